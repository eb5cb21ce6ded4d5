package wheel

// Receivers returns the number of receivers that have live timers.
func (w *Wheel) Receivers() int { return w.recv.count }

// EachReceiver calls fn with every receiver that has live timers and how
// many it has, in no particular order, until fn returns false, starting
// at position from of the receiver table (0 for a whole walk; any value
// is valid). It returns the position after the last receiver fn saw, to
// go on from there in a later call, or 0 when the walk went round the
// whole table. The wheel must not change during the walk (fn must not
// add, cancel or advance). It costs about one table entry per receiver.
func (w *Wheel) EachReceiver(from int, fn func(r uint64, timers int) bool) (next int) {
	n := len(w.recv.table)
	if n == 0 {
		return 0
	}
	from %= n
	if from < 0 {
		from += n
	}
	t := w.recv.table
	for _, part := range [2][2]int{{from, n}, {0, from}} { // from the start position round to it
		for i := part[0]; i < part[1]; i++ {
			if e := &t[i]; e.count != 0 && !fn(e.key, int(e.count)) {
				return (i + 1) % n
			}
		}
	}
	return 0
}
