package wheel

import (
	"math"
	"unsafe"
)

// Advance moves the wheel's time to tick `to`, firing in order every timer due
// at or before it and calling fn (if not nil) once per firing.
//
// Firings come in order of due tick; timers due on the same tick fire in the
// order they were first added. A repeating timer is re-armed from its
// scheduled tick (no drift), so crossing k of its periods yields k firings,
// each with its own Tick. While fn runs, Now() is the firing's Tick; the
// firing timer has already been re-armed, or removed if this was its Last
// firing. fn may call any method of the wheel except Advance, with immediate
// effect: a timer it adds that falls due at or before `to` fires in this call.
//
// With max > 0, Advance fires at most max timers. If more are due at or
// before `to` it returns done == false with Now() the due tick of the next
// one, which the next call fires first; otherwise done is true. With
// max <= 0 there is no limit. done == true means Now() == to and everything
// due by then has fired. A `to` before Now() is treated as Now(): time never
// goes back. Empty ticks cost nothing: the work is the firings, plus moving
// each timer down at most once per level.
func (w *Wheel) Advance(to uint64, max int, fn func(Fire)) (fired int, done bool) {
	if to < w.now {
		to = w.now
	}
	w.extra.holding = true
	defer w.extra.endHold()
	for {
		for w.pendPos < len(w.pending) {
			if j := w.pendPos + lookahead; j < len(w.pending) && len(w.index.table) >= prefetchMin {
				w.prefetchRemoval(uint32(w.pending[j]), false)
				w.prefetchRemoval(uint32(w.pending[j-lookahead/2]), true)
			}
			i := uint32(w.pending[w.pendPos])
			if i == 0 { // cancelled or paused while pending
				w.pendPos++
				continue
			}
			if max > 0 && fired >= max {
				return fired, false
			}
			w.pendPos++
			w.fire(i, fn)
			fired++
		}
		w.pending, w.pendPos = w.pending[:0], 0
		t, ok := w.nextEvent()
		if !ok || t > to {
			w.setNow(to, false)
			return fired, true
		}
		w.setNow(t, false)
		w.turn()
	}
}

// Removing a timer at its last firing deletes its key from the index: a
// random access into a table far larger than the cache for a big wheel,
// followed by a read of the node of each entry the deletion shifts back. In
// a burst of firings Advance prefetches both ahead of time: the index entry
// lookahead firings ahead, and the nodes after it lookahead/2 ahead, once
// that entry has arrived.
// Below prefetchMin entries (1 MiB) the index stays in cache and
// prefetching only costs time.
const (
	lookahead   = 16
	prefetchMin = 1 << 18
)

// prefetchRemoval prefetches, for pending timer i whose next firing is its
// last, its index entry (near) or the nodes of the entries after it (!near).
func (w *Wheel) prefetchRemoval(i uint32, near bool) {
	if i == 0 {
		return
	}
	n := w.nodes.at(i)
	if n.repeat == 0 || n.fired+1 < n.repeat {
		return
	}
	x := &w.index
	p := hash(Key{n.receiver, n.tid}) & x.mask
	if !near {
		prefetch(unsafe.Pointer(&x.table[p]))
		return
	}
	for k := uint64(1); k <= 2; k++ {
		e := x.table[(p+k)&x.mask]
		if e == 0 {
			return
		}
		prefetch(unsafe.Pointer(w.nodes.at(e & idxMask)))
	}
}

// fire fires timer i, just taken from the pending array.
func (w *Wheel) fire(i uint32, fn func(Fire)) {
	n := w.nodes.at(i)
	n.wprev = markFiring
	t := w.now
	every := uint64(n.every)
	n.fired++
	ev := Fire{Key: Key{n.receiver, n.tid}, Tick: t, Fired: uint64(n.fired), Repeat: n.repeat}
	if n.hasExtra() {
		x := w.extra.at(n.every)
		if n.fired == 0 {
			x.firedHi++
		}
		every = x.every
		ev.Fired |= uint64(x.firedHi) << 32
		ev.Data = x.data
	} else if n.fired == 0 { // the count passed 2^32: keep its high bits apart
		n.every = w.extra.alloc(extra{every: every, firedHi: 1})
		n.seq |= flagExtra
		ev.Fired = 1 << 32
	}
	ev.Last = uint64(n.repeat) != 0 && ev.Fired >= uint64(n.repeat) || every > math.MaxUint64-t
	if ev.Last {
		pos, _ := w.index.lookup(ev.Key)
		w.remove(i, pos)
	} else {
		n.due = t + every
		w.place(i)
	}
	if fn != nil {
		fn(ev)
	}
	w.extra.release()
}

// NextEvent returns the first tick at or after Now() at which Advance has
// work: timers due at Now() not yet fired (a bounded Advance stopped), or a
// slot to fire or move down. ok is false when the wheel has no timer to run.
// An Advance to a tick before it only moves time; a driver can sleep until
// it (and must look again after Add or Resume).
func (w *Wheel) NextEvent() (tick uint64, ok bool) {
	for _, e := range w.pending[w.pendPos:] {
		if e != 0 {
			return w.now, true
		}
	}
	return w.nextEvent()
}
