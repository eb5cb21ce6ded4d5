package client

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
)

// requireCode checks that err is an *Error with the given op and code that
// errors.Is matches to sentinel.
func requireCode(t *testing.T, err error, sentinel error, op protocol.Op, code protocol.Code) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sentinel)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, op, e.Op)
	assert.Equal(t, code, e.Code)
}

func TestDialReportsHello(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	assert.NotZero(t, c.Session())
	assert.Equal(t, 10*time.Millisecond, c.TickDuration())
	assert.Equal(t, uint64(64<<10), c.Limits().MaxFrame)
	assert.Equal(t, uint64(4096), c.Limits().MaxData)
	now, err := c.Ping(tctx(t))
	require.NoError(t, err)
	assert.Equal(t, uint64(start), now)
}

func TestTimerCalls(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	ctx := tctx(t)

	bound, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, BindResult{}, bound, "nothing pending or dropped, no first_seq without ack")

	data := []byte("payload")
	due, err := c.Add(ctx, 1, 11, 3, &AddOptions{Repeat: 4, Data: data})
	require.NoError(t, err)
	assert.Equal(t, uint64(start+3), due)
	data[0] = 'X' // the request took a copy

	_, err = c.Add(ctx, 1, 11, 5, nil)
	requireCode(t, err, ErrExists, protocol.OpAdd, protocol.CodeExists)
	due, err = c.Add(ctx, 1, 11, 3, &AddOptions{Repeat: 4, Data: []byte("payload"), Replace: true})
	require.NoError(t, err)
	assert.Equal(t, uint64(start+3), due)

	due, err = c.Add(ctx, 1, 13, 0, nil)
	require.NoError(t, err, "after 0 fires at the next tick")
	assert.Equal(t, uint64(start+1), due)
	_, err = c.Add(ctx, 1, 13, math.MaxUint64, nil)
	requireCode(t, err, ErrInvalidArgument, protocol.OpAdd, protocol.CodeInvalidArgument)

	due, err = c.AddAt(ctx, 1, 12, start+10, &AddOptions{Every: 2})
	require.NoError(t, err)
	assert.Equal(t, uint64(start+10), due)
	for i, at := range []uint64{start, start - 7, 0} { // not in the future: the next tick
		due, err = c.AddAt(ctx, 1, 14+uint64(i), at, nil)
		require.NoError(t, err, "at %d", at)
		assert.Equal(t, uint64(start+1), due, "at %d", at)
	}
	for tid := uint64(13); tid <= 16; tid++ {
		require.NoError(t, c.Cancel(ctx, 1, tid))
	}

	tm, err := c.Get(ctx, 1, 11)
	require.NoError(t, err)
	assert.Equal(t, Timer{Receiver: 1, Tid: 11, Due: start + 3, Remaining: 3, Every: 3, Repeat: 4, Data: []byte("payload")}, tm)
	_, err = c.Get(ctx, 1, 99)
	requireCode(t, err, ErrNotFound, protocol.OpGet, protocol.CodeNotFound)

	ts, err := c.List(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.ElementsMatch(t, []uint64{11, 12}, []uint64{ts[0].Tid, ts[1].Tid})
	ts, err = c.List(ctx, 7)
	require.NoError(t, err)
	assert.Empty(t, ts)

	require.NoError(t, c.Pause(ctx, 1, 12))
	requireCode(t, c.Pause(ctx, 1, 12), ErrBadState, protocol.OpPause, protocol.CodeBadState)
	tm, err = c.Get(ctx, 1, 12)
	require.NoError(t, err)
	assert.True(t, tm.Paused)
	require.NoError(t, c.Resume(ctx, 1, 12))
	requireCode(t, c.Resume(ctx, 1, 12), ErrBadState, protocol.OpResume, protocol.CodeBadState)
	requireCode(t, c.Pause(ctx, 1, 99), ErrNotFound, protocol.OpPause, protocol.CodeNotFound)

	require.NoError(t, c.Cancel(ctx, 1, 12))
	requireCode(t, c.Cancel(ctx, 1, 12), ErrNotFound, protocol.OpCancel, protocol.CodeNotFound)

	now, fired, err := c.FastForward(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, uint64(start+3), now)
	assert.Equal(t, uint64(1), fired)
	ev := nextEvent(t, c.Events())
	assert.Equal(t, Event{Kind: Fire, Receiver: 1, Tid: 11, Tick: start + 3, Fired: 1, Repeat: 4, Data: []byte("payload"), Seq: 1}, ev)

	n, err := c.CancelAll(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, err = c.CancelAll(ctx, 1)
	require.NoError(t, err)
	assert.Zero(t, n)

	require.NoError(t, c.Unbind(ctx, 1))
	requireCode(t, c.Unbind(ctx, 1), ErrNotFound, protocol.OpUnbind, protocol.CodeNotFound)
	_, ok := c.isBound(1)
	assert.False(t, ok)
	noEvent(t, c.Events())
}

func TestAdminCalls(t *testing.T) {
	srv := startServer(t, nil) // no admin token: loopback is admin
	c := dial(t, srv.Addr())
	ctx := tctx(t)

	now, err := c.SetSpeed(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, uint64(start), now)
	for _, bad := range []float64{-1, 0, math.NaN(), math.Inf(1)} {
		_, err = c.SetSpeed(ctx, bad)
		requireCode(t, err, ErrInvalidArgument, protocol.OpSetSpeed, protocol.CodeInvalidArgument)
	}
	_, err = c.ResumeSync(ctx)
	require.NoError(t, err)
	s, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.False(t, s.Frozen)
	assert.Equal(t, 2.0, s.Speed)
	_, err = c.Freeze(ctx)
	require.NoError(t, err)
	now, _, err = c.FastForward(ctx, 5)
	require.NoError(t, err)
	s, err = c.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, s.Frozen)
	assert.Equal(t, now, s.Now)
	assert.Equal(t, uint64(1), s.Sessions)
	assert.Equal(t, uint64(10*time.Millisecond), s.TickNs)

	_, _, err = c.FastForward(ctx, math.MaxUint64)
	requireCode(t, err, ErrInvalidArgument, protocol.OpFastForward, protocol.CodeInvalidArgument)
}

func TestUnauthorized(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.AdminToken = "s3cret-admin-token" })
	user := dial(t, srv.Addr(), WithToken(""))
	admin := dial(t, srv.Addr(), WithToken("s3cret-admin-token"))
	ctx := tctx(t)

	_, _, err := user.FastForward(ctx, 1)
	requireCode(t, err, ErrUnauthorized, protocol.OpFastForward, protocol.CodeUnauthorized)
	_, err = user.Stats(ctx)
	requireCode(t, err, ErrUnauthorized, protocol.OpStats, protocol.CodeUnauthorized)
	_, err = user.Freeze(ctx)
	requireCode(t, err, ErrUnauthorized, protocol.OpFreeze, protocol.CodeUnauthorized)
	_, err = user.ResumeSync(ctx)
	requireCode(t, err, ErrUnauthorized, protocol.OpResumeSync, protocol.CodeUnauthorized)
	_, err = user.SetSpeed(ctx, 1)
	requireCode(t, err, ErrUnauthorized, protocol.OpSetSpeed, protocol.CodeUnauthorized)

	now, fired, err := admin.FastForward(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(start+1), now)
	assert.Zero(t, fired)
	// The non-admin client still works for ordinary calls.
	now, err = user.Ping(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(start+1), now)
}

func TestDialBadToken(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.ClientToken = "let-me-in-please-0123" })
	_, err := Dial(tctx(t), srv.Addr(), WithToken("wrong"))
	requireCode(t, err, ErrUnauthorized, protocol.OpHello, protocol.CodeUnauthorized)
	c := dial(t, srv.Addr(), WithToken("let-me-in-please-0123"))
	_, err = c.Ping(tctx(t))
	require.NoError(t, err)
}

func TestDialRefused(t *testing.T) {
	f := startFake(t, nil)
	addr := f.addr()
	f.stop()
	_, err := Dial(tctx(t), addr)
	require.Error(t, err)
}

func TestLimitExceeded(t *testing.T) {
	srv := startServer(t, func(c *server.Config) {
		c.Limits.MaxFrame = 1024
		c.Limits.MaxOutbound = 1 << 20
		c.Limits.MaxData = 16
		c.Limits.MaxTimersPerReceiver = 2
	})
	c := dial(t, srv.Addr())
	ctx := tctx(t)

	_, err := c.Add(ctx, 1, 1, 5, &AddOptions{Data: bytes.Repeat([]byte{'x'}, 17)})
	requireCode(t, err, ErrLimitExceeded, protocol.OpAdd, protocol.CodeLimitExceeded)
	_, err = c.Add(ctx, 1, 1, 5, &AddOptions{Data: bytes.Repeat([]byte{'x'}, 16)})
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 2, 5, nil)
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 3, 5, nil)
	requireCode(t, err, ErrLimitExceeded, protocol.OpAdd, protocol.CodeLimitExceeded)

	// A request over max_frame is refused by the client itself: the server
	// would close the connection.
	_, err = c.Add(ctx, 2, 1, 5, &AddOptions{Data: bytes.Repeat([]byte{'x'}, 2000)})
	requireCode(t, err, ErrLimitExceeded, protocol.OpAdd, protocol.CodeLimitExceeded)
	assert.Contains(t, err.Error(), "max_frame")
	_, err = c.Ping(ctx)
	require.NoError(t, err, "the connection survives")
}

func TestAddAfterRoundsUp(t *testing.T) {
	srv := startServer(t, nil) // 10ms ticks
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	for i, tc := range []struct {
		d     time.Duration
		ticks uint64
	}{{25 * time.Millisecond, 3}, {20 * time.Millisecond, 2}, {time.Nanosecond, 1}, {10*time.Millisecond + 1, 2}, {time.Second, 100}} {
		assert.Equal(t, tc.ticks, c.Ticks(tc.d), "%v", tc.d)
		due, err := c.AddAfter(ctx, 1, uint64(i), tc.d, nil)
		require.NoError(t, err)
		assert.Equal(t, start+tc.ticks, due, "%v", tc.d)
	}
	for i, d := range []time.Duration{0, -time.Second} { // a deadline already reached: the next tick
		due, err := c.AddAfter(ctx, 1, 99+uint64(i), d, nil)
		require.NoError(t, err, "%v", d)
		assert.Equal(t, uint64(start+1), due, "%v", d)
	}
	assert.Equal(t, uint64(3), Ticks(25*time.Millisecond, 10*time.Millisecond))
	assert.Zero(t, Ticks(-1, 10*time.Millisecond))
	assert.Zero(t, Ticks(time.Second, 0))
}

func TestTakeover(t *testing.T) {
	srv := startServer(t, nil)
	c1 := dial(t, srv.Addr())
	c2 := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c1.Bind(ctx, 5, nil)
	require.NoError(t, err)
	_, ok := c1.isBound(5)
	require.True(t, ok)
	_, err = c2.Bind(ctx, 5, &BindOptions{Ephemeral: true})
	require.NoError(t, err)
	ev := nextEvent(t, c1.Events())
	assert.Equal(t, Event{Kind: Takeover, Receiver: 5, NewSession: c2.Session()}, ev)
	_, ok = c1.isBound(5)
	assert.False(t, ok, "a taken-over receiver is not re-bound after a reconnect")
	eph, ok := c2.isBound(5)
	assert.True(t, ok)
	assert.True(t, eph)
	assert.Equal(t, "takeover", Takeover.String())
	assert.Equal(t, "fire", Fire.String())
}

func TestHandler(t *testing.T) {
	srv := startServer(t, nil)
	got := make(chan Event, 10)
	c := dial(t, srv.Addr(), WithHandler(func(ev Event) { got <- ev }))
	assert.Nil(t, c.Events())
	ctx := tctx(t)
	_, err := c.Bind(ctx, 3, nil)
	require.NoError(t, err)
	_, err = c.Add(ctx, 3, 1, 1, &AddOptions{Repeat: 2})
	require.NoError(t, err)
	_, _, err = c.FastForward(ctx, 2)
	require.NoError(t, err)
	ev := nextEvent(t, got)
	assert.Equal(t, uint64(1), ev.Seq)
	ev = nextEvent(t, got)
	assert.Equal(t, uint64(2), ev.Seq)
	assert.True(t, ev.Last)
}

func TestErrorType(t *testing.T) {
	e := &Error{Op: protocol.OpAdd, Code: protocol.CodeExists, Message: "timer (1, 2) exists"}
	assert.Equal(t, "tickwheel: add: exists: timer (1, 2) exists", e.Error())
	assert.True(t, errors.Is(e, ErrExists))
	assert.False(t, errors.Is(e, ErrNotFound))
	assert.Nil(t, (&Error{Code: 200}).Unwrap())
	for code := protocol.CodeMalformed; code <= protocol.CodeInternal; code++ {
		assert.NotNil(t, (&Error{Code: code}).Unwrap(), "code %s", code)
	}
}

// TestAddRepeat: the shortest Add is a one-shot timer, like time.AfterFunc;
// firing until cancelled is asked for by name (Forever, repeat 0 on the
// wire); a count is a count. What the Client hands back — Get, List,
// ListPage and fire events — says Forever the way AddOptions does, so that
// tm.Repeat == Forever tests for it.
func TestAddRepeat(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 1, 5, nil)
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 2, 5, &AddOptions{Repeat: Forever})
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 3, 5, &AddOptions{Repeat: 7})
	require.NoError(t, err)
	want := map[uint64]uint64{1: 1, 2: Forever, 3: 7}
	for tid, w := range want {
		tm, err := c.Get(ctx, 1, tid)
		require.NoError(t, err)
		assert.Equal(t, w, tm.Repeat, "Get: tid %d", tid)
	}
	tm, err := c.Get(ctx, 1, 2)
	require.NoError(t, err)
	assert.True(t, tm.Repeat == Forever, "compares with Forever as written")
	all, err := c.List(ctx, 1)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, tm := range all {
		assert.Equal(t, want[tm.Tid], tm.Repeat, "List: tid %d", tm.Tid)
	}
	page, next, err := c.ListPage(ctx, 1, 2, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, [3]uint64{2, Forever, 3}, [3]uint64{page[0].Tid, page[0].Repeat, next}, "ListPage")

	_, fired, err := c.FastForward(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, uint64(3), fired)
	for range 3 {
		ev := nextEvent(t, c.Events())
		assert.Equal(t, want[ev.Tid], ev.Repeat, "event: tid %d", ev.Tid)
		assert.Equal(t, ev.Tid == 1, ev.Last, "tid %d", ev.Tid)
	}
}

// TestServerErrorTexts: a real server's error replies carry no Go package
// prefixes (issue 28: "tickwheel: add: exists: wheel: timer already
// exists").
func TestServerErrorTexts(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c.Add(ctx, 1, 2, 5, nil)
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 2, 5, nil)
	assert.EqualError(t, err, "tickwheel: add: exists: timer already exists")
	err = c.Cancel(ctx, 1, 3)
	assert.EqualError(t, err, "tickwheel: cancel: not_found: timer not found")
}
