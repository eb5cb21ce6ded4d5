package wheel

// Receivers returns the number of receivers that have live timers.
func (w *Wheel) Receivers() int { return w.recv.count }

// EachReceiver calls fn with every receiver that has live timers and how
// many it has, in no particular order, until fn returns false. The wheel
// must not change during the walk (fn must not add, cancel or advance).
// It costs a walk of the receiver table, about one entry per receiver.
func (w *Wheel) EachReceiver(fn func(r uint64, timers int) bool) {
	for i := range w.recv.table {
		e := &w.recv.table[i]
		if e.count != 0 && !fn(e.key, int(e.count)) {
			return
		}
	}
}
