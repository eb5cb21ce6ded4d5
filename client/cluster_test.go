package client

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// Tests of a Client given several addresses, against fake cluster nodes in
// front of a real in-process server: no real cluster is needed.

// fakeNode is a fake cluster node. It accepts the first helloOK hellos (a
// leader); after that it answers every request, hello or not, with
// not_leader naming leader(n) (n: the not_leader replies sent before) and
// closes the connection, as a tickwheel follower does.
type fakeNode struct {
	ln      net.Listener
	helloOK atomic.Int64
	refused atomic.Int64 // not_leader replies sent
	leader  func(n int64) string
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
}

// startFollower runs a fake follower on 127.0.0.1:0 that names leader.
func startFollower(t *testing.T, leader string) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serveFake(t, ln, 0, func(int64) string { return leader })
}

// serveFake runs a fakeNode on ln until the test ends.
func serveFake(t *testing.T, ln net.Listener, helloOK int64, leader func(int64) string) *fakeNode {
	f := &fakeNode{ln: ln, leader: leader, conns: make(map[net.Conn]bool)}
	f.helloOK.Store(helloOK)
	f.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[nc] = true
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for nc := range f.conns {
			nc.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeNode) addr() string { return f.ln.Addr().String() }

func (f *fakeNode) serve(nc net.Conn) {
	defer nc.Close()
	readRequests(nc, func(req protocol.Request) bool {
		if req.Op == protocol.OpHello && f.helloOK.Add(-1) >= 0 {
			_, err := nc.Write(fakeHello(req.ID, 0))
			return err == nil
		}
		leader := f.leader(f.refused.Add(1) - 1)
		_, _ = nc.Write(protocol.AppendNotLeader(nil, req.ID, "this node is a follower", leader))
		return false
	})
}

// connAddr is the address of c's current connection, "" while it has none.
func (c *Client) connAddr() string {
	if cn := c.current(); cn != nil {
		return cn.addr
	}
	return ""
}

// TestDialFollowsNotLeader: a follower's not_leader reply to hello is
// followed to the leader it names, whether the list also holds the leader
// or not, and given as addr or through WithAddrs.
func TestDialFollowsNotLeader(t *testing.T) {
	srv := startServer(t, nil)
	f := startFollower(t, srv.Addr())
	for _, tt := range []struct {
		name string
		addr string
		opts []Option
	}{
		{"follower,leader", f.addr() + "," + srv.Addr(), nil},
		{"follower only", f.addr(), nil},
		{"spaces", " " + f.addr() + " , " + srv.Addr(), nil},
		{"WithAddrs", "", []Option{WithAddrs(f.addr(), srv.Addr())}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := f.refused.Load()
			c := dial(t, tt.addr, tt.opts...)
			assert.Equal(t, srv.Addr(), c.connAddr())
			assert.Equal(t, before+1, f.refused.Load(), "the follower was asked first")
			now, err := c.Ping(tctx(t))
			require.NoError(t, err)
			assert.Equal(t, uint64(start), now)
		})
	}
}

// TestDialNoLeaderNext: a follower that knows no leader sends the Client on
// to the next address of its list.
func TestDialNoLeaderNext(t *testing.T) {
	srv := startServer(t, nil)
	f := startFollower(t, "")
	c := dial(t, f.addr()+","+srv.Addr())
	assert.Equal(t, srv.Addr(), c.connAddr())
	assert.Equal(t, int64(1), f.refused.Load())

	// A dead address on the list is skipped too.
	dead := startFollower(t, "")
	deadAddr := dead.addr()
	dead.ln.Close()
	c2 := dial(t, deadAddr+","+srv.Addr())
	assert.Equal(t, srv.Addr(), c2.connAddr())
}

// TestDialLeaderLoop: two followers naming each other stop the Client after
// WithLeaderHops redirections from each address, with an error that says
// so and names the chain, at once rather than at the Dial's deadline.
func TestDialLeaderLoop(t *testing.T) {
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lnB, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := serveFake(t, lnA, 0, func(int64) string { return lnB.Addr().String() })
	b := serveFake(t, lnB, 0, func(int64) string { return lnA.Addr().String() })

	t0 := time.Now()
	_, err = Dial(tctx(t), a.addr()+","+b.addr())
	require.Error(t, err)
	assert.Less(t, time.Since(t0), 3*time.Second)
	require.ErrorIs(t, err, ErrNotLeader)
	assert.Contains(t, err.Error(), "followed not_leader 3 times ("+a.addr()+" -> "+b.addr()+" -> "+a.addr()+" -> "+b.addr()+", which names "+a.addr()+") without reaching the leader")
	assert.Equal(t, int64(8), a.refused.Load()+b.refused.Load(), "4 hellos from each address of the list")

	_, err = Dial(tctx(t), a.addr(), WithLeaderHops(1))
	require.ErrorIs(t, err, ErrNotLeader)
	assert.Contains(t, err.Error(), "followed not_leader 1 times")
}

// TestDialDuringElection: while the nodes know no leader Dial tries again,
// with backoff, until one is named (or its ctx ends, with an error that
// says the node knew no leader). The ctx's deadline passes once the node
// has refused three hellos, not after a fixed time: on a loaded machine
// 300 ms could end before the first refusal arrived (an error without
// ErrNotLeader) or before the third.
func TestDialDuringElection(t *testing.T) {
	srv := startServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := serveFake(t, ln, 0, func(n int64) string {
		if n < 3 {
			return ""
		}
		return srv.Addr()
	})
	c := dial(t, f.addr(), WithReconnect(5*time.Millisecond, 20*time.Millisecond))
	assert.Equal(t, srv.Addr(), c.connAddr())
	assert.Equal(t, int64(4), f.refused.Load())

	none := startFollower(t, "")
	ctx := deadlineWhen(t, func() bool { return none.refused.Load() >= 3 })
	_, err = Dial(ctx, none.addr(), WithReconnect(5*time.Millisecond, 20*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrNotLeader)
	assert.Contains(t, err.Error(), "(leader unknown)")
	assert.Greater(t, none.refused.Load(), int64(2), "tried again")
}

// deadlineWhen returns a context whose deadline passes (Err
// context.DeadlineExceeded) once cond holds, polled every millisecond, or
// after a minute; it ends with the test.
func deadlineWhen(t *testing.T, cond func() bool) context.Context {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	g := &gatedDeadline{Context: parent, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for !cond() {
			select {
			case <-parent.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return g
}

// gatedDeadline is deadlineWhen's context: done when its condition held
// (or its parent ended), reported as a deadline that passed.
type gatedDeadline struct {
	context.Context
	done chan struct{}
}

func (g *gatedDeadline) Done() <-chan struct{} { return g.done }

func (g *gatedDeadline) Err() error {
	select {
	case <-g.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestNotLeaderOnSession: a node that stops being the leader answers the
// requests of its established sessions with not_leader and closes them. A
// read is retried on the leader it names; a change returns ErrNotLeader
// with the leader's address (it is not retried: it may commit anyway),
// and the Client reconnects to the leader.
func TestNotLeaderOnSession(t *testing.T) {
	srv := startServer(t, nil)
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := serveFake(t, lnA, 1, func(int64) string { return srv.Addr() })
	c := dial(t, a.addr(), WithReconnect(5*time.Millisecond, 5*time.Millisecond))
	require.Equal(t, a.addr(), c.connAddr())
	_, err = c.Get(tctx(t), 1, 1)
	require.ErrorIs(t, err, ErrNotFound, "answered by the real server")
	assert.Equal(t, srv.Addr(), c.connAddr())

	lnB, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := serveFake(t, lnB, 1, func(int64) string { return srv.Addr() })
	d := dial(t, b.addr(), WithReconnect(5*time.Millisecond, 5*time.Millisecond))
	_, err = d.AddAfter(tctx(t), 1, 1, time.Second, nil)
	require.ErrorIs(t, err, ErrNotLeader)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, protocol.OpAdd, e.Op)
	assert.Equal(t, srv.Addr(), e.Leader)
	assert.Contains(t, err.Error(), "(leader "+srv.Addr()+")")
	eventually(t, "the reconnection to the leader", func() bool { return d.connAddr() == srv.Addr() })
	assert.Equal(t, int64(1), b.refused.Load(), "the reconnection went to the leader named, not back to b")
	_, err = d.AddAfter(tctx(t), 1, 1, time.Second, nil)
	require.NoError(t, err, "the caller retries on the leader")

	// A pipelined add answered not_leader names the leader too; the
	// commands after it lost their connection.
	lnC, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := serveFake(t, lnC, 1, func(int64) string { return srv.Addr() })
	e2 := dial(t, f.addr(), WithReconnect(5*time.Millisecond, 5*time.Millisecond))
	p := e2.Pipeline()
	first, second := p.Add(1, 2, 10, nil), p.Add(1, 3, 10, nil)
	require.ErrorIs(t, p.Exec(tctx(t)), ErrNotLeader)
	require.ErrorAs(t, first.Err(), &e)
	assert.Equal(t, srv.Addr(), e.Leader)
	require.ErrorIs(t, second.Err(), ErrDisconnected)
	require.ErrorIs(t, second.Err(), ErrNotLeader, "the loss names its cause")
}

// TestFailoverRebinds: the leader's node goes down and its address turns
// into a follower naming the new leader, which has the old one's state
// (here: the same server restarted on another listed address, with the same
// data directory). The Client reconnects there by itself, re-binds its
// acknowledged-mode receiver, gets the unacknowledged event again (dropped
// as a duplicate: the user sees each event once), and the events that
// fire on the new leader.
func TestFailoverRebinds(t *testing.T) {
	dir := t.TempDir()
	addrA, addrB := freeAddr(t), freeAddr(t)
	cfg := func(addr string) server.Config {
		c := testConfig(t, addr, start)
		c.DataDir, c.Persistence, c.Fsync = dir, "on", "always"
		return c
	}
	srvA, err := server.New(cfg(addrA), discardLogger())
	require.NoError(t, err)
	require.NoError(t, srvA.Start())
	t.Cleanup(func() { stopServer(t, srvA) })

	c := dial(t, addrA+","+addrB, WithReconnect(5*time.Millisecond, 20*time.Millisecond))
	ctx := tctx(t)
	_, err = c.Bind(ctx, 1, &BindOptions{Ack: AckManual})
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 1, 1, &AddOptions{Repeat: 3})
	require.NoError(t, err)
	_, _, err = c.FastForward(ctx, 2)
	require.NoError(t, err)
	for seq := uint64(1); seq <= 2; seq++ {
		ev := nextEvent(t, c.Events())
		require.Equal(t, seq, ev.Seq)
	}
	require.NoError(t, c.Ack(ctx, 1, 1), "seq 2 stays unacknowledged")

	stopServer(t, srvA)
	lnA, err := net.Listen("tcp", addrA)
	require.NoError(t, err)
	follower := serveFake(t, lnA, 0, func(int64) string { return addrB })
	srvB, err := server.New(cfg(addrB), discardLogger())
	require.NoError(t, err)
	require.NoError(t, srvB.Start())
	t.Cleanup(func() { stopServer(t, srvB) })

	eventually(t, "the reconnection to the new leader", func() bool { return c.connAddr() == addrB })
	_, _, err = c.FastForward(ctx, 1)
	require.NoError(t, err)
	ev := nextEvent(t, c.Events())
	assert.Equal(t, uint64(3), ev.Seq, "seq 2 came again and was dropped as a duplicate")
	assert.Equal(t, addrB, c.connAddr())
	assert.Equal(t, uint64(1), c.Redelivered())
	require.NoError(t, c.Ack(ctx, 1, 3), "bound on the new leader")
	noEvent(t, c.Events())
	t.Logf("the follower at the old address refused %d hellos", follower.refused.Load())

	// Another client given only the old address finds the leader too.
	other := dial(t, addrA)
	assert.Equal(t, addrB, other.connAddr())
}

// freeAddr returns a free 127.0.0.1 address below the ephemeral port
// range, for a server started later.
func freeAddr(t *testing.T) string {
	ln, err := clustertest.Listen()
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestSplitAddrs: Dial's addr and WithAddrs's lists, in order, without
// blanks and duplicates.
func TestSplitAddrs(t *testing.T) {
	assert.Equal(t, []string{"a:1"}, splitAddrs("a:1", nil))
	assert.Equal(t, []string{"a:1", "b:2", "c:3"}, splitAddrs(" a:1,b:2 ,,", []string{"c:3,a:1", " "}))
	assert.Empty(t, splitAddrs(" , ", nil))
	_, err := Dial(tctx(t), " , ")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "tickwheel: no server address"), err.Error())
}
