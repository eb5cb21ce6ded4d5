package session

import (
	"github.com/tickwheel/tickwheel/protocol"
)

// Counters for the operator's metrics. The Core counts requests by op and
// error replies by code always (an array increment each); with metrics on
// (SetMetrics) it also tells the server how late, in ticks, each firing
// of the turn was, for its lateness histogram. Inputs fed back by Replay
// (recovery) are not counted: the counters cover what this process served.
//
// Almost every firing is on time (due at tw-time's tick, or fast-forwarded
// over): those cost onFire two compares, and TakeLates counts them from
// firedTotal; only a late firing (the wheel catching up) is noted, as a
// run of equal lateness.

// Array bounds of the per-op and per-code counters; an op or code past
// them (none is defined) is counted at index 0.
const (
	maxOpCount   = 32
	maxCodeCount = 32
)

// coreMetrics are the Core's operator counters. Owned by the event loop.
type coreMetrics struct {
	on       bool
	requests [maxOpCount]uint64
	errors   [maxCodeCount]uint64
	// scanAt is where LoadOf's walk of the wheel's receivers goes on.
	scanAt int
	// lates are this turn's late firings as runs of equal lateness
	// (ticks), in firing order; the server takes them, with the on-time
	// ones, at the end of each turn (TakeLates). firedAt is firedTotal as
	// of the last TakeLates.
	lates   []LateRun
	firedAt uint64
}

// LateRun is n firings that were late ticks ticks (see protocol.Fire.Late:
// 0 when on time or fast-forwarded over).
type LateRun struct {
	Late uint64
	N    uint64
}

// SetMetrics turns the per-firing lateness notes on or off. While on, the
// server must take them every turn (TakeLates), or they grow with every
// late firing. Turn them on after recovery: TakeLates would count the
// firings of a Replay as on time.
func (c *Core) SetMetrics(on bool) {
	c.m.on = on
	c.m.lates = c.m.lates[:0]
	c.m.firedAt = c.firedTotal
}

// countRequest counts a decoded request of op.
func (c *Core) countRequest(op protocol.Op) {
	if c.replaying {
		return
	}
	i := int(op)
	if i >= maxOpCount {
		i = 0
	}
	c.m.requests[i]++
}

// countError counts an error reply of code.
func (c *Core) countError(code protocol.Code) {
	if c.replaying {
		return
	}
	i := int(code)
	if i >= maxCodeCount {
		i = 0
	}
	c.m.errors[i]++
}

// noteLate notes a late firing due at tick: the caller (onFire) checked
// that metrics are on and that tick is late (below tw-time's target, above
// what a fast-forward jumped over), so that an on-time firing costs two
// compares and, with metrics off, one branch.
func (c *Core) noteLate(tick uint64) {
	if c.replaying {
		return
	}
	l := c.late(tick)
	if n := len(c.m.lates); n > 0 && c.m.lates[n-1].Late == l {
		c.m.lates[n-1].N++
		return
	}
	c.m.lates = append(c.m.lates, LateRun{Late: l, N: 1})
}

// TakeLates calls fn with the lateness of the firings since the last call,
// as runs (the late ones in firing order, then the on-time ones, Late 0),
// and forgets them; it does nothing with metrics off, or when nothing
// fired. The slice is valid only during fn.
func (c *Core) TakeLates(fn func([]LateRun)) {
	if !c.m.on || c.firedTotal == c.m.firedAt {
		return
	}
	fired := c.firedTotal - c.m.firedAt
	c.m.firedAt = c.firedTotal
	for _, r := range c.m.lates {
		fired -= min(r.N, fired)
	}
	if fired > 0 {
		c.m.lates = append(c.m.lates, LateRun{Late: 0, N: fired})
	}
	fn(c.m.lates)
	c.m.lates = c.m.lates[:0]
}

// Requests returns the number of requests of op decoded since the Core
// was made (Replay's excluded).
func (c *Core) Requests(op protocol.Op) uint64 {
	if int(op) >= maxOpCount {
		return 0
	}
	return c.m.requests[op]
}

// Errors returns the number of error replies of code sent since the Core
// was made (Replay's excluded), refusals and timeouts included.
func (c *Core) Errors(code protocol.Code) uint64 {
	if int(code) >= maxCodeCount {
		return 0
	}
	return c.m.errors[code]
}

// Load is what the operator's metrics and status page show of the Core
// beyond Stats and Counters.
type Load struct {
	// TimerReceivers is the number of receivers with live timers.
	TimerReceivers int
	// Stalled is the number of sessions with events held back because
	// their pending output is at max_outbound (slow consumers).
	Stalled int
	// BacklogReceivers is the number of receivers with queued events.
	BacklogReceivers int
	// OldestDue is the due tick of the oldest event queued in any
	// receiver's backlog or outbox, when Queued; OldestDue against Now is
	// how long it has waited in tw-time.
	OldestDue uint64
	Queued    bool
	// TopTimers and TopBacklog are the receivers with the most live timers
	// and the most queued events, most first, at most k of each (see
	// LoadOf).
	TopTimers, TopBacklog []ReceiverLoad
	// Sampled is true when there were more receivers (or receiver
	// records) than LoadOf's scan limit: BacklogReceivers, OldestDue and
	// the top lists then come from part of them.
	Sampled bool
}

// ReceiverLoad is one receiver's live timers and queued events.
type ReceiverLoad struct {
	Receiver uint64
	Timers   int
	Backlog  int
	Bound    bool
}

// LoadOf returns the Core's load, with the k receivers with the most live
// timers and the k with the most queued events. It walks at most records
// receiver records (each costs a few cache misses: its record and its
// queue's first frame) and timers receivers with timers (an entry of the
// wheel's receiver table each), so that its cost on the event loop stays
// bounded however many there are: past that, a different part each call
// (Go's map order for the records; the wheel's walk goes on where the
// last one stopped).
func (c *Core) LoadOf(k, records, timers int) Load {
	ld := Load{Stalled: len(c.stalled), TimerReceivers: c.wheel.Receivers()}
	var m protocol.Message
	seen := 0
	for _, r := range c.receivers {
		if seen++; seen > records {
			ld.Sampled = true
			break
		}
		if r.n == 0 {
			continue
		}
		ld.BacklogReceivers++
		if f := r.q.front(); len(f) > protocol.HeaderSize && protocol.DecodeMessage(f[protocol.HeaderSize:], &m) == nil &&
			m.Kind == protocol.KindFire && (!ld.Queued || m.Fire.Tick < ld.OldestDue) {
			ld.OldestDue, ld.Queued = m.Fire.Tick, true
		}
		ld.TopBacklog = insertTop(ld.TopBacklog, k, ReceiverLoad{Receiver: r.id, Backlog: r.n, Bound: r.owner != nil}, byBacklog)
	}
	if ld.TimerReceivers > timers {
		ld.Sampled = true
	} else {
		c.m.scanAt = 0
	}
	seen = 0
	c.m.scanAt = c.wheel.EachReceiver(c.m.scanAt, func(id uint64, n int) bool {
		if seen++; seen > timers {
			return false
		}
		ld.TopTimers = insertTop(ld.TopTimers, k, ReceiverLoad{Receiver: id, Timers: n}, byTimers)
		return true
	})
	for _, list := range [][]ReceiverLoad{ld.TopTimers, ld.TopBacklog} {
		for i := range list {
			r := &list[i]
			r.Timers = c.wheel.ReceiverLen(r.Receiver)
			if rec := c.receivers[r.Receiver]; rec != nil {
				r.Backlog, r.Bound = rec.n, rec.owner != nil
			}
		}
	}
	return ld
}

// The orders of LoadOf's top lists.
const (
	byTimers = iota
	byBacklog
)

// key returns the figure r is ranked by in order by.
func (r *ReceiverLoad) key(by int) int {
	if by == byTimers {
		return r.Timers
	}
	return r.Backlog
}

// insertTop inserts x into top, kept sorted by key (most first, earlier
// entries first among equals) and at most k long. (An order given as a
// func value would make x escape: an allocation per call.)
func insertTop(top []ReceiverLoad, k int, x ReceiverLoad, by int) []ReceiverLoad {
	v := x.key(by)
	if k <= 0 || len(top) == k && v <= top[k-1].key(by) {
		return top
	}
	i := len(top)
	for i > 0 && v > top[i-1].key(by) {
		i--
	}
	if len(top) < k {
		top = append(top, ReceiverLoad{})
	}
	copy(top[i+1:], top[i:len(top)-1])
	top[i] = x
	return top
}

// front returns the first frame without removing it, or nil when the
// queue is empty.
func (q *frameQueue) front() []byte {
	if len(q.chunks) == 0 {
		return nil
	}
	c := q.chunks[0][q.off:]
	if len(c) < 4 {
		return nil
	}
	return c[:frameLen(c)]
}
