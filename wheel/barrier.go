package wheel

import (
	"sync/atomic"
)

// # The write barrier that serializes (snapshot format 3)
//
// A Frozen's encoder walks the slab's pages in order and encodes the live
// timers of each; the loop (the wheel's owner) goes on. Before the loop's
// first write to a node page after a Freeze (slab.at finds the page's
// epoch stale), it asks each barrier not finished yet whether the page may
// be written in place (slab.serialize): a page the encoder has not reached
// the loop claims and encodes itself, into the barrier's log, from the page
// as it stands, which is the page at the Freeze (it was not written since:
// this is the first write); a page the encoder has claimed and finished,
// or that the loop encoded earlier, is written in place. Only a page the
// encoder is reading at that instant is copied (the old copy on write, one
// page), so the loop never waits for the encoder. The loop's cost is about
// 14 bytes encoded per timer of a page it writes first, instead of a copy
// of the page (896 bytes); no copy of the wheel's pages survives the
// snapshot.
//
// Each page's claim is 2 bits in claims, set by compare-and-swap, by the
// loop or by the encoder, whichever comes first; doneTo is the page the
// encoder is at (every page below is finished with). The loop's encodings
// go to a log of chunks: the loop appends a page's records and then stores
// the chunk's committed length (and counts the page in loopPages); the
// encoder copies committed bytes, whole pages' records between its own, to
// the snapshot. The encoder ends its walk by storing doneTo = end (the loop
// claims no page after that), waits for the loop's last page to be
// committed (at most one page's encoding, on the loop), copies the rest,
// and sets over: the loop forgets the barrier at its next look.
//
// Ownership: first, end, n, now, extras, big and claims are set at the
// Freeze and only read afterwards; tail and scratch are the loop's; head
// and rd are the encoder's; the rest are atomics.
type barrier struct {
	first, end uint32 // pages [first, end) may hold frozen timers
	n          uint32 // the slab's high-water mark at the Freeze
	now        uint64
	extras     []*cowBlock[extra] // the extras at the Freeze (copied on write)
	big        [][]byte

	claims    []atomic.Uint32 // 2 bits a page from first: claimLoop, claimEnc
	doneTo    atomic.Uint32   // the encoder has finished with every page below
	loopPages atomic.Uint32   // pages the loop claimed and committed
	over      atomic.Bool     // the walk is finished, or the Frozen released

	log     atomic.Pointer[logChunk] // the log's first chunk, once the loop commits a page
	tail    *logChunk                // the loop's: the chunk it appends to
	scratch []byte                   // the loop's: a page's records before they go to tail
	head    *logChunk                // the encoder's: the chunk it reads
	rd      int                      // the encoder's: bytes of head copied
}

// The claim bits of a page.
const (
	claimLoop = 1
	claimEnc  = 2
)

// logChunk is a piece of a barrier's log: data[:n] is committed (never
// written again); the loop writes data[n:] and then moves n on. data is
// allocated once, at its full size: the slice itself never changes.
type logChunk struct {
	data []byte
	n    atomic.Int64
	next atomic.Pointer[logChunk]
}

// logChunkSize is the usual size of a chunk of a barrier's log: a page's
// records longer than it (long payloads) get a chunk of their own.
const logChunkSize = 64 << 10

func newBarrier(first, end, n uint32, now uint64, extras []*cowBlock[extra], big [][]byte) *barrier {
	b := &barrier{first: first, end: end, n: n, now: now, extras: extras, big: big}
	if end > first {
		b.claims = make([]atomic.Uint32, (end-first+15)/16)
	}
	b.doneTo.Store(first)
	return b
}

// claim sets page p's claim bit who, unless the page is claimed already;
// it returns the page's claim bits as found (0: the caller has it).
func (b *barrier) claim(p uint32, who uint32) uint32 {
	word := &b.claims[(p-b.first)/16]
	sh := (p - b.first) % 16 * 2
	for {
		w := word.Load()
		if got := w >> sh & 3; got != 0 {
			return got
		}
		if word.CompareAndSwap(w, w|who<<sh) {
			return 0
		}
	}
}

// loopWrite runs on the loop before its first write to page p, whose
// contents are pg, since the Freeze. It returns true when the page may be
// written in place as far as this barrier goes (the encoder is done with
// it, or the loop just encoded it, or encoded it before), false when the
// encoder may be reading it now (the caller copies the page).
func (b *barrier) loopWrite(p uint32, pg *cowPage[node]) bool {
	if p < b.first || p >= b.end || p < b.doneTo.Load() {
		return true
	}
	switch b.claim(p, claimLoop) {
	case 0:
	case claimLoop:
		return true
	default: // the encoder's
		return p < b.doneTo.Load()
	}
	e := encoder{now: b.now, extras: b.extras, big: b.big, fresh: true}
	b.scratch = e.appendPage(b.scratch[:0], pg, p, b.n)
	b.commit(b.scratch)
	if cap(b.scratch) > logChunkSize {
		b.scratch = nil // one long payload: do not keep its buffer
	}
	return true
}

// commit appends a page's records to the log and publishes them.
func (b *barrier) commit(recs []byte) {
	if len(recs) == 0 { // no live timer in the page
		b.loopPages.Add(1)
		return
	}
	c := b.tail
	pos := 0
	if c != nil {
		pos = int(c.n.Load())
	}
	if c == nil || pos+len(recs) > len(c.data) {
		nc := &logChunk{data: make([]byte, max(logChunkSize, len(recs)))}
		if c == nil {
			b.log.Store(nc)
		} else {
			c.next.Store(nc)
		}
		b.tail, c, pos = nc, nc, 0
	}
	copy(c.data[pos:], recs)
	c.n.Store(int64(pos + len(recs)))
	b.loopPages.Add(1)
}

// drain copies the log's committed bytes to dst, on the encoder, until
// len(dst) reaches stop. caught is true when it copied all that was
// committed: dst then ends with a whole page's records (or none of the
// log's), and the encoder may append its own.
func (b *barrier) drain(dst []byte, stop int) (out []byte, caught bool) {
	if b.head == nil {
		if b.head = b.log.Load(); b.head == nil {
			return dst, true
		}
	}
	for {
		c := b.head
		n := int(c.n.Load())
		if b.rd < n {
			if len(dst) >= stop {
				return dst, false
			}
			k := min(n, b.rd+max(stop-len(dst), 1))
			dst = append(dst, c.data[b.rd:k]...)
			b.rd = k
			continue
		}
		nx := c.next.Load()
		if nx == nil {
			return dst, true
		}
		if int(c.n.Load()) != b.rd {
			continue // committed before the next chunk was linked
		}
		b.head, b.rd = nx, 0
	}
}

// serialize runs on the loop before its first write to node page p since
// the latest Freeze, while a Frozen is pinned: each barrier not over
// encodes the page if its encoder has not reached it. It returns false
// when the page must be copied rather than written in place (an encoder is
// reading it). Finished barriers are dropped from the list.
func (s *slab) serialize(p uint32, pg *cowPage[node]) bool {
	inPlace := true
	live := s.bars[:0]
	for _, b := range s.bars {
		if b.over.Load() {
			continue
		}
		live = append(live, b)
		if !b.loopWrite(p, pg) {
			inPlace = false
		}
	}
	clear(s.bars[len(live):])
	s.bars = live
	return inPlace
}
