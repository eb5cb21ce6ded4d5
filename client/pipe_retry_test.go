package client

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// batchCutter is a TCP proxy in front of a server that, on the first
// connection carrying changes, lets the server apply n changes (it waits
// for all their replies from the server) but hands the client only the
// first keep of those replies, then cuts the client's connection. Later
// connections pass through. It records the changes each connection
// carried, in order.
type batchCutter struct {
	ln      net.Listener
	target  string
	n, keep int
	cut     atomic.Bool // the connection was cut once
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns [][]protocol.Request // the changes sent on each connection, in order
}

func startBatchCutter(t *testing.T, target string, n, keep int) *batchCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &batchCutter{ln: ln, target: target, n: n, keep: keep}
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *batchCutter) addr() string { return p.ln.Addr().String() }

// changes returns the changes each connection carried so far.
func (p *batchCutter) changes() [][]protocol.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]protocol.Request, len(p.conns))
	for i, reqs := range p.conns {
		out[i] = append([]protocol.Request(nil), reqs...)
	}
	return out
}

func (p *batchCutter) accept() {
	for k := 0; ; k++ {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, nil)
		p.mu.Unlock()
		var idMu sync.Mutex
		changeIDs := map[uint64]bool{} // the ids of the changes sent on this connection
		p.wg.Go(func() {               // client to server: note the changes
			defer sc.Close()
			eachFrame(cc, func(frame, payload []byte) bool {
				var req protocol.Request
				if protocol.DecodeRequest(payload, &req) == nil && isChange(req.Op) {
					idMu.Lock()
					changeIDs[req.ID] = true
					idMu.Unlock()
					p.mu.Lock()
					req.Data = append([]byte(nil), req.Data...)
					p.conns[k] = append(p.conns[k], req)
					p.mu.Unlock()
				}
				_, err := sc.Write(frame)
				return err == nil
			})
		})
		p.wg.Go(func() { // server to client: hold the replies past keep
			defer cc.Close()
			replies := 0
			eachFrame(sc, func(frame, payload []byte) bool {
				var m protocol.Message
				if !p.cut.Load() && protocol.DecodeMessage(payload, &m) == nil && m.Kind <= protocol.KindError {
					idMu.Lock()
					change := changeIDs[m.ID]
					idMu.Unlock()
					if change {
						if replies++; replies == p.n {
							p.cut.Store(true)
							return false // all applied: cut, the rest unsent
						}
						if replies > p.keep {
							return true // applied; the reply is held back
						}
					}
				}
				_, err := cc.Write(frame)
				return err == nil
			})
		})
	}
}

// TestPipeRetriedAfterLostReplies: the server applies a Pipe's 25 changes
// (adds, cancels, a pause and a resume) and the connection dies after the
// first 7 replies arrived. Exec reconnects and sends the 18 others again,
// in order, with the same client and request ids, and nothing else; the
// server answers them with their first replies instead of applying them
// twice. So every Cmd succeeds (an add applied twice answers exists, a
// cancel not_found) with its first reply (the due tick of the first add),
// the server counts 18 retries, and holds each timer once.
func TestPipeRetriedAfterLostReplies(t *testing.T) {
	srv := startServer(t, rememberIDs)
	ctx := tctx(t)
	setup := dial(t, srv.Addr())
	for tid := uint64(1001); tid <= 1004; tid++ {
		_, err := setup.Add(ctx, 1, tid, 500, nil)
		require.NoError(t, err)
	}

	const n, keep = 25, 7
	p := startBatchCutter(t, srv.Addr(), n, keep)
	c := dial(t, p.addr(), WithReconnect(time.Millisecond, 10*time.Millisecond))
	pipe := c.Pipeline()
	var adds []*Cmd
	for tid := uint64(1); tid <= 20; tid++ {
		adds = append(adds, pipe.Add(1, tid, 10+tid, nil))
	}
	others := []*Cmd{pipe.Cancel(1, 1001), pipe.Pause(1, 1002), pipe.Resume(1, 1002), pipe.Cancel(1, 1003)}
	readd := pipe.Add(1, 1001, 77, nil) // after its cancel: kept in order
	require.Equal(t, n, pipe.Len())
	require.NoError(t, pipe.Exec(ctx))
	require.True(t, p.cut.Load(), "the connection was cut")

	for i, cmd := range adds {
		require.NoError(t, cmd.Err(), "add %d", i+1)
		assert.Equal(t, uint64(start+11+i), cmd.Due(), "add %d: the first reply", i+1)
	}
	for _, cmd := range others {
		require.NoError(t, cmd.Err(), cmd.Op())
	}
	require.NoError(t, readd.Err())
	assert.Equal(t, uint64(start+77), readd.Due())

	conns := p.changes()
	require.GreaterOrEqual(t, len(conns), 2)
	first, second := conns[0], conns[1]
	require.Len(t, first, n)
	for _, req := range first {
		require.NotZero(t, req.Client, "%s %d carries the Client's id", req.Op, req.Tid)
		require.Equal(t, first[0].Client, req.Client)
	}
	require.Len(t, second, n-keep, "only the changes whose replies did not arrive are sent again")
	for i, req := range second {
		want := first[keep+i]
		assert.Equal(t, want.ID, req.ID, "retry %d: the same request id, in order", i)
		assert.Equal(t, want.Client, req.Client)
		assert.Equal(t, want.Op, req.Op)
		assert.Equal(t, want.Tid, req.Tid)
	}
	for _, reqs := range conns[2:] {
		assert.Empty(t, reqs, "no third attempt")
	}

	st, err := srv.ReadMetrics(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(n-keep), st.Counters.Retries, "each retry answered from memory")
	assert.Equal(t, uint64(23), st.Stats.Timers, "20 adds, 1001 again, 1002 and 1004")
	tm, err := setup.Get(ctx, 1, 1002)
	require.NoError(t, err)
	assert.False(t, tm.Paused, "paused then resumed, once each")
	_, err = setup.Get(ctx, 1, 1003)
	require.ErrorIs(t, err, ErrNotFound)
}

// TestPipeNoRequestIDsNotRetried: on a server whose hello reports no
// request_id_ticks (it would apply a retry again), a Pipe's changes carry
// no client id and those whose connection was lost are not sent again:
// each Cmd reports ErrDisconnected, as before request ids.
func TestPipeNoRequestIDsNotRetried(t *testing.T) {
	var mu sync.Mutex
	var seen []protocol.Request
	f := startFake(t, func(w io.Writer, req protocol.Request) bool {
		if req.Op != protocol.OpAdd {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req)
		return len(seen)%3 != 0 // the third add cuts the connection, unanswered
	})
	c := dial(t, f.addr(), WithReconnect(time.Millisecond, 10*time.Millisecond))
	pipe := c.Pipeline()
	cmds := []*Cmd{pipe.Add(1, 1, 5, nil), pipe.Add(1, 2, 5, nil), pipe.Add(1, 3, 5, nil)}
	require.ErrorIs(t, pipe.Exec(tctx(t)), ErrDisconnected)
	for _, cmd := range cmds {
		require.ErrorIs(t, cmd.Err(), ErrDisconnected)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3, "sent once")
	for _, req := range seen {
		assert.Zero(t, req.Client, "no request id for a server that ignores them")
	}
}

// stepDownProxy is a TCP proxy in front of a server that, on its first
// connection, passes the first keep changes and their replies, then answers
// the next change not_leader (naming the proxy, as a node that stepped
// down names the new leader) and closes the connection, the changes after
// it unread. Later connections pass through. It records the changes each
// connection carried, in order.
type stepDownProxy struct {
	batchCutter
}

func startStepDownProxy(t *testing.T, target string, keep int) *stepDownProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stepDownProxy{batchCutter{ln: ln, target: target, keep: keep}}
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *stepDownProxy) accept() {
	for k := 0; ; k++ {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, nil)
		p.mu.Unlock()
		var ccMu sync.Mutex             // both goroutines write to cc
		answered := make(chan struct{}) // the keep changes' replies went to the client
		var changeIDs sync.Map
		p.wg.Go(func() { // client to server
			defer sc.Close()
			seen := 0
			eachFrame(cc, func(frame, payload []byte) bool {
				var req protocol.Request
				if protocol.DecodeRequest(payload, &req) == nil && isChange(req.Op) {
					p.mu.Lock()
					p.conns[k] = append(p.conns[k], req)
					p.mu.Unlock()
					if seen++; seen > p.keep && !p.cut.Load() {
						<-answered
						p.cut.Store(true)
						ccMu.Lock()
						_, _ = cc.Write(protocol.AppendNotLeader(nil, req.ID, "leadership lost", p.addr()))
						ccMu.Unlock()
						cc.Close()
						return false
					}
					changeIDs.Store(req.ID, true)
				}
				_, err := sc.Write(frame)
				return err == nil
			})
		})
		p.wg.Go(func() { // server to client
			defer cc.Close()
			replies := 0
			eachFrame(sc, func(frame, payload []byte) bool {
				ccMu.Lock()
				_, err := cc.Write(frame)
				ccMu.Unlock()
				var m protocol.Message
				if k == 0 && protocol.DecodeMessage(payload, &m) == nil && m.Kind <= protocol.KindError {
					if _, ok := changeIDs.Load(m.ID); ok {
						if replies++; replies == p.keep {
							close(answered)
						}
					}
				}
				return err == nil
			})
		})
	}
}

// TestPipeRetriedAfterNotLeader: the node a Pipe's batch went to answers
// its first 3 changes, then the 4th with not_leader, and closes the
// connection, the rest unread. Exec follows the leader it names and sends
// the 4th and every later change there, in order, with their ids, and not
// the first 3; each Cmd gets one reply (before, the 4th reported
// ErrNotLeader and the others ErrDisconnected).
func TestPipeRetriedAfterNotLeader(t *testing.T) {
	srv := startServer(t, rememberIDs)
	ctx := tctx(t)
	const n, keep = 12, 3
	p := startStepDownProxy(t, srv.Addr(), keep)
	c := dial(t, p.addr(), WithReconnect(time.Millisecond, 10*time.Millisecond))
	pipe := c.Pipeline()
	var cmds []*Cmd
	for tid := uint64(1); tid <= n-2; tid++ {
		cmds = append(cmds, pipe.Add(2, tid, tid, nil))
	}
	cmds = append(cmds, pipe.Pause(2, 1), pipe.Cancel(2, 2))
	require.NoError(t, pipe.Exec(ctx))
	require.True(t, p.cut.Load(), "not_leader was answered")
	for i, cmd := range cmds[:n-2] {
		require.NoError(t, cmd.Err(), "add %d", i+1)
		assert.Equal(t, uint64(start+1+i), cmd.Due())
	}
	require.NoError(t, cmds[n-2].Err())
	require.NoError(t, cmds[n-1].Err())

	conns := p.changes()
	require.GreaterOrEqual(t, len(conns), 2)
	first, second := conns[0], conns[1]
	require.Len(t, first, keep+1, "the changes the node read")
	require.Len(t, second, n-keep, "the not_leader one and those after it, not the first 3")
	for i, req := range second {
		assert.Equal(t, first[keep].ID+uint64(i), req.ID, "retry %d: its id, in order", i)
		assert.Equal(t, first[0].Client, req.Client)
		assert.NotZero(t, req.Client)
	}
	st, err := srv.ReadMetrics(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(n-3), st.Stats.Timers, "10 adds, one cancelled")
}
