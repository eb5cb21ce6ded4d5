package session

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

func TestHello(t *testing.T) {
	t.Run("reply", func(t *testing.T) {
		wire := protocol.Limits{MaxFrame: 1 << 10, MaxConnections: 7, IdleTimeoutMs: 9}
		h := newHarness(t, func(c *Config, _ *Limits) { c.TickNs, c.ServerVersion, c.Wire = 5e6, "v9", wire })
		c := h.client("h")
		hello := c.hello
		assert.Equal(t, protocol.Hello{Session: c.s.ID(), Now: start, TickNs: 5e6, ServerVersion: "v9", Limits: wire}, hello,
			"the session id, tw-time, and what the server configured")
		other := h.client("h2")
		assert.NotEqual(t, hello.Session, other.session, "session ids are distinct")
		assert.Equal(t, "h2", other.s.Name())
	})
	t.Run("bad version", func(t *testing.T) {
		h := newHarness(t, nil)
		c := h.dial()
		for _, v := range []uint64{0, 2, math.MaxUint64} {
			text := c.failCode(protocol.CodeUnsupportedVersion, protocol.Request{Op: protocol.OpHello, Version: v})
			assert.Contains(t, text, "version")
		}
		// Still no session: the hello failed.
		c.failCode(protocol.CodeHelloRequired, protocol.Request{Op: protocol.OpPing})
		c.sayHello("late", "")
		c.ping()
	})
	t.Run("requests before hello", func(t *testing.T) {
		h := newHarness(t, nil)
		c := h.dial()
		for _, op := range []protocol.Op{protocol.OpPing, protocol.OpBind, protocol.OpUnbind, protocol.OpAdd,
			protocol.OpCancel, protocol.OpGet, protocol.OpList, protocol.OpCancelAll, protocol.OpPause,
			protocol.OpResume, protocol.OpFastForward, protocol.OpFreeze, protocol.OpResumeSync,
			protocol.OpSetSpeed, protocol.OpStats} {
			c.failCode(protocol.CodeHelloRequired, protocol.Request{Op: op, Receiver: 1, Tid: 1, After: 1, Ticks: 1, Speed: 1})
		}
		c.sayHello("now", "")
		c.ping()
	})
}

func TestClientToken(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.ClientToken = "client-secret"; c.AdminToken = "admin-secret" })

	c := h.dial()
	c.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpHello, Version: protocol.Version})
	c.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Token: "wrong"})
	c.failCode(protocol.CodeHelloRequired, protocol.Request{Op: protocol.OpPing})
	// The right client token: a session, but not an admin one.
	c.sayHello("client", "client-secret")
	c.ping()
	c.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpStats})

	// The admin token is accepted as a client token too, and grants admin ops.
	a := h.clientToken("admin", "admin-secret")
	a.stats()
}

func TestAdminOps(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.AdminToken = "adm" })
	admin := h.clientToken("admin", "adm")
	user := h.clientToken("user", "") // loopback, but no token: not admin
	for _, op := range []protocol.Op{protocol.OpFastForward, protocol.OpFreeze, protocol.OpResumeSync,
		protocol.OpSetSpeed, protocol.OpStats} {
		text := user.failCode(protocol.CodeUnauthorized, protocol.Request{Op: op, Ticks: 5, Speed: 2})
		assert.Contains(t, text, op.String())
	}
	user.ping() // still usable
	// None of the refused ops had an effect.
	st := admin.stats()
	assert.Equal(t, uint64(start), st.Now)
	assert.Equal(t, 1.0, st.Speed)
	assert.True(t, st.Frozen)
}

func TestUnknownOp(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial()
	// Before hello an unknown op is hello_required, like any other request
	// but hello; a malformed one is malformed (decoding comes first).
	c.failCode(protocol.CodeHelloRequired, protocol.Request{Op: 99})
	h.apply(c.s, []byte{0x94, 0xcd, 0x01, 0x2c, 78, 1, 0xa1, 'x'}) // [300, 78, 1, "x"]
	m := c.reply(78)
	assert.Equal(t, protocol.CodeHelloRequired, m.Code)
	assert.False(t, c.s.Killed())
	c.sayHello("u", "")
	for _, op := range []protocol.Op{0, 18, 19, 26, 255} {
		text := c.failCode(protocol.CodeUnknownOp, protocol.Request{Op: op})
		assert.Contains(t, text, "unknown op")
	}
	// op > 255 and extra arguments, encoded by hand: [300, 77, 1, "x"]
	h.apply(c.s, []byte{0x94, 0xcd, 0x01, 0x2c, 77, 1, 0xa1, 'x'})
	m = c.reply(77)
	assert.Equal(t, protocol.KindError, m.Kind)
	assert.Equal(t, protocol.CodeUnknownOp, m.Code)
	c.ping() // the connection stays usable

	// A malformed request before hello: malformed, and the session is killed.
	d := h.dial()
	h.apply(d.s, []byte{0x92, 99, 0xc1}) // [99, <never used byte>]
	assert.Equal(t, protocol.CodeMalformed, d.reply(0).Code)
	assert.True(t, d.s.Killed())
}

func TestBindUnbind(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("b")
	backlog, dropped := c.bind(5, false)
	assert.Zero(t, backlog)
	assert.Zero(t, dropped)
	c.bind(5, true) // binding again is fine
	c.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 5})
	text := c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpUnbind, Receiver: 5})
	assert.Contains(t, text, "5")
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpUnbind, Receiver: 6})

	// Unbinding another session's receiver is not_found too.
	other := h.client("o")
	other.bind(7, false)
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpUnbind, Receiver: 7})

	// After unbind, events go to the backlog.
	c.bind(8, false)
	c.add(protocol.Request{Receiver: 8, Tid: 1, After: 1})
	c.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 8})
	c.ff(1)
	assert.Empty(t, c.events)
	assert.Equal(t, uint64(1), c.stats().BacklogEvents)
}

func TestAdd(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxData = 100 })
	c := h.client("a")
	c.bind(1, false)

	assert.Equal(t, uint64(start+5), c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5}))
	assert.Equal(t, uint64(start+7), c.add(protocol.Request{Receiver: 1, Tid: 2, At: start + 7}))
	// at wins over after.
	assert.Equal(t, uint64(start+9), c.add(protocol.Request{Receiver: 1, Tid: 3, After: 2, At: start + 9}))
	assert.Equal(t, uint64(start+2), c.add(protocol.Request{Receiver: 1, Tid: 4, After: 2, Every: 3, Repeat: 3, Data: []byte("payload")}))

	tm := c.get(1, 4)
	assert.Equal(t, protocol.Timer{Receiver: 1, Tid: 4, Due: start + 2, Remaining: 2, Every: 3, Repeat: 3, Data: []byte("payload")}, tm)
	tm = c.get(1, 2)
	assert.Equal(t, uint64(7), tm.Every, "every defaults to the first delay")

	inv := func(req protocol.Request) string {
		t.Helper()
		req.Op, req.Receiver = protocol.OpAdd, 1
		return c.failCode(protocol.CodeInvalidArgument, req)
	}
	inv(protocol.Request{Tid: 10, After: math.MaxUint64})             // due overflows
	inv(protocol.Request{Tid: 10, After: math.MaxUint64 - start + 1}) // exactly 2^64
	text := inv(protocol.Request{Tid: 10, After: 1, Repeat: math.MaxUint32 + 1})
	assert.Contains(t, text, "repeat")
	// The largest due and the largest repeat are fine.
	assert.Equal(t, uint64(math.MaxUint64), c.add(protocol.Request{Receiver: 1, Tid: 11, After: math.MaxUint64 - start}))
	c.add(protocol.Request{Receiver: 1, Tid: 12, After: 1, Repeat: math.MaxUint32})
	assert.Equal(t, uint64(math.MaxUint32), c.get(1, 12).Repeat)

	// Duplicates and replace.
	text = c.failCode(protocol.CodeExists, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 3})
	assert.NotEmpty(t, text)
	assert.Equal(t, uint64(start+5), c.get(1, 1).Due, "a refused duplicate changes nothing")
	assert.Equal(t, uint64(start+3), c.add(protocol.Request{Receiver: 1, Tid: 1, After: 3, Repeat: 1, Replace: true, Data: []byte("new")}))
	tm = c.get(1, 1)
	assert.Equal(t, uint64(start+3), tm.Due)
	assert.Equal(t, []byte("new"), tm.Data)
	// replace of a timer that does not exist just adds it.
	c.add(protocol.Request{Receiver: 1, Tid: 13, After: 1, Repeat: 1, Replace: true})
	// The same tid for another receiver is another timer.
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 1})

	// Data: max_data bytes fit, one more does not.
	c.add(protocol.Request{Receiver: 1, Tid: 20, After: 1, Repeat: 1, Data: make([]byte, 100)})
	code, text := c.fail(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 21, After: 1, Data: make([]byte, 101)})
	assert.Equal(t, protocol.CodeLimitExceeded, code)
	assert.Contains(t, text, "max_data")
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 21})

	// The fire events carry what was added.
	c.ff(3)
	var got []string
	for _, f := range c.fires() {
		got = append(got, fireLine(start, f))
	}
	assert.Equal(t, []string{
		"T+1 r=1 tid=12 fired=1/4294967295 last=false seq=1 data=",
		"T+1 r=1 tid=13 fired=1/1 last=true seq=2 data=",
		"T+1 r=1 tid=20 fired=1/1 last=true seq=3 data=" + string(make([]byte, 100)),
		"T+2 r=1 tid=4 fired=1/3 last=false seq=4 data=payload",
		"T+2 r=1 tid=12 fired=2/4294967295 last=false seq=5 data=",
		"T+3 r=1 tid=12 fired=3/4294967295 last=false seq=6 data=",
		"T+3 r=1 tid=1 fired=1/1 last=true seq=7 data=new",
	}, got)
}

func TestCancelGetListCancelAll(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("c")
	for tid := uint64(1); tid <= 3; tid++ {
		c.add(protocol.Request{Receiver: 1, Tid: tid, After: tid * 10, Data: []byte{byte(tid)}})
	}
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 1})

	ts := c.list(1)
	require.Len(t, ts, 3)
	for i, tm := range ts {
		tid := uint64(i + 1)
		assert.Equal(t, protocol.Timer{Receiver: 1, Tid: tid, Due: start + tid*10, Remaining: tid * 10, Every: tid * 10, Data: []byte{byte(tid)}}, tm)
	}
	assert.Empty(t, c.list(3))

	c.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 2})
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 2})
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 2})
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpCancel, Receiver: 9, Tid: 1})
	assert.Len(t, c.list(1), 2)

	assert.Equal(t, []uint64{2}, c.uints(protocol.Request{Op: protocol.OpCancelAll, Receiver: 1}))
	assert.Equal(t, []uint64{0}, c.uints(protocol.Request{Op: protocol.OpCancelAll, Receiver: 1}))
	assert.Empty(t, c.list(1))
	assert.Len(t, c.list(2), 1, "other receivers are untouched")

	// A get after some firings reports fired and the next due.
	c.add(protocol.Request{Receiver: 3, Tid: 1, After: 2, Repeat: 3})
	c.ff(2)
	tm := c.get(3, 1)
	assert.Equal(t, uint64(1), tm.Fired)
	assert.Equal(t, uint64(start+4), tm.Due)
	assert.Equal(t, uint64(2), tm.Remaining)
	c.ff(4)
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpGet, Receiver: 3, Tid: 1}) // its last firing removed it
}

func TestPauseResume(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("p")
	c.bind(1, false)
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 10, Repeat: 1})
	c.ff(4)

	c.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})
	tm := c.get(1, 1)
	assert.True(t, tm.Paused)
	assert.Equal(t, uint64(6), tm.Remaining)
	c.failCode(protocol.CodeBadState, protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})

	c.ff(100) // paused: does not fire, remaining frozen
	assert.Empty(t, c.events)
	tm = c.get(1, 1)
	assert.Equal(t, uint64(6), tm.Remaining)
	assert.Equal(t, uint64(start+104+6), tm.Due)

	c.uints(protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 1})
	c.failCode(protocol.CodeBadState, protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 1})
	assert.False(t, c.get(1, 1).Paused)
	c.ff(5)
	assert.Empty(t, c.events)
	c.ff(1)
	fs := c.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, uint64(start+110), fs[0].Tick)

	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})
	c.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 1})
}

func TestClockOps(t *testing.T) {
	h := newHarness(t, nil)
	// tw-time's clock, as the server's hook applies the ops to it: it
	// follows real time while resumed, 4 ticks by the time freeze comes.
	clock, resumed := uint64(start), false
	var ops []string
	h.c.SetClockHook(func(op ClockOp, speed float64, ticks uint64) uint64 {
		ops = append(ops, fmt.Sprintf("%d %v %d", op, speed, ticks))
		switch {
		case op == ClockFastForward:
			clock += ticks
		case op == ClockFreeze && resumed:
			clock += 4
		}
		resumed = op == ClockResume || resumed && op != ClockFreeze
		return clock
	})
	c := h.client("clock")
	assert.Equal(t, uint64(start), c.ping())

	assert.Equal(t, []uint64{start + 10, 0}, c.ff(10))
	assert.Equal(t, uint64(start+10), c.ping())
	assert.Equal(t, []uint64{start + 10, 0}, c.ff(0))
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 1})
	c.add(protocol.Request{Receiver: 1, Tid: 2, After: 2, Repeat: 1})
	assert.Equal(t, []uint64{start + 15, 2}, c.ff(5), "fast_forward reports the firings it caused")
	text := c.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpFastForward, Ticks: math.MaxUint64})
	assert.Contains(t, text, "fast-forward")
	assert.Equal(t, uint64(start+15), c.ping(), "a refused fast-forward changes nothing")

	// set_speed: bad values are refused and change nothing.
	for _, sp := range []float64{0, -1, math.NaN(), math.Inf(1), 1e7, 0.0001} {
		c.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpSetSpeed, Speed: sp})
	}
	assert.Equal(t, 1.0, c.stats().Speed)
	assert.Equal(t, []uint64{start + 15}, c.uints(protocol.Request{Op: protocol.OpSetSpeed, Speed: 2.5}))
	st := c.stats()
	assert.Equal(t, 2.5, st.Speed)
	assert.True(t, st.Frozen, "set_speed does not unfreeze")

	// resume_sync lets tw-time follow the clock; freeze stops it again,
	// where the clock has come to.
	now := c.uints(protocol.Request{Op: protocol.OpResumeSync})
	assert.Equal(t, []uint64{start + 15}, now)
	assert.False(t, c.stats().Frozen)
	frozenAt := c.uints(protocol.Request{Op: protocol.OpFreeze})
	assert.Equal(t, []uint64{start + 19}, frozenAt, "the ticks that passed while resumed")
	st = c.stats()
	assert.True(t, st.Frozen)
	assert.Equal(t, uint64(start+19), st.Target)
	// frozen: fast_forward lands exactly, and target == now once it is answered.
	ff := c.ff(3)
	assert.Equal(t, ff[0], c.ping())
	st = c.stats()
	assert.Equal(t, ff[0], st.Now)
	assert.Equal(t, st.Now, st.Target)
	assert.Zero(t, st.Lag)
	c.uints(protocol.Request{Op: protocol.OpFreeze}) // freeze twice is fine
	assert.Equal(t, []string{"4 0 10", "4 0 0", "4 0 5", "3 2.5 0", "2 0 0", "1 0 0", "4 0 3", "1 0 0"}, ops,
		"the clock hears each op that passed its checks once, with its argument")
}

func TestStats(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.TickNs = 20e6 })
	a := h.client("admin")
	st := a.stats()
	assert.Equal(t, protocol.Stats{Now: start, Target: start, Sessions: 1, Connections: 1, TickNs: 20e6, Speed: 1, Frozen: true}, st)

	b := h.client("b")
	b.bind(1, false)
	assert.Equal(t, uint64(2), a.stats().Sessions)
	b.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 2})
	b.add(protocol.Request{Receiver: 2, Tid: 1, After: 1, Repeat: 1})
	st = a.stats()
	assert.Equal(t, uint64(2), st.Timers)
	assert.Equal(t, uint64(1), st.Receivers)

	a.ff(1)
	st = a.stats()
	assert.Equal(t, uint64(2), st.FiredTotal)
	assert.Equal(t, uint64(1), st.Timers)
	assert.Equal(t, uint64(1), st.BacklogEvents, "receiver 2 is unbound")
	assert.Equal(t, uint64(2), st.Receivers)
	assert.Equal(t, uint64(start+1), st.Now)

	a.ff(1)
	st = a.stats()
	assert.Equal(t, uint64(3), st.FiredTotal)
	assert.Zero(t, st.Timers)

	c := h.client("c")
	c.bind(2, false)
	require.Len(t, c.fires(), 0) // the backlog follows the reply: not read yet
	st = a.stats()
	assert.Zero(t, st.BacklogEvents)
	assert.Equal(t, uint64(3), st.Sessions)
	assert.Equal(t, uint64(3), st.Connections)
	assert.Zero(t, st.DroppedTotal)

	b.close()
	st = a.stats()
	assert.Equal(t, uint64(2), st.Sessions)
	assert.Equal(t, uint64(2), st.Connections)
}

func TestAddOnlyBound(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.AddOnlyBound = true })
	owner := h.client("owner")
	other := h.client("other")
	owner.bind(1, false)
	owner.add(protocol.Request{Receiver: 1, Tid: 1, After: 5})
	owner.add(protocol.Request{Receiver: 1, Tid: 2, After: 5})

	for _, req := range []protocol.Request{
		{Op: protocol.OpAdd, Receiver: 1, Tid: 3, After: 5},
		{Op: protocol.OpAdd, Receiver: 2, Tid: 1, After: 5}, // nobody's
		{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 9, Replace: true},
		{Op: protocol.OpCancel, Receiver: 1, Tid: 1},
		{Op: protocol.OpPause, Receiver: 1, Tid: 1},
		{Op: protocol.OpResume, Receiver: 1, Tid: 1},
		{Op: protocol.OpCancelAll, Receiver: 1},
	} {
		text := other.failCode(protocol.CodeUnauthorized, req)
		assert.Contains(t, text, "add_only_bound", "%s", req.Op)
	}
	// Nothing changed.
	ts := owner.list(1)
	require.Len(t, ts, 2)
	assert.False(t, ts[0].Paused)
	assert.Equal(t, uint64(start+5), ts[0].Due)

	// The owner may do all of it; after a takeover, the new owner may.
	owner.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})
	owner.uints(protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 1})
	owner.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 2})
	other.bind(1, false)
	other.add(protocol.Request{Receiver: 1, Tid: 3, After: 5})
	owner.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 4, After: 5})
	assert.Equal(t, []uint64{2}, other.uints(protocol.Request{Op: protocol.OpCancelAll, Receiver: 1}))
}
