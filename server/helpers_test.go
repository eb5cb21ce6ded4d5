package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// startServer runs a server on 127.0.0.1:0, frozen unless cfg says otherwise
// via mutate, and stops it when the test ends.
func startServer(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Stop(ctx))
	})
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
}

func dial(t *testing.T, srv *Server) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, r: bufio.NewReader(c)}
}

// hello dials and says hello.
func helloClient(t *testing.T, srv *Server, name string) *rawClient {
	c := dial(t, srv)
	m := c.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: name})
	require.Equal(t, protocol.KindOK, m.Kind, "hello: %s", m.Text)
	return c
}

func (c *rawClient) send(req protocol.Request) uint64 {
	c.id++
	req.ID = c.id
	_, err := c.conn.Write(protocol.AppendRequest(nil, &req))
	require.NoError(c.t, err)
	return req.ID
}

// read returns the next server message.
func (c *rawClient) read() (protocol.Message, error) {
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return protocol.Message{}, err
	}
	n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
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
	m := c.call(req)
	require.Equal(c.t, protocol.KindOK, m.Kind, "%s: %s %s", req.Op, m.Code, m.Text)
	v, err := protocol.DecodeUints(m.Result, nil)
	require.NoError(c.t, err)
	return v
}

// fail calls req and returns the error code of its reply.
func (c *rawClient) fail(req protocol.Request) (protocol.Code, string) {
	c.t.Helper()
	m := c.call(req)
	require.Equal(c.t, protocol.KindError, m.Kind, "%s should fail", req.Op)
	return m.Code, m.Text
}

// closed reports whether the server closed the connection (EOF on read).
func (c *rawClient) closed() bool {
	for {
		_, err := c.read()
		if err != nil {
			return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
		}
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
