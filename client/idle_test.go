package client

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestIdleClientStaysConnected: against a server with a 1 s idle timeout,
// a client that makes no call for 3 s keeps its session: its pings (every
// third of the timeout) keep the connection alive, so the next call needs
// no reconnect. (With 300 ms, a loaded machine delayed a ping past the
// timeout now and then.)
func TestIdleClientStaysConnected(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.Timeouts.Idle = time.Second }))
	// servertest's own admin token, not testAdminToken; the log shows the
	// server's reason should it close the connection.
	c := dial(t, srv.Addr(), WithToken(srv.AdminToken()), WithLogger(slog.New(slog.NewTextHandler(testLog{t}, nil))))
	require.Equal(t, uint64(1000), c.Limits().IdleTimeoutMs)
	session, cn := c.Session(), c.current()
	time.Sleep(3 * time.Second)
	assert.Same(t, cn, c.current(), "the same connection")
	assert.Equal(t, session, c.Session())
	_, err := c.Ping(tctx(t))
	require.NoError(t, err)
	assert.Same(t, cn, c.current(), "no reconnect")
}

// TestIdlePings: the client pings whenever it has sent nothing for a third
// of the idle timeout the server reports, and not while it sends requests
// anyway; without an idle timeout it never pings. Checked with a bare
// listener that records when each request arrives.
func TestIdlePings(t *testing.T) {
	const idle = 600 * time.Millisecond
	for _, tt := range []struct {
		name   string
		idleMs uint64
	}{{"idle timeout", uint64(idle.Milliseconds())}, {"none", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			var mu sync.Mutex
			var pings []time.Time
			served := make(chan struct{})
			go func() {
				defer close(served)
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				serveRecording(nc, tt.idleMs, func(req protocol.Request) {
					if req.Op == protocol.OpPing {
						mu.Lock()
						pings = append(pings, time.Now())
						mu.Unlock()
					}
				})
			}()
			c := dial(t, ln.Addr().String())
			began := time.Now()
			time.Sleep(1500 * time.Millisecond)
			// Busy: calls every 20 ms leave no room for pings.
			mu.Lock()
			quiet := len(pings)
			mu.Unlock()
			const calls = 40
			for range calls {
				_, err := c.Ping(tctx(t))
				require.NoError(t, err)
				time.Sleep(20 * time.Millisecond)
			}
			c.Close()
			ln.Close()
			<-served

			mu.Lock()
			defer mu.Unlock()
			if tt.idleMs == 0 {
				assert.Equal(t, calls, len(pings), "only the calls' pings")
				return
			}
			assert.GreaterOrEqual(t, quiet, 4, "about one ping per 200 ms while quiet")
			assert.LessOrEqual(t, quiet, 9)
			// Pinging regardless of the calls would add about 5; one is
			// allowed for a stall of the test (a loaded machine).
			assert.LessOrEqual(t, len(pings)-quiet-calls, 1, "no idle pings while busy")
			last := began
			for i, p := range pings[:quiet] {
				assert.Less(t, p.Sub(last), idle, "gap before ping %d", i)
				last = p
			}
		})
	}
}

// testLog writes log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// serveRecording answers hello (with idle_timeout_ms idleMs) and pings on
// nc, calling record with every request, until nc fails.
func serveRecording(nc net.Conn, idleMs uint64, record func(protocol.Request)) {
	readRequests(nc, func(req protocol.Request) bool {
		record(req)
		out := protocol.AppendOK(nil, req.ID, start)
		if req.Op == protocol.OpHello {
			out = fakeHello(req.ID, idleMs)
		}
		_, err := nc.Write(out)
		return err == nil
	})
}
