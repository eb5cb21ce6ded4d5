package session

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// restoreCore reads the core section into c, whose wheel is restored
// separately. It returns the rest of b.
func (c *Core) restoreCore(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(snapMagic)) || len(b) < len(snapMagic)+1 {
		return nil, fmt.Errorf("%w: not a core snapshot", ErrSnapshot)
	}
	v := b[len(snapMagic)]
	if v < 1 || v > snapVersion {
		return nil, fmt.Errorf("%w: format version %d, this server reads 1 to %d", ErrSnapshot, v, snapVersion)
	}
	d := &decoder{b: b[len(snapMagic)+1:], version: v}
	c.target = d.uv()
	c.caughtUp = d.byte() != 0
	c.speed = math.Float64frombits(d.u64())
	c.frozen = d.byte() != 0
	c.skipped = d.uv()
	c.wallNs, c.wallTick = d.uv(), d.uv()
	c.nextSession = d.uv()
	c.loggedNext = c.nextSession
	c.firedTotal, c.droppedTotal, c.lostTotal = d.uv(), d.uv(), d.uv()
	nl := legacyLimits
	if d.version >= 2 {
		nl = d.count()
	}
	readLimits(d, &c.limits, nl)
	c.limits = c.limits.WithDefaults()
	c.addOnlyBound = d.byte() != 0
	n := d.count()
	queues := make(map[*Session][]uint64, n)
	for range n {
		s, q := restoreSession(d)
		if d.err == nil {
			c.sessions[s.id] = s
			queues[s] = q
			for _, f := range s.inflight {
				c.inflightBytes += f.size
			}
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
	var waiting []uint64
	if d.version >= 2 {
		for range d.count() {
			waiting = append(waiting, d.uv())
		}
	}
	if d.version >= 3 {
		c.restorePlans(d)
	}
	if d.version >= 4 {
		tick := d.uv()
		if c.cfg.TickNs == 0 { // a reader of snapshots: the state's tick
			c.cfg.TickNs = tick
		}
		if d.err == nil && tick != c.cfg.TickNs {
			d.fail(fmt.Errorf("%w: the state was written with a tick of %v and this server's is %v: start it with the state's tick (with another, every due tick would fall at another time)",
				ErrTickChanged, time.Duration(tick), time.Duration(c.cfg.TickNs)))
		}
	}
	var idle []idleRef
	if d.version >= 5 {
		idle = readIdle(d)
		if d.version >= 8 {
			c.forgotSeq = d.uv()
		}
		if d.version >= 10 {
			c.restoreGroups(d)
		}
		if d.version >= 11 {
			c.restoreRequestIDs(d)
		}
	} else {
		c.legacyIdle = true // listed once the wheel is restored (see Restore)
	}
	c.restoreReceivers(d)
	c.linkRestored(d, idle)
	for _, id := range waiting {
		if r := c.receivers[id]; r != nil && r.parked.len() > 0 {
			c.waiting = append(c.waiting, r)
		} else {
			d.fail(fmt.Errorf("receiver %d listed as waiting has no waiting firing", id))
		}
	}
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
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, d.err)
	}
	return d.b, nil
}

func restoreSession(d *decoder) (*Session, []uint64) {
	s := &Session{id: d.uv(), name: string(d.bytes()), receivers: make(map[uint64]bool), logged: true}
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
		f := inflight{receiver: d.uv(), end: d.uv()}
		if d.version >= 5 {
			f.dropped = d.uv()
		}
		if d.version >= 6 {
			f.size = d.uv()
		}
		s.inflight = append(s.inflight, f)
	}
	var q []uint64
	for range d.count() {
		q = append(q, d.uv())
	}
	if d.version >= 2 {
		s.noteStart, s.noteEnd = int(d.uv()), int(d.uv())
		s.noteRecv, s.noteFirst, s.noteLast = d.uv(), d.uv(), d.uv()
		// noteEnd 0 is "no notice to extend": noteStart is then whatever
		// the last notice left (a flush clears only noteEnd), unused until
		// the next notice sets it, and kept as it is so that the restored
		// state snapshots to the same bytes.
		if d.err == nil && s.noteEnd != 0 && (s.noteStart > s.noteEnd || s.noteEnd > len(s.out)) {
			d.fail(fmt.Errorf("session %d: dropped notice at %d..%d of %d bytes", s.id, s.noteStart, s.noteEnd, len(s.out)))
		}
	}
	if d.version >= 6 {
		s.plain = d.byte() != 0
	}
	return s, q
}

func (c *Core) restoreReceivers(d *decoder) {
	for i := range d.count() {
		r := &receiver{id: d.uv(), owner: c.sessionByID(d, d.uv())}
		if d.err == nil && i > 0 && r.id <= c.recvList[len(c.recvList)-1].id { // written in ascending order
			d.fail(fmt.Errorf("receiver %d after receiver %d: ids out of order or repeated", r.id, c.recvList[len(c.recvList)-1].id))
		}
		r.ephemeral = d.byte() != 0
		r.seq, r.dropped = d.uv(), d.uv()
		r.queuedIn = c.sessionByID(d, d.uv())
		var caps []int
		off := 0
		if d.version >= 7 { // the chunks' layout (frameQueue.layout)
			for range d.count() {
				caps = append(caps, int(d.uv()))
			}
			off = int(d.uv())
		}
		var frames [][]byte
		for range d.count() {
			f := d.bytes()
			if d.err == nil && (len(f) < 4 || frameLen(f) != len(f)) {
				d.fail(fmt.Errorf("receiver %d: a backlog frame of %d bytes is not one whole frame", r.id, len(f)))
			}
			if d.err != nil {
				break
			}
			frames = append(frames, f)
		}
		c.restoreBacklog(r, caps, off, frames)
		if d.version >= 2 {
			c.restoreAcked(d, r)
		}
		if d.err != nil {
			return
		}
		c.addReceiver(r)
	}
}

// restoreBacklog gives r its backlog's frames, in the chunks' layout the
// snapshot kept (older snapshots kept none: the frames are pushed, and
// the bytes held may differ from the snapshotted server's).
func (c *Core) restoreBacklog(r *receiver, caps []int, off int, frames [][]byte) {
	if len(caps) > 0 && r.q.restore(caps, off, frames) {
		r.n = len(frames)
		for _, f := range frames {
			r.bytes += len(f)
			c.backlogBytes += uint64(len(f))
		}
		c.backlogEvents += uint64(r.n)
		c.backlogHeld += uint64(r.q.held)
		return
	}
	for _, f := range frames {
		c.appendBacklog(r, f) // (copied)
	}
}

// restoreAcked reads a receiver's acknowledged-mode fields.
func (c *Core) restoreAcked(d *decoder, r *receiver) {
	r.acked = d.byte() != 0
	if r.acked { // its frames, restored above, are its outbox
		c.outboxEvents += uint64(r.n)
		c.outboxBytes += uint64(r.bytes)
		c.outboxHeld += uint64(r.q.held)
	}
	r.sent, r.high = int(d.uv()), d.uv()
	for i := 0; i < r.sent && i < r.n; i++ { // the cursor at the first frame not sent
		r.q.next()
	}
	for range d.count() {
		p := parked{tid: d.uv(), tick: d.uv(), fired: d.uv(), repeat: d.uv(), last: d.byte() != 0}
		p.data = append([]byte(nil), d.bytes()...)
		p.from = p.tick // older versions: its late counts from its due tick
		if d.version >= 9 {
			p.from = d.uv()
		}
		r.parked.push(p)
		c.parkedTotal++
		c.parkedBytes += uint64(len(p.data))
	}
	for range d.count() {
		if r.holding == nil {
			r.holding = make(map[uint64]struct{})
		}
		r.holding[d.uv()] = struct{}{}
	}
	if d.err == nil && (r.sent > r.n || !r.acked && (r.sent != 0 || r.parked.len() > 0)) {
		d.fail(fmt.Errorf("receiver %d: %d of %d events sent, %d parked, acked %v", r.id, r.sent, r.n, r.parked.len(), r.acked))
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
