package wheel

// recvList is the list of one receiver's timers, newest first.
type recvList struct {
	head  uint32
	count uint32
}

type recvEntry struct {
	key uint64
	recvList
}

// recvTable maps a receiver to its timer list with open addressing and linear
// probing; an entry with count 0 is empty. It is a few times faster than a Go
// map on the add and cancel paths, which touch it every time.
type recvTable struct {
	table []recvEntry
	mask  uint64
	count int
}

func recvHash(r uint64) uint64 {
	h := r * 0x9E3779B97F4A7C15
	return h ^ h>>29
}

func (t *recvTable) pos(r uint64) uint64 {
	p := recvHash(r) & t.mask
	for t.table[p].count != 0 && t.table[p].key != r {
		p = (p + 1) & t.mask
	}
	return p
}

// get returns r's list; ok is false when r has no timers.
func (t *recvTable) get(r uint64) (l recvList, ok bool) {
	if t.count == 0 {
		return recvList{}, false
	}
	e := &t.table[t.pos(r)]
	return e.recvList, e.count != 0
}

// ref returns r's list for update, an empty one (count 0) when r has no
// timers; the caller must then set count to at least 1. The pointer is valid
// until the next ref or delete.
func (t *recvTable) ref(r uint64) *recvList {
	if uint64(t.count+1)*4 > uint64(len(t.table))*3 {
		t.resize(max(2*len(t.table), 16))
	}
	p := t.pos(r)
	e := &t.table[p]
	if e.count == 0 {
		e.key = r
		t.count++
	}
	return &e.recvList
}

// entry returns r's list, which must exist, for update. The pointer is valid
// until the next ref or delete.
func (t *recvTable) entry(r uint64) *recvList {
	return &t.table[t.pos(r)].recvList
}

// delete removes r, which must be present, shifting the later entries of its
// probe run back into the gap. (Unlike the timer index, which leaves
// tombstones, each entry here holds its key, so the shift reads nothing more.)
func (t *recvTable) delete(r uint64) {
	p := t.pos(r)
	t.count--
	for q := (p + 1) & t.mask; t.table[q].count != 0; q = (q + 1) & t.mask {
		home := recvHash(t.table[q].key) & t.mask
		if (q-home)&t.mask >= (q-p)&t.mask {
			t.table[p] = t.table[q]
			p = q
		}
	}
	t.table[p] = recvEntry{}
}

func (t *recvTable) resize(size int) {
	old := t.table
	t.table = make([]recvEntry, size)
	t.mask = uint64(size - 1)
	for _, e := range old {
		if e.count != 0 {
			p := recvHash(e.key) & t.mask
			for t.table[p].count != 0 {
				p = (p + 1) & t.mask
			}
			t.table[p] = e
		}
	}
}
