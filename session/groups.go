package session

import (
	"cmp"
	"slices"

	"github.com/tickwheel/tickwheel/wheel"
)

// groupTable is the groups of timers (issue 27): which group each grouped
// timer is in, each group's members in the order they joined, and which
// receivers and groups are paused (timers added to them start paused).
// Owned by the event loop, through the Core.
//
// It lives apart from the wheel, which knows nothing of groups: a timer
// without a group costs it nothing, a grouped one a member node (32 bytes),
// an index slot (8 bytes at a load of 3/8 to 3/4: 10.7 to 21.3 bytes;
// groupindex.go) and, once it left, 4 bytes of free list: about 48 bytes;
// in a group of groupOrderMin members or more, 16 to 64 bytes more for its
// keys in order (group.ord, grouporder.go), which list_group pages from.
// Members are nodes of one slab, linked per group, so that a bulk
// operation walks a group in a deterministic order from a cursor that a
// removal moves on (see Core.groupRemoved); freed nodes are reused.
//
// The table may hold members whose timer is gone from the wheel only
// between a removal and the hook that forgets it, never across an input:
// every place the Core removes a timer calls forget.
type groupTable struct {
	nodes  []groupMember // index 0 is no node
	free   []uint32
	of     groupIndex // a grouped timer's member node, by key
	groups map[uint64]*group
	// pausedRecv holds the receivers a pause_all paused and no resume_all
	// resumed since: timers added to them start paused. pausedGroups
	// counts the groups marked paused. Both are bounded by max_receivers
	// (Core.roomForMark).
	pausedRecv   map[uint64]struct{}
	pausedGroups int
	// orderMin is the fewest members a group must have to get its keys in
	// order (group.ord): 0 means groupOrderMin. Tests lower it.
	orderMin int
	// ordBytes is the memory of the groups' ordered keys (groupOrder.bytes
	// summed), kept as they change.
	ordBytes uint64
}

// groupOrderMin is the fewest members for which a group keeps its keys in
// (receiver, tid) order for list_group (group.ord); it drops them when
// fewer than a quarter of that are left. A smaller group's page walks its
// members: at most about a thousand, a few microseconds.
const groupOrderMin = 1024

// groupMember is a grouped timer: its key, its group and its neighbours
// in the group's list (0: none).
type groupMember struct {
	key        wheel.Key
	group      uint64
	prev, next uint32
}

// group is one group's record: its members, oldest first, and whether a
// pause_all paused it (timers added to it then start paused). It exists
// while it has members or is paused.
type group struct {
	head, tail uint32
	count      int
	paused     bool
	// recv counts the group's timers per receiver: who a bulk operation
	// on the group touches (see Core.mayTouchGroup).
	recv map[uint64]int
	// ord is the members' keys in (receiver, tid) order while the group
	// is large (see groupOrderMin), else nil: what list_group pages from.
	ord *groupOrder
}

// grouped reports whether any timer is in a group.
func (t *groupTable) grouped() bool { return t.of.count > 0 }

// member returns timer k's member node, 0 when it is in no group.
func (t *groupTable) member(k wheel.Key) uint32 {
	_, i := t.of.find(t.nodes, k)
	return i
}

// groupOf returns the group of timer k, 0 for none.
func (t *groupTable) groupOf(k wheel.Key) uint64 {
	if i := t.member(k); i != 0 {
		return t.nodes[i].group
	}
	return 0
}

// get returns group g's record, nil when it has none.
func (t *groupTable) get(g uint64) *group {
	if t.groups == nil {
		return nil
	}
	return t.groups[g]
}

// ref returns group g's record, making it.
func (t *groupTable) ref(g uint64) *group {
	if t.groups == nil {
		t.groups = make(map[uint64]*group)
	}
	gr := t.groups[g]
	if gr == nil {
		gr = &group{recv: make(map[uint64]int)}
		t.groups[g] = gr
	}
	return gr
}

// join puts timer k, which is in no group, last in group g (non-zero) and
// returns its member node.
func (t *groupTable) join(k wheel.Key, g uint64) uint32 {
	if t.nodes == nil {
		t.nodes = make([]groupMember, 1)
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.nodes = append(t.nodes, groupMember{})
		i = uint32(len(t.nodes) - 1)
	}
	gr := t.ref(g)
	t.nodes[i] = groupMember{key: k, group: g, prev: gr.tail}
	if gr.tail != 0 {
		t.nodes[gr.tail].next = i
	} else {
		gr.head = i
	}
	gr.tail = i
	gr.count++
	gr.recv[k.Receiver]++
	t.of.insert(t.nodes, i)
	before := gr.ord.bytes()
	switch {
	case gr.ord != nil:
		gr.ord.insert(k)
	case gr.count >= t.minOrdered():
		keys := make([]wheel.Key, 0, gr.count)
		for j := gr.head; j != 0; j = t.nodes[j].next {
			keys = append(keys, t.nodes[j].key)
		}
		gr.ord = newGroupOrder(keys)
	}
	t.ordBytes += gr.ord.bytes() - before
	return i
}

// minOrdered is the fewest members for which a group keeps group.ord.
func (t *groupTable) minOrdered() int {
	if t.orderMin > 0 {
		return t.orderMin
	}
	return groupOrderMin
}

// leave takes member node i out of its group and frees it. The group's
// record goes when it is left empty and not paused.
func (t *groupTable) leave(i uint32) {
	m := &t.nodes[i]
	gr := t.groups[m.group]
	if m.prev != 0 {
		t.nodes[m.prev].next = m.next
	} else {
		gr.head = m.next
	}
	if m.next != 0 {
		t.nodes[m.next].prev = m.prev
	} else {
		gr.tail = m.prev
	}
	gr.count--
	if gr.recv[m.key.Receiver]--; gr.recv[m.key.Receiver] == 0 {
		delete(gr.recv, m.key.Receiver)
	}
	pos, _ := t.of.find(t.nodes, m.key)
	t.of.deleteAt(t.nodes, pos)
	if gr.ord != nil {
		before := gr.ord.bytes()
		gr.ord.remove(m.key)
		if gr.count == 0 || gr.count < t.minOrdered()/4 {
			gr.ord = nil
		}
		t.ordBytes -= before - gr.ord.bytes()
	}
	if gr.count == 0 && !gr.paused {
		delete(t.groups, m.group)
	}
	*m = groupMember{}
	t.free = append(t.free, i)
	if t.of.count == 0 { // the last grouped timer: give the memory back
		t.nodes, t.free = nil, nil
	}
}

// setPaused marks group g paused or not; an unpaused group without
// members is forgotten.
func (t *groupTable) setPaused(g uint64, on bool) {
	if on {
		if gr := t.ref(g); !gr.paused {
			gr.paused = true
			t.pausedGroups++
		}
		return
	}
	if gr := t.get(g); gr != nil && gr.paused {
		gr.paused = false
		t.pausedGroups--
		if gr.count == 0 {
			delete(t.groups, g)
		}
	}
}

// setRecvPaused marks receiver r paused (its new timers start paused) or not.
func (t *groupTable) setRecvPaused(r uint64, on bool) {
	switch {
	case on && t.pausedRecv == nil:
		t.pausedRecv = map[uint64]struct{}{r: {}}
	case on:
		t.pausedRecv[r] = struct{}{}
	default:
		delete(t.pausedRecv, r)
	}
}

// startsPaused reports whether a timer added to receiver r in group g
// (0: none) starts paused.
func (t *groupTable) startsPaused(r, g uint64) bool {
	if _, ok := t.pausedRecv[r]; ok {
		return true
	}
	gr := t.get(g)
	return g != 0 && gr != nil && gr.paused
}

// keysFrom appends to dst the keys of group gr's members that are at least
// from in (receiver, tid) order, the n smallest of them (all when fewer),
// sorted, and returns dst and the work it did (the keys it looked at). A
// large group's page comes from its ordered keys: O(log m + n) for m
// members. A small one's (gr.ord nil) walks the group: O(m + n log n).
func (t *groupTable) keysFrom(gr *group, from wheel.Key, n int, dst []wheel.Key) ([]wheel.Key, int) {
	if gr.ord != nil {
		return gr.ord.from(from, n, dst)
	}
	start := len(dst)
	for i := gr.head; i != 0; i = t.nodes[i].next {
		k := t.nodes[i].key
		if keyCmp(k, from) < 0 {
			continue
		}
		dst = append(dst, k)
		if len(dst)-start == 2*n { // keep the n smallest: linear per n dropped
			slices.SortFunc(dst[start:], keyCmp)
			dst = dst[:start+n]
		}
	}
	slices.SortFunc(dst[start:], keyCmp)
	if len(dst)-start > n {
		dst = dst[:start+n]
	}
	return dst, gr.count
}

// keyCmp orders keys by receiver, then tid.
func keyCmp(a, b wheel.Key) int {
	if c := cmp.Compare(a.Receiver, b.Receiver); c != 0 {
		return c
	}
	return cmp.Compare(a.Tid, b.Tid)
}

// groupBytes estimates the table's memory: its member nodes, its free
// list, its index, its group records and the large groups' ordered keys.
func (t *groupTable) groupBytes() uint64 {
	return uint64(cap(t.nodes))*32 + uint64(cap(t.free))*4 + uint64(len(t.of.table))*8 + uint64(len(t.groups))*96 + uint64(len(t.pausedRecv))*16 + t.ordBytes
}
