package wheel

import (
	"math"
	"slices"
)

// Add adds a timer under k as described by s. See Spec for the errors.
// When it returns an error the wheel is unchanged. It is AddFrom(k, s, Now())
// without the due tick.
func (w *Wheel) Add(k Key, s Spec) error {
	_, err := w.AddFrom(k, s, w.now)
	return err
}

// AddFrom is Add with After and At taken relative to now, the caller's
// tw-time, which may be ahead of Now() while the wheel catches up through
// bounded Advance calls (a now before Now() is treated as Now()). It returns
// the due tick of the first firing.
//
// The errors are Add's, judged against max(now, Now()): At <= now is ErrPast
// (even when At is after Now()), now+After past 2^64-1 is ErrOverflow, and
// Every == 0 means the first delay, due - now. The timer is armed in the
// wheel at due, so it fires when an Advance reaches due, after every timer
// due earlier; its place in the same-tick order follows from its add
// order, as with Add. When it
// returns an error the wheel is unchanged and due is 0.
func (w *Wheel) AddFrom(k Key, s Spec, now uint64) (due uint64, err error) {
	now = max(now, w.now)
	switch {
	case s.At != 0:
		if s.At <= now {
			return 0, ErrPast
		}
		due = s.At
	case s.After == 0:
		return 0, ErrZeroAfter
	case s.After > math.MaxUint64-now:
		return 0, ErrOverflow
	default:
		due = now + s.After
	}
	every := s.Every
	if every == 0 {
		every = due - now
	}
	w.index.reserve()
	h := hash(k)
	pos, old := w.index.lookupHash(k, h)
	if old != 0 {
		if !s.Replace {
			return 0, ErrExists
		}
		w.remove(old, pos)
		pos, _ = w.index.lookupHash(k, h)
	}
	i, ok := w.nodes.alloc()
	if !ok {
		return 0, ErrFull
	}
	if w.seq >= w.seqMax {
		w.renumber()
	}
	n := w.nodes.at(i)
	n.receiver, n.tid, n.due, n.seq, n.repeat, n.fired = k.Receiver, k.Tid, due, w.seq, s.Repeat, 0
	w.seq++
	if every <= math.MaxUint32 && len(s.Data) == 0 {
		n.every = uint32(every)
	} else {
		n.every = w.extra.alloc(every, s.Data)
		n.seq |= flagExtra
	}
	w.index.insertAt(pos, h, i)
	w.index.noteNew(i)
	w.recvAppend(k.Receiver, i)
	w.place(i)
	return due, nil
}

// Cancel removes the timer k. It returns ErrNotFound when there is none.
// Cancelling from inside an Advance callback is safe, the firing timer included.
func (w *Wheel) Cancel(k Key) error {
	pos, i := w.index.lookup(k)
	if i == 0 {
		return ErrNotFound
	}
	w.remove(i, pos)
	return nil
}

// CancelAll removes every timer of receiver r and returns how many there were.
func (w *Wheel) CancelAll(r uint64) int {
	l, ok := w.recv.get(r)
	if !ok {
		return 0
	}
	count := int(l.count)
	for range count {
		l, _ = w.recv.get(r)
		n := w.nodes.get(l.head)
		w.remove(l.head, w.index.position(hash(Key{n.receiver, n.tid}), l.head))
	}
	return count
}

// Get describes the timer k, or returns ErrNotFound.
func (w *Wheel) Get(k Key) (Info, error) {
	_, i := w.index.lookup(k)
	if i == 0 {
		return Info{}, ErrNotFound
	}
	return w.info(i), nil
}

// List appends the timers of receiver r to dst, oldest added first, and
// returns the extended slice.
func (w *Wheel) List(r uint64, dst []Info) []Info {
	l, ok := w.recv.get(r)
	if !ok {
		return dst
	}
	from := len(dst)
	for i := l.head; i != nilIdx; i = w.nodes.get(i).rnext {
		dst = append(dst, w.info(i))
	}
	slices.Reverse(dst[from:]) // the list is newest first
	return dst
}

// Pause stops the timer k with its remaining ticks frozen. It returns
// ErrNotFound, or ErrPaused when the timer is already paused.
func (w *Wheel) Pause(k Key) error {
	_, i := w.index.lookup(k)
	if i == 0 {
		return ErrNotFound
	}
	n := w.nodes.at(i)
	if n.wprev == markPaused {
		return ErrPaused
	}
	w.unlinkArmed(i)
	w.noteUnlinked(n.due)
	n.due -= min(n.due, w.now) // a due timer has 0 ticks left
	n.wprev, n.wnext = markPaused, nilIdx
	return nil
}

// Resume restarts a paused timer k: it becomes due after exactly the ticks it
// had left when paused. It returns ErrNotFound, ErrNotPaused when the timer is
// not paused, or ErrOverflow (and the timer stays paused) when the new due
// tick would pass 2^64-1. With no ticks left it is due at Now(), after the
// timers due then not fired yet (see Advance on the same-tick order).
func (w *Wheel) Resume(k Key) error {
	_, i := w.index.lookup(k)
	if i == 0 {
		return ErrNotFound
	}
	n := w.nodes.at(i)
	if n.wprev != markPaused {
		return ErrNotPaused
	}
	if n.due > math.MaxUint64-w.now {
		return ErrOverflow
	}
	n.due += w.now
	if n.due == w.now {
		w.appendDue(i)
	} else {
		w.place(i)
	}
	return nil
}

func (w *Wheel) info(i uint32) Info {
	n := w.nodes.get(i)
	in := Info{
		Key:    Key{n.receiver, n.tid},
		Due:    n.due,
		Every:  uint64(n.every),
		Fired:  uint64(n.fired),
		Repeat: n.repeat,
	}
	if n.wprev == markPaused {
		in.Paused = true
		in.Remaining = n.due
		in.Due = satAdd(w.now, n.due)
	} else {
		in.Remaining = n.due - min(n.due, w.now) // 0 for a due timer, also one due before Now()
	}
	if n.hasExtra() {
		x := w.extra.get(n.every)
		in.Every = x.every
		in.Fired |= uint64(x.firedHi) << 32
		in.Data = w.extra.payload(x)
	}
	return in
}

// remove deletes timer i, whose index entry is at pos, from every structure.
func (w *Wheel) remove(i uint32, pos uint64) {
	n := w.nodes.get(i) // only read here; release writes through at
	if n.wprev != markPaused && n.wprev != markFiring {
		w.unlinkArmed(i)
		w.noteUnlinked(n.due)
	}
	w.index.deleteAt(pos)
	w.recvRemove(n.receiver, i)
	if n.hasExtra() {
		w.extra.drop(n.every)
	}
	w.nodes.release(i)
	if i == w.firing {
		w.firing = 0
	}
}

// recvAppend links node i at the head of its receiver's list, newest first.
func (w *Wheel) recvAppend(r uint64, i uint32) {
	n := w.nodes.at(i)
	l := w.recv.ref(r)
	n.rprev, n.rnext = nilIdx, nilIdx
	if l.count != 0 {
		n.rnext = l.head
		w.nodes.at(l.head).rprev = i
	}
	l.head = i
	l.count++
}

func (w *Wheel) recvRemove(r uint64, i uint32) {
	n := w.nodes.get(i) // only read: the barrier is for writes
	if w.walk.active {
		w.walkRemoved(r, i, n.rnext) // listwalk.go
	}
	l := w.recv.entry(r)
	if l.count == 1 {
		w.recv.delete(r)
		return
	}
	if n.rprev == nilIdx {
		l.head = n.rnext
	} else {
		w.nodes.at(n.rprev).rnext = n.rnext
	}
	if n.rnext != nilIdx {
		w.nodes.at(n.rnext).rprev = n.rprev
	}
	l.count--
}

// renumber gives the live timers the add sequence numbers 0..n-1 in their
// current order, once the 31-bit counter runs out (every 2^31 adds).
func (w *Wheel) renumber() {
	sc := w.scratch[:0]
	for i := w.nodes.nsent; i < w.nodes.n; i++ {
		if n := w.nodes.at(i); n.wprev != markFree {
			sc = append(sc, uint64(n.order())<<32|uint64(i))
		}
	}
	slices.Sort(sc)
	for j, e := range sc {
		n := w.nodes.at(uint32(e))
		n.seq = n.seq&flagExtra | uint32(j)
	}
	w.seq = uint32(len(sc))
	w.scratch = sc[:0]
	w.page = pageIndex{} // its add-order check reads the old numbers
	w.walk.seqAt = 0     // likewise the tids a walk collects
}

func satAdd(a, b uint64) uint64 {
	if b > math.MaxUint64-a {
		return math.MaxUint64
	}
	return a + b
}
