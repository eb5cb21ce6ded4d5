package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// The rules of each op are tested on the Core (session/); the tests here
// check that a connection's requests and replies, and the pushes between
// them, go over TCP end to end, one test per op family.

const start = 1000 // startServer's StartTick

// TestHello: the hello reply over TCP carries the server's configuration:
// its tick, version and every limit, timeouts and max_connections
// included, which the server derives (session/ tests the rest of hello).
func TestHello(t *testing.T) {
	srv := startServer(t, nil)
	c := helloClient(t, srv, "h")
	h := c.hello
	assert.NotZero(t, h.Session)
	assert.Equal(t, uint64(start), h.Now)
	assert.Equal(t, uint64(defaultTick), h.TickNs)
	assert.Equal(t, Version, h.ServerVersion)
	assert.Equal(t, protocol.Limits{MaxFrame: 64 << 10, MaxData: 4096, MaxTimersPerReceiver: 100_000,
		MaxTimers: 10_000_000, MaxReceiversPerSession: 100_000, MaxBacklog: 10_000, MaxOutbound: 8 << 20,
		MaxBacklogBytes: 16 << 20, MaxBacklogTotal: 1_000_000, MaxBacklogBytesTotal: 512 << 20,
		MaxDataTotal: 1 << 30, MaxInbound: 4 << 20, MaxConnections: uint64(srv.cfg.Limits.MaxConnections),
		MaxName: 256, MaxListPage: 1000, MaxListBytes: 1 << 20,
		HandshakeTimeoutMs: 10_000, IdleTimeoutMs: 120_000, FrameTimeoutMs: 10_000,
		MaxOutbox: 100_000, MaxOutboxBytes: 16 << 20, MaxOutboxTotal: 10_000_000, MaxOutboxBytesTotal: 512 << 20,
		MaxRequestIDs: 0, RequestIDTicks: 0}, h.Limits) // a single server remembers no request ids unless told to
	other := helloClient(t, srv, "h2")
	assert.NotEqual(t, h.Session, other.session, "session ids are distinct")
	// Before hello, requests are refused, unknown ops too.
	d := dial(t, srv)
	d.failCode(protocol.CodeHelloRequired, protocol.Request{Op: protocol.OpPing})
	d.failCode(protocol.CodeHelloRequired, protocol.Request{Op: 99})
	d.sayHello("late", "")
	d.ping()
}

// TestTimerOpsOverTCP: add, get, list, pause, resume, cancel and
// cancel_all, with their errors, and the events a fast-forward causes.
func TestTimerOpsOverTCP(t *testing.T) {
	srv := startServer(t, nil)
	c := helloClient(t, srv, "a")
	c.bind(1, false)
	assert.Equal(t, uint64(start+2), c.add(protocol.Request{Receiver: 1, Tid: 4, After: 2, Every: 3, Repeat: 3, Data: []byte("payload")}))
	assert.Equal(t, protocol.Timer{Receiver: 1, Tid: 4, Due: start + 2, Remaining: 2, Every: 3, Repeat: 3, Data: []byte("payload")}, c.get(1, 4))
	c.failCode(protocol.CodeExists, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 4, After: 3})
	c.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 5, After: 1, Repeat: 1 << 33})
	c.add(protocol.Request{Receiver: 1, Tid: 5, After: 10, Repeat: 1})
	c.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 5})
	assert.True(t, c.get(1, 5).Paused)
	c.failCode(protocol.CodeBadState, protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 5})
	c.uints(protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 5})
	assert.Len(t, c.list(1), 2)

	assert.Equal(t, []uint64{start + 5, 2}, c.ff(5))
	assert.Equal(t, []string{
		"T+2 r=1 tid=4 fired=1/3 last=false seq=1 data=payload",
		"T+5 r=1 tid=4 fired=2/3 last=false seq=2 data=payload",
	}, fireLines(c.fires()), "the events come before the fast-forward's reply")

	c.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 5})
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 5})
	assert.Equal(t, []uint64{1}, c.uints(protocol.Request{Op: protocol.OpCancelAll, Receiver: 1}))
	assert.Empty(t, c.list(1))
}

// TestReceiverOpsOverTCP: bind and unbind; a takeover pushed to the old
// owner between its replies; a backlog delivered after the bind's reply.
func TestReceiverOpsOverTCP(t *testing.T) {
	srv := startServer(t, nil)
	admin := helloClient(t, srv, "admin")
	first := helloClient(t, srv, "first")
	second := helloClient(t, srv, "second")
	first.bind(1, false)
	admin.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	admin.ff(1)
	first.ping()
	require.Len(t, first.fires(), 1)

	second.bind(1, false)
	m, err := first.read() // pushed without a request of first's
	require.NoError(t, err)
	require.Equal(t, protocol.KindTakeover, m.Kind)
	assert.Equal(t, uint64(1), m.Receiver)
	assert.Equal(t, second.session, m.Session)
	second.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 1})
	second.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpUnbind, Receiver: 1})

	admin.ff(2) // two events into the unbound receiver's backlog
	id := first.send(protocol.Request{Op: protocol.OpBind, Receiver: 1})
	m, err = first.read()
	require.NoError(t, err)
	require.Equal(t, id, m.ID, "the reply comes first, then the backlog")
	assert.Equal(t, []uint64{2, 0, 2}, okUints(t, protocol.OpBind, m))
	for seq := uint64(2); seq <= 3; seq++ {
		m, err := first.read()
		require.NoError(t, err)
		require.Equal(t, protocol.KindFire, m.Kind)
		assert.Equal(t, seq, m.Fire.Seq)
	}
}

// TestAdminOpsOverTCP: the clock ops and stats, refused to a session
// without the admin token.
func TestAdminOpsOverTCP(t *testing.T) {
	srv := startServer(t, func(c *Config) { c.Tick = 20e6 })
	a := helloClient(t, srv, "admin")
	user := helloToken(t, srv, "user", "")
	user.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpStats})
	user.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpFastForward, Ticks: 5})

	assert.Equal(t, []uint64{start + 10, 0}, a.ff(10))
	assert.Equal(t, []uint64{start + 10}, a.uints(protocol.Request{Op: protocol.OpSetSpeed, Speed: 2.5}))
	a.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpSetSpeed, Speed: -1})
	now := a.uints(protocol.Request{Op: protocol.OpResumeSync})
	require.Len(t, now, 1)
	assert.GreaterOrEqual(t, now[0], uint64(start+10))
	st := a.stats()
	assert.False(t, st.Frozen)
	assert.Equal(t, 2.5, st.Speed)
	assert.Equal(t, uint64(20e6), st.TickNs)
	frozenAt := a.uints(protocol.Request{Op: protocol.OpFreeze})
	require.Len(t, frozenAt, 1)
	assert.GreaterOrEqual(t, frozenAt[0], now[0])
	st = a.stats()
	assert.True(t, st.Frozen)
	assert.Equal(t, uint64(2), st.Sessions)
	assert.Equal(t, frozenAt[0], st.Now)
}

// fireLines renders fire events relative to start.
func fireLines(fs []protocol.Fire) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("T+%d r=%d tid=%d fired=%d/%d last=%v seq=%d data=%s",
			f.Tick-start, f.Receiver, f.Tid, f.Fired, f.Repeat, f.Last, f.Seq, f.Data))
	}
	return out
}
