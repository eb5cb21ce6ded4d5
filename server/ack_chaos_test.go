package server

import (
	"bufio"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// ackConsumer is a client of acknowledged delivery, written against the
// wire protocol: it binds its receivers with ack, checks every event, acks
// once per read batch, and drops duplicates by (receiver, seq). Its
// connections are reset (SO_LINGER 0) at random moments.
type ackConsumer struct {
	t     *testing.T
	token string
	rng   *rand.Rand
	recv  []uint64
	high  map[uint64]uint64 // the highest seq handled, per receiver
	acked map[uint64]uint64 // the highest ack the server confirmed
	fires map[uint64]uint64 // unique events handled, per receiver

	unique, dups, resets int
	maxDups              uint64 // the most duplicates after one reconnect, for one receiver
}

func newAckConsumer(t *testing.T, token string, seed uint64, recv []uint64) *ackConsumer {
	a := &ackConsumer{t: t, token: token, rng: rand.New(rand.NewPCG(seed, 2)), recv: recv,
		high: map[uint64]uint64{}, acked: map[uint64]uint64{}, fires: map[uint64]uint64{}}
	return a
}

// ackConn is one connection of the consumer.
type ackConn struct {
	c      *net.TCPConn
	r      *bufio.Reader
	id     uint64
	binds  map[uint64]uint64 // bind request id -> receiver
	acks   map[uint64][2]uint64
	expect map[uint64]uint64 // the next seq this connection must get, per receiver bound
	sent   map[uint64]uint64 // the last ack sent, per receiver
	inAir  map[uint64]uint64 // per receiver: handled but not confirmed when the last connection died
	dups   map[uint64]uint64
}

// session connects to addr, binds, and consumes until it has read
// resetAfter new events (then resets the connection) or want unique events are
// handled; it returns an error when the connection fails otherwise (the
// server was killed).
func (a *ackConsumer) session(addr string, resetAfter, want int) error {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	c := &ackConn{c: nc.(*net.TCPConn), r: bufio.NewReaderSize(nc, 64<<10), binds: map[uint64]uint64{},
		acks: map[uint64][2]uint64{}, expect: map[uint64]uint64{}, sent: map[uint64]uint64{}, dups: map[uint64]uint64{}}
	defer c.c.Close()
	var out []byte
	c.id++
	out = protocol.AppendRequest(out, &protocol.Request{Op: protocol.OpHello, ID: c.id, Version: protocol.Version, Name: "ack", Token: a.token})
	inAir := map[uint64]uint64{}
	for _, r := range a.recv {
		c.id++
		c.binds[c.id] = r
		out = protocol.AppendRequest(out, &protocol.Request{Op: protocol.OpBind, ID: c.id, Receiver: r, Ack: true})
		inAir[r] = a.high[r] - a.acked[r]
	}
	if _, err := c.c.Write(out); err != nil {
		return err
	}
	read := 0
	for a.unique < want {
		if err := a.read(c, &read, inAir); err != nil {
			return err
		}
		if read >= resetAfter {
			a.resets++
			c.c.SetLinger(0) // RST: whatever the kernel holds for us is gone
			return nil
		}
		if c.r.Buffered() == 0 { // the end of a read batch: one ack per receiver
			if err := a.ackBatch(c); err != nil {
				return err
			}
		}
	}
	return a.ackBatch(c)
}

// read reads and checks one message.
func (a *ackConsumer) read(c *ackConn, read *int, inAir map[uint64]uint64) error {
	c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return err
	}
	payload := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c.r, payload); err != nil {
		return err
	}
	var m protocol.Message
	require.NoError(a.t, protocol.DecodeMessage(payload, &m))
	switch m.Kind {
	case protocol.KindOK:
		if r, ok := c.binds[m.ID]; ok {
			v, err := protocol.DecodeUints(m.Result, nil)
			require.NoError(a.t, err)
			require.Len(a.t, v, 3)
			first := v[2]
			if v[0] > 0 { // (with nothing pending the seqs may jump forward: a bind with ack moves them past any used)
				require.LessOrEqual(a.t, first, a.high[r]+1, "receiver %d: the bind goes on from %d, past %d handled: events are missing", r, first, a.high[r])
			}
			require.GreaterOrEqual(a.t, first-1, a.acked[r], "receiver %d: a confirmed ack (%d) was undone", r, a.acked[r])
			c.expect[r] = first
			c.sent[r] = first - 1
		} else if ack, ok := c.acks[m.ID]; ok {
			a.acked[ack[0]] = max(a.acked[ack[0]], ack[1])
		}
	case protocol.KindError:
		a.t.Fatalf("error reply %d: %s %s", m.ID, m.Code, m.Text)
	case protocol.KindFire:
		f := &m.Fire
		r := f.Receiver
		require.Equal(a.t, c.expect[r], f.Seq, "receiver %d: events come in seq order with no gap", r)
		c.expect[r]++
		if f.Seq <= a.high[r] { // seen before the reconnect
			a.dups++
			c.dups[r]++
			a.maxDups = max(a.maxDups, c.dups[r])
			require.LessOrEqual(a.t, c.dups[r], inAir[r], "receiver %d: more duplicates than were unacknowledged", r)
			return nil
		}
		a.high[r] = f.Seq
		a.fires[r]++
		a.unique++
		*read++ // (new events only: a session that resets amid its duplicates would make no progress)
	default:
		a.t.Fatalf("unexpected message %s", m.Kind)
	}
	return nil
}

// ackBatch acks, once per receiver, everything handled since the last ack.
func (a *ackConsumer) ackBatch(c *ackConn) error {
	var out []byte
	for _, r := range a.recv {
		if h := a.high[r]; c.expect[r] > 0 && h > c.sent[r] && h < c.expect[r] {
			c.id++
			c.acks[c.id] = [2]uint64{r, h}
			c.sent[r] = h
			out = protocol.AppendRequest(out, &protocol.Request{Op: protocol.OpAck, ID: c.id, Receiver: r, Seq: h})
		}
	}
	if len(out) == 0 {
		return nil
	}
	_, err := c.c.Write(out)
	return err
}

// ackTimers adds count timers on each receiver, firing every tick from the
// next, repeat times each.
func ackTimers(t *testing.T, addr, token string, recv []uint64, count, repeat int) {
	w, err := dialWire(addr, "producer", token)
	require.NoError(t, err)
	defer w.close()
	for _, r := range recv {
		for tid := range count {
			_, err := w.uints(protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: uint64(tid + 1), After: 1, Every: 1, Repeat: uint64(repeat)})
			require.NoError(t, err)
		}
	}
}

// TestAckChaosResets: 3 receivers, 100k events at a high rate (a 1 ms
// tick), the consumer's connection reset at 50+ random moments: every event
// arrives at least once, per receiver in strictly increasing seq order
// once duplicates are dropped, none missing; duplicates stay within what
// was unacknowledged at each reset.
func TestAckChaosResets(t *testing.T) {
	recv := []uint64{1, 2, 3}
	timers, repeat := 20, 1667 // 100,020 events in 1.7 s of ticks
	if testing.Short() {
		repeat = 334
	}
	srv := startServer(t, func(c *Config) { c.Frozen, c.StartTick, c.Tick = false, 0, time.Millisecond })
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	a := newAckConsumer(t, testAdminToken, seed, recv)
	ackTimers(t, srv.Addr(), testAdminToken, recv, timers, repeat)
	want := len(recv) * timers * repeat
	for a.unique < want {
		require.NoError(t, a.session(srv.Addr(), 200+a.rng.IntN(2800), want))
	}
	for _, r := range recv {
		require.Equal(t, uint64(timers*repeat), a.fires[r], "receiver %d", r)
	}
	t.Logf("%d events, %d resets, %d duplicates (at most %d for one receiver after one reset)", a.unique, a.resets, a.dups, a.maxDups)
	if !testing.Short() {
		require.GreaterOrEqual(t, a.resets, 50)
	}
	w, err := dialWire(srv.Addr(), "check", testAdminToken)
	require.NoError(t, err)
	defer w.close()
	st, err := w.stats()
	require.NoError(t, err)
	require.Zero(t, st.DroppedTotal, "nothing dropped or lost")
}

// TestAckChaosKill9: the same with the server killed (kill -9) and
// restarted at random moments between resets, with fsync always: no event
// is missing, and no ack the server confirmed is undone.
func TestAckChaosKill9(t *testing.T) {
	recv := []uint64{1, 2, 3}
	timers, repeat, kills := 10, 2000, 6 // 60,000 events
	if testing.Short() {
		repeat, kills = 300, 2
	}
	args := []string{"-data-dir", t.TempDir(), "-fsync", "always", "-tick", "1ms", "-downtime", "catch-up"}
	p := startProc(t, args...)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	a := newAckConsumer(t, procToken, seed, recv)
	ackTimers(t, p.addr, procToken, recv, timers, repeat)
	want := len(recv) * timers * repeat
	killed := 0
	for session := 0; a.unique < want; session++ {
		if killed < kills && session%2 == 1 { // killed while this session consumes, or just after
			go func(p *proc, d time.Duration) { time.Sleep(d); p.kill() }(p, time.Duration(a.rng.IntN(300))*time.Millisecond)
		}
		err := a.session(p.addr, 200+a.rng.IntN(2800), want)
		if err == nil && p.alive() {
			continue
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("the connection failed while the server runs: %v", err)
		}
		killed++
		t.Logf("kill %d after %d unique events (%v)", killed, a.unique, err)
		p = startProc(t, args...)
	}
	for _, r := range recv {
		require.Equal(t, uint64(timers*repeat), a.fires[r], "receiver %d", r)
	}
	if !testing.Short() { // (the short run's events may all be read before its second kill)
		require.Equal(t, kills, killed)
	}
	t.Logf("%d events, %d resets, %d kills, %d duplicates (at most %d for one receiver after one reconnect)",
		a.unique, a.resets, killed, a.dups, a.maxDups)
}
