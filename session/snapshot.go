package session

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"

	"github.com/tickwheel/tickwheel/wheel"
)

// A snapshot is the whole state of a Core: everything Replay needs to go on
// from it, so that a snapshot plus the records after it rebuild the state.
// The core section's bytes are canonical: maps are written in key order,
// so two Cores in the same state write the same bytes there. The wheel's
// section (format 3) has its timers in the order its encoder walked the
// slab and the loop's write barrier encoded pages (wheel.Frozen), each
// with its add sequence number: equal states give equal bytes only when
// the slabs are laid out alike and nothing was written during the
// encoding (a replay of the same inputs, or a restored Core re-encoded).
//
// Layout: the magic "TWCS", a format version byte, the core section, then
// the wheel's own snapshot (see wheel.Frozen). The core section is
// uvarints (floats as 8 little-endian bytes, bytes with their length
// first): tw-time and clock settings, counters, limits, the sessions with
// their flow-control state, the stalled and dirty lists, the waiting
// fast-forwards, and the receivers with their backlogs.
//
// Version 2 added acknowledged mode: the number of limits before them,
// the receivers with waiting firings in order, each session's
// dropped-notice position, and each receiver's mode, sent
// count, high-water seq, parked firings and held timers. Version 1
// snapshots are still read.
//
// Version 3 added, at the end of the core section, the last downtime and
// the plans of timers with a calendar schedule or a missed-firing policy
// (schedule.go). Versions 1 and 2 are still read: they have none.
//
// Version 4 added the tick length, last: the state's ticks, and the log's
// adds with after_ns or a schedule, mean nothing in another, so a Core
// with another TickNs refuses the snapshot (ErrTickChanged). Older
// versions are read without the check.
//
// Version 5 added, after the tick length, the retained idle receivers in
// acknowledged mode, oldest idle first, each with the tick it became idle
// (retain.go). Older versions kept them for ever: a Core restored from
// one retains those it holds as idle since the snapshot's tw-time. It
// also added the dropped notices to each session's in-flight list (the
// seqs each announces, 0 for an event), so that a close before they reach
// the kernel reports them again (loseUnsent).
//
// Version 6 added, last in each session, whether its error replies are
// plain (Session.plain; older versions' sessions were not), and each
// in-flight entry's frame length, last (counted against
// max_outbound_total: Core.inflightBytes; older versions count their
// entries as 0 bytes). (Two branches of one release added these under the
// same number; no released build wrote version 6 with only one of them.)
//
// Version 7 added, before each receiver's backlog frames, the layout of
// the chunks they lie in (capacities, and where the first frame starts
// in the first), which max_backlog_bytes_total counts (frameQueue). Older
// versions' backlogs are packed afresh.
//
// Version 8 added, after the retained receivers, the highest seq of a
// receiver in acknowledged mode that retention forgot (Core.forgotSeq,
// see renumber). Older versions read as 0: nothing forgotten.
//
// Version 9 added, last in each parked firing, the tick its late counts
// from (parked.from), and last in each timer's plan the ticks it was
// overdue when added (timerPlan.overdue). Older versions read the first
// as the firing's due tick, the second as 0.
//
// Version 10 added, last, the groups section (issue 27, see
// groupsSnap.appendGroups):
// the timers' groups, the paused receivers and groups, and the bulk
// operations in progress. Older versions have none.
//
// Version 11 added, after it, the changes remembered for retries with a
// request id (requestid.go: appendRequestIDs). Older versions remember
// none.
//
// Version 12 added, last in each bulk operation in progress, the client
// id of its pending request id (bulkOp.client), and pending entries (an
// empty reply) to the memory of request ids. Version 11's operations have
// none.
//
// Version 13 changed the fingerprint of a remembered request's bytes from
// FNV-1a to XXH64 (payloadSum), and added after each entry's fingerprint
// whether it is still FNV-1a (reqEntry.fnv). Versions 11 and 12's entries
// are all FNV-1a: a retry of one is compared with FNV-1a, so it gets its
// first reply after an upgrade as before.
const (
	snapMagic   = "TWCS"
	snapVersion = 13
)

// ErrTickChanged is returned (wrapped) by Restore when the snapshot was
// written by a Core whose tick length differs from this one's.
var ErrTickChanged = errors.New("session: the tick length changed")

// ErrSnapshot wraps every error of restoring a snapshot.
var ErrSnapshot = errors.New("session: snapshot")

// encoder appends snapshot fields.
type encoder struct {
	b []byte
	// digest: the state check's encoding (Core.DigestSnapshot), not a
	// snapshot: a session's pending output goes as its length only.
	digest bool
}

func (e *encoder) uv(v uint64)    { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int)      { e.uv(uint64(v)) }
func (e *encoder) bool(v bool)    { e.b = append(e.b, b2u(v)) }
func (e *encoder) f64(v float64)  { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *encoder) bytes(v []byte) { e.uv(uint64(len(v))); e.b = append(e.b, v...) }

// sid returns s's id, or 0 for none or a closed session.
func sid(s *Session) uint64 {
	if s == nil || s.closed {
		return 0
	}
	return s.id
}

// appendCore appends the core section at once, as Snapshot and AppendNext
// write it in two parts.
func (c *Core) appendCore(e *encoder) {
	c.appendCoreHead(e)
	c.appendGroups(e)
	c.appendRequestIDs(e)
}

// appendCoreHead appends the core section up to the groups section (see
// Snapshot for the rest). Backlog frames are appended as they are; the
// caller may do it from a copy taken on the loop (see Snapshot), since
// frames are never changed once made.
func (c *Core) appendCoreHead(e *encoder) {
	e.b = append(e.b, snapMagic...)
	e.b = append(e.b, snapVersion)
	e.uv(c.target)
	e.bool(c.caughtUp)
	e.f64(c.speed)
	e.bool(c.frozen)
	e.uv(c.skipped)
	e.uv(c.wallNs)
	e.uv(c.wallTick)
	e.uv(c.nextSession)
	e.uv(c.firedTotal)
	e.uv(c.droppedTotal)
	e.uv(c.lostTotal)
	fields := limitFields(&c.limits)
	e.int(len(fields))
	for _, v := range fields {
		e.int(*v)
	}
	e.bool(c.addOnlyBound)
	ids := sortedKeys(c.sessions)
	e.int(len(ids))
	for _, id := range ids {
		appendSession(e, c.sessions[id])
	}
	// A session closed this turn may still be listed; it is gone for
	// good, so the snapshot leaves it out.
	open := func(list []*Session) []*Session {
		var out []*Session
		for _, s := range list {
			if !s.closed {
				out = append(out, s)
			}
		}
		return out
	}
	stalled, dirty := open(c.stalled), open(c.dirty)
	e.int(len(stalled))
	for _, s := range stalled {
		e.uv(s.id)
	}
	e.int(len(dirty))
	for _, s := range dirty {
		e.uv(s.id)
	}
	e.int(len(c.waiters))
	for _, w := range c.waiters {
		e.uv(sid(w.s)) // (Close sets s to nil)
		e.uv(w.id)
		e.uv(w.target)
		e.uv(w.fired)
	}
	e.int(len(c.waiting))
	for _, r := range c.waiting {
		e.uv(r.id)
	}
	c.appendPlans(e)
	e.uv(c.cfg.TickNs)
	c.appendIdle(e)
	e.uv(c.forgotSeq)
}

func appendSession(e *encoder, s *Session) {
	e.uv(s.id)
	e.bytes([]byte(s.name))
	e.bool(s.hello)
	e.bool(s.admin)
	e.int(s.authFailures)
	e.bool(s.waiting)
	e.bool(s.kill)
	e.uv(s.written)
	e.int(s.buffered)
	e.bool(s.blocked)
	e.bool(s.stalled)
	if e.digest {
		// What the output holds is not state a replay reproduces: a
		// reply to a read, a refusal or a quiet session's output is
		// replayed as as many zero bytes (inPad, inSync). Its length is.
		e.int(len(s.out))
	} else {
		e.bytes(s.out)
	}
	rids := sortedKeys(s.receivers)
	e.int(len(rids))
	for _, r := range rids {
		e.uv(r)
		e.bool(s.receivers[r])
	}
	e.int(len(s.inflight))
	for _, f := range s.inflight {
		e.uv(f.receiver)
		e.uv(f.end)
		e.uv(f.dropped)
		e.uv(f.size)
	}
	e.int(len(s.queue))
	for _, r := range s.queue {
		e.uv(r.id)
	}
	e.int(s.noteStart)
	e.int(s.noteEnd)
	e.uv(s.noteRecv)
	e.uv(s.noteFirst)
	e.uv(s.noteLast)
	e.bool(s.plain)
}

// receiverSnap is a receiver as a snapshot holds it: the record's fields,
// where its backlog's chunk headers are in the snapshot's copy of them
// (Snapshot.chunks[first:first+n]: chunks[0][off:], then the others
// whole; their headers copied as they were and their bytes shared with the
// live backlog: bytes once written in a chunk are never written again, and
// each header's length stops at the last frame the snapshot holds) and, for
// the few in acknowledged mode that park firings or hold timers, where
// those are (Snapshot.extras[extra-1]; 0: none). It holds no pointer: the
// copy of 100,000 records is 8 MB that the loop writes without a write
// barrier and the collector does not scan. The encoder lists the frames
// and sorts holding, off the loop.
type receiverSnap struct {
	id, owner, seq, dropped, queuedIn, high uint64
	off, sent                               int
	first, n, extra                         uint32
	ephemeral, acked                        bool
}

// recvExtra is what a receiverSnap in acknowledged mode may hold beyond
// its record: copies of its parked firings and of its held tids (unsorted
// until encoded).
type recvExtra struct {
	parked  []parked
	holding []uint64
}

// receiverSnaps copies the receivers' records, in the order of the memory
// they lie in (inAddressOrder; the encoder sorts the copies by id:
// AppendNext), with the backlog chunk headers they share and their
// extras. Its cost on the loop is a record per receiver and a header per
// backlog chunk (a chunk holds up to 64 KiB of frames), not a slice per
// event: listing each of a million backlog events made Snapshot stop the
// loop 22-171 ms at 100M timers (docs/BENCHMARKS.md). The copies go in the
// last finished snapshot's (spareRecvs, spareChunks): new memory is zeroed
// by the kernel page by page as it is first written, which cost more than
// the copy itself.
func (c *Core) receiverSnaps() ([]receiverSnap, [][]byte, []recvExtra) {
	out, chunks := c.spareRecvs[:0], c.spareChunks[:0]
	c.spareRecvs, c.spareChunks = nil, nil
	if cap(out) < len(c.receivers) {
		out = make([]receiverSnap, 0, len(c.receivers)+len(c.receivers)/8)
	}
	var extras []recvExtra
	rs := append(c.spareRefs[:0], c.recvList...)
	tmp := inAddressOrder(rs, c.spareRefs2)
	if cap(chunks) == 0 { // no copy kept: sized once (appends would copy and clear it several times over)
		n := c.snapChunks - 1
		if n < 0 { // no snapshot before: counted
			n = 0
			for _, r := range rs {
				n += len(r.q.chunks)
			}
		}
		if n > 0 {
			chunks = make([][]byte, 0, n+n/8)
		}
	}
	for _, r := range rs {
		first := len(chunks)
		chunks = append(chunks, r.q.chunks...) // the live queue's headers, copied here
		out = append(out, receiverSnap{id: r.id, owner: sid(r.owner), seq: r.seq, dropped: r.dropped, queuedIn: sid(r.queuedIn),
			high: r.high, off: r.q.off, sent: r.sent, first: uint32(first), n: uint32(len(r.q.chunks)),
			ephemeral: r.ephemeral, acked: r.acked})
		if r.parked.n > 0 || r.holding != nil {
			x := recvExtra{parked: r.parked.all()}
			for tid := range r.holding {
				x.holding = append(x.holding, tid)
			}
			extras = append(extras, x)
			out[len(out)-1].extra = uint32(len(extras))
		}
	}
	clear(rs)
	clear(tmp)
	c.spareRefs, c.spareRefs2 = keepSpare(rs), keepSpare(tmp)
	c.snapChunks = len(chunks) + 1
	return out, chunks, extras
}

// keepSpare returns s emptied, to be filled by the next snapshot, or nil
// when it is much larger than this one needed (the receivers were many
// more once): the copies do not hold a high-water mark's memory for good.
func keepSpare[T any](s []T) []T {
	if cap(s) > 2*len(s)+1024 {
		return nil
	}
	return s[:0]
}

// appendFrames encodes the frames of a backlog's chunks (receiverSnap):
// their count, then each.
func appendFrames(e *encoder, chunks [][]byte, off int) {
	n := 0
	eachFrame(chunks, off, func([]byte) { n++ })
	e.int(n)
	eachFrame(chunks, off, e.bytes)
}

// eachFrame calls fn with each frame of chunks, chunks[0] from off.
func eachFrame(chunks [][]byte, off int, fn func([]byte)) {
	for i, c := range chunks {
		if i == 0 {
			c = c[off:]
		}
		for len(c) > 0 {
			l := frameLen(c)
			fn(c[:l:l])
			c = c[l:]
		}
	}
}

// appendReceiver encodes r, whose backlog's chunk headers are chunks
// (Snapshot.chunks[r.first:r.first+r.n]) and whose parked firings and
// held tids are x's (sorting x.holding).
func appendReceiver(e *encoder, r *receiverSnap, chunks [][]byte, x *recvExtra) {
	e.uv(r.id)
	e.uv(r.owner)
	e.bool(r.ephemeral)
	e.uv(r.seq)
	e.uv(r.dropped)
	e.uv(r.queuedIn)
	e.int(len(chunks))
	for _, c := range chunks {
		e.int(cap(c))
	}
	e.int(r.off)
	appendFrames(e, chunks, r.off)
	e.bool(r.acked)
	e.int(r.sent)
	e.uv(r.high)
	e.int(len(x.parked))
	for _, p := range x.parked {
		e.uv(p.tid)
		e.uv(p.tick)
		e.uv(p.fired)
		e.uv(p.repeat)
		e.bool(p.last)
		e.bytes(p.data)
		e.uv(p.from)
	}
	slices.Sort(x.holding)
	e.int(len(x.holding))
	for _, tid := range x.holding {
		e.uv(tid)
	}
}

// sessionsByID resolves a recorded session id while restoring.
func (c *Core) sessionByID(d *decoder, id uint64) *Session {
	if id == 0 || d.err != nil {
		return nil
	}
	s := c.sessions[id]
	if s == nil {
		d.fail(fmt.Errorf("unknown session %d", id))
	}
	return s
}

// Snapshot is an immutable copy of a Core's state, taken on the loop by
// Core.Snapshot and encoded by AppendNext, from any one goroutine, while
// the Core goes on. Release it (on the Core's goroutine) when done.
type Snapshot struct {
	core   []byte         // the core section up to the groups, encoded when taken
	groups *groupsSnap    // the groups and their members, encoded by AppendNext
	tail   []byte         // the rest of the core section up to the request ids, encoded when taken
	reqIDs reqSnap        // the memory of request ids, encoded by AppendNext
	recvs  []receiverSnap // the receivers, encoded by AppendNext
	chunks [][]byte       // the backlog chunk headers recvs' are in
	extras []recvExtra    // recvs' parked firings and held tids
	owner  *Core          // the Core it came from, which keeps recvs and chunks for the next
	frozen *wheel.Frozen
	next   int // stage: 0 core, 1 receivers (from recv), 2 the wheel
	recv   int
}

// Snapshot takes a copy of the state for encoding. Its cost on the loop is
// the sessions' and receivers' records (backlog frames are shared, not
// copied), a copy of the groups' member nodes (one memcpy, 32 bytes a
// grouped timer: the members are encoded by AppendNext; see groupsSnap),
// a copy of the memory of request ids (64 bytes an entry, encoded by
// AppendNext; see reqSnap) and the wheel's Freeze, which shares the
// timers' pages (the loop saves a node before its first write to it,
// until the encoder has walked its page: wheel.Frozen).
func (c *Core) Snapshot() *Snapshot {
	head, tail := encoder{}, encoder{}
	c.appendCoreHead(&head)
	c.appendGroupsTail(&tail)
	snap := &Snapshot{core: head.b, groups: c.groupsSnap(false), tail: tail.b, reqIDs: c.reqIDs.copyLive(), owner: c}
	snap.recvs, snap.chunks, snap.extras = c.receiverSnaps()
	snap.frozen = c.wheel.Freeze()
	return snap
}

// SetYield makes the encoding call yield now and then (see
// wheel.Frozen.SetYield): runtime.Gosched, for an encoder that shares a
// CPU with the Core's loop. Call it before the first AppendNext.
func (s *Snapshot) SetYield(yield func()) { s.frozen.SetYield(yield) }

// DigestSnapshot is Snapshot in digest mode, for a cluster's state check:
// what it appends, with *sum once the last piece is appended, identifies
// the state — two Cores in the same state give the same, whatever their
// histories — and is not a snapshot. The wheel's timer records are hashed
// into *sum, not appended, in a way that does not depend on the wheel's
// layout (wheel.Frozen.SetDigest); a session's pending output counts by
// its length, not its bytes (a replica holds zeros where the Core that
// executed the turns holds replies it does not replay: a read's, a
// refusal's, a quiet session's; the leader's replies wait there for the
// turns in flight when it marks a check).
func (c *Core) DigestSnapshot(sum *uint64) *Snapshot {
	head, tail := encoder{digest: true}, encoder{digest: true}
	c.appendCoreHead(&head)
	c.appendGroupsTail(&tail)
	snap := &Snapshot{core: head.b, groups: c.groupsSnap(false), tail: tail.b, reqIDs: c.reqIDs.copyLive(), owner: c}
	snap.recvs, snap.chunks, snap.extras = c.receiverSnaps()
	snap.frozen = c.wheel.Freeze()
	snap.frozen.SetDigest(sum)
	return snap
}

// Timers returns the number of timers in the snapshot.
func (s *Snapshot) Timers() int { return s.frozen.Len() }

// AppendNext appends the next piece of the snapshot, of about max bytes
// (at least one whole part; max <= 0: all the rest), to dst, and reports
// whether it was the last.
func (s *Snapshot) AppendNext(dst []byte, max int) (out []byte, done bool) {
	if max <= 0 {
		max = math.MaxInt
	}
	start := len(dst)
	for len(dst)-start < max {
		switch s.next {
		case 0:
			dst = append(dst, s.core...)
			e := encoder{b: dst}
			s.groups.appendGroups(&e)
			s.groups = nil // the copy of the nodes is garbage now
			e.b = append(e.b, s.tail...)
			s.reqIDs.append(&e)
			s.reqIDs = reqSnap{}
			e.int(len(s.recvs))
			dst = e.b
			s.next = 1
		case 1:
			if s.recv == len(s.recvs) {
				s.next = 2
				continue
			}
			if s.recv == 0 {
				slices.SortFunc(s.recvs, func(a, b receiverSnap) int { return cmp.Compare(a.id, b.id) })
			}
			e := encoder{b: dst}
			r := &s.recvs[s.recv]
			chunks := s.chunks[r.first : r.first+r.n]
			var x recvExtra
			if r.extra > 0 {
				x, s.extras[r.extra-1] = s.extras[r.extra-1], recvExtra{}
			}
			appendReceiver(&e, r, chunks, &x)
			clear(chunks) // (the copy of the headers is kept for the next snapshot: their frames are not)
			s.recv++
			dst = e.b
		default:
			return s.frozen.AppendNext(dst, max-(len(dst)-start))
		}
	}
	return dst, false
}

// Release gives the wheel back the memory the copy held. Call it on the
// Core's goroutine, after the last AppendNext.
func (s *Snapshot) Release() {
	s.frozen.Release()
	if s.owner != nil && s.next == 2 { // each record emptied as encoded: kept for the next one
		s.owner.spareRecvs, s.owner.spareChunks = keepSpare(s.recvs), keepSpare(s.chunks)
	}
	s.recvs, s.chunks, s.extras = nil, nil, nil
}

// Restore rebuilds a Core from a snapshot's bytes (all of them). The Core
// does not record until Record(true). A snapshot written with another tick
// length than cfg.TickNs is refused (ErrTickChanged); cfg.TickNs 0 takes
// the snapshot's, for tools that read one.
func Restore(cfg Config, data []byte, log *slog.Logger, peer PeerLog) (*Core, error) {
	c := New(cfg, Limits{}, nil, log, peer)
	rest, err := c.restoreCore(data)
	if err != nil {
		return nil, err
	}
	return c.restoreRest(rest, nil)
}

// RestoreFrom is Restore reading the snapshot from rd to its io.EOF,
// decoding the wheel's timers as they are read, with memory for the
// snapshot's core section and a piece of restorePiece bytes rather than
// the whole snapshot (1.9 GB at 100M timers): the reads then go into a
// buffer already in the cache, not into fresh memory the kernel has to
// zero and map first, and the decoding starts with the first piece. rd's
// errors are returned as they are (wrapped with nothing), io.EOF excepted.
func RestoreFrom(cfg Config, rd io.Reader, log *slog.Logger, peer PeerLog) (*Core, error) {
	c, rest, rd, err := restoreCoreFrom(rd, func() *Core { return New(cfg, Limits{}, nil, log, peer) })
	if err != nil {
		return nil, err
	}
	return c.restoreRest(rest, rd)
}

// restoreRest restores the wheel snapshot that follows the core section,
// rest and then what rd reads (nil: nothing), into c.
func (c *Core) restoreRest(rest []byte, rd io.Reader) (*Core, error) {
	w, err := restoreWheelFrom(rest, rd, c.log, c.cfg.RestoreTimers)
	var re readError
	switch {
	case errors.As(err, &re):
		return nil, re.err
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	c.wheel = w
	if c.legacyIdle {
		c.retainLegacy()
		c.legacyIdle = false
	}
	return c, nil
}
