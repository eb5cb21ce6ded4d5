package wheel

// index maps a Key to its node with open addressing and linear probing. Each
// entry is just the node index (0 = empty; no timer has index 0, a sentinel
// does), the key itself is read from the node. At most 3/4 full, so it costs
// 5.3–10.7 bytes per timer, against ~40 for a Go map of Key to uint32.
type index struct {
	table []uint32
	mask  uint64
	count uint32
	nodes *slab
}

const minIndexSize = 64

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
	if uint64(x.count+1)*4 > uint64(len(x.table))*3 {
		x.resize(len(x.table) * 2)
	}
}

// lookup returns k's position and node index, or, when k is absent, the empty
// position where it would go and 0.
func (x *index) lookup(k Key) (pos uint64, i uint32) {
	for p := hash(k) & x.mask; ; p = (p + 1) & x.mask {
		i := x.table[p]
		if i == 0 {
			return p, 0
		}
		if n := x.nodes.at(i); n.receiver == k.Receiver && n.tid == k.Tid {
			return p, i
		}
	}
}

// insertAt stores node i at the empty position pos returned by lookup.
func (x *index) insertAt(pos uint64, i uint32) {
	x.table[pos] = i
	x.count++
}

// deleteAt empties position pos, closing the gap by shifting later entries of
// the probe run back (no tombstones).
func (x *index) deleteAt(p uint64) {
	x.count--
	for q := (p + 1) & x.mask; ; q = (q + 1) & x.mask {
		i := x.table[q]
		if i == 0 {
			break
		}
		n := x.nodes.at(i)
		home := hash(Key{n.receiver, n.tid}) & x.mask
		// Move entry q into the hole at p unless its home lies cyclically in (p, q].
		if (q-home)&x.mask >= (q-p)&x.mask {
			x.table[p] = i
			p = q
		}
	}
	x.table[p] = 0
}

func (x *index) resize(size int) {
	old := x.table
	x.table = make([]uint32, size)
	x.mask = uint64(size - 1)
	for _, i := range old {
		if i == 0 {
			continue
		}
		n := x.nodes.at(i)
		p := hash(Key{n.receiver, n.tid}) & x.mask
		for x.table[p] != 0 {
			p = (p + 1) & x.mask
		}
		x.table[p] = i
	}
}

// find returns the node index of k, or 0 when absent.
func (x *index) find(k Key) uint32 {
	_, i := x.lookup(k)
	return i
}
