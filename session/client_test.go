package session

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// client is a session driven through the harness the way a client sees a
// server: it sends requests with increasing ids and reads the messages its
// session was sent, in order. While its fast-forward's reply is due, a
// read runs advance turns (as the server's loop does) until it comes.
type client struct {
	t       testing.TB
	h       *harness
	s       *Session
	id      uint64
	inbox   []protocol.Message // sent to it, not read yet
	events  []protocol.Message // pushes read while waiting for replies, in order
	session uint64             // from the hello reply
	hello   protocol.Hello
}

// client opens a session that says hello with the admin token.
func (h *harness) client(name string) *client { return h.clientToken(name, testAdminToken) }

// clientToken opens a session that says hello with token.
func (h *harness) clientToken(name, token string) *client {
	c := h.dial()
	c.sayHello(name, token)
	return c
}

// dial opens a session that has not said hello.
func (h *harness) dial() *client { return &client{t: h.t, h: h, s: h.c.Open()} }

// close closes c's session as its connection's closing does.
func (c *client) close() {
	c.h.c.Close(c.s, 0)
	c.h.flush()
}

func (c *client) sayHello(name, token string) {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: name, Token: token})
	require.Equal(c.t, protocol.KindOK, m.Kind, "hello: %s %s", m.Code, m.Text)
	require.NoError(c.t, protocol.DecodeHello(m.Result, &c.hello))
	c.session = c.hello.Session
}

// send applies req with the next id and returns the id.
func (c *client) send(req protocol.Request) uint64 {
	c.id++
	req.ID = c.id
	c.h.send(c.s, req)
	return req.ID
}

// read returns the next message sent to c, running advance turns while
// a fast-forward of c's is in progress; it fails when none comes.
func (c *client) read() protocol.Message {
	c.t.Helper()
	for turns := 0; len(c.inbox) == 0; turns++ {
		c.inbox = append(c.inbox, c.h.take(c.s)...)
		if len(c.inbox) > 0 {
			break
		}
		require.True(c.t, c.s.Waiting() && turns < 1_000_000, "session %d: no message comes", c.s.id)
		c.h.advance()
	}
	m := c.inbox[0]
	c.inbox = c.inbox[1:]
	return m
}

// pending reports whether a message sent to c has not been read.
func (c *client) pending() bool {
	c.inbox = append(c.inbox, c.h.take(c.s)...)
	return len(c.inbox) > 0
}

// reply reads until the reply to id, keeping pushes in c.events.
func (c *client) reply(id uint64) protocol.Message {
	c.t.Helper()
	for {
		m := c.read()
		if m.Kind == protocol.KindFire || m.Kind == protocol.KindTakeover || m.Kind == protocol.KindDropped {
			c.events = append(c.events, m)
			continue
		}
		require.Equal(c.t, id, m.ID, "replies come in request order")
		return m
	}
}

func (c *client) call(req protocol.Request) protocol.Message {
	c.t.Helper()
	return c.reply(c.send(req))
}

// uints calls req and returns its OK result as uints, failing on an error reply.
func (c *client) uints(req protocol.Request) []uint64 {
	c.t.Helper()
	return okUints(c.t, req.Op, c.call(req))
}

// fail calls req and returns the error code and text of its reply.
func (c *client) fail(req protocol.Request) (protocol.Code, string) {
	c.t.Helper()
	m := c.call(req)
	require.Equal(c.t, protocol.KindError, m.Kind, "%s should fail", req.Op)
	return m.Code, m.Text
}

// failCode calls req and checks it fails with code; it returns the text.
func (c *client) failCode(code protocol.Code, req protocol.Request) string {
	c.t.Helper()
	got, text := c.fail(req)
	require.Equal(c.t, code, got, "%s: %s", req.Op, text)
	return text
}

func (c *client) ping() uint64 {
	c.t.Helper()
	v := c.uints(protocol.Request{Op: protocol.OpPing})
	require.Len(c.t, v, 1)
	return v[0]
}

// ff fast-forwards by n ticks and returns [now, fired].
func (c *client) ff(n uint64) []uint64 {
	c.t.Helper()
	return c.uints(protocol.Request{Op: protocol.OpFastForward, Ticks: n})
}

func (c *client) bind(receiver uint64, ephemeral bool) (backlog, dropped uint64) {
	c.t.Helper()
	v := c.uints(protocol.Request{Op: protocol.OpBind, Receiver: receiver, Ephemeral: ephemeral})
	require.Len(c.t, v, 3, "bind result is [backlog, dropped, first_seq]")
	return v[0], v[1]
}

// add adds a timer and returns its due tick.
func (c *client) add(req protocol.Request) uint64 {
	c.t.Helper()
	req.Op = protocol.OpAdd
	v := c.uints(req)
	require.Len(c.t, v, 1)
	return v[0]
}

func (c *client) stats() protocol.Stats {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpStats})
	require.Equal(c.t, protocol.KindOK, m.Kind, "stats: %s %s", m.Code, m.Text)
	var s protocol.Stats
	require.NoError(c.t, protocol.DecodeStats(m.Result, &s))
	return s
}

func (c *client) get(receiver, tid uint64) protocol.Timer {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpGet, Receiver: receiver, Tid: tid})
	require.Equal(c.t, protocol.KindOK, m.Kind, "get: %s %s", m.Code, m.Text)
	var tm protocol.Timer
	require.NoError(c.t, protocol.DecodeTimer(m.Result, &tm))
	return tm
}

func (c *client) list(receiver uint64) []protocol.Timer {
	c.t.Helper()
	ts, _ := c.listPage(receiver, 0, 0)
	return ts
}

// listPage calls list and returns the page and next, failing on an error.
func (c *client) listPage(receiver, from, limit uint64) ([]protocol.Timer, uint64) {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpList, Receiver: receiver, FromTid: from, Limit: limit})
	require.Equal(c.t, protocol.KindOK, m.Kind, "list: %s %s", m.Code, m.Text)
	ts, next, err := protocol.DecodeListPage(m.Result, nil)
	require.NoError(c.t, err)
	return ts, next
}

// fires returns the fire events read so far (while waiting for replies)
// and forgets every push read; every one must be a fire.
func (c *client) fires() []protocol.Fire {
	c.t.Helper()
	var fs []protocol.Fire
	for _, m := range c.events {
		require.Equal(c.t, protocol.KindFire, m.Kind, "unexpected push %v", m)
		fs = append(fs, m.Fire)
	}
	c.events = nil
	return fs
}

// fireLine renders a fire event relative to tick T.
func fireLine(T uint64, f protocol.Fire) string {
	return fmt.Sprintf("T+%d r=%d tid=%d fired=%d/%d last=%v seq=%d data=%s", f.Tick-T, f.Receiver, f.Tid, f.Fired, f.Repeat, f.Last, f.Seq, f.Data)
}

// fireLines renders fs with fireLine.
func fireLines(T uint64, fs []protocol.Fire) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fireLine(T, f))
	}
	return out
}
