package client

// keptRing holds the events handed to the user and not known acknowledged,
// oldest first: a fingerprint of each (tid, tick, fired), with their seqs
// consecutive from first (acknowledged mode numbers a receiver's events
// without gaps; a jump forward, which a bind makes only when nothing is
// pending, empties the ring first). At most maxKept are held. The ring's
// size is a power of two that doubles as it fills and shrinks when mostly
// empty, so keeping an event and forgetting acknowledged ones copies
// nothing in the steady state (the acks of a fast stream are confirmed
// late, behind the events queued before their replies, so the ring stays
// well filled while the stream lasts).
type keptRing struct {
	fp      []uint64
	head, n int
	first   uint64 // seq of the oldest
}

// fingerprint identifies a delivered event beyond its seq, so that a new
// event with the same seq (a server that lost its state) is not taken for a
// redelivery.
func fingerprint(tid, tick, fired uint64) uint64 {
	h := tid*0x9E3779B97F4A7C15 ^ tick*0xC2B2AE3D27D4EB4F ^ fired*0x165667B19E3779F9
	return h ^ h>>29
}

// at returns the slot of the i-th kept event, 0 being the oldest.
func (k *keptRing) at(i int) *uint64 { return &k.fp[(k.head+i)&(len(k.fp)-1)] }

// push keeps event seq, forgetting the oldest when maxKept are kept, or
// all of them when seq does not follow the newest.
func (k *keptRing) push(seq, fp uint64) {
	switch {
	case k.n == 0:
		k.first = seq
	case seq != k.first+uint64(k.n):
		k.head, k.n, k.first = 0, 0, seq
	case k.n == maxKept:
		k.head = (k.head + 1) & (len(k.fp) - 1)
		k.n--
		k.first++
	}
	if k.n == len(k.fp) {
		k.resize(min(max(2*len(k.fp), 64), maxKept))
	}
	*k.at(k.n) = fp
	k.n++
}

// resize moves the kept events to a ring of size slots.
func (k *keptRing) resize(size int) {
	fp := make([]uint64, size)
	for i := range k.n {
		fp[i] = *k.at(i)
	}
	k.fp, k.head = fp, 0
}

// trim forgets the kept events with seq <= seq.
func (k *keptRing) trim(seq uint64) {
	if k.n == 0 || seq < k.first {
		return
	}
	i := int(min(seq-k.first+1, uint64(k.n)))
	k.head = (k.head + i) & (len(k.fp) - 1)
	k.n -= i
	k.first += uint64(i)
	if k.n == 0 {
		*k = keptRing{}
	} else if len(k.fp) > 1024 && k.n < len(k.fp)/16 { // (not at once: acks are confirmed in bursts)
		k.resize(len(k.fp) / 4)
	}
}

// find returns the fingerprint of the kept event seq, if any.
func (k *keptRing) find(seq uint64) (uint64, bool) {
	if k.n == 0 || seq < k.first || seq-k.first >= uint64(k.n) {
		return 0, false
	}
	return *k.at(int(seq - k.first)), true
}
