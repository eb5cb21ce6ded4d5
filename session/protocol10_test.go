package session

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// Tests of docs/PROTOCOL.md 1.0's answers to the questions issue 29 found
// open or contradicted. tw-time's calendar: tick t is t × 10 ms after the
// Unix epoch, so start (1,000,000) is 1970-01-01 02:46:40 UTC, a Thursday,
// and a minute is 6,000 ticks, a day 8,640,000.
const (
	minuteTicks = 6_000
	dayTicks    = 8_640_000
)

// TestGetPausedCronTimerShowsItsSchedule: get on a paused cron timer
// shows as due its schedule's next time after now, where a resume moves
// it (it showed now + the ticks left at the pause, a time the timer never
// fires at), and an @every timer's every is its interval, a cron timer's
// 0.
func TestGetPausedCronTimerShowsItsSchedule(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	require.Equal(t, uint64(dayTicks), a.add(protocol.Request{Receiver: 1, Tid: 1, Schedule: "@daily"}))
	a.add(protocol.Request{Receiver: 1, Tid: 2, Schedule: "@every 90s"})
	assert.Zero(t, a.get(1, 1).Every, "a cron timer's every is 0")
	assert.Equal(t, uint64(9_000), a.get(1, 2).Every, "an @every timer's every is its interval")

	a.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})
	a.ff(2*dayTicks - start + 100) // two days on, and 1 s
	now := a.ping()
	tm := a.get(1, 1)
	assert.True(t, tm.Paused)
	assert.Equal(t, uint64(3*dayTicks), tm.Due, "the next midnight after now, not now + remaining")
	assert.Equal(t, 3*dayTicks-now, tm.Remaining)
	a.uints(protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 1})
	assert.Equal(t, tm.Due, a.get(1, 1).Due, "resume moves it where get said")
}

// TestHeldCronTimerResumesOnSchedule: a cron timer the server held while
// its firing waited for outbox room resumes on its schedule, as a user's
// resume does, not the ticks it had left (off the minute).
func TestHeldCronTimerResumesOnSchedule(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, Schedule: "* * * * *"})
	a.ff(2 * minuteTicks)
	a.ping()
	fs := a.fires()
	require.Len(t, fs, 1, "the second firing waits")
	require.True(t, a.get(1, 1).Paused, "held")
	a.ff(minuteTicks / 2) // half a minute on
	a.ack(1, fs[0].Seq)
	a.ping()
	require.Len(t, a.fires(), 1, "the waiting firing goes out")
	tm := a.get(1, 1)
	require.False(t, tm.Paused)
	assert.Zero(t, tm.Due%minuteTicks, "due %d: on the minute", tm.Due)
	assert.Greater(t, tm.Due, a.ping())
}

// TestSeqAfterRestart: a receiver the server keeps a record of (here: with
// a timer left) continues its seq after a restart; a plain receiver with
// nothing pending has no record, before or after a restart, so its next
// event starts again at 1.
func TestSeqAfterRestart(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	a.bind(1, false)
	a.bind(2, false)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1, Repeat: 3})
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 1, Repeat: 2})
	a.ff(2)
	a.ping()
	require.Len(t, a.fires(), 4)
	a.close() // kill -9: the connection is gone
	c2 := restoreCopy(t, h.c)
	require.NotNil(t, c2.receivers[1], "a timer left: kept")
	assert.Equal(t, uint64(2), c2.receivers[1].seq, "its seq continues")
	assert.Nil(t, c2.receivers[2], "nothing pending: no record, so its next event is seq 1")
	b := h.client("b")
	b.bind(2, false)
	b.add(protocol.Request{Receiver: 2, Tid: 2, After: 1, Repeat: 1})
	b.ff(1)
	b.ping()
	fs := b.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, uint64(1), fs[0].Seq)
}

// TestCronFieldRules: what /n applies to, N/n, names in any case (but
// descriptors in lower case), no wrap-around ranges, and which fields are
// restricted for the day-of-month/day-of-week rule (*/2 is; Vixie cron
// would take it as *).
func TestCronFieldRules(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	due := func(tid uint64, sch string) uint64 {
		t.Helper()
		return a.add(protocol.Request{Receiver: 1, Tid: tid, Schedule: sch, Repeat: 2})
	}
	// 5/15 is 5-59/15: :05, :20, :35, :50; the next after 02:46:40 is 02:50.
	assert.Equal(t, uint64(10_200*100), due(1, "5/15 * * * *"))
	assert.Equal(t, uint64(10_200*100), due(2, "5-59/15 * * * *"))
	assert.Equal(t, due(3, "0 0 1 jan *"), due(4, "0 0 1 JAN *"), "names in any case")
	assert.Equal(t, due(5, "0 0 * * sat,sun"), due(6, "0 0 * * Sat,SUN"))
	assert.Equal(t, due(7, "0 0 * * 0"), due(8, "0 0 * * 7"), "0 and 7 are Sunday")
	// Both day fields restricted: either matches. Jan 3 1970 is odd and a
	// Saturday; Vixie cron (*/2 unrestricted: both must match) waits for
	// Monday Jan 5.
	assert.Equal(t, uint64(2*dayTicks), due(9, "0 0 */2 * mon"))
	assert.Equal(t, uint64(4*dayTicks), due(10, "0 0 * * mon"), "day of month * is unrestricted")

	for _, bad := range []string{"0 0 * * sat-sun", "0 0 * dec-jan *", "@Daily", "@DAILY"} {
		text := a.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 99, Schedule: bad})
		assert.Contains(t, text, bad)
	}
}

// TestHelloRights: an unsupported-version hello on an established session
// is not a failed hello: the session keeps its rights; a failed hello
// (bad token) takes them away, back to "hello required", where the
// pre-hello frame limit applies again (the server reads HelloDone).
func TestHelloRights(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	a.failCode(protocol.CodeUnsupportedVersion, protocol.Request{Op: protocol.OpHello, Version: 2, Name: "a", Token: testAdminToken})
	a.stats() // still admin
	require.True(t, a.s.HelloDone())
	a.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpHello, Version: 1, Name: "a", Token: "wrong-token-wrong-token"})
	assert.False(t, a.s.HelloDone(), "back to hello required: the pre-hello frame limit again")
	a.failCode(protocol.CodeHelloRequired, protocol.Request{Op: protocol.OpPing})
}

// TestOverLongArguments: the error code of each over-long string.
func TestOverLongArguments(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	long := strings.Repeat("a", 300)
	a.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpHello, Version: 1, Name: long, Token: testAdminToken})
	a.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpHello, Version: 1, Name: "a", Token: long})
	b := h.client("b")
	b.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, Schedule: "0 0 * * *" + strings.Repeat(" ", 100)})
	b.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, Schedule: "@daily", Zone: strings.Repeat("A", 65)})
}

// TestFreshAckBindFirstSeq: a fresh bind with ack numbers from the
// server's firings so far + 1 (fired_total), not from 1, so that no seq
// a forgotten record of the receiver gave can come again.
func TestFreshAckBindFirstSeq(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	for tid := uint64(1); tid <= 5; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	a.ff(1)
	fired := a.stats().FiredTotal
	require.Equal(t, uint64(5), fired)
	assert.Equal(t, []uint64{0, 0, fired + 1}, a.bindAck(2))
}

// TestFastForwardCountsWaitingFirings: a fast-forward's fired counts the
// firings that wait for outbox room too (they fired; their events wait).
func TestFastForwardCountsWaitingFirings(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.bindAck(1)
	for tid := uint64(1); tid <= 3; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	v := a.ff(1)
	assert.Equal(t, uint64(3), v[1])
	assert.Equal(t, uint64(2), a.stats().WaitingFirings)
}

// TestEphemeralAckReceiverDrops: when an ephemeral acknowledged receiver's
// session ends, its outbox and waiting firings are counted in stats'
// dropped_total only: the receiver's record goes with them, so a later
// bind of it reports none.
func TestEphemeralAckReceiverDrops(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.uints(protocol.Request{Op: protocol.OpBind, Receiver: 1, Ack: true, Ephemeral: true})
	for tid := uint64(1); tid <= 3; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	a.ff(1)
	a.close()
	b := h.client("b")
	assert.Equal(t, uint64(3), b.stats().DroppedTotal, "one in the outbox, two waiting")
	v := b.uints(protocol.Request{Op: protocol.OpBind, Receiver: 1})
	assert.Equal(t, []uint64{0, 0, 1}, v, "nothing to report: the receiver's record went")
}
