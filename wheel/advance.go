package wheel

import (
	"math"
	"unsafe"
)

// Advance moves the wheel's time to tick `to`, firing every timer due at or
// before it and calling fn (if not nil) once per firing. The *Fire passed
// to fn belongs to the wheel and is reused: it is valid only until fn
// returns (copy what must outlive it, Data included).
//
// Timers fire in the rotation of the due set (fair.go): a tick reached
// with nothing else due fires in rounds by receiver (each receiver's
// earliest-added timer due on it, then each one's second, and so on, each
// round in the order the receivers' first timers were added); a
// receiver's own timers fire in due order, then add order within a tick.
// A bounded Advance (max > 0) that finds timers still due (a bounded call
// before it stopped at its max) first moves time on by one tick, when
// Now() is before `to`, and the timers due on it join the rotation: so a
// receiver whose timer falls due while another's backlog drains fires
// within a round of the receivers with timers due, in the call that
// reaches its tick, not after the whole backlog; each firing still reports
// the tick it was due at (Fire.Tick), which is then before Now(). While
// timers are still due time moves on by that one tick per call; otherwise
// Advance goes tick by tick, Now() the tick it fires, and the firings come
// in order of due tick. A timer that becomes due at Now() after its tick's order was made
// (Resume with no ticks left, Reschedule to Now()) fires after its
// receiver's other due timers. A repeating timer is re-armed from its
// scheduled tick (no drift), so crossing k of its periods yields k
// firings, each with its own Tick; a firing due at or before Now() again
// joins its receiver's queue in due order. While fn runs, Now() is at or
// after the firing's Tick; the firing timer has already been re-armed, or
// removed if this was its Last firing. fn may call any method of the wheel
// except Advance, with immediate effect: a timer it adds that falls due at
// or before `to` fires in this call.
//
// With max > 0, Advance fires at most max timers. If more are due at or
// before `to` it returns done == false, the rest due at Now() or before,
// to fire first on the next call; otherwise done is true. With max <= 0
// there is no limit. done == true means Now() == to and everything due by
// then has fired. A `to` before Now() is treated as Now(): time never goes
// back. Empty ticks cost nothing: the work is the firings, plus moving
// each timer down at most once per level.
func (w *Wheel) Advance(to uint64, max int, fn func(*Fire)) (fired int, done bool) {
	if to < w.now {
		to = w.now
	}
	w.extra.holding = true
	defer w.extra.endHold()
	d := w.nodes.get(w.due)
	if max > 0 && d.wnext != w.due {
		w.catchUp(to)
	}
	for {
		if w.rot.on {
			prefetching := w.index.table.len() >= prefetchMin
			for w.rot.on {
				if max > 0 && fired >= max {
					return fired, false
				}
				if prefetching {
					w.rotPrefetch()
				}
				w.fire(w.rotNext(), fn)
				fired++
			}
			continue
		}
		if d.wnext != w.due {
			// far runs lookahead timers ahead of the one firing, to prefetch.
			far, prefetching := w.due, w.index.table.len() >= prefetchMin
			if prefetching {
				far = w.ahead(d.wnext, lookahead)
			}
			for i := d.wnext; i != w.due; i = d.wnext {
				if max > 0 && fired >= max {
					return fired, false
				}
				if prefetching {
					if far = w.ahead(far, 1); far != w.due {
						w.prefetchRemoval(far)
					}
				}
				n := w.nodes.get(i) // only read: fire writes it through at
				d.wnext = n.wnext
				w.nodes.at(n.wnext).wprev = w.due
				w.fire(i, fn)
				fired++
				if w.rot.on { // the list changed other than at its head
					break
				}
			}
			continue
		}
		t, ok := w.nextEvent()
		if !ok || t > to {
			w.setNow(to, false)
			return fired, true
		}
		w.setNow(t, false)
		w.turn()
	}
}

// catchUp moves time on by one tick, when Now() is before `to`, while
// timers are still due (a backlog): the tick's timers join the rotation in
// add order. One tick per call: the backlog is what a bounded Advance
// could not fire, and a server calls Advance once per loop turn as its
// clock moves on, so the wheel follows the clock while the backlog drains
// (a turn at least per tick), without running far ahead of the backlog:
// its repeating timers are mostly re-armed into the future rather than
// into its queues, and a fast-forward that a freeze stops stops near the
// firings.
func (w *Wheel) catchUp(to uint64) {
	if w.now >= to {
		return
	}
	t := w.now + 1
	next, ok := w.nextEvent()
	w.setNow(t, false)
	if ok && next == t {
		w.turn()
	}
}

// ahead returns the node k places after i in the due list, or the due
// sentinel when the list ends first. It only steers prefetches: a node that
// left the list meanwhile (cancelled or paused by a callback) ends the walk.
func (w *Wheel) ahead(i uint32, k int) uint32 {
	for ; k > 0 && i != w.due; k-- {
		n := w.nodes.get(i)
		if n.wprev >= markFiring {
			return w.due
		}
		i = n.wnext
	}
	return i
}

// Removing a timer at its last firing deletes its key from the index: a
// random access into a table far larger than the cache for a big wheel. In a
// burst of firings Advance prefetches that entry lookahead firings ahead.
// Below prefetchMin entries (1 MiB) the index stays in cache and
// prefetching only costs time.
const (
	lookahead   = 16
	prefetchMin = 1 << 18
)

// prefetchRemoval prefetches the index entry of due timer i if its next
// firing is its last.
func (w *Wheel) prefetchRemoval(i uint32) {
	n := w.nodes.get(i)
	if n.repeat == 0 || n.fired+1 < n.repeat {
		return
	}
	x := &w.index
	prefetch(unsafe.Pointer(x.table.at(hash(Key{n.receiver, n.tid}) & x.mask)))
}

// rotPrefetch is prefetchRemoval for the rotation mode (fair.go), in two
// steps: the ring's group lookahead places from its front fires about
// lookahead firings on (fewer when groups ahead of it have left the ring),
// and its first node, whose line the step before asked for when it was
// 2*lookahead places from the front, tells which index entry to ask for;
// the group 2*lookahead places from the front has its first node's line
// asked for. A ring of lookahead groups or fewer past its front (a backlog
// of that few receivers) gets no prefetch. Where a node is read at random
// in a big slab (a catch-up after downtime, which a restart also
// replays), each firing's removal waited on the node and then on its
// index entry. Only a hint: a group's queue changed meanwhile by a
// callback makes a useless prefetch, not a wrong firing.
func (w *Wheel) rotPrefetch() {
	r := &w.rot
	if k := r.head + 2*lookahead; k < len(r.ring) {
		if g := r.ring[k]; !g.dead {
			prefetch(unsafe.Pointer(w.nodes.get(g.first)))
		}
	}
	if k := r.head + lookahead; k < len(r.ring) {
		if g := r.ring[k]; !g.dead {
			w.prefetchRemoval(g.first)
		}
	}
}

// fire fires timer i, just taken from the due list.
func (w *Wheel) fire(i uint32, fn func(*Fire)) {
	n := w.nodes.at(i)
	n.wprev = markFiring
	t := n.due
	every := uint64(n.every)
	n.fired++
	ev := &w.ev // set field by field: see server's onFire on composite literals
	ev.Receiver, ev.Tid, ev.Tick, ev.Fired, ev.Repeat = n.receiver, n.tid, t, uint64(n.fired), n.repeat
	if n.hasExtra() {
		x := w.extra.at(n.every)
		if n.fired == 0 {
			x.firedHi++
		}
		every = x.every
		ev.Fired |= uint64(x.firedHi) << 32
		ev.Data = w.extra.payload(x)
	} else if n.fired == 0 { // the count passed 2^32: keep its high bits apart
		n.every = w.extra.alloc(every, nil)
		w.extra.at(n.every).firedHi = 1
		n.seq |= flagExtra
		ev.Fired = 1 << 32
	}
	ev.Last = uint64(n.repeat) != 0 && ev.Fired >= uint64(n.repeat) || every > math.MaxUint64-t
	if ev.Last {
		w.remove(i, w.index.position(hash(ev.Key), i))
	} else {
		n.due = t + every
		if n.due <= w.now { // the wheel ran ahead of a backlog
			w.joinDue(i, false)
		} else {
			w.place(i)
		}
	}
	if fn != nil {
		if !ev.Last {
			w.firing = i
		}
		fn(ev)
		w.firing = 0
	}
	ev.Data = nil
	w.extra.release()
}

// NextEvent returns the first tick at or after Now() at which Advance has
// work: timers due at Now() not yet fired (a bounded Advance stopped), or a
// slot to fire or move down. ok is false when the wheel has no timer to run.
// An Advance to a tick before it only moves time; a driver can sleep until
// it (and must look again after Add or Resume).
func (w *Wheel) NextEvent() (tick uint64, ok bool) {
	if w.nodes.get(w.due).wnext != w.due {
		return w.now, true
	}
	return w.nextEvent()
}
