package wheel

// Reschedule moves the next firing of timer k to tick due, keeping the
// rest of it: its fired count, repeat count, interval, data and its add
// order (which places it in the same-tick order, see Advance). The firings after it are re-armed
// from due by the interval as usual, unless the caller moves them again.
// It is how a caller drives a timer whose firings do not follow a fixed
// interval (a calendar schedule): from an Advance callback it moves the
// timer just re-armed, and the move takes effect at once.
//
// It returns ErrNotFound, ErrPaused for a paused timer (its remaining ticks
// are what Resume uses), or ErrPast when due is before Now(), except for
// the timer firing in the callback that calls it, which may move to any
// tick after the firing's Tick: when a bounded Advance left a backlog,
// Now() may be past it (see Advance), and a calendar timer's next firing
// after a late one may be due already. A due equal to Now() puts the timer
// at the end of its receiver's due timers; one before Now() among them in
// due order, then add order: it fires in the Advance running (when called
// from its callback) or the next one.
func (w *Wheel) Reschedule(k Key, due uint64) error {
	i := w.firing // the timer firing now: no look-up (see Wheel.firing)
	if i == 0 || w.nodes.get(i).receiver != k.Receiver || w.nodes.get(i).tid != k.Tid {
		if _, i = w.index.lookup(k); i == 0 {
			return ErrNotFound
		}
	}
	n := w.nodes.at(i)
	switch {
	case n.wprev == markPaused:
		return ErrPaused
	case due < w.now && (i != w.firing || due <= w.ev.Tick):
		return ErrPast
	case n.due == due:
		return nil
	}
	w.unlinkArmed(i)
	w.noteUnlinked(n.due)
	n.due = due
	switch {
	case due == w.now:
		w.appendDue(i)
	case due < w.now: // the firing timer, in a wheel ahead of its backlog
		w.joinDue(i, false)
	default:
		w.place(i)
	}
	return nil
}
