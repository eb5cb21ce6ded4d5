package session

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// listGroup returns every timer of group g, paging by limit.
func (c *client) listGroup(g, limit uint64) []protocol.Timer {
	c.t.Helper()
	var all []protocol.Timer
	var fr, ft uint64
	for pages := 0; ; pages++ {
		require.Less(c.t, pages, 100_000)
		m := c.call(protocol.Request{Op: protocol.OpListGroup, Group: g, FromReceiver: fr, FromTid: ft, Limit: limit})
		require.Equal(c.t, protocol.KindOK, m.Kind, "list_group: %s %s", m.Code, m.Text)
		ts, nr, nt, err := protocol.DecodeListGroupPage(m.Result, nil)
		require.NoError(c.t, err)
		all = append(all, ts...)
		if nr == 0 && nt == 0 {
			return all
		}
		fr, ft = nr, nt
	}
}

// bulk calls a bulk op and returns its count, running advance turns
// until the reply comes.
func (c *client) bulk(op protocol.Op, receiver, group uint64) uint64 {
	c.t.Helper()
	v := c.uints(protocol.Request{Op: op, Receiver: receiver, Group: group})
	require.Len(c.t, v, 1)
	return v[0]
}

func keysOf(ts []protocol.Timer) []string {
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%d/%d", t.Receiver, t.Tid))
	}
	return out
}

// TestGroupShownAndListed: an add's group is kept with the timer, shown by
// get and list, and list_group pages the group's timers in (receiver,
// tid) order across receivers; a cancelled or fired timer leaves it, a
// replace moves it.
func TestGroupShownAndListed(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	for _, k := range [][2]uint64{{3, 9}, {1, 5}, {2, 1}, {1, 2}, {3, 1}} {
		a.add(protocol.Request{Receiver: k[0], Tid: k[1], After: 100, Group: 77})
	}
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 1, Group: 77})
	a.add(protocol.Request{Receiver: 1, Tid: 7, After: 100}) // no group
	assert.Equal(t, uint64(77), a.get(3, 9).Group)
	assert.Equal(t, uint64(0), a.get(1, 7).Group)
	assert.Equal(t, []uint64{77, 77, 77, 0}, []uint64{a.list(1)[0].Group, a.list(1)[1].Group, a.list(1)[2].Group, a.list(1)[3].Group})
	want := []string{"1/1", "1/2", "1/5", "2/1", "3/1", "3/9"}
	assert.Equal(t, want, keysOf(a.listGroup(77, 0)))
	assert.Equal(t, want, keysOf(a.listGroup(77, 2)), "pages of 2")
	assert.Equal(t, want, keysOf(a.listGroup(77, 1)), "pages of 1")
	assert.Empty(t, a.listGroup(78, 0))

	a.ff(1) // 1/1 fires, its last
	a.call(protocol.Request{Op: protocol.OpCancel, Receiver: 2, Tid: 1})
	a.add(protocol.Request{Receiver: 3, Tid: 9, After: 100, Replace: true, Group: 5})
	assert.Equal(t, []string{"1/2", "1/5", "3/1"}, keysOf(a.listGroup(77, 0)))
	assert.Equal(t, []string{"3/9"}, keysOf(a.listGroup(5, 0)))
	a.add(protocol.Request{Receiver: 3, Tid: 9, After: 100, Replace: true})
	assert.Empty(t, a.listGroup(5, 0))
	assert.Empty(t, h.c.groups.groups[5], "an empty group is forgotten")
}

// TestCancelAllGroupChunked: cancel_all of a group larger than
// max_bulk_per_turn is done over several turns, and replies once with
// the count when complete; meanwhile its session's requests wait, other
// sessions are served, and timers added to the group after it began stay.
func TestCancelAllGroupChunked(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 10 })
	a, b := h.client("a"), h.client("b")
	for i := range uint64(35) {
		a.add(protocol.Request{Receiver: 1 + i%3, Tid: i, After: 1000, Group: 9})
	}
	a.add(protocol.Request{Receiver: 1, Tid: 100, After: 1000}) // not in the group
	id := a.send(protocol.Request{Op: protocol.OpCancelGroup, Group: 9})
	assert.False(t, a.pending(), "not complete after the first chunk")
	assert.True(t, a.s.Waiting())
	assert.Equal(t, 1, h.c.BulkInProgress())
	b.add(protocol.Request{Receiver: 2, Tid: 500, After: 1000, Group: 9}) // after the op began
	turns := 0
	for !a.pending() {
		more := h.advance()
		turns++
		assert.Equal(t, turns < 3, more, "another turn is asked for while the op is not complete")
	}
	assert.Equal(t, 3, turns, "35 timers at 10 a turn: the request's chunk and three more")
	assert.Equal(t, []uint64{35}, okUints(t, protocol.OpCancelGroup, a.reply(id)))
	assert.False(t, a.s.Waiting())
	assert.Equal(t, []string{"2/500"}, keysOf(a.listGroup(9, 0)))
	assert.Len(t, a.list(1), 1)
	assert.Equal(t, 2, h.c.wheel.Len())
}

// TestCancelAllReceiverChunked: a receiver's cancel_all is chunked too,
// and leaves a timer added to the receiver after it began.
func TestCancelAllReceiverChunked(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 4 })
	a, b := h.client("a"), h.client("b")
	for i := range uint64(20) {
		a.add(protocol.Request{Receiver: 1, Tid: 2 * i, After: 1000})
	}
	id := a.send(protocol.Request{Op: protocol.OpCancelAll, Receiver: 1})
	b.add(protocol.Request{Receiver: 1, Tid: 39, After: 1000}) // past the cursor: left alone
	b.add(protocol.Request{Receiver: 1, Tid: 1, After: 1000})  // behind it
	for turns := 0; !a.pending(); turns++ {
		require.Less(t, turns, 10)
		h.advance()
	}
	assert.Equal(t, []uint64{20}, okUints(t, protocol.OpCancelAll, a.reply(id)))
	assert.Equal(t, []string{"1/1", "1/39"}, keysOf(a.list(1)))
}

// TestPauseAllResumeAllKeepRemaining: pause_all and resume_all of a group
// keep each timer's remaining ticks exactly (a repeating one resumes
// mid-interval), a timer added to a paused group or receiver starts
// paused, and resume_all resumes them too.
func TestPauseAllResumeAllKeepRemaining(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 2 })
	a := h.client("a")
	for r := range uint64(5) {
		a.bind(r+1, false)
	}
	T := h.c.Now()
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 10, Repeat: 1, Group: 4})
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 30, Repeat: 1, Group: 4})
	a.add(protocol.Request{Receiver: 2, Tid: 2, After: 4, Every: 4, Repeat: 3, Group: 4})
	a.add(protocol.Request{Receiver: 3, Tid: 1, After: 10, Repeat: 1}) // not in the group
	a.ff(6)                                                            // 2/2 fired at T+4; due at T+8
	assert.Equal(t, uint64(3), a.bulk(protocol.OpPauseAll, 0, 4))
	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 5, Repeat: 1, Group: 4})
	assert.True(t, a.get(1, 2).Paused, "added to a paused group: starts paused")
	for _, k := range [][3]uint64{{1, 1, 4}, {2, 1, 24}, {2, 2, 2}, {1, 2, 5}} {
		tm := a.get(k[0], k[1])
		assert.True(t, tm.Paused, "%v", k)
		assert.Equal(t, k[2], tm.Remaining, "%v", k)
	}
	a.ff(100)
	assert.Equal(t, []string{"T+4 r=2 tid=2 fired=1/3 last=false seq=1 data=", "T+10 r=3 tid=1 fired=1/1 last=true seq=1 data="}, fireLines(T, a.fires()))
	assert.Equal(t, uint64(4), a.bulk(protocol.OpResumeAll, 0, 4))
	assert.False(t, a.get(1, 2).Paused)
	a.ff(30)
	assert.Equal(t, []string{
		"T+108 r=2 tid=2 fired=2/3 last=false seq=2 data=", // 2 left at T+106
		"T+110 r=1 tid=1 fired=1/1 last=true seq=1 data=",
		"T+111 r=1 tid=2 fired=1/1 last=true seq=2 data=",
		"T+112 r=2 tid=2 fired=3/3 last=true seq=3 data=",
		"T+130 r=2 tid=1 fired=1/1 last=true seq=4 data=",
	}, fireLines(T, a.fires()))

	// A receiver: pause_all marks it, its new timers start paused until resume_all.
	a.add(protocol.Request{Receiver: 5, Tid: 1, After: 10})
	assert.Equal(t, uint64(1), a.bulk(protocol.OpPauseAll, 5, 0))
	a.add(protocol.Request{Receiver: 5, Tid: 2, After: 10})
	assert.True(t, a.get(5, 2).Paused)
	assert.Equal(t, uint64(2), a.bulk(protocol.OpResumeAll, 5, 0))
	a.add(protocol.Request{Receiver: 5, Tid: 3, After: 10})
	assert.False(t, a.get(5, 3).Paused)
	assert.Equal(t, uint64(0), a.bulk(protocol.OpResumeAll, 5, 0), "nothing paused: a count of 0")
}

// TestBulkInvalidAndAuth: a receiver and a group at once is
// invalid_argument; with add_only_bound a session may run a group's bulk
// op only when it has bound every receiver with timers in the group.
func TestBulkInvalidAndAuth(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.AddOnlyBound = true })
	a, b := h.client("a"), h.client("b")
	a.bind(1, false)
	a.bind(2, false)
	b.bind(3, false)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 10, Group: 4})
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 10, Group: 4})
	b.add(protocol.Request{Receiver: 3, Tid: 1, After: 10, Group: 4})
	a.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpPauseAll, Receiver: 1, Group: 4})
	text := a.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpCancelGroup, Group: 4})
	a.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpCancelGroup})
	assert.Contains(t, text, "receiver 3")
	b.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpPauseAll, Group: 4})
	b.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpPauseAll, Receiver: 1})
	assert.Len(t, a.listGroup(4, 0), 3, "refused: nothing changed")
	assert.False(t, a.get(1, 1).Paused)
	b.call(protocol.Request{Op: protocol.OpCancel, Receiver: 3, Tid: 1})
	assert.Equal(t, uint64(2), a.bulk(protocol.OpPauseAll, 0, 4), "every receiver left in the group is bound")
}

// TestBulkOpRacesFirings is the property of a chunked operation racing
// firings: random timers of a group, one-shot and repeating, come due
// while a cancel_all or pause_all of the group (or of one receiver's
// timers, paged by tid) runs a few timers a turn and the wheel advances
// a tick a turn. Every timer either fired before the
// operation reached it or is covered by it, never both and never
// neither: no firing of a timer follows its covering, the count equals
// the timers covered, and no firing repeats a (timer, tick).
func TestBulkOpRacesFirings(t *testing.T) {
	for seed := range uint64(60) {
		op := protocol.OpCancelAll
		if seed%2 == 1 {
			op = protocol.OpPauseAll
		}
		byReceiver := seed%4 >= 2
		t.Run(fmt.Sprintf("%s-receiver=%v-%d", op, byReceiver, seed), func(t *testing.T) { bulkRace(t, seed, op, byReceiver) })
	}
}

func bulkRace(t *testing.T, seed uint64, op protocol.Op, byReceiver bool) {
	rng := rand.New(rand.NewPCG(seed, 27))
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 1 + rng.IntN(8) })
	a, w := h.client("a"), h.client("w")
	for r := range uint64(4) {
		w.bind(r+1, false)
	}
	n := 20 + rng.IntN(60)
	keys := make([]wheel.Key, n)
	repeats := map[wheel.Key]bool{}
	for i := range keys {
		k := wheel.Key{Receiver: 1 + uint64(rng.IntN(4)), Tid: uint64(i)}
		keys[i] = k
		req := protocol.Request{Receiver: k.Receiver, Tid: k.Tid, After: 1 + uint64(rng.IntN(30)), Repeat: 1, Group: 6}
		if rng.IntN(3) == 0 {
			req.Every, req.Repeat, repeats[k] = 1+uint64(rng.IntN(5)), 0, true
		}
		a.add(req)
	}
	fired := map[wheel.Key]bool{}
	seen := map[[2]uint64]bool{}
	collect := func() {
		for _, m := range h.take(w.s) {
			f := m.Fire
			k := wheel.Key{Receiver: f.Receiver, Tid: f.Tid}
			require.False(t, seen[[2]uint64{k.Tid, f.Tick}], "timer %v fired twice at %d", k, f.Tick)
			seen[[2]uint64{k.Tid, f.Tick}] = true
			fired[k] = true
		}
	}
	h.c.Advance(h.c.Now()+uint64(rng.IntN(5)), 0) // some fire before
	collect()
	req := protocol.Request{Op: op, Group: 6}
	if op == protocol.OpCancelAll {
		req.Op = protocol.OpCancelGroup
	}
	inScope := func(wheel.Key) bool { return true }
	if byReceiver {
		req = protocol.Request{Op: op, Receiver: 1}
		inScope = func(k wheel.Key) bool { return k.Receiver == 1 }
	}
	id := a.send(req)
	for turns := 0; !a.pending(); turns++ {
		require.Less(t, turns, 10_000)
		h.c.Advance(h.c.Now()+1, 0)
		h.c.More()
		collect()
	}
	count := okUints(t, req.Op, a.reply(id))[0]
	h.c.Advance(h.c.Now()+1000, 0) // after the reply nothing it covered fires
	for _, m := range h.take(w.s) {
		if inScope(wheel.Key{Receiver: m.Fire.Receiver, Tid: m.Fire.Tid}) {
			t.Fatalf("timer %d/%d fired at %d after the %s completed", m.Fire.Receiver, m.Fire.Tid, m.Fire.Tick, op)
		}
	}
	covered := 0
	for _, k := range keys {
		if !inScope(k) {
			continue
		}
		in, err := h.c.wheel.Get(k)
		live := err == nil
		switch {
		case op == protocol.OpPauseAll && live:
			require.True(t, in.Paused, "timer %v not paused", k)
			covered++
		case op == protocol.OpCancelAll && (repeats[k] || !fired[k]):
			require.False(t, live, "timer %v not cancelled", k)
			covered++ // a repeating timer, or a one-shot one that had not fired
		default: // a one-shot timer that fired before the op reached it
			require.False(t, live)
			require.True(t, fired[k], "timer %v neither fired nor covered", k)
			require.False(t, repeats[k], "repeating timer %v not covered", k)
		}
	}
	assert.Equal(t, uint64(covered), count, "the count is the timers covered")
	if op == protocol.OpCancelAll && !byReceiver {
		assert.Empty(t, a.listGroup(6, 0), "no member left")
	}
}

// TestBulkSnapshotMidOp: a snapshot taken while bulk operations are in
// progress holds the groups, the paused marks and the operations with
// their cursors: the restored Core encodes to the same bytes and, driven
// by the same advances, completes them exactly as the original does.
func TestBulkSnapshotMidOp(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 3 })
	a, b, w := h.client("a"), h.client("b"), h.client("w")
	w.bind(1, false)
	w.bind(2, false)
	for i := range uint64(20) {
		a.add(protocol.Request{Receiver: 1 + i%2, Tid: i, After: 1 + i%7, Every: 3, Group: 8})
		a.add(protocol.Request{Receiver: 2, Tid: 100 + i, After: 50, Repeat: 1})
	}
	a.send(protocol.Request{Op: protocol.OpPauseAll, Group: 8})
	b.send(protocol.Request{Op: protocol.OpCancelAll, Receiver: 2})
	h.c.Advance(h.c.Now()+2, 0)
	require.Equal(t, 2, h.c.BulkInProgress())
	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		data, _ := snap.AppendNext(nil, 0)
		return data
	}
	data := encode(h.c)
	r, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, data, encode(r))
	for range 20 {
		target := h.c.Now() + 1
		h.c.Advance(target, 0)
		r.Advance(target, 0)
	}
	assert.Zero(t, h.c.BulkInProgress())
	ids := []uint64{1, 2}
	assert.Equal(t, dumpState(h.c, ids, false), dumpState(r, ids, false)) // the groups' section included
	h.rep.sync()
}

// TestBulkGoesOnAfterClose: a bulk operation whose session closes (or a
// restart closes) goes on to its end, unanswered: the log holds it, and
// every timer it covers is covered.
func TestBulkGoesOnAfterClose(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 5 })
	a := h.client("a")
	for i := range uint64(23) {
		a.add(protocol.Request{Receiver: 1 + i%4, Tid: i, After: 100, Group: 3})
	}
	a.send(protocol.Request{Op: protocol.OpCancelGroup, Group: 3})
	h.c.Restart()
	h.flush()
	require.Equal(t, 1, h.c.BulkInProgress())
	h.catchUp()
	assert.Zero(t, h.c.BulkInProgress())
	assert.Zero(t, h.c.wheel.Len())
	assert.False(t, h.c.groups.grouped())
}

// TestPauseMarksBounded: the paused marks of receivers and of groups are
// bounded by max_receivers each; a mark already set, or one a resume_all
// cleared, leaves room.
func TestPauseMarksBounded(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxReceivers = 2 })
	a := h.client("a")
	a.bulk(protocol.OpPauseAll, 1, 0)
	a.bulk(protocol.OpPauseAll, 2, 0)
	a.bulk(protocol.OpPauseAll, 2, 0) // already marked
	a.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpPauseAll, Receiver: 3})
	a.bulk(protocol.OpResumeAll, 1, 0)
	a.bulk(protocol.OpPauseAll, 3, 0)
	a.bulk(protocol.OpPauseAll, 0, 10)
	a.bulk(protocol.OpPauseAll, 0, 11)
	a.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpPauseAll, Group: 12})
	a.bulk(protocol.OpResumeAll, 0, 10)
	a.bulk(protocol.OpPauseAll, 0, 12)
	assert.Equal(t, 2, h.c.groups.pausedGroups)
}
