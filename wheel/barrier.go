package wheel

import (
	"math/bits"
	"runtime"
	"sync/atomic"
)

// # The write barrier that saves a node before its first write
//
// A Frozen's encoder walks the slab's pages in order and encodes the live
// timers of each; the loop (the wheel's owner) goes on. Before the loop's
// first write to a node since a Freeze, while that Frozen's encoder has
// not reached the node's page, the loop saves the node as it stands (56
// bytes, the state at the Freeze: this is its first write) into the
// barrier's log, which the encoder encodes between its own pages; then it
// writes the node in place. No node page is copied: the loop waits for the
// encoder only while the encoder copies the unsaved nodes of the one page
// it has claimed (896 bytes at most; loopWrite says why a copy by the loop
// would be wrong). The loop's cost is one compare-and-swap and
// one copy of a node per node it writes first, however scattered: a turn
// that moves 50k timers down the wheel saves 50k nodes (2.8 MB), where a
// barrier of whole pages encoded or copied a page (16 nodes) for each:
// 896 bytes copied, or 16 records encoded, per node written, where the
// node alone is 56 bytes and one record's encoding is left to the encoder.
//
// Each page has a claim word in claims: a bit per node the loop saved, and
// claimEnc once the encoder has claimed the page to copy it (it then
// copies the nodes the loop has not saved, which the loop does not write
// until the copy is done); doneTo is the page the encoder is at (every
// page below is finished with: the loop writes them in place). The loop
// appends saved nodes to a log of chunks and then stores the chunk's
// committed count; the encoder encodes the committed nodes. The encoder
// ends its walk by storing doneTo = end (the
// loop saves nothing after that), waits for the nodes the loop saved to
// be committed (the loop's claim and its copy are back to back), encodes
// them, and sets over: the loop forgets the barrier at its next look.
//
// A node page stays stale (its epoch older than the array's: writes take
// the slow path, slab.own) until no barrier needs anything more of it: the
// encoder is past it, or the loop saved all its nodes.
//
// Ownership: first, end and n are set at the Freeze and only read
// afterwards; tail is the loop's; head and rd are the encoder's; the rest
// are atomics.
type barrier struct {
	first, end uint32 // pages [first, end) may hold frozen timers
	n          uint32 // the slab's high-water mark at the Freeze

	claims *claimSet     // its words: saved nodes' bits, claimEnc, gen; back to the spares after
	words  []*claimChunk // claims.chunks at the Freeze, covering [0, end): the encoder's to read
	gen    uint32        // the generation of claims' words that are this barrier's
	doneTo atomic.Uint32 // the encoder has finished with every page below
	over   atomic.Bool   // the walk is finished, or the Frozen released

	log     atomic.Pointer[logChunk] // the log's first chunk, once the loop saves a node
	tail    *logChunk                // the loop's: the chunk it appends to
	head    *logChunk                // the encoder's: the chunk it reads
	rd      int                      // the encoder's: nodes of head encoded
	drained uint32                   // the encoder's: nodes of the log encoded
}

// claimEnc is the bit of a page's claim word that says the encoder has
// claimed it; the low pageLen bits are the nodes the loop saved; the bits
// from genShift the generation of the barrier the word belongs to (a word
// of another generation is empty).
const (
	claimEnc = 1 << pageLen
	allSaved = 1<<pageLen - 1
	genShift = pageLen + 1
	maxGen   = 1<<(32-genShift) - 1
)

// claimSet is the claim words of a barrier, a word per node page from page
// 0, in chunks of claimChunkLen. A set is reused by the next barrier once
// the loop has dropped this one (slab.pruneBars): a new generation makes
// every word empty without clearing them. And a spare set grows with the
// slab, a chunk or two per block the slab adds (slab.grow), so that
// Freeze finds one that covers the slab and allocates no claim words: a
// make of 4 bytes per 16 timers (25 MB at 100M), which the runtime zeroes
// when it reuses freed heap, took 15 ms of the first Freeze after a start
// at 100M timers (7,700 page faults). Owned by the loop between barriers;
// a barrier reads its own copy of chunks, which the loop never changes.
type claimSet struct {
	chunks []*claimChunk
	gen    uint32 // the last generation handed out
}

// claimChunk is claimChunkLen claim words (4 KiB), fresh ones 0: the
// generation of no barrier, so empty.
type claimChunk [claimChunkLen]atomic.Uint32

const (
	claimChunkShift = 10
	claimChunkLen   = 1 << claimChunkShift
	claimChunkMask  = claimChunkLen - 1
)

// covers returns the pages the set has words for.
func (cs *claimSet) covers() uint32 { return uint32(len(cs.chunks)) << claimChunkShift }

// extend adds chunks, at most k, toward covering pages pages.
func (cs *claimSet) extend(pages uint32, k int) {
	for ; k > 0 && cs.covers() < pages; k-- {
		cs.chunks = append(cs.chunks, new(claimChunk))
	}
}

// claimsFor returns a claim set covering pages [0, end) and a generation
// of it no word holds: the spare one that covers the most, extended to end
// if the slab outgrew it, else (every spare in use or at its last
// generation) a new one.
func (s *slab) claimsFor(end uint32) (*claimSet, uint32) {
	best := -1
	for k, cs := range s.spareClaims {
		if cs.gen < maxGen && (best < 0 || cs.covers() > s.spareClaims[best].covers()) {
			best = k
		}
	}
	cs := &claimSet{}
	if best >= 0 {
		cs = s.spareClaims[best]
		s.spareClaims = append(s.spareClaims[:best], s.spareClaims[best+1:]...)
	}
	cs.extend(end, int(maxNodes/pageLen))
	cs.gen++
	return cs, cs.gen
}

// growClaims extends the spare claim sets toward covering the slab's
// pages, two chunks each at most: called for each block the slab adds (an
// eighth of a chunk), so a spare catches up with a slab that grew while
// its barrier was in use. It first takes back the sets of the barriers
// that are over.
func (s *slab) growClaims() {
	s.pruneBars()
	pages := s.arr.len() / pageLen
	for _, cs := range s.spareClaims {
		cs.extend(pages, 2)
	}
}

// pruneBars drops the barriers that are over from the loop's list, and
// keeps their claim sets for the next (at most two).
func (s *slab) pruneBars() {
	live := s.bars[:0]
	for _, b := range s.bars {
		if !b.over.Load() {
			live = append(live, b)
			continue
		}
		if len(s.spareClaims) < 2 {
			s.spareClaims = append(s.spareClaims, b.claims)
		}
	}
	clear(s.bars[len(live):])
	s.bars = live
}

// logChunk is a piece of a barrier's log: nodes[:n] are committed (never
// written again); the loop writes nodes[n:] and then moves n on. nodes is
// allocated once, at its full size: the slice itself never changes. The
// nodes hold no pointers, so the chunks cost the garbage collector nothing
// to scan.
type logChunk struct {
	nodes []node
	n     atomic.Int64
	next  atomic.Pointer[logChunk]
}

// logChunkLen is the nodes in a chunk of a barrier's log (56 KiB).
const logChunkLen = 1024

func newBarrier(first, end, n uint32, claims *claimSet, gen uint32) *barrier {
	b := &barrier{first: first, end: end, n: n, claims: claims, words: claims.chunks, gen: gen}
	b.doneTo.Store(first)
	return b
}

// word returns page p's claim word as it is (to compare and swap) and as
// this barrier reads it (another generation's is empty).
func (b *barrier) word(p uint32) (w *atomic.Uint32, raw, cur uint32) {
	w = &b.words[p>>claimChunkShift][p&claimChunkMask]
	raw, cur = w.Load(), b.gen<<genShift
	if raw>>genShift == b.gen {
		cur = raw
	}
	return w, raw, cur
}

// loopWrite runs on the loop before a write to node j of page p, whose
// contents are pg, while the page is stale; the node may then be written in
// place. done is true when this barrier needs nothing more of the page
// (the caller may stop asking: the encoder is past it, or every node is
// saved).
//
// When the encoder has claimed the page and not yet copied it, loopWrite
// waits for that copy (896 bytes), yielding: the page cannot be copied
// instead, because the loop may hold pointers into it (slab.at's) from
// earlier in the same operation, whose writes a copy would lose.
func (b *barrier) loopWrite(p, j uint32, pg *cowPage[node]) (done bool) {
	if p < b.first || p >= b.end || p < b.doneTo.Load() {
		return true
	}
	bit := uint32(1) << j
	for {
		word, raw, w := b.word(p)
		switch {
		case w&claimEnc != 0: // the encoder's: in place once it has copied it
			for spin := 0; p >= b.doneTo.Load(); spin++ {
				if spin >= 64 {
					runtime.Gosched()
				}
			}
			return true
		case w&bit != 0:
			return w&allSaved == allSaved
		}
		if word.CompareAndSwap(raw, w|bit) {
			b.save(&pg[j], p<<pageShift|j < b.n)
			return (w|bit)&allSaved == allSaved
		}
	}
}

// save appends a copy of n to the log and publishes it; one past the
// high-water mark at the Freeze (frozen false) goes as a free node, so
// that the log holds a node for every claim bit the loop set, which is how
// the encoder knows it has them all.
func (b *barrier) save(n *node, frozen bool) {
	c := b.tail
	if c == nil || c.n.Load() == int64(len(c.nodes)) {
		nc := &logChunk{nodes: make([]node, logChunkLen)}
		if c == nil {
			b.log.Store(nc)
		} else {
			c.next.Store(nc)
		}
		b.tail, c = nc, nc
	}
	k := c.n.Load()
	c.nodes[k] = *n
	if !frozen {
		c.nodes[k].wprev = markFree
	}
	c.n.Store(k + 1)
}

// drain encodes the log's committed nodes with e, on the encoder, until
// len(dst) reaches stop (caught false) or none is left (caught true).
func (b *barrier) drain(e *encoder, dst []byte, stop int) (out []byte, caught bool) {
	if b.head == nil {
		if b.head = b.log.Load(); b.head == nil {
			return dst, true
		}
	}
	for {
		c := b.head
		if n := int(c.n.Load()); b.rd < n {
			if len(dst) >= stop {
				return dst, false
			}
			if nd := &c.nodes[b.rd]; nd.wprev != markFree {
				dst = e.appendRecord(dst, nd)
			}
			b.rd++
			b.drained++
			continue
		}
		if b.rd < len(c.nodes) {
			return dst, true // the loop has not filled it yet
		}
		nx := c.next.Load()
		if nx == nil {
			return dst, true
		}
		b.head, b.rd = nx, 0
	}
}

// claimPage claims page p for the encoder, unless the loop saved all its
// nodes; it returns the nodes the loop saved (then or by the claim).
func (b *barrier) claimPage(p uint32) (saved uint32) {
	for {
		word, raw, w := b.word(p)
		if w&allSaved == allSaved || word.CompareAndSwap(raw, w|claimEnc) {
			return w & allSaved
		}
	}
}

// serialize runs on the loop before a write to node j of page p (whose
// contents are pg) while the page is stale and a Frozen is pinned: each
// barrier not over saves the node if it needs it; the node may then be
// written in place. done is true when no barrier needs anything more of
// the page. Finished barriers are dropped from the list.
func (s *slab) serialize(p, j uint32, pg *cowPage[node]) (done bool) {
	done = true
	s.pruneBars()
	for _, b := range s.bars {
		if !b.loopWrite(p, j, pg) {
			done = false
		}
	}
	return done
}

// popcount of a claim word's saved bits.
func savedCount(w uint32) uint32 { return uint32(bits.OnesCount32(w & allSaved)) }
