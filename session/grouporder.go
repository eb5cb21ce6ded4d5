package session

import (
	"math/bits"
	"slices"

	"github.com/tickwheel/tickwheel/wheel"
)

// orderBlock is the most keys a block of a groupOrder holds (8 KiB).
const orderBlock = 512

// groupOrder is a large group's member keys in (receiver, tid) order, so
// that a list_group page costs O(log m + page) for m members instead of a
// walk of the group (issue 24 item 12 for groups). It is a sorted list of
// sorted blocks: every key of blocks[i] is below every key of
// blocks[i+1], and mins[i] is blocks[i][0]. A block holds 1 to orderBlock
// keys; a full one splits in two (or, when the new key goes past its end,
// the key goes first in the next block, or starts a block of its own when
// that one is full too, so that keys added in ascending order fill their
// blocks), and one left with fewer than orderBlock/4 keys merges
// with a neighbour when both fit in 3/4 of a block.
//
// Costs, for m keys: an insert or a removal O(log m + orderBlock) (two
// binary searches and a move of at most one block's keys; a removal moves
// the keys on the shorter side, so removals from either end of a block, as
// a group's cancel in key order makes, move none), plus O(m /
// orderBlock) for the block list on a split or a merge, which happens once
// per orderBlock/4 or more changes; a page O(log m + its keys). Memory: 16
// to 64 bytes a key (a block's 8 KiB over its 128 to 512 keys; keys added
// in ascending order fill blocks, random ones leave them about 3/4 full).
// Blocks hold no pointers, so the GC does not scan the keys.
//
// It is no state: it is made from the group's members and kept with them
// (groupTable.join and leave), never written to a snapshot, and changes
// only what a page costs. Owned by the event loop, through groupTable.
type groupOrder struct {
	blocks [][]wheel.Key
	mins   []wheel.Key
	count  int
}

// newGroupOrder returns the order of keys, which it sorts; keys must be
// distinct. It keeps no reference to keys.
func newGroupOrder(keys []wheel.Key) *groupOrder {
	slices.SortFunc(keys, keyCmp)
	o := &groupOrder{count: len(keys)}
	for len(keys) > 0 {
		n := min(len(keys), orderBlock*3/4)
		b := make([]wheel.Key, n, orderBlock)
		copy(b, keys)
		o.blocks = append(o.blocks, b)
		o.mins = append(o.mins, b[0])
		keys = keys[n:]
	}
	return o
}

// blockOf returns the block where key k is or would go: the last whose
// least key is at most k, or 0 when k is below all of them.
func (o *groupOrder) blockOf(k wheel.Key) int {
	i, _ := searchKeys(o.mins, k) // the first min >= k
	if i < len(o.mins) && o.mins[i] == k {
		return i
	}
	return max(i-1, 0)
}

// insert adds key k, which must not be in o.
func (o *groupOrder) insert(k wheel.Key) {
	o.count++
	if len(o.blocks) == 0 {
		b := make([]wheel.Key, 1, orderBlock)
		b[0] = k
		o.blocks, o.mins = [][]wheel.Key{b}, []wheel.Key{k}
		return
	}
	bi := o.blockOf(k)
	b := o.blocks[bi]
	at, _ := searchKeys(b, k)
	if len(b) == orderBlock {
		if at == len(b) && bi+1 < len(o.blocks) && len(o.blocks[bi+1]) < orderBlock {
			// Past the block's end: first in the next one.
			o.blocks[bi+1] = slices.Insert(room(o.blocks[bi+1]), 0, k)
			o.mins[bi+1] = k
			return
		}
		if at == len(b) { // past the block's end, the next one full: a block of its own
			nb := make([]wheel.Key, 1, orderBlock)
			nb[0] = k
			o.blocks = slices.Insert(o.blocks, bi+1, nb)
			o.mins = slices.Insert(o.mins, bi+1, k)
			return
		}
		half := orderBlock / 2
		nb := make([]wheel.Key, orderBlock-half, orderBlock)
		copy(nb, b[half:])
		clear(b[half:])
		b = b[:half]
		o.blocks[bi] = b
		o.blocks = slices.Insert(o.blocks, bi+1, nb)
		o.mins = slices.Insert(o.mins, bi+1, nb[0])
		if at > half {
			bi, b, at = bi+1, nb, at-half
		}
	}
	o.blocks[bi] = slices.Insert(room(b), at, k)
	o.mins[bi] = o.blocks[bi][0]
}

// room returns block b, of fewer than orderBlock keys, with room for one
// more: in a new array of orderBlock when b's is used up (removals from a
// block's front move its start up its array).
func room(b []wheel.Key) []wheel.Key {
	if len(b) < cap(b) {
		return b
	}
	nb := make([]wheel.Key, len(b), orderBlock)
	copy(nb, b)
	return nb
}

// remove takes key k out of o and reports whether it was there.
func (o *groupOrder) remove(k wheel.Key) bool {
	if len(o.blocks) == 0 {
		return false
	}
	bi := o.blockOf(k)
	b := o.blocks[bi]
	at, found := searchKeys(b, k)
	if !found {
		return false
	}
	o.count--
	if at < len(b)/2 { // move the keys before it up: the block starts one later
		copy(b[1:at+1], b[:at])
		b = b[1:]
	} else {
		b = slices.Delete(b, at, at+1)
	}
	o.blocks[bi] = b
	switch {
	case len(b) == 0:
		o.blocks = slices.Delete(o.blocks, bi, bi+1)
		o.mins = slices.Delete(o.mins, bi, bi+1)
	case len(b) < orderBlock/4:
		o.mins[bi] = b[0]
		o.mergeSmall(bi)
	default:
		o.mins[bi] = b[0]
	}
	return true
}

// mergeSmall merges block bi with its left or right neighbour when the two
// fit in 3/4 of a block.
func (o *groupOrder) mergeSmall(bi int) {
	for _, left := range [2]int{bi - 1, bi} {
		if left < 0 || left+1 >= len(o.blocks) {
			continue
		}
		a, b := o.blocks[left], o.blocks[left+1]
		if len(a)+len(b) > orderBlock*3/4 {
			continue
		}
		if cap(a) < len(a)+len(b) {
			a = append(make([]wheel.Key, 0, orderBlock), a...)
		}
		o.blocks[left] = append(a, b...)
		o.blocks = slices.Delete(o.blocks, left+1, left+2)
		o.mins = slices.Delete(o.mins, left+1, left+2)
		return
	}
}

// from appends to dst the n smallest keys of o that are at least k, in
// order (all of them when fewer), and returns dst and the work it did: the
// keys appended and the steps of its binary searches.
func (o *groupOrder) from(k wheel.Key, n int, dst []wheel.Key) ([]wheel.Key, int) {
	if len(o.blocks) == 0 || n <= 0 {
		return dst, 1
	}
	bi := o.blockOf(k)
	at, _ := searchKeys(o.blocks[bi], k)
	work := 1 + bits.Len(uint(len(o.blocks))) + bits.Len(orderBlock)
	for ; bi < len(o.blocks) && n > 0; bi, at = bi+1, 0 {
		b := o.blocks[bi][at:]
		b = b[:min(len(b), n)]
		dst = append(dst, b...)
		n -= len(b)
		work += len(b)
	}
	return dst, work
}

// bytes estimates o's memory: its blocks and block lists.
func (o *groupOrder) bytes() uint64 {
	if o == nil {
		return 0
	}
	return uint64(len(o.blocks))*(orderBlock*16+24+16) + 64
}

// searchKeys returns where key k is in sorted keys a, or where it would go,
// and whether it is there: slices.BinarySearchFunc with keyCmp, the
// comparison inlined (a group's cancel makes two searches a timer).
func searchKeys(a []wheel.Key, k wheel.Key) (int, bool) {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e := a[m]; e.Receiver < k.Receiver || (e.Receiver == k.Receiver && e.Tid < k.Tid) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(a) && a[lo] == k
}
