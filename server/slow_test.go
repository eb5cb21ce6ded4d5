package server

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// dialSmallBuffer dials with a small socket receive buffer, set before the
// connect so that the advertised window stays small: the kernel then holds
// little of what the server sends to a client that does not read.
func dialSmallBuffer(t *testing.T, srv *Server, rcvbuf int) *rawClient {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	return wrapConn(t, c)
}

// slowSetup is a server with a small max_outbound and a session "slow"
// (small socket buffer) that binds receiver 1, whose perTick timers of
// dataSize bytes each fire every tick, while "admin" has its own receiver 2
// with one timer: the test advances tw-time and checks admin's events.
func slowSetup(t *testing.T, mutate func(*Config)) (srv *Server, admin, slow *rawClient) {
	srv = startServer(t, func(c *Config) {
		c.Limits.MaxFrame = 4096
		c.Limits.MaxData = 1024
		c.Limits.MaxOutbound = 64 << 10
		if mutate != nil {
			mutate(c)
		}
	})
	admin = helloClient(t, srv, "admin")
	admin.bind(2, false)
	admin.add(protocol.Request{Receiver: 2, Tid: 1, After: 1})
	slow = dialSmallBuffer(t, srv, 4096)
	slow.sayHello("slow", "")
	slow.bind(1, false)
	data := make([]byte, slowData)
	for i := range slowPerTick {
		data[0] = byte(i)
		admin.add(protocol.Request{Receiver: 1, Tid: uint64(i), After: 1, Data: data})
	}
	return srv, admin, slow
}

const (
	slowPerTick = 16   // timers of the slow receiver, each firing every tick
	slowData    = 1000 // bytes of data on each: ~16 KB of events per tick
)

// advanceUntil moves tw-time on tick by tick until cond holds of the
// server's stats (checked every 8 ticks; the kernel's socket buffers absorb
// megabytes first), and returns the ticks. Each tick admin gets exactly its
// own event, whatever the slow session does.
func advanceUntil(t *testing.T, admin *rawClient, what string, cond func(protocol.Stats) bool) int {
	t.Helper()
	const maxTicks = 5000 // ~80 MB of events
	for ticks := 1; ticks <= maxTicks; ticks++ {
		admin.ff(1)
		fs := admin.fires()
		require.Len(t, fs, 1)
		require.Equal(t, uint64(2), fs[0].Receiver)
		if ticks%8 == 0 && cond(admin.stats()) {
			return ticks
		}
	}
	t.Fatalf("%s: not after %d ticks", what, maxTicks)
	return 0
}

// TestSlowReader: a session that does not read is not closed. What does
// not fit in max_outbound waits in its receiver's backlog, which drops its
// oldest events past max_backlog; when the client reads again it gets every
// event kept, in order, and the seq gaps add up to the drops the server
// counted. Other sessions are served meanwhile.
func TestSlowReader(t *testing.T) {
	_, admin, slow := slowSetup(t, func(c *Config) { c.Limits.MaxBacklog = 200 })
	ticks := advanceUntil(t, admin, "the backlog overflows", func(st protocol.Stats) bool { return st.DroppedTotal > 0 })
	ticks += advanceUntil(t, admin, "more ticks", func(protocol.Stats) bool { return true })
	st := admin.stats()
	require.Equal(t, uint64(2), st.Sessions, "the slow session is still open")
	require.LessOrEqual(t, st.BacklogEvents, uint64(200))

	total := uint64(ticks * slowPerTick)
	var lastSeen, received, gaps uint64
	for lastSeen < total {
		m, err := slow.read()
		require.NoError(t, err, "after seq %d of %d", lastSeen, total)
		if m.Kind != protocol.KindFire {
			continue
		}
		require.Greater(t, m.Fire.Seq, lastSeen, "events come in order")
		gaps += m.Fire.Seq - lastSeen - 1
		lastSeen = m.Fire.Seq
		received++
	}
	assert.Equal(t, total, received+gaps)
	assert.Equal(t, admin.stats().DroppedTotal, gaps, "every gap is a drop the server counted")
	t.Logf("slow client: %d events received, %d dropped of %d", received, gaps, total)
}

// TestLostWithConnection: events handed to a connection that is reset
// before they are written to its socket are counted in the receiver's next
// bind, and the backlog then continues the sequence with no gap.
func TestLostWithConnection(t *testing.T) {
	srv, admin, slow := slowSetup(t, nil)
	// Once events are held back, max_outbound bytes wait in the server.
	ticks := advanceUntil(t, admin, "events held back", func(st protocol.Stats) bool { return st.BacklogEvents > 0 })
	require.NoError(t, slow.conn.(*net.TCPConn).SetLinger(0))
	slow.conn.Close() // RST: nothing read
	admin.waitSessions(1)

	c := helloClient(t, srv, "rebind")
	backlog, dropped := c.bind(1, false)
	require.Positive(t, dropped, "events in the server's buffer were lost and reported")
	fs := c.readFires(int(backlog))
	total := uint64(ticks * slowPerTick)
	if backlog > 0 {
		for i := 1; i < len(fs); i++ {
			require.Equal(t, fs[i-1].Seq+1, fs[i].Seq, "the backlog is contiguous")
		}
		require.Equal(t, total, fs[len(fs)-1].Seq)
		// What came before the backlog either reached the kernel (beyond
		// the server's sight) or was reported lost.
		require.LessOrEqual(t, dropped, fs[0].Seq-1)
	}
	t.Logf("of %d events: %d lost and reported, %d in the backlog, %d in kernel buffers", total, dropped, backlog, total-dropped-backlog)
}

// readFires reads n fire events (a backlog larger than max_outbound is sent
// as the socket drains, so replies to later requests may come between).
func (c *rawClient) readFires(n int) []protocol.Fire {
	c.t.Helper()
	var fs []protocol.Fire
	for len(fs) < n {
		m, err := c.read()
		require.NoError(c.t, err, "after %d of %d events", len(fs), n)
		if m.Kind == protocol.KindFire {
			fs = append(fs, m.Fire)
		}
	}
	return fs
}

// TestBacklogLargerThanOutbound: binding a receiver whose backlog is far
// larger than max_outbound, while its timers keep firing, delivers every
// event in order to a client that reads; it is never closed as slow.
func TestBacklogLargerThanOutbound(t *testing.T) {
	srv := startServer(t, func(c *Config) {
		c.Limits.MaxFrame = 4096
		c.Limits.MaxData = 1024
		c.Limits.MaxOutbound = 64 << 10
	})
	admin := helloClient(t, srv, "admin")
	data := make([]byte, slowData)
	for i := range 1000 {
		admin.add(protocol.Request{Receiver: 1, Tid: uint64(i), After: 1, Repeat: 2, Data: data})
	}
	admin.ff(1) // 1,000 events, ~1 MB, in the backlog of unbound receiver 1
	c := helloClient(t, srv, "binder")
	backlog, dropped := c.bind(1, false)
	require.Equal(t, uint64(1000), backlog)
	require.Zero(t, dropped)
	admin.ff(1) // 1,000 more fire while the backlog is being delivered
	var seq uint64
	for seq < 2000 {
		m, err := c.read()
		require.NoError(t, err, "closed after seq %d", seq)
		require.Equal(t, protocol.KindFire, m.Kind)
		require.Equal(t, seq+1, m.Fire.Seq)
		seq = m.Fire.Seq
	}
	assert.Zero(t, admin.stats().DroppedTotal)
}

// TestBurstToReadingClient: one tick whose events are more than
// max_outbound (2,100 timers of 4 KiB, ~8.7 MB against the default 8 MiB)
// does not close a client that reads: what does not fit waits in the
// receiver's queue and follows as the client drains, in order, none
// dropped (the report of a close after ~8.4 MB).
func TestBurstToReadingClient(t *testing.T) {
	srv := startServer(t, nil) // the default limits
	admin := helloClient(t, srv, "admin")
	c := helloClient(t, srv, "reader")
	c.bind(1, false)
	data := make([]byte, 4096)
	const n = 2100
	for i := range n {
		admin.add(protocol.Request{Receiver: 1, Tid: uint64(i + 1), After: 1, Data: data})
	}
	admin.ff(1)
	var seq uint64
	for seq < n {
		m, err := c.read()
		require.NoError(t, err, "closed after seq %d", seq)
		require.Equal(t, protocol.KindFire, m.Kind)
		require.Equal(t, seq+1, m.Fire.Seq)
		require.Equal(t, seq+1, m.Fire.Tid, "same-tick timers fire in the order they were added")
		seq = m.Fire.Seq
	}
	c.ping()
	assert.Zero(t, admin.stats().DroppedTotal)
}
