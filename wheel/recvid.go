package wheel

import (
	"encoding/binary"
	"fmt"
)

// Receivers by id (snapshot version 6).
//
// A record's receiver is written whole the first time the snapshot meets
// it, which gives it the next id (0, 1, ...), and by its id after that
// (see SnapshotVersion). Game receivers are 64-bit ids, a 6 to 10 byte
// varint each; an id of fewer than 16,384 receivers is 2 bytes. And the
// restore's index builder links each timer into its receiver's list
// (restorerecv.go) through a slice by id, where it took a look-up in the
// receiver table for each timer: at 100M timers of 10,000 receivers that
// look-up was 2.3 s of the builder's ~8.8 s of CPU, a cache miss each
// (the table is 256 KiB, the builder's streams of nodes and buckets keep
// it out of the core's cache), the slice is 80 KiB and read in the order
// the ids were given.
//
// At most recvIDMax ids are given in one snapshot: the encoder's table of
// them and the restore's slices stay bounded (32, 8 and 8 MiB at most). A
// receiver met after that is written whole each time, and the builder
// finds its list in the receiver table, as in version 5.

// recvIDMax is how many receivers a snapshot gives ids to, at most (a
// variable for the tests, which lower it; a snapshot is read with the
// value it was written with).
var recvIDMax = 1 << 20

// appendReceiver appends the receiver field of a record of receiver r:
// its id plus 1, or 0 and r whole, r then given the next id while fewer
// than recvIDMax are given. In digest mode (the record hashed on its own)
// r is written whole, without the 0, as in version 5: a record's hash
// does not depend on the ones before it.
func (e *encoder) appendReceiver(dst []byte, r uint64) []byte {
	if e.sum != nil {
		return binary.AppendUvarint(dst, r)
	}
	if l, ok := e.ids.get(r); ok {
		return binary.AppendUvarint(dst, uint64(l.head)+1)
	}
	if int(e.nextID) < recvIDMax {
		*e.ids.ref(r) = recvList{head: e.nextID, count: 1}
		e.nextID++
	}
	return binary.AppendUvarint(append(dst, 0), r)
}

// prevRecord is what a record of version 3 or later is read relative to:
// the previous record's receiver, its id (nilIdx: none) and seq, and the
// receivers the ids given so far stand for (version 6).
type prevRecord struct {
	recv uint64
	id   uint32
	seq  uint32
	ids  []uint64
}

// receiver reads the rest of a version 6 receiver field whose first varint
// v was read before b[off:]: it returns the receiver and the offset after
// the field, or a negative offset (varShort or varBad) for the whole
// receiver's varint, or an error for an id not given yet. It sets t.id
// and t.whole (the id is then giveID's).
func (p *prevRecord) receiver(b []byte, off int, v uint64, t *snapTimer) (uint64, int, error) {
	if v == 0 {
		t.id, t.whole = nilIdx, true
		v, off = getUvarint(b, off)
		return v, off, nil
	}
	if v-1 >= uint64(len(p.ids)) {
		return 0, 0, errRecord("receiver id %d, of %d given", v-1, len(p.ids))
	}
	t.id = uint32(v - 1)
	return p.ids[v-1], off, nil
}

// giveID gives the receiver of t, a record read whole, the next id, while
// fewer than recvIDMax are given: called once the record is read.
func (p *prevRecord) giveID(t *snapTimer) {
	if t.whole && len(p.ids) < recvIDMax {
		t.id = uint32(len(p.ids))
		p.ids = append(p.ids, t.key.Receiver)
	}
}

// listOf returns the list of node n's receiver for update: by the id the
// Restorer left in n.rprev, or from the receiver table for a receiver
// without one. Ids come in the order they were given (the nodes are in
// the records' order), so the slice grows by one at a time.
func (b *IndexBuilder) listOf(n *node) *recvList {
	id := n.rprev
	if id == nilIdx {
		return b.recv.ref(n.receiver)
	}
	for int(id) >= len(b.heads) {
		b.heads = append(b.heads, recvList{})
	}
	return &b.heads[id]
}

// takeHeads puts the lists of the receivers with an id in the receiver
// table, once every timer is linked. A receiver with a list there already
// (given two ids, or written without one past recvIDMax as well, by a
// snapshot the encoder did not write) is an error: its timers would be
// in two lists.
func (b *IndexBuilder) takeHeads() error {
	heads, blocks := b.heads, b.blocks
	b.heads = nil
	for _, l := range heads {
		if l.count == 0 {
			continue // an id of no timer: the builder links none past dup
		}
		r := frozenGet(blocks, l.head).receiver
		e := b.recv.ref(r)
		if e.count != 0 {
			return fmt.Errorf("%w: receiver %d has two ids", ErrSnapshot, r)
		}
		*e = l
	}
	return nil
}
