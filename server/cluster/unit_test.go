package cluster

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func TestEntryCodec(t *testing.T) {
	recs := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{7}, 40<<10)}
	b := appendRecords(nil, 42, recs)
	stint, got, err := decodeRecords(b)
	require.NoError(t, err)
	require.Equal(t, uint64(42), stint)
	require.Equal(t, len(recs), len(got))
	for i := range recs {
		require.True(t, bytes.Equal(recs[i], got[i]), "record %d", i)
	}
	for cut := 1; cut < 12; cut++ {
		_, _, err := decodeRecords(b[:cut])
		require.ErrorIs(t, err, errBadEntry, "truncated at %d", cut)
	}
	_, _, err = decodeRecords(append(b, 0))
	require.ErrorIs(t, err, errBadEntry, "trailing bytes")

	l := appendLeader(nil, 9, "n1", "10.0.0.1:7420")
	stint, id, addr, err := decodeLeader(l)
	require.NoError(t, err)
	require.Equal(t, uint64(9), stint)
	require.Equal(t, "n1", id)
	require.Equal(t, "10.0.0.1:7420", addr)
	_, _, _, err = decodeLeader(l[:len(l)-1])
	require.ErrorIs(t, err, errBadEntry)
}

// One entry takes the queued proposals of one stint, at least one, at
// most max bytes of records.
func TestTakeBatches(t *testing.T) {
	var p proposer
	p.init(1)
	add := func(stint uint64, size int) {
		p.queue = append(p.queue, proposal{rec: make([]byte, size), stint: stint})
		p.bytes += size
	}
	add(1, 40)
	add(1, 40)
	add(1, 100) // over 100 with the two before
	add(1, 500) // alone over max
	add(2, 10)  // another stint
	sizes := func(b []proposal) []int {
		var s []int
		for _, x := range b {
			s = append(s, len(x.rec))
		}
		return s
	}
	require.Equal(t, []int{40, 40}, sizes(p.take(100)))
	require.Equal(t, []int{100}, sizes(p.take(100)))
	require.Equal(t, []int{500}, sizes(p.take(100)), "a record over the limit goes alone")
	require.Equal(t, 10, p.bytes)
	b := p.take(100)
	require.Equal(t, []int{10}, sizes(b))
	require.Equal(t, uint64(2), b[0].stint)
	require.Empty(t, p.take(100))
	require.Zero(t, p.bytes)
}

type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func testFSM(c Consumer) *fsm {
	return &fsm{node: &Node{cfg: Config{Log: slog.New(slog.DiscardHandler)}}, consumer: c, clients: map[string]string{}}
}

func logs() []*raft.Log {
	return []*raft.Log{
		{Index: 1, Type: raft.LogConfiguration},
		{Index: 2, Type: raft.LogNoop},
		{Index: 3, Type: raft.LogCommand, Data: appendLeader(nil, 5, "n1", "c1:7420")},
		{Index: 4, Type: raft.LogCommand, Data: appendRecords(nil, 5, [][]byte{[]byte("a"), []byte("b")})},
		{Index: 5, Type: raft.LogCommand, Data: []byte{kindRecords, 1}}, // malformed
		{Index: 6, Type: raft.LogCommand, Data: appendRecords(nil, 5, [][]byte{[]byte("c")})},
	}
}

// Committed entries reach the consumer in order, raft's own and malformed
// ones left out (the malformed one answered with an error); the snapshot
// is the address map and the consumer's bytes, and restoring it gives the
// same state, byte for byte.
func TestFSMApplySnapshotRestore(t *testing.T) {
	c := newRecConsumer()
	f := testFSM(c)
	resp := f.ApplyBatch(logs())
	require.Len(t, resp, 6)
	require.ErrorIs(t, resp[4].(error), errBadEntry)
	for i, r := range resp {
		if i != 4 {
			require.Nil(t, r)
		}
	}
	require.Equal(t, []string{"a", "b", "c"}, strs(c.records()))
	require.Equal(t, "c1:7420", f.clientAddr("n1"))

	snap := func(f *fsm) []byte {
		s, err := f.Snapshot()
		require.NoError(t, err)
		var sink memSink
		require.NoError(t, s.Persist(&sink))
		require.True(t, sink.closed)
		s.Release()
		return sink.Bytes()
	}
	b := snap(f)
	c2 := newRecConsumer()
	f2 := testFSM(c2)
	require.NoError(t, f2.Restore(io.NopCloser(bytes.NewReader(b))))
	require.Equal(t, []string{"a", "b", "c"}, strs(c2.records()))
	require.Equal(t, "c1:7420", f2.clientAddr("n1"))
	require.Equal(t, b, snap(f2), "equal states give equal snapshots")

	require.Error(t, f2.Restore(io.NopCloser(strings.NewReader("not a snapshot"))))
}

type failingConsumer struct{ *recConsumer }

func (failingConsumer) Apply([]Entry) error { return errors.New("replay failed") }

// A consumer that cannot apply stops the node applying: nothing more is
// handed over and no snapshot is taken of the broken state.
func TestFSMConsumerFailure(t *testing.T) {
	c := failingConsumer{newRecConsumer()}
	f := testFSM(c)
	f.ApplyBatch(logs())
	_, err := f.Snapshot()
	require.Error(t, err)
}

func TestConfigChecks(t *testing.T) {
	ok := func() Config {
		return Config{ClusterID: "c", NodeID: "n1", BindAddr: "127.0.0.1:0", DataDir: "d", Token: testToken}
	}
	c := ok()
	require.NoError(t, c.withDefaults())
	require.Equal(t, DefaultElectionTimeout, c.ElectionTimeout)
	require.Equal(t, DefaultMaxEntryBytes, c.MaxEntryBytes)
	for name, mutate := range map[string]func(*Config){
		"short token":      func(c *Config) { c.Token = "short" },
		"no cluster id":    func(c *Config) { c.ClusterID = "" },
		"long cluster id":  func(c *Config) { c.ClusterID = strings.Repeat("x", 256) },
		"no node id":       func(c *Config) { c.NodeID = "" },
		"no data dir":      func(c *Config) { c.DataDir = "" },
		"no address":       func(c *Config) { c.BindAddr = "" },
		"peers without me": func(c *Config) { c.Peers = []Peer{{ID: "n2", Addr: "a:1"}} },
		"duplicate peer":   func(c *Config) { c.Peers = []Peer{{ID: "n1", Addr: "a:1"}, {ID: "n1", Addr: "b:1"}} },
		"lease over heartbeat": func(c *Config) {
			c.HeartbeatTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 200*time.Millisecond
		},
	} {
		c := ok()
		mutate(&c)
		require.Error(t, c.withDefaults(), name)
	}
}

// authPair returns a listener layer and a dialer layer with the given
// cluster ids and tokens.
func authPair(t *testing.T, lc, lt, dc, dt string) (*authLayer, *authLayer, *syncBuffer) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logs := &syncBuffer{}
	l := newAuthLayer(ln, nil, lc, []byte(lt), newTestLog(logs), nil, nil)
	t.Cleanup(func() { l.Close() })
	dln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d := newAuthLayer(dln, nil, dc, []byte(dt), slog.New(slog.DiscardHandler), nil, nil)
	t.Cleanup(func() { d.Close() })
	return l, d, logs
}

func TestHandshake(t *testing.T) {
	l, d, _ := authPair(t, "c", testToken, "c", testToken)
	c, err := d.Dial(raft.ServerAddress(l.Addr().String()), time.Second)
	require.NoError(t, err)
	defer c.Close()
	s, err := l.Accept()
	require.NoError(t, err)
	defer s.Close()
	_, err = c.Write([]byte("raft bytes"))
	require.NoError(t, err)
	buf := make([]byte, 10)
	_, err = io.ReadFull(s, buf)
	require.NoError(t, err)
	require.Equal(t, "raft bytes", string(buf), "after the handshake the connection is raft's")

	for name, p := range map[string][4]string{
		"token":   {"c", testToken, "c", "another-token-of-enough-length"},
		"cluster": {"c", testToken, "d", testToken},
	} {
		l, d, logs := authPair(t, p[0], p[1], p[2], p[3])
		_, err := d.Dial(raft.ServerAddress(l.Addr().String()), time.Second)
		require.ErrorIs(t, err, ErrAuth, name)
		require.Eventually(t, func() bool { return l.refusals.count() == 1 }, 5*time.Second, 10*time.Millisecond, name)
		if name == "cluster" {
			require.Contains(t, logs.String(), "raft connection refused", "the listener names a wrong cluster id")
		}
	}

	// Garbage instead of the handshake is refused, not handed to raft.
	l, _, _ = authPair(t, "c", testToken, "c", testToken)
	g, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer g.Close()
	g.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	g.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = g.Read(buf)
	var ne net.Error
	require.Error(t, err)
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the listener closes a connection that is not a peer's: %v", err)
	select {
	case <-l.conns:
		t.Fatal("an unauthenticated connection reached raft")
	default:
	}
}

// A connection authenticated but not yet accepted by raft when the layer
// closes is closed with it: the peer that dialed it sees the connection
// end at once, instead of waiting out its RPC timeout for an answer nobody
// will read (a stopping leader's raft Shutdown waited 10 s on one).
func TestCloseEndsQueuedConnections(t *testing.T) {
	l, d, _ := authPair(t, "c", testToken, "c", testToken)
	c, err := d.Dial(raft.ServerAddress(l.Addr().String()), time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { return len(l.conns) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	_, err = c.Write([]byte{1}) // an RPC raft would send
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.Error(t, err)
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the queued connection was left open: %v", err)
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

// A burst of refusals logs one line, with the count of the others in the
// next.
func TestRefusalLogRateLimited(t *testing.T) {
	logs := &syncBuffer{}
	r := refusalLog{log: newTestLog(logs)}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	for i := 0; i < 5; i++ {
		r.note(addr, ErrAuth)
	}
	r.note(addr, io.EOF) // a peer gone mid-handshake: counted, not logged
	require.Equal(t, 1, strings.Count(logs.String(), "raft connection refused"))
	require.Equal(t, uint64(6), r.count())
	require.Equal(t, 4, r.suppressed)
}

func TestHclogBridge(t *testing.T) {
	var buf syncBuffer
	h := newHclog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h.Named("raft").With("peer", "n2").Warn("failed to contact", "err", "timeout")
	h.Trace("too fine") // below the bridge's Info level
	h.SetLevel(hclog.Debug)
	h.Debug("fine")
	out := buf.String()
	require.Contains(t, out, `level=WARN msg="failed to contact" component=raft peer=n2 err=timeout`)
	require.NotContains(t, out, "too fine")
	require.Contains(t, out, "level=DEBUG msg=fine")
}

// A dialer that does not hold the token cannot get past the listener even
// if it ignores the listener's proof and answers with a guess.
func TestHandshakeRogueDialer(t *testing.T) {
	l, _, _ := authPair(t, "c", testToken, "c", testToken)
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	d := make([]byte, nonceLen)
	_, err = c.Write(append(append([]byte(authMagic), 1, 'c'), d...))
	require.NoError(t, err)
	resp := make([]byte, 1+nonceLen+32)
	_, err = io.ReadFull(c, resp)
	require.NoError(t, err)
	require.Equal(t, authOK, resp[0])
	lnonce := resp[1 : 1+nonceLen]
	_, err = c.Write(mac([]byte("another-token-of-enough-length"), 'D', "c", d, lnonce))
	require.NoError(t, err)
	status := make([]byte, 1)
	_, err = io.ReadFull(c, status)
	require.NoError(t, err)
	require.Equal(t, authWrongToken, status[0])
	select {
	case <-l.conns:
		t.Fatal("a connection with a wrong MAC reached raft")
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, uint64(1), l.refusals.count())
}
