package session

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// appendGroups appends the groups section from the live table, at once
// (a stopped world); Core.Snapshot instead takes a groupsSnap on the loop
// and writes the same bytes from it on the encoder's goroutine.
func (c *Core) appendGroups(e *encoder) {
	c.groupsSnap(true).appendGroups(e)
	c.appendGroupsTail(e)
}

// groupsSnap is the groups' part of a snapshot as Core.Snapshot takes it
// on the loop: a copy of the member nodes (one memcpy of the slab) and of
// the groups' heads, counts and paused marks, unsorted. It aliases
// nothing the loop changes afterwards, so that appendGroups can run on
// any goroutine while the Core goes on; the members, the bulk of the
// section (about 4 bytes per grouped timer), are encoded there.
type groupsSnap struct {
	nodes []groupMember // a copy of groupTable.nodes
	heads []groupHead   // the groups, in map order
}

// groupHead is one group's record as a snapshot needs it.
type groupHead struct {
	id     uint64
	head   uint32
	count  int
	paused bool
}

// groupsSnap copies what appendGroups reads of the groups' table, on the
// loop. With share, the nodes are the live table's, not a copy: for a
// section encoded at once, before the loop changes anything.
func (c *Core) groupsSnap(share bool) *groupsSnap {
	t := &c.groups
	g := &groupsSnap{nodes: t.nodes, heads: make([]groupHead, 0, len(t.groups))}
	if !share {
		g.nodes = slices.Clone(t.nodes)
	}
	for id, gr := range t.groups {
		g.heads = append(g.heads, groupHead{id: id, head: gr.head, count: gr.count, paused: gr.paused})
	}
	return g
}

// appendGroups appends the groups section (snapshot version 10), from
// the copy, up to the paused receivers (appendGroupsTail writes the rest):
// the groups in id order, each with its paused mark and its members
// (receiver, tid) in the group's order; then the paused receivers in id
// order; and the bulk operations in progress, oldest first, each with its
// session (0: closed), request id, op, receiver, group, then for a
// group's operation the keys of its cursor and end (or none when done),
// for a receiver's its next tid, whether it is done and the tids it skips
// in order; and the count so far, then (version 12) the client id of its
// pending request id (0: none). Member nodes are not written: positions
// are keys, so the bytes depend only on the state. Any goroutine may call
// it, once.
func (g *groupsSnap) appendGroups(e *encoder) {
	slices.SortFunc(g.heads, func(a, b groupHead) int { return cmp.Compare(a.id, b.id) })
	e.int(len(g.heads))
	for _, h := range g.heads {
		e.uv(h.id)
		e.bool(h.paused)
		e.int(h.count)
		for i := h.head; i != 0; i = g.nodes[i].next {
			e.uv(g.nodes[i].key.Receiver)
			e.uv(g.nodes[i].key.Tid)
		}
	}
}

// appendGroupsTail appends the rest of the groups section (see
// groupsSnap.appendGroups): the paused receivers and the bulk operations, which are
// few (bounded by max_receivers and the sessions' requests), so
// Core.Snapshot encodes them on the loop.
func (c *Core) appendGroupsTail(e *encoder) {
	t := &c.groups
	recv := sortedKeys(t.pausedRecv)
	e.int(len(recv))
	for _, r := range recv {
		e.uv(r)
	}
	e.int(len(c.bulk))
	for _, op := range c.bulk {
		e.uv(sid(op.s))
		e.uv(op.id)
		e.uv(uint64(op.op))
		e.uv(op.receiver)
		e.uv(op.group)
		if op.group != 0 {
			e.bool(op.cur != 0)
			if op.cur != 0 {
				for _, i := range [2]uint32{op.cur, op.end} {
					e.uv(t.nodes[i].key.Receiver)
					e.uv(t.nodes[i].key.Tid)
				}
			}
		} else {
			e.uv(op.from)
			e.bool(op.fin)
			skip := sortedKeys(op.skip)
			e.int(len(skip))
			for _, tid := range skip {
				e.uv(tid)
			}
		}
		e.uv(op.n)
		e.uv(op.client)
	}
}

// restoreGroups reads the groups section (see groupsSnap.appendGroups
// and appendGroupsTail).
func (c *Core) restoreGroups(d *decoder) {
	t := &c.groups
	for range d.count() {
		g, paused, n := d.uv(), d.byte() != 0, d.count()
		if d.err == nil && (g == 0 || t.get(g) != nil) {
			d.fail(fmt.Errorf("group %d listed twice, or group 0", g))
		}
		for range n {
			k := wheel.Key{Receiver: d.uv(), Tid: d.uv()}
			if d.err != nil {
				return
			}
			if t.member(k) != 0 {
				d.fail(fmt.Errorf("timer %d/%d in two groups", k.Receiver, k.Tid))
				return
			}
			t.join(k, g)
		}
		if d.err != nil {
			return
		}
		t.setPaused(g, paused)
	}
	for range d.count() {
		if r := d.uv(); d.err == nil {
			t.setRecvPaused(r, true)
		}
	}
	for range d.count() {
		op := &bulkOp{s: c.sessionByID(d, d.uv()), id: d.uv(), op: protocol.Op(d.uv()), receiver: d.uv(), group: d.uv()}
		if !slices.Contains([]protocol.Op{protocol.OpCancelAll, protocol.OpPauseAll, protocol.OpResumeAll}, op.op) {
			d.fail(fmt.Errorf("bulk operation of op %d", op.op))
		}
		if op.group != 0 {
			if d.byte() != 0 {
				for _, at := range []*uint32{&op.cur, &op.end} {
					k := wheel.Key{Receiver: d.uv(), Tid: d.uv()}
					if *at = t.member(k); d.err == nil && (*at == 0 || t.nodes[*at].group != op.group) {
						d.fail(fmt.Errorf("bulk operation on group %d at timer %d/%d, not in it", op.group, k.Receiver, k.Tid))
					}
				}
			}
		} else {
			op.from, op.fin = d.uv(), d.byte() != 0
			for range d.count() {
				if op.skip == nil {
					op.skip = make(map[uint64]struct{})
				}
				op.skip[d.uv()] = struct{}{}
			}
		}
		op.n = d.uv()
		if d.version >= 12 {
			op.client = d.uv() // (older versions remembered no bulk operation in progress)
		}
		if d.err != nil {
			return
		}
		c.bulk = append(c.bulk, op)
	}
}
