package session

import "github.com/tickwheel/tickwheel/wheel"

// groupIndex finds a grouped timer's member node by its key: an open-
// addressing table probed linearly from the key's hash. Each slot holds
// the low 32 bits of the key's hash above the node number (0: empty), so
// a probe compares hashes in the table and reads a node (a random access
// into a large slab) only for a match, and a deletion finds the home slot
// of the entries it shifts back without reading their nodes. Deletions
// shift back instead of leaving tombstones, so a table that saw a million
// deletions probes as short as a fresh one: a Go map of the same keys
// took about 300 ns a deletion during a large group's cancel. It holds at
// most 3/4 of its slots, 8 bytes each: 10.7 to 21.3 bytes a member.
// Owned by the event loop, through groupTable.
type groupIndex struct {
	table []uint64 // hash<<32 | node
	mask  uint64   // len(table)-1, below 2^32
	count int
}

// keyHash mixes a key's two words (the finalizer of splitmix64).
func keyHash(k wheel.Key) uint64 {
	h := k.Receiver*0x9E3779B97F4A7C15 ^ k.Tid
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	return h ^ h>>31
}

// find returns the slot of key k and its node (0 when k is not there: the
// slot is then where it would go).
func (x *groupIndex) find(nodes []groupMember, k wheel.Key) (pos uint64, i uint32) {
	if x.count == 0 {
		return 0, 0
	}
	h := keyHash(k) & 0xFFFFFFFF
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		e := x.table[p]
		if e == 0 {
			return p, 0
		}
		if e>>32 == h && nodes[uint32(e)].key == k {
			return p, uint32(e)
		}
	}
}

// insert adds node i, whose key is not in the table.
func (x *groupIndex) insert(nodes []groupMember, i uint32) {
	if (x.count+1)*4 > len(x.table)*3 {
		x.grow(nodes)
	}
	h := keyHash(nodes[i].key) & 0xFFFFFFFF
	p := h & x.mask
	for x.table[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.table[p] = h<<32 | uint64(i)
	x.count++
}

// grow doubles the table (16 slots at first) and places every entry again.
func (x *groupIndex) grow(nodes []groupMember) {
	old := x.table
	x.table = make([]uint64, max(16, 2*len(old)))
	x.mask = uint64(len(x.table) - 1)
	for _, e := range old {
		if e != 0 {
			p := e >> 32 & x.mask
			for x.table[p] != 0 {
				p = (p + 1) & x.mask
			}
			x.table[p] = e
		}
	}
}

// deleteAt empties slot pos and moves back the entries after it that
// would no longer be found past the hole.
func (x *groupIndex) deleteAt(nodes []groupMember, pos uint64) {
	i := pos
	for j := (pos + 1) & x.mask; x.table[j] != 0; j = (j + 1) & x.mask {
		home := x.table[j] >> 32 & x.mask
		// The entry at j stays when its home is cyclically in (i, j].
		if (i <= j && i < home && home <= j) || (i > j && (i < home || home <= j)) {
			continue
		}
		x.table[i] = x.table[j]
		i = j
	}
	x.table[i] = 0
	x.count--
	if x.count == 0 {
		*x = groupIndex{} // the last member: give the memory back
	}
}
