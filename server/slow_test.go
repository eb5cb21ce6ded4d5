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

// TestSlowReader: a session that binds a receiver and never reads is closed
// once max_outbound bytes are queued to it; another session keeps getting
// its events meanwhile; the slow receiver's later events wait in its backlog,
// with the sequence continuing.
func TestSlowReader(t *testing.T) {
	const (
		perTick  = 16   // timers of the slow receiver, each firing every tick
		dataSize = 1000 // bytes of data on each: ~16 KB of events per tick
		maxTicks = 5000 // ~80 MB: far more than any kernel buffers on loopback
	)
	srv := startServer(t, func(c *Config) {
		c.Limits.MaxFrame = 4096
		c.Limits.MaxData = 1024
		c.Limits.MaxOutbound = 64 << 10
	})
	admin := helloClient(t, srv, "admin")
	admin.bind(2, false)
	admin.add(protocol.Request{Receiver: 2, Tid: 1, After: 1})

	slow := dialSmallBuffer(t, srv, 4096)
	slow.sayHello("slow", "")
	slow.bind(1, false)
	data := make([]byte, dataSize)
	for i := range perTick {
		data[0] = byte(i)
		admin.add(protocol.Request{Receiver: 1, Tid: uint64(i), After: 1, Data: data})
	}

	// Advance tick by tick until the server closes the slow session. Each
	// tick the admin gets exactly its own event.
	ticks := 0
	for ; ticks < maxTicks; ticks++ {
		admin.ff(1)
		fs := admin.fires()
		require.Len(t, fs, 1, "tick %d", ticks+1)
		require.Equal(t, uint64(2), fs[0].Receiver)
		require.Equal(t, uint64(ticks+1), fs[0].Seq)
		if ticks%8 == 7 && admin.stats().Sessions == 1 {
			break
		}
	}
	require.Less(t, ticks, maxTicks, "the slow session was never closed")
	ticks++
	t.Logf("slow session closed after %d ticks (%d events, ~%d KiB)", ticks, ticks*perTick, ticks*perTick*dataSize/1024)

	// Later events of the slow receiver go to its backlog.
	const after = 5
	admin.ff(after)
	require.Len(t, admin.fires(), after)
	ticks += after
	total := uint64(ticks * perTick)

	// The slow client gets what the kernel held, then EOF: a prefix of the
	// sequence.
	var lastSeen uint64
	for _, m := range slow.readUntilClosed() {
		if m.Kind != protocol.KindFire {
			continue
		}
		require.Equal(t, lastSeen+1, m.Fire.Seq, "the slow client's events are a gapless prefix")
		lastSeen = m.Fire.Seq
	}

	// A new session binds the slow receiver and gets the rest of the sequence
	// from where the server stopped delivering: contiguous, up to the last one.
	c := helloClient(t, srv, "rebind")
	backlog, dropped := c.bind(1, false)
	assert.Zero(t, dropped)
	require.GreaterOrEqual(t, backlog, uint64(after*perTick))
	c.ping()
	fs := c.fires()
	require.Len(t, fs, int(backlog))
	for i, f := range fs {
		require.Equal(t, uint64(1), f.Receiver)
		if i > 0 {
			require.Equal(t, fs[i-1].Seq+1, f.Seq, "backlog seq is contiguous")
		}
	}
	assert.Greater(t, fs[0].Seq, lastSeen, "the backlog starts after what the slow client got")
	assert.Equal(t, total, fs[len(fs)-1].Seq, "no event after the close is lost and seq does not restart")
	t.Logf("slow client read %d events, lost %d with its connection, backlog %d", lastSeen, fs[0].Seq-lastSeen-1, backlog)

	// Live events continue the sequence.
	admin.ff(1)
	c.ping()
	fs = c.fires()
	require.Len(t, fs, perTick)
	assert.Equal(t, total+1, fs[0].Seq)
}
