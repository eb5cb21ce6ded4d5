package wheel

import "container/heap"

// heapQueue is the textbook container/heap timer queue, the peer the wheel is
// measured against: a binary min-heap of *heapTimer ordered by (due, seq),
// with a handle per timer for O(log n) cancel.
type heapQueue []*heapTimer

type heapTimer struct {
	due, every, seq uint64
	receiver, tid   uint64
	index           int
}

func (q heapQueue) Len() int { return len(q) }
func (q heapQueue) Less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].seq < q[j].seq
}
func (q heapQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *heapQueue) Push(x any) {
	t := x.(*heapTimer)
	t.index = len(*q)
	*q = append(*q, t)
}
func (q *heapQueue) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return t
}

// advance fires every timer due at or before to, re-arming a repeating one
// and removing a one-shot one (every == 0), and returns the count.
func (q *heapQueue) advance(to uint64) int {
	n := 0
	for len(*q) > 0 && (*q)[0].due <= to {
		t := (*q)[0]
		if t.every == 0 {
			heap.Pop(q)
		} else {
			t.due += t.every
			heap.Fix(q, 0)
		}
		n++
	}
	return n
}
