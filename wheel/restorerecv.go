package wheel

// The receivers' lists of a wheel restored from a version 3 (or later)
// snapshot are linked by the IndexBuilder, as it indexes each timer, in
// slab order: a caller with a second core builds the index there while
// the Restorer decodes, and the lists cost the decoding ~15-20 of its ~85
// ns a timer at 10M (the receiver table's look-up, the list's old head),
// about as much as the builder had left after IndexBuilder.ext. The Restorer
// never reads or writes the receiver table, nor a node's rnext, while the
// records are read, and writes rprev only to hand the builder the
// receiver's id (recvid.go): the builder's alone, until Restorer.Wheel
// takes them back (takeHeads, sortLists).

// recvWalkMax is how many newer timers linkRecv passes, at most, to put a
// timer in its place in its receiver's list.
const recvWalkMax = 8

// linkRecv links node i into its receiver's list (see recvAppend), in add
// order: at the head when it is the receiver's newest so far, else after
// the newer timers at the list's head, when there are at most recvWalkMax
// of them; otherwise at the head, the list noted unsorted (sortLists sorts
// it). A snapshot written while the wheel took adds has a few timers of a
// receiver ahead of their place in slab order (the nodes the write
// barrier saved, the receiver's newest among them): the records after
// such a one are older, and each goes in one or two nodes down the list,
// where noting the receiver unsorted had sortLists gather and relink
// every timer of nearly every receiver (84 ns a timer at 10M,
// BenchmarkRestoreWrittenWhileAdding). The nodes passed were linked
// recently: they are in the cache.
func (b *IndexBuilder) linkRecv(blocks []*cowBlock[node], i uint32) {
	n := frozenGet(blocks, i)
	seq := n.order()
	l := b.listOf(n)
	n.rprev, n.rnext = nilIdx, nilIdx
	if l.count != 0 {
		h := frozenGet(blocks, l.head)
		if h.order() >= seq && !b.isUnsorted(n.receiver) && linkAfterNewer(blocks, l.head, h, i, n, seq) {
			l.count++
			return
		}
		n.rnext, h.rprev = l.head, i
		if h.order() >= seq {
			b.noteUnsorted(n.receiver)
		}
	}
	l.head = i
	l.count++
}

// linkAfterNewer links node i (n), of seq seq, after the newer timers at
// the start of the list whose head is p (h, not older than seq), before
// the first older one or at the end, and reports true; or reports false,
// and links nothing, when it would pass more than recvWalkMax timers or
// meets one of seq seq (sortLists then reports the two).
func linkAfterNewer(blocks []*cowBlock[node], p uint32, h *node, i uint32, n *node, seq uint32) bool {
	if h.order() == seq {
		return false
	}
	for range recvWalkMax {
		q := h.rnext
		if q != nilIdx {
			qn := frozenGet(blocks, q)
			if o := qn.order(); o > seq {
				p, h = q, qn
				continue
			} else if o == seq {
				return false
			}
			qn.rprev = i
		}
		h.rnext, n.rprev, n.rnext = i, p, q
		return true
	}
	return false
}

// isUnsorted reports whether recv's list was noted unsorted: sortLists
// relinks it, so linkRecv links its timers at the head without a walk. A
// snapshot of a wheel whose freed nodes were reused has most lists far
// out of slab order, and a walk there is up to recvWalkMax cache misses
// (the list's nodes lie anywhere in the slab): with the walk, the builder
// took 115 ns of CPU a timer at 10M churned timers.
func (b *IndexBuilder) isUnsorted(recv uint64) bool {
	if len(b.unsorted) == 0 {
		return false
	}
	_, ok := b.unsorted[recv]
	return ok
}

// noteUnsorted notes that recv's list is not in add order.
func (b *IndexBuilder) noteUnsorted(recv uint64) {
	if b.unsorted == nil {
		b.unsorted = make(map[uint64]struct{})
	}
	b.unsorted[recv] = struct{}{}
}
