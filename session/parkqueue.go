package session

// parkQueue is a FIFO of parked firings kept in fixed-size blocks, so that
// a long queue (a burst into a full outbox) grows and drains without ever
// copying what it holds. The zero value is an empty queue.
type parkQueue struct {
	blocks [][]parked // full blocks, then the last one filling; blocks[0][head:] are the oldest
	head   int
	n      int
}

// parkBlock is the number of firings in one block.
const parkBlock = 256

// len returns the number of parked firings.
func (q *parkQueue) len() int { return q.n }

// push appends p at the end.
func (q *parkQueue) push(p parked) {
	if k := len(q.blocks); k == 0 || len(q.blocks[k-1]) == parkBlock {
		q.blocks = append(q.blocks, make([]parked, 0, parkBlock))
	}
	last := &q.blocks[len(q.blocks)-1]
	*last = append(*last, p)
	q.n++
}

// front returns the oldest parked firing; the queue must not be empty.
func (q *parkQueue) front() *parked { return &q.blocks[0][q.head] }

// pop removes the oldest parked firing, letting go of its data.
func (q *parkQueue) pop() {
	q.blocks[0][q.head] = parked{}
	q.head++
	q.n--
	if q.head == len(q.blocks[0]) { // (only the last block may be short, and then the queue is empty)
		q.blocks[0] = nil
		q.blocks = q.blocks[1:]
		q.head = 0
	}
	if q.n == 0 {
		*q = parkQueue{}
	}
}

// all returns a copy of the parked firings, oldest first.
func (q *parkQueue) all() []parked {
	out := make([]parked, 0, q.n)
	for i, b := range q.blocks {
		if i == 0 {
			b = b[q.head:]
		}
		out = append(out, b...)
	}
	return out
}
