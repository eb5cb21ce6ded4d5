package session

import (
	"bytes"
	"fmt"
	"math"
)

// restoreCore reads the core section into c, whose wheel is restored
// separately. It returns the rest of b.
func (c *Core) restoreCore(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(snapMagic)) || len(b) < len(snapMagic)+1 {
		return nil, fmt.Errorf("%w: not a core snapshot", ErrSnapshot)
	}
	if v := b[len(snapMagic)]; v != snapVersion {
		return nil, fmt.Errorf("%w: format version %d, this server reads %d", ErrSnapshot, v, snapVersion)
	}
	d := &decoder{b: b[len(snapMagic)+1:]}
	c.target = d.uv()
	c.caughtUp = d.byte() != 0
	c.speed = math.Float64frombits(d.u64())
	c.frozen = d.byte() != 0
	c.skipped = d.uv()
	c.wallNs, c.wallTick = d.uv(), d.uv()
	c.nextSession = d.uv()
	c.firedTotal, c.droppedTotal, c.lostTotal = d.uv(), d.uv(), d.uv()
	for _, v := range limitFields(&c.limits) {
		*v = int(d.uv())
	}
	c.addOnlyBound = d.byte() != 0
	n := d.count()
	queues := make(map[*Session][]uint64, n)
	for range n {
		s, q := restoreSession(d)
		if d.err == nil {
			c.sessions[s.id] = s
			queues[s] = q
		}
	}
	for range d.count() {
		if s := c.sessionByID(d, d.uv()); s != nil {
			c.stalled = append(c.stalled, s)
		}
	}
	for range d.count() {
		if s := c.sessionByID(d, d.uv()); s != nil {
			c.dirty = append(c.dirty, s)
		}
	}
	for range d.count() {
		w := waiter{s: c.sessionByID(d, d.uv()), id: d.uv(), target: d.uv(), fired: d.uv()}
		c.waiters = append(c.waiters, w)
	}
	c.restoreReceivers(d)
	for s, q := range queues { // each queue lists receivers restored above
		for _, id := range q {
			if r := c.receivers[id]; r != nil {
				s.queue = append(s.queue, r)
			} else {
				d.fail(fmt.Errorf("session %d queues unknown receiver %d", s.id, id))
			}
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, d.err)
	}
	return d.b, nil
}

func restoreSession(d *decoder) (*Session, []uint64) {
	s := &Session{id: d.uv(), name: string(d.bytes()), receivers: make(map[uint64]bool)}
	s.hello, s.admin = d.byte() != 0, d.byte() != 0
	s.authFailures = int(d.uv())
	s.waiting, s.kill = d.byte() != 0, d.byte() != 0
	s.written, s.buffered = d.uv(), int(d.uv())
	s.blocked, s.stalled = d.byte() != 0, d.byte() != 0
	s.out = append([]byte(nil), d.bytes()...)
	for range d.count() {
		s.receivers[d.uv()] = d.byte() != 0
	}
	for range d.count() {
		s.inflight = append(s.inflight, inflight{receiver: d.uv(), end: d.uv()})
	}
	var q []uint64
	for range d.count() {
		q = append(q, d.uv())
	}
	return s, q
}

func (c *Core) restoreReceivers(d *decoder) {
	for range d.count() {
		r := &receiver{id: d.uv(), owner: c.sessionByID(d, d.uv())}
		r.ephemeral = d.byte() != 0
		r.seq, r.dropped = d.uv(), d.uv()
		r.queuedIn = c.sessionByID(d, d.uv())
		for range d.count() {
			c.appendBacklog(r, append([]byte(nil), d.bytes()...))
		}
		if d.err != nil {
			return
		}
		c.receivers[r.id] = r
	}
}

// count reads a list length, bounded by the bytes left (each element takes
// at least one byte), so a corrupt length cannot make a huge allocation.
func (d *decoder) count() int {
	n := d.uv()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail(errShort)
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}
