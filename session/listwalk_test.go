package session

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestListPageBoundedPerTurn: the first page of a receiver holding 100,000
// timers walks at most MaxListWalkPerTurn of them in any turn (plus the
// page it makes), the reply coming a few turns later (the session's next
// requests unread until then); it is the page a list in one turn gives.
// Before, the request's own turn walked all 100,000 (10-25 ms at 100M
// timers, each walked timer a cache miss).
func TestListPageBoundedPerTurn(t *testing.T) {
	const m, budget = 100_000, 1000
	h := newHarness(t, func(cfg *Config, l *Limits) { cfg.MaxListWalkPerTurn = budget })
	c := h.client("c")
	rng := rand.New(rand.NewPCG(5, 6))
	tids := make([]uint64, m)
	for i, p := range rng.Perm(m) {
		tids[i] = uint64(p)*2 + 1
	}
	c.addMany(7, tids, func(uint64) []byte { return nil })
	c.addMany(8, []uint64{1, 2, 3}, func(uint64) []byte { return nil })
	slices.Sort(tids)

	work := h.c.Work()
	id := c.send(protocol.Request{Op: protocol.OpList, Receiver: 7})
	assert.LessOrEqual(t, h.c.Work()-work, budget+2, "the request's turn walks at most the budget")
	require.True(t, c.s.Waiting(), "the reply waits for the walk: the server reads no more of the session")
	assert.Empty(t, h.take(c.s), "no reply yet")
	turns := 0
	for c.s.Waiting() {
		work = h.c.Work()
		h.advance()
		turns++
		require.LessOrEqual(t, h.c.Work()-work, budget+1100, "turn %d walks at most the budget and makes the page", turns)
		require.Less(t, turns, 2*m/budget)
	}
	assert.GreaterOrEqual(t, turns, m/budget-1)
	m1 := c.reply(id)
	require.Equal(t, protocol.KindOK, m1.Kind, "list: %s %s", m1.Code, m1.Text)
	ts, next, err := protocol.DecodeListPage(m1.Result, nil)
	require.NoError(t, err)
	require.Len(t, ts, 1000)
	for i, tm := range ts {
		require.Equal(t, tids[i], tm.Tid)
	}
	assert.Equal(t, tids[1000], next)
}

// TestListPageChangesBetweenTurns: timers cancelled and added by another
// session while a page is gathered over several turns. Paging a 5,000-timer
// receiver through with such changes between every turn gives each timer
// that lives throughout exactly once, in tid order, none that was
// cancelled before the paging began; a second list queued behind the first
// is answered after it; a list whose session closes is dropped.
func TestListPageChangesBetweenTurns(t *testing.T) {
	const m = 5000
	h := newHarness(t, func(cfg *Config, l *Limits) { cfg.MaxListWalkPerTurn = 300 })
	c, o := h.client("c"), h.client("o")
	rng := rand.New(rand.NewPCG(7, 8))
	tids := make([]uint64, m)
	for i, p := range rng.Perm(m) {
		tids[i] = uint64(p) * 4
	}
	c.addMany(7, tids, func(uint64) []byte { return nil })
	changed := map[uint64]bool{}
	live := map[uint64]bool{}
	for _, tid := range tids {
		live[tid] = true
	}
	var seen []uint64
	from := uint64(0)
	for pages := 0; ; pages++ {
		require.Less(t, pages, m)
		id := c.send(protocol.Request{Op: protocol.OpList, Receiver: 7, FromTid: from, Limit: 97})
		for c.s.Waiting() {
			for range 3 { // another session's changes between the turns
				tid := uint64(rng.IntN(4*m + 8))
				if live[tid] {
					o.call(protocol.Request{Op: protocol.OpCancel, Receiver: 7, Tid: tid})
					delete(live, tid)
				} else {
					o.call(protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: tid, After: 1000})
					live[tid] = true
				}
				changed[tid] = true
			}
			h.advance()
		}
		msg := c.reply(id)
		require.Equal(t, protocol.KindOK, msg.Kind, "list: %s %s", msg.Code, msg.Text)
		ts, next, err := protocol.DecodeListPage(msg.Result, nil)
		require.NoError(t, err)
		for _, tm := range ts {
			require.True(t, live[tm.Tid], "tid %d in the page is live", tm.Tid)
			seen = append(seen, tm.Tid)
		}
		if next == 0 {
			break
		}
		if len(ts) > 0 {
			require.Greater(t, next, ts[len(ts)-1].Tid)
		}
		from = next
	}
	require.True(t, slices.IsSorted(seen) && len(slices.Compact(slices.Clone(seen))) == len(seen), "ascending, each once")
	for _, tid := range tids {
		if !changed[tid] {
			require.Contains(t, seen, tid, "tid %d lived throughout", tid)
		}
	}

	// Two lists at once: the second waits for the first; a closed
	// session's list is dropped, and the next one goes on.
	d := h.client("d")
	a := c.send(protocol.Request{Op: protocol.OpList, Receiver: 7})
	d.send(protocol.Request{Op: protocol.OpList, Receiver: 7})
	e := h.client("e")
	b := e.send(protocol.Request{Op: protocol.OpList, Receiver: 7, Limit: 5})
	require.True(t, c.s.Waiting() && d.s.Waiting() && e.s.Waiting())
	d.close()
	h.catchUp()
	assert.Equal(t, protocol.KindOK, c.reply(a).Kind)
	ts, _, err := protocol.DecodeListPage(e.reply(b).Result, nil)
	require.NoError(t, err)
	assert.Len(t, ts, 5)
	assert.False(t, c.s.Waiting() || e.s.Waiting())
}

// TestListShareOfATurn: the lists of several sessions applied in one loop
// turn (as the doorbell's deferred reads apply them) share the turn's
// MaxListWalkPerTurn. Each of three sessions lists a receiver of 80 timers
// with a budget of 200 (a timer walked and put in the page is 2 units): the first is answered in the turn, the others
// wait for the next turns, and no turn does more than the budget (and a
// page) of list work. Before, each list applied while none was in progress
// had a budget of its own: the three were answered in the one turn. An
// admin's fast-forward between them, which advances the wheel within the
// turn, gives them no more.
func TestListShareOfATurn(t *testing.T) {
	const timers, budget = 80, 200
	h := newHarness(t, func(cfg *Config, l *Limits) { cfg.MaxListWalkPerTurn = budget })
	add := h.client("add")
	tids := make([]uint64, timers)
	for i := range tids {
		tids[i] = uint64(i + 1)
	}
	cs := make([]*client, 3)
	for i := range cs {
		add.addMany(uint64(10+i), tids, func(uint64) []byte { return nil })
		cs[i] = h.client(string(rune('a' + i)))
	}
	admin := h.client("admin")
	h.advance() // a new turn

	work := h.c.Work()
	ids := make([]uint64, len(cs))
	for i, c := range cs {
		ids[i] = c.send(protocol.Request{Op: protocol.OpList, Receiver: uint64(10 + i)})
		admin.send(protocol.Request{Op: protocol.OpFastForward, Ticks: 0})
	}
	require.LessOrEqual(t, h.c.Work()-work, budget+timers, "the turn's list work")
	require.False(t, cs[0].s.Waiting(), "the first list is answered in its turn")
	require.True(t, cs[1].s.Waiting() && cs[2].s.Waiting(), "the others wait for the turns after")
	for turns := 0; cs[1].s.Waiting() || cs[2].s.Waiting(); turns++ {
		require.Less(t, turns, 4)
		work = h.c.Work()
		h.advance()
		require.LessOrEqual(t, h.c.Work()-work, budget+timers, "turn %d's list work", turns)
	}
	for i, c := range cs {
		m := c.reply(ids[i])
		require.Equal(t, protocol.KindOK, m.Kind, "list %d: %s %s", i, m.Code, m.Text)
		ts, next, err := protocol.DecodeListPage(m.Result, nil)
		require.NoError(t, err)
		require.Len(t, ts, timers)
		require.Zero(t, next)
	}
}
