package wheel

// index maps a Key to its node with open addressing and linear probing. Each
// entry is the node index (below 2^28) with 4 bits of the key's hash on top,
// so a probe reads the node only on a likely match; 0 is empty (no timer has
// index 0, a sentinel does). The key itself lives in the node. At most 5/8
// full, the index costs 6.4–12.8 bytes per timer, against ~40 for a Go map.
// (At 3/4 a deletion, which reads the node of every entry it may shift back,
// scanned twice as long a run: firing a burst of 3M one-shot timers took
// 175 ns each instead of 98.)
type index struct {
	table []uint32
	mask  uint64
	count uint32
	nodes *slab
}

const (
	minIndexSize = 64
	tagShift     = 28 // entry = tag<<tagShift | node index
	idxMask      = 1<<tagShift - 1
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
// lookup stays valid for insertAt.
func (x *index) reserve() {
	if uint64(x.count+1)*8 > uint64(len(x.table))*5 {
		x.resize(len(x.table) * 2)
	}
}

// lookup returns k's position and node index, or, when k is absent, the empty
// position where it would go and 0.
func (x *index) lookup(k Key) (pos uint64, i uint32) {
	return x.lookupHash(k, hash(k))
}

// lookupHash is lookup with h == hash(k) already computed.
func (x *index) lookupHash(k Key, h uint64) (pos uint64, i uint32) {
	t := tag(h)
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		e := x.table[p]
		if e == 0 {
			return p, 0
		}
		if e&^idxMask != t {
			continue
		}
		if n := x.nodes.at(e & idxMask); n.receiver == k.Receiver && n.tid == k.Tid {
			return p, e & idxMask
		}
	}
}

// insertAt stores node i, whose key hashes to h, at the empty position pos
// returned by lookup.
func (x *index) insertAt(pos, h uint64, i uint32) {
	x.table[pos] = tag(h) | i
	x.count++
}

// deleteAt empties position pos, closing the gap by shifting later entries of
// the probe run back (no tombstones).
func (x *index) deleteAt(p uint64) {
	x.count--
	for q := (p + 1) & x.mask; ; q = (q + 1) & x.mask {
		e := x.table[q]
		if e == 0 {
			break
		}
		n := x.nodes.at(e & idxMask)
		home := hash(Key{n.receiver, n.tid}) & x.mask
		// Move entry q into the hole at p unless its home lies cyclically in (p, q].
		if (q-home)&x.mask >= (q-p)&x.mask {
			x.table[p] = e
			p = q
		}
	}
	x.table[p] = 0
}

func (x *index) resize(size int) {
	old := x.table
	x.table = make([]uint32, size)
	x.mask = uint64(size - 1)
	for _, e := range old {
		if e == 0 {
			continue
		}
		n := x.nodes.at(e & idxMask)
		p := hash(Key{n.receiver, n.tid}) & x.mask
		for x.table[p] != 0 {
			p = (p + 1) & x.mask
		}
		x.table[p] = e
	}
}

// find returns the node index of k, or 0 when absent.
func (x *index) find(k Key) uint32 {
	_, i := x.lookup(k)
	return i
}
