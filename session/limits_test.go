package session

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tickwheel/tickwheel/protocol"
)

func TestLimitMaxTimers(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxTimers = 3 })
	c := h.client("l")
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5})
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 5})
	c.add(protocol.Request{Receiver: 3, Tid: 1, After: 5})
	text := c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 4, Tid: 1, After: 5})
	assert.Contains(t, text, "max_timers")
	assert.Contains(t, text, "3")
	// A replace that does not add a timer is fine at the limit...
	assert.Equal(t, uint64(start+9), c.add(protocol.Request{Receiver: 1, Tid: 1, After: 9, Replace: true}))
	// ...a replace of a missing timer adds one, so it is refused.
	c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 2, After: 5, Replace: true})
	// Room again once a timer goes: cancelled, or fired for the last time.
	c.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 2, Tid: 1})
	c.add(protocol.Request{Receiver: 4, Tid: 1, After: 1, Repeat: 1})
	c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 5, Tid: 1, After: 5})
	c.ff(1)
	c.add(protocol.Request{Receiver: 5, Tid: 1, After: 5})
	assert.Equal(t, uint64(3), c.stats().Timers)
}

func TestLimitMaxTimersPerReceiver(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxTimersPerReceiver = 2 })
	c := h.client("l")
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5})
	c.add(protocol.Request{Receiver: 1, Tid: 2, After: 5})
	text := c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 3, After: 5})
	assert.Contains(t, text, "max_timers_per_receiver")
	assert.Contains(t, text, "2")
	// replace at the limit still works, and changes the timer
	assert.Equal(t, uint64(start+7), c.add(protocol.Request{Receiver: 1, Tid: 2, After: 7, Replace: true, Data: []byte("r")}))
	tm := c.get(1, 2)
	assert.Equal(t, uint64(start+7), tm.Due)
	assert.Equal(t, []byte("r"), tm.Data)
	// other receivers have their own count
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 5})
	c.add(protocol.Request{Receiver: 2, Tid: 2, After: 5})
	c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 3, After: 5})
	assert.Len(t, c.list(1), 2)
}

func TestLimitMaxReceiversPerSession(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxReceiversPerSession = 2 })
	c := h.client("l")
	c.bind(1, false)
	c.bind(2, true)
	text := c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpBind, Receiver: 3})
	assert.Contains(t, text, "max_receivers_per_session")
	assert.Contains(t, text, "2")
	c.bind(2, false) // binding one it has again is not a new receiver
	// The refused bind did not bind: receiver 3's events go to its backlog.
	c.add(protocol.Request{Receiver: 3, Tid: 1, After: 1, Repeat: 1})
	c.ff(1)
	assert.Empty(t, c.events)
	// After an unbind there is room again.
	c.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 1})
	backlog, _ := c.bind(3, false)
	assert.Equal(t, uint64(1), backlog)
	// The limit is per session.
	d := h.client("d")
	d.bind(4, false)
	d.bind(5, false)
}

func TestLimitMaxBacklog(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklog = 3 })
	a := h.client("admin")
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 5, Data: []byte("d")})
	a.ff(5)
	st := a.stats()
	assert.Equal(t, uint64(3), st.BacklogEvents)
	assert.Equal(t, uint64(2), st.DroppedTotal)

	c := h.client("c")
	backlog, dropped := c.bind(1, false)
	assert.Equal(t, uint64(3), backlog)
	assert.Equal(t, uint64(2), dropped, "the bind reply reports the dropped events")
	c.ping()
	// The oldest were dropped: the kept ones are the last three, in order,
	// and their seq shows the gap.
	var got []string
	for _, f := range c.fires() {
		got = append(got, fireLine(start, f))
	}
	assert.Equal(t, []string{
		"T+3 r=1 tid=1 fired=3/5 last=false seq=3 data=d",
		"T+4 r=1 tid=1 fired=4/5 last=false seq=4 data=d",
		"T+5 r=1 tid=1 fired=5/5 last=true seq=5 data=d",
	}, got)
	st = a.stats()
	assert.Zero(t, st.BacklogEvents)
	assert.Equal(t, uint64(2), st.DroppedTotal)

	// The dropped count is reported once.
	c.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 1})
	_, dropped = c.bind(1, false)
	assert.Zero(t, dropped)
}

// TestLimitMaxBacklogTotal: once all backlogs together hold max_backlog_total
// events, a new event for an unbound receiver replaces that receiver's
// oldest; the drops are reported on bind.
func TestLimitMaxBacklogTotal(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklogTotal = 4 })
	a := h.client("admin")
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 1, Repeat: 3})
	a.ff(3) // 6 events interleaved by tick (r1, r2, r1, r2, ...): each keeps its 2 newest
	st := a.stats()
	assert.Equal(t, uint64(4), st.BacklogEvents)
	assert.Equal(t, uint64(2), st.DroppedTotal)

	c := h.client("c")
	for r := uint64(1); r <= 2; r++ {
		backlog, dropped := c.bind(r, false)
		assert.Equal(t, uint64(2), backlog, "receiver %d", r)
		assert.Equal(t, uint64(1), dropped, "receiver %d", r)
	}
}
