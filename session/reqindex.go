package session

import (
	"unsafe"

	"github.com/tickwheel/tickwheel/wheel"
)

// The hash index of the memory of request ids (requestid.go), for the
// entries that do not fit in their client's window (reqwindow.go, which
// finds the others, most of them, without a hash; lookup, index and
// drop choose): open addressing with linear probing over
// requestIDs.slots, twice as many slots as the ring has entries, so at
// most half full; allocated with its first entry. A slot is 0 (empty) or
// the low 32 bits of its key's hash (reqHash) over its ring slot + 1. A probe
// compares those hash bits first and reads the ring entry only when they
// match, so a lookup that misses — every new change — reads nothing but
// the index, usually one cache line; the hash bits also give a slot's
// home, so a deletion shifts the later slots of its run back without
// reading their entries (no tombstones: probe runs stay as short as the
// load makes them). Unlike a Go map, it allocates nothing per entry and
// never rehashes in place; it is rebuilt only when the ring grows.
//
// Why: with a map from key to position, a change's lookup, insert and the
// deletion of the oldest key took 520-640 ns of CPU a change at 100,000
// entries (BenchmarkRequestIDMemory against the map on this machine); the
// ring and this index take 90-135 ns, about two cache misses (the new
// key's slot, the oldest key's slot); with a client's consecutive ids
// side by side (reqHash), about half a miss: 60-85 ns against 80-105 ns
// alternated in one run (docs/BENCHMARKS.md).
//
// The index's layout is not state: it depends on the ring's size, which
// depends on the Core's history, but nothing observable depends on it
// (snapshots list the entries in ring order).

// minRequestRing is the ring's first size.
const minRequestRing = 64

// maxRequestRing bounds the ring: a ring slot + 1 must fit in 32 bits
// and the index's size in the 32 hash bits a slot keeps.
const maxRequestRing = 1 << 31

// reqBlock is how many consecutive ids of a client have consecutive home
// slots: 4 slots of 8 bytes, half a 64-byte cache line (a block of 8, a
// whole line, made the runs twice as long again for little more).
const reqBlock = 4

// reqHash is the hash of key k: groupindex.go's keyHash of the client and
// the id's block of reqBlock consecutive ids, which mixes both words
// (clients number their ids from 1 up: the low bits of an id alone would
// crowd a few probe runs), with the id's place in its block as the low
// bits. Clients number their changes in order, so a change's key has its
// home in the cache line where the previous change's went (the lookup
// that misses and the insert of every new change), and the oldest
// entry, dropped as it comes, in the line of the one dropped before:
// with keyHash of the whole key, each was a cache miss in an index of
// 2 MB at the default 100,000 entries: a miss for 3 ids of 4 now. The
// blocks of a client, and of different clients, land at random, so probe
// runs stay short, if longer than with random keys (a lookup that misses
// probes about 3 slots, in one or two lines, against 0.8 in one line:
// TestRequestIDIndexConsecutiveIDs). Ids that are not consecutive cost
// what they did, or a little more: ids of a stride of 4, or one id per
// client, have homes in a quarter of the slots (about 1.7 probes).
func reqHash(k reqKey) uint64 {
	return keyHash(wheel.Key{Receiver: k.client, Tid: k.id / reqBlock})&^(reqBlock-1) | k.id%reqBlock
}

// lookup returns the position of live entry k, or false: from k's
// client's window, else from the hash index when it holds any entry. The
// usual case — the client looked up last, no entry in the hash index —
// is written out first, without a call.
func (r *requestIDs) lookup(k reqKey) (pos uint64, ok bool) {
	if r.lastSlot != 0 && r.lastClient == k.client && r.hashed == 0 {
		if v := r.clients[r.lastSlot-1].find(k.id); v != 0 {
			return r.first + (uint64(v-1)-r.first)&uint64(len(r.ring)-1), true
		}
		return 0, false
	}
	return r.lookupAny(k)
}

// lookupAny is lookup's general case.
func (r *requestIDs) lookupAny(k reqKey) (pos uint64, ok bool) {
	if r.live == 0 {
		return 0, false
	}
	if s, ok := r.clientSlot(k.client, false); ok {
		if v := r.clients[s].find(k.id); v != 0 {
			return r.first + (uint64(v-1)-r.first)&uint64(len(r.ring)-1), true
		}
	}
	if r.hashed == 0 {
		return 0, false
	}
	return r.hashLookup(k)
}

// hashLookup returns the position of live entry k from the hash index,
// or false.
func (r *requestIDs) hashLookup(k reqKey) (pos uint64, ok bool) {
	mask := uint64(len(r.slots) - 1)
	h := reqHash(k)
	tag := h & 0xffffffff
	for p := h & mask; ; p = (p + 1) & mask {
		s := r.slots[p]
		if s == 0 {
			return 0, false
		}
		if s>>32 != tag {
			continue
		}
		i := uint64(uint32(s) - 1)
		if r.ring[i].key == k {
			return r.first + (i-r.first)&uint64(len(r.ring)-1), true
		}
	}
}

// index adds the entry of key k at ring slot i (k is not in the index):
// to k's client's window when it fits there (a new window for a client
// with none), else to the hash index; the entry's win says which.
func (r *requestIDs) index(k reqKey, i uint32) {
	e := &r.ring[i]
	if r.lastSlot != 0 && r.lastClient == k.client { // the usual case: place's, written out
		c := &r.clients[r.lastSlot-1]
		// (k.id >= c.lo: an id just past 2^64 wraps to one below lo,
		// k.id-c.lo small, yet outside the range, where find misses it.)
		if c.n > 0 && k.id >= c.lo && k.id-c.lo < uint64(len(c.win)) && k.id != ^uint64(0) {
			c.win[k.id&uint64(len(c.win)-1)] = i + 1
			c.hi = max(c.hi, k.id+1)
			c.n++
			e.win = r.lastSlot
			return
		}
	}
	s, _ := r.clientSlot(k.client, true)
	if r.clients[s].place(k.id, i+1) {
		e.win = s + 1
		return
	}
	if r.clients[s].n == 0 { // (made for this entry: only the largest id does not fit an empty window)
		r.freeClient(s)
	}
	e.win = 0
	r.hashInsert(k, i)
}

// hashInsert adds the entry of key k at ring slot i to the hash index (k
// is not in it; it has room: at most half full, once allocated). The
// same scheme as groupIndex, whose slots point into another array.
func (r *requestIDs) hashInsert(k reqKey, i uint32) {
	if r.slots == nil {
		r.slots = make([]uint64, 2*len(r.ring))
	}
	r.hashed++
	h := reqHash(k)
	mask := uint64(len(r.slots) - 1)
	p := h & mask
	for r.slots[p] != 0 {
		p = (p + 1) & mask
	}
	r.slots[p] = h<<32 | uint64(i+1)
}

// hashRemove removes the entry of key k at ring slot i from the hash
// index, then moves each later slot of the probe run that may fill the
// hole back into it (backward-shift deletion).
func (r *requestIDs) hashRemove(k reqKey, i uint32) {
	r.hashed--
	mask := uint64(len(r.slots) - 1)
	want := uint64(i + 1)
	p := reqHash(k) & mask
	for uint64(uint32(r.slots[p])) != want {
		p = (p + 1) & mask
	}
	for q := (p + 1) & mask; ; q = (q + 1) & mask {
		s := r.slots[q]
		if s == 0 {
			break
		}
		// s may move to the hole at p unless its home lies after p,
		// up to q (cyclically): then p is before where it may be.
		if home := (s >> 32) & mask; (q-home)&mask >= (q-p)&mask {
			r.slots[p] = s
			p = q
		}
	}
	r.slots[p] = 0
}

// grow makes room for one more entry in a full ring: the live entries are
// copied, in order, to the front of a ring of the same size when at most
// 3/4 of it would then be used (the dead ones take the rest), else of
// twice the size (the first: minRequestRing), and the index rebuilt
// (windows and hash index made afresh). Positions start again from 0.
// O(entries), once per ring's worth of pushes at least: amortised O(1),
// and no allocation once the ring holds max_request_ids (but for a
// compaction: an expired entry applied again leaves a dead one).
func (r *requestIDs) grow() {
	size := len(r.ring)
	if 4*(r.live+1) > 3*size {
		size = max(minRequestRing, 2*size)
	}
	if uint64(size) > maxRequestRing {
		panic("session: the memory of request ids outgrew 2^31 entries") // (max_request_ids is checked far below)
	}
	old, first, next := r.ring, r.first, r.next
	r.ring = make([]reqEntry, size) // (when compacting, the entries move within it: a copy is simplest, and this is rare)
	r.slots, r.hashed = nil, 0
	r.clients, r.free, r.byClient, r.lastSlot = nil, nil, nil, 0
	r.first, r.next = 0, 0
	for p := first; p < next; p++ {
		e := &old[p&uint64(len(old)-1)]
		if e.dead {
			continue
		}
		r.ring[r.next] = *e
		r.index(e.key, uint32(r.next))
		r.next++
	}
}

// prefetchNext, after the change of key k was remembered and the memory
// trimmed, when the hash index holds any entry (else it does nothing: a
// window's next places are in the line just read; rememberReply does not
// call it then), asks the CPU for the hash index lines the next
// remembered change will most likely read, so that they arrive while the
// rest of this turn and the next request's decoding run: the home of k's
// client's next id when it starts a new block (a client numbers its
// changes in order, so a pipelined client's next change is usually that
// id: its lookup, which misses, and its insert read that line), and the
// home of the oldest entry's key when it starts a new block (the next
// change past max_request_ids drops it: hashRemove). Within a block both
// lines were just read. In a pipelined client's adds these two lines were
// the memory's cache misses, about 90 ns of CPU an add at 100,000 entries
// (docs/BENCHMARKS.md, "The single node's pipelined add against base,
// again"), before the windows. Only a hint: nothing is read or written.
func (r *requestIDs) prefetchNext(k reqKey) {
	if r.hashed == 0 {
		return
	}
	mask := uint64(len(r.slots) - 1)
	if next := k.id + 1; next%reqBlock == 0 {
		prefetch(unsafe.Pointer(&r.slots[reqHash(reqKey{k.client, next})&mask]))
	}
	if e := r.at(r.first); e.key.id%reqBlock == 0 {
		prefetch(unsafe.Pointer(&r.slots[reqHash(e.key)&mask]))
	}
}
