package wheel

import "unsafe"

// index maps a Key to its node with open addressing and linear probing. Each
// entry is the node index (below 2^28) with 4 bits of the key's hash on top,
// so a probe reads the node only on a likely match; 0 is empty (no timer has
// index 0, a sentinel does). The key itself lives in the node. At most 3/4
// full, the index costs 5.3–10.7 bytes per timer, against ~40 for a Go map
// (5/8 took 6.4–12.8: 10.7 at 100M timers, past a budget of 64 bytes per
// timer with the 56-byte node; a miss then probes about 8 entries, half a
// cache line, where 5/8 probed 4).
//
// A deletion leaves a tombstone, unless it ends its probe run, so it reads
// nothing but its own entry: a backward-shift deletion would read the node of
// every later entry of the run to find its home, a cache miss each in a big
// index (firing a burst of 1M one-shot timers spent a fifth of its time
// there). Tombstones count toward the 3/4 and are reused by insertions; when
// they fill it, the table is rebuilt without them, at the same size unless
// the live entries need more.
type index struct {
	table []uint32
	mask  uint64
	count uint32 // live entries
	tombs uint32 // tombstones
	nodes *slab
}

const (
	minIndexSize = 64
	tagShift     = 28 // entry = tag<<tagShift | node index
	idxMask      = 1<<tagShift - 1
	// tomb marks a deleted entry. Node 1 is a sentinel, never a timer, so no
	// live entry has this value.
	tomb = 1
	// noPos is no position.
	noPos = ^uint64(0)
)

// tag returns the 4 hash bits stored in an entry, taken from bits the table
// position does not use.
func tag(h uint64) uint32 { return uint32(h>>60) << tagShift }

func (x *index) init(nodes *slab) {
	x.nodes = nodes
	x.table = make([]uint32, minIndexSize)
	x.mask = minIndexSize - 1
}

// hash mixes both halves of the key (a variant of the wyhash/murmur finaliser).
func hash(k Key) uint64 {
	h := k.Receiver*0x9E3779B97F4A7C15 ^ (k.Tid+0x632BE59BD9B4E019)*0xBF58476D1CE4E5B9
	h ^= h >> 31
	h *= 0x94D049BB133111EB
	h ^= h >> 29
	return h
}

// reserve makes room for one more entry, so that a position returned by
// lookup stays valid for insertAt: live entries and tombstones together stay
// at most 3/4 of the table, so every probe run ends at an empty entry.
func (x *index) reserve() {
	size := uint64(len(x.table))
	if uint64(x.count+x.tombs+1)*4 <= size*3 {
		return
	}
	if uint64(x.count+1)*8 > size*3 { // live entries above half the limit: grow
		size *= 2
	}
	x.resize(int(size))
}

// lookup returns k's position and node index, or, when k is absent, the
// position where it would go (the first tombstone or the empty entry that
// ends its probe run) and 0.
func (x *index) lookup(k Key) (pos uint64, i uint32) {
	return x.lookupHash(k, hash(k))
}

// lookupHash is lookup with h == hash(k) already computed.
func (x *index) lookupHash(k Key, h uint64) (pos uint64, i uint32) {
	t := tag(h)
	free := noPos
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		e := x.table[p]
		if e == 0 {
			if free != noPos {
				return free, 0
			}
			return p, 0
		}
		if e == tomb {
			if free == noPos {
				free = p
			}
			continue
		}
		if e&^idxMask != t {
			continue
		}
		if n := x.nodes.get(e & idxMask); n.receiver == k.Receiver && n.tid == k.Tid {
			return p, e & idxMask
		}
	}
}

// insertAt stores node i, whose key hashes to h, at the position pos
// returned by lookup for an absent key.
func (x *index) insertAt(pos, h uint64, i uint32) {
	if x.table[pos] == tomb {
		x.tombs--
	}
	x.table[pos] = tag(h) | i
	x.count++
}

// deleteAt removes the entry at position p: a tombstone, or, when p ends
// its probe run, empty, together with the tombstones just before it (no
// probe needs to pass them any more).
func (x *index) deleteAt(p uint64) {
	x.count--
	if x.table[(p+1)&x.mask] != 0 {
		x.table[p] = tomb
		x.tombs++
		return
	}
	x.table[p] = 0
	for q := (p - 1) & x.mask; x.table[q] == tomb; q = (q - 1) & x.mask {
		x.table[q] = 0
		x.tombs--
	}
}

// resize rebuilds the table at size entries, without tombstones. It reads
// each timer's key from its node: in slab order when the slab is mostly
// live timers, a sequential scan, rather than in table order, a cache miss
// per entry in a big table.
func (x *index) resize(size int) {
	old := x.table
	x.table = make([]uint32, size)
	x.mask = uint64(size - 1)
	x.tombs = 0
	s := x.nodes
	if used := s.n - s.nsent; used <= 2*x.count {
		for i := s.nsent; i < s.n; i++ {
			if n := s.get(i); n.wprev != markFree {
				x.put(n, i)
			}
		}
		return
	}
	for _, e := range old {
		if e != 0 && e != tomb {
			x.put(s.get(e&idxMask), e&idxMask)
		}
	}
}

// put stores node i, whose key is absent, in the first empty entry of its
// probe run (resize: the table has no tombstones).
func (x *index) put(n *node, i uint32) {
	h := hash(Key{n.receiver, n.tid})
	p := h & x.mask
	for x.table[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.table[p] = tag(h) | i
}

// find returns the node index of k, or 0 when absent.
func (x *index) find(k Key) uint32 {
	_, i := x.lookup(k)
	return i
}

// build indexes the nodes nsent..n-1 of the slab, all live timers without
// an index entry (a wheel being restored), in a table of at most 3/8 load,
// where a wheel that grew to that many timers has between 3/8 and 3/4:
// the wheel can then double before it resizes its index. It reports false
// when two of the timers have the same key. The entries are read in slab
// order and each one's table entry is prefetched some nodes ahead, so that
// the cache misses of a large table overlap.
func (x *index) build() bool {
	s := x.nodes
	count := s.n - s.nsent
	size := uint64(minIndexSize)
	for uint64(count)*8 > size*3 {
		size *= 2
	}
	x.table, x.mask = make([]uint32, size), size-1
	x.count, x.tombs = count, 0
	const ahead = 16
	var hs [ahead]uint64 // hashes of the nodes ahead, by index mod ahead
	keyHash := func(i uint32) uint64 {
		n := s.get(i)
		h := hash(Key{n.receiver, n.tid})
		prefetch(unsafe.Pointer(&x.table[h&x.mask]))
		return h
	}
	for i := s.nsent; i < s.n && i < s.nsent+ahead; i++ {
		hs[i%ahead] = keyHash(i)
	}
	for i := s.nsent; i < s.n; i++ {
		h := hs[i%ahead]
		if j := i + ahead; j < s.n {
			hs[j%ahead] = keyHash(j)
		}
		n, t := s.get(i), tag(h)
		p := h & x.mask
		for e := x.table[p]; e != 0; e = x.table[p] {
			if e&^idxMask == t {
				if m := s.get(e & idxMask); m.receiver == n.receiver && m.tid == n.tid {
					return false
				}
			}
			p = (p + 1) & x.mask
		}
		x.table[p] = t | i
	}
	return true
}
