package session

import (
	"fmt"
	"slices"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// appendGroups appends the groups section (snapshot version 10): the
// groups in id order, each with its paused mark and its members (receiver,
// tid) in the group's order; the paused receivers in id order; and the
// bulk operations in progress, oldest first, each with its session (0:
// closed), request id, op, receiver, group, then for a group's operation
// the keys of its cursor and end (or none when done), for a receiver's
// its next tid, whether it is done and the tids it skips in order; and
// the count so far. Member nodes are not written: positions are keys, so
// the bytes depend only on the state.
func (c *Core) appendGroups(e *encoder) {
	t := &c.groups
	ids := sortedKeys(t.groups)
	e.int(len(ids))
	for _, g := range ids {
		gr := t.groups[g]
		e.uv(g)
		e.bool(gr.paused)
		e.int(gr.count)
		for i := gr.head; i != 0; i = t.nodes[i].next {
			e.uv(t.nodes[i].key.Receiver)
			e.uv(t.nodes[i].key.Tid)
		}
	}
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
	}
}

// restoreGroups reads the groups section (see appendGroups).
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
		if d.err != nil {
			return
		}
		c.bulk = append(c.bulk, op)
	}
}
