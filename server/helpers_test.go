package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// ioTimeout bounds every wait on a socket: a test that waits this long has
// failed (a reply or a close that never comes), it is never the normal path.
const ioTimeout = 5 * time.Second

// testLogger discards the server's logs unless TICKWHEEL_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("TICKWHEEL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testAdminToken is the admin token of the test servers, unless mutate
// changes it: helloClient sends the server's admin token.
const testAdminToken = "test-admin-token"

// startServer runs a server on 127.0.0.1:0, frozen unless cfg says otherwise
// via mutate, and stops it when the test ends. Its admin token is
// testAdminToken and its data directory a temporary one; it keeps its state
// in memory unless mutate turns persistence on.
func startServer(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	srv := newServer(t, mutate)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		require.NoError(t, srv.Stop(ctx))
	})
	return srv
}

// newServer is startServer without the cleanup, for tests that stop the
// server themselves.
func newServer(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: t.TempDir(),
		Persistence: "off"}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	return srv
}

// rawClient speaks the wire protocol directly, one request at a time or pipelined.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	id   uint64
	// events received while waiting for replies, in order
	events []protocol.Message
	// session is the session id from the hello reply
	session uint64
	hello   protocol.Hello
	// wait, when set, replaces ioTimeout as the bound on each read: for
	// a reply that comes only after long work (a fast-forward over many
	// busy ticks), which a loaded -race machine may take well over
	// ioTimeout to finish.
	wait time.Duration
}

func dial(t *testing.T, srv *Server) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	return wrapConn(t, c)
}

func wrapConn(t *testing.T, c net.Conn) *rawClient {
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, r: bufio.NewReader(c)}
}

// helloClient dials and says hello with the server's admin token, so the
// session may use admin ops (ff, stats). helloToken(t, srv, name, "") makes
// a session without admin rights.
func helloClient(t *testing.T, srv *Server, name string) *rawClient {
	t.Helper()
	return helloToken(t, srv, name, srv.AdminToken())
}

// helloToken dials and says hello with token.
func helloToken(t *testing.T, srv *Server, name, token string) *rawClient {
	t.Helper()
	c := dial(t, srv)
	c.sayHello(name, token)
	return c
}

// sayHello says hello on an open connection and records the session id.
func (c *rawClient) sayHello(name, token string) {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: name, Token: token})
	require.Equal(c.t, protocol.KindOK, m.Kind, "hello: %s %s", m.Code, m.Text)
	require.NoError(c.t, protocol.DecodeHello(m.Result, &c.hello))
	c.session = c.hello.Session
}

func (c *rawClient) send(req protocol.Request) uint64 {
	c.id++
	req.ID = c.id
	c.write(protocol.AppendRequest(nil, &req))
	return req.ID
}

// write writes raw bytes in one call.
func (c *rawClient) write(b []byte) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := c.conn.Write(b)
	require.NoError(c.t, err)
}

// read returns the next server message.
func (c *rawClient) read() (protocol.Message, error) {
	wait := ioTimeout
	if c.wait > 0 {
		wait = c.wait
	}
	c.conn.SetReadDeadline(time.Now().Add(wait))
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return protocol.Message{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 16<<20 {
		return protocol.Message{}, errors.New("test client: server frame too large")
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.r, payload); err != nil {
		return protocol.Message{}, err
	}
	var m protocol.Message
	if err := protocol.DecodeMessage(payload, &m); err != nil {
		return m, err
	}
	return m, nil
}

// reply reads until the reply to id, keeping pushes in c.events.
func (c *rawClient) reply(id uint64) protocol.Message {
	c.t.Helper()
	for {
		m, err := c.read()
		require.NoError(c.t, err)
		if m.Kind == protocol.KindFire || m.Kind == protocol.KindTakeover {
			c.events = append(c.events, m)
			continue
		}
		require.Equal(c.t, id, m.ID, "replies come in request order")
		return m
	}
}

func (c *rawClient) call(req protocol.Request) protocol.Message {
	c.t.Helper()
	return c.reply(c.send(req))
}

// uints calls req and returns its OK result as uints, failing on an error reply.
func (c *rawClient) uints(req protocol.Request) []uint64 {
	c.t.Helper()
	return okUints(c.t, req.Op, c.call(req))
}

func okUints(t *testing.T, op protocol.Op, m protocol.Message) []uint64 {
	t.Helper()
	require.Equal(t, protocol.KindOK, m.Kind, "%s: %s %s", op, m.Code, m.Text)
	v, err := protocol.DecodeUints(m.Result, nil)
	require.NoError(t, err)
	return v
}

// fail calls req and returns the error code of its reply.
func (c *rawClient) fail(req protocol.Request) (protocol.Code, string) {
	c.t.Helper()
	m := c.call(req)
	require.Equal(c.t, protocol.KindError, m.Kind, "%s should fail", req.Op)
	return m.Code, m.Text
}

// failCode calls req and checks it fails with code; it returns the message.
func (c *rawClient) failCode(code protocol.Code, req protocol.Request) string {
	c.t.Helper()
	got, text := c.fail(req)
	require.Equal(c.t, code, got, "%s: %s", req.Op, text)
	return text
}

// ping checks that the session answers.
func (c *rawClient) ping() uint64 {
	c.t.Helper()
	v := c.uints(protocol.Request{Op: protocol.OpPing})
	require.Len(c.t, v, 1)
	return v[0]
}

// ff fast-forwards by n ticks and returns [now, fired].
func (c *rawClient) ff(n uint64) []uint64 {
	c.t.Helper()
	return c.uints(protocol.Request{Op: protocol.OpFastForward, Ticks: n})
}

func (c *rawClient) bind(receiver uint64, ephemeral bool) (backlog, dropped uint64) {
	c.t.Helper()
	v := c.uints(protocol.Request{Op: protocol.OpBind, Receiver: receiver, Ephemeral: ephemeral})
	require.Len(c.t, v, 3, "bind result is [backlog, dropped, first_seq]")
	return v[0], v[1]
}

// add adds a timer and returns its due tick.
func (c *rawClient) add(req protocol.Request) uint64 {
	c.t.Helper()
	req.Op = protocol.OpAdd
	v := c.uints(req)
	require.Len(c.t, v, 1)
	return v[0]
}

func (c *rawClient) stats() protocol.Stats {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpStats})
	require.Equal(c.t, protocol.KindOK, m.Kind, "stats: %s %s", m.Code, m.Text)
	var s protocol.Stats
	require.NoError(c.t, protocol.DecodeStats(m.Result, &s))
	return s
}

func (c *rawClient) get(receiver, tid uint64) protocol.Timer {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpGet, Receiver: receiver, Tid: tid})
	require.Equal(c.t, protocol.KindOK, m.Kind, "get: %s %s", m.Code, m.Text)
	var tm protocol.Timer
	require.NoError(c.t, protocol.DecodeTimer(m.Result, &tm))
	return tm
}

func (c *rawClient) list(receiver uint64) []protocol.Timer {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpList, Receiver: receiver})
	require.Equal(c.t, protocol.KindOK, m.Kind, "list: %s %s", m.Code, m.Text)
	ts, err := protocol.DecodeList(m.Result, nil)
	require.NoError(c.t, err)
	return ts
}

// takeEvents returns the pushes received so far and forgets them.
func (c *rawClient) takeEvents() []protocol.Message {
	ev := c.events
	c.events = nil
	return ev
}

// fires returns the fire events received so far, forgetting every push.
func (c *rawClient) fires() []protocol.Fire {
	c.t.Helper()
	var fs []protocol.Fire
	for _, m := range c.takeEvents() {
		require.Equal(c.t, protocol.KindFire, m.Kind, "unexpected push %v", m)
		fs = append(fs, m.Fire)
	}
	return fs
}

// readUntilClosed reads messages until the server closes the connection and
// returns them. It fails the test on a timeout: the server did not close.
func (c *rawClient) readUntilClosed() []protocol.Message {
	c.t.Helper()
	var ms []protocol.Message
	for {
		m, err := c.read()
		if err != nil {
			require.Truef(c.t, isClosedErr(err), "want the server to close the connection, got %v", err)
			return ms
		}
		ms = append(ms, m)
	}
}

// closed reports whether the server closed the connection (EOF or reset on
// read), reading and dropping whatever comes before. A timeout is not a close.
func (c *rawClient) closed() bool {
	for {
		_, err := c.read()
		if err != nil {
			return isClosedErr(err)
		}
	}
}

// isClosedErr reports whether err is the peer closing: EOF, or a reset (the
// server closing with our unread bytes in its buffer resets the connection).
// A read timeout is not a close.
func isClosedErr(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op)
}

// frame wraps payload in a frame header.
func frame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// waitUntil polls cond (each call a round trip to the server, never a
// sleep) until it holds, failing after ioTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitSessions waits until the server counts n sessions (admin's included):
// closes are seen by the server asynchronously.
func (c *rawClient) waitSessions(n uint64) {
	c.t.Helper()
	waitUntil(c.t, "the session count", func() bool { return c.stats().Sessions == n })
}

// runLogged starts a server of cfg logging to logs, and stops it when the
// test ends.
func runLogged(t *testing.T, cfg Config, logs *lockedBuffer) *Server {
	t.Helper()
	srv, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		require.NoError(t, srv.Stop(ctx))
	})
	return srv
}
