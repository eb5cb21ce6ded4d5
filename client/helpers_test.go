package client

import (
	"context"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
)

const start = 1000 // StartTick of the test servers

// testAdminToken is the test servers' admin token, which dial sends unless
// the test gives its own WithToken.
const testAdminToken = "test-admin-token"

// testConfig is the config of a frozen test server on addr at tick.
func testConfig(t testing.TB, addr string, tick uint64) server.Config {
	return server.Config{Addr: addr, Frozen: true, StartTick: tick, AdminToken: testAdminToken, DataDir: t.TempDir()}
}

// rememberIDs makes a test server remember request ids
// (limits.max_request_ids as a cluster node's default; a single server's
// default is -1), so that the client retries changes.
func rememberIDs(c *server.Config) { c.Limits.MaxRequestIDs = 100_000 }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startServer runs a frozen in-process server at tick 1000 on 127.0.0.1:0
// (or cfg.Addr as set by mutate), with admin token testAdminToken, and stops
// it when the test ends.
func startServer(t testing.TB, mutate func(*server.Config)) *server.Server {
	t.Helper()
	cfg := testConfig(t, "127.0.0.1:0", start)
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := server.New(cfg, discardLogger())
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { stopServer(t, srv) })
	return srv
}

func stopServer(t testing.TB, srv *server.Server) {
	select {
	case <-srv.Done():
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Stop(ctx))
}

// dial connects a Client to addr with the admin token (unless opts give
// another WithToken) and closes it when the test ends.
func dial(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, append([]Option{WithToken(testAdminToken)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// tctx is a context for one call in a test.
func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// nextEvent waits for the next event on ch.
func nextEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "events channel closed")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return Event{}
	}
}

// noEvent checks that no event is waiting on ch.
func noEvent(t *testing.T, ch <-chan Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

// eventually polls cond every 5ms for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noLeak checks that the goroutine count comes back to at most before.
func noLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutine leak: %d goroutines, %d before\n%s", n, before, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dropConn closes the Client's current connection, as a network failure
// would: the Client sees the loss and reconnects.
func (c *Client) dropConn() {
	if cn := c.current(); cn != nil {
		cn.nc.Close()
	}
}

// pendingCalls returns the number of calls in flight on the current connection.
func (c *Client) pendingCalls() int {
	cn := c.current()
	if cn == nil {
		return 0
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.pending)
}

func (c *Client) isBound(receiver uint64) (ephemeral, ok bool) {
	o, ok := c.bindOptions(receiver)
	return o.Ephemeral, ok
}

// bindOptions returns the options the Client re-binds receiver with.
func (c *Client) bindOptions(receiver uint64) (o BindOptions, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok = c.bound[receiver]
	return
}

// fakeServer answers hello and hands every other request to onRequest,
// which may write a reply to w and returns false to have the connection
// closed. It never replies on its own: unanswered calls stay in flight.
type fakeServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func startFake(t *testing.T, onRequest func(w io.Writer, req protocol.Request) bool) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeServer{ln: ln, conns: make(map[net.Conn]bool)}
	f.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[nc] = true
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(nc, onRequest) })
		}
	})
	t.Cleanup(f.stop)
	return f
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }

func (f *fakeServer) stop() {
	f.ln.Close()
	f.mu.Lock()
	for nc := range f.conns {
		nc.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeServer) serve(nc net.Conn, onRequest func(w io.Writer, req protocol.Request) bool) {
	defer func() {
		nc.Close()
		f.mu.Lock()
		delete(f.conns, nc)
		f.mu.Unlock()
	}()
	readRequests(nc, func(req protocol.Request) bool {
		if req.Op == protocol.OpHello {
			_, err := nc.Write(fakeHello(req.ID, 0))
			return err == nil
		}
		return onRequest(nc, req)
	})
}

// readRequests calls fn with each request read from nc until nc fails, a
// request does not decode, or fn returns false.
func readRequests(nc net.Conn, fn func(protocol.Request) bool) {
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		n, err := nc.Read(tmp)
		if err != nil {
			return
		}
		buf = append(buf, tmp[:n]...)
		for {
			payload, n, err := protocol.SplitFrame(buf, 0)
			if err != nil {
				break
			}
			var req protocol.Request
			if protocol.DecodeRequest(payload, &req) != nil {
				return
			}
			buf = buf[n:]
			if !fn(req) {
				return
			}
		}
	}
}

// fakeHello is a fake server's reply to hello id, reporting idleMs as
// idle_timeout_ms (0: none).
func fakeHello(id, idleMs uint64) []byte {
	h := protocol.Hello{Session: 1, Now: start, TickNs: uint64(10 * time.Millisecond), ServerVersion: "fake",
		Limits: protocol.Limits{MaxFrame: protocol.DefaultMaxFrame, IdleTimeoutMs: idleMs}}
	return protocol.AppendHelloOK(nil, id, &h)
}
