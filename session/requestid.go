package session

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/tickwheel/tickwheel/protocol"
)

// Request ids: a change request (add, cancel, cancel_all, pause, resume)
// that carries a client id (protocol.Request.Client) is identified by that
// client id and its request id. The Core remembers the reply of each such
// request it applied, so that a retry — the same request sent again after a
// failover or a lost connection, when the client cannot know whether the
// first one was applied — gets the first reply again and changes nothing.
//
// What is remembered is state like any other: it changes only with a
// recorded input (a change that was applied; a refused one changed nothing
// and is not remembered, so its retry is judged afresh), it is in the
// snapshot, and so a replica, a replay and a restart remember the same.
// It is bounded by two limits: limits.max_request_ids entries (the oldest
// goes first) and limits.request_id_ticks ticks of tw-time (an entry older
// than that is not used, and goes at the next remembered change). A retry
// past either is applied as a new request. max_request_ids -1 turns the
// memory off (remembers): nothing is remembered and every change applies.
// What a remembered change costs the loop, and why it is a ring and an
// index of its own rather than a Go map: reqwindow.go (a window per
// client, which finds most entries without a hash) and reqindex.go.
//
// The key includes a fingerprint of the request's bytes (payloadSum,
// XXH64 since snapshot format 13; FNV-1a before: an entry restored from an
// older snapshot keeps it, reqEntry.fnv): a known client and id with other
// bytes is a client's bug (one id for two requests), answered
// request_id_reused and not applied.
//
// A bulk operation (bulk.go) that does not complete in the apply that
// starts it replies in a later turn: it is remembered as pending (an
// entry with no reply, n 0: no reply frame is empty) and carries its
// client id (bulkOp.client), so that finishBulk fills in the reply when
// it completes, whether or not its session is still open. A retry of a
// pending one is not applied again: when the first session has closed
// (a lost connection, a failover) the retrying session adopts the
// operation and gets its reply when it completes; while the first
// session is open the retry is answered bad_state. An entry and its
// operation stay linked: forgetting a pending entry (forgetReq) unlinks
// its operation, which then goes on unremembered.

// reqKey identifies a request: its client id and request id.
type reqKey struct{ client, id uint64 }

// reqEntry is a remembered change: when it was applied, a fingerprint of
// its payload, and its reply frame as first sent (header included) in
// small, or, when longer than small (no reply the Core sends today is:
// an add's is at most 25 bytes), in the memory's big map. 64 bytes, no
// pointers: the ring is one allocation the garbage collector does not
// scan. Owned by the event loop, like the Core.
type reqEntry struct {
	key  reqKey
	tick uint64
	sum  uint64
	// win is the slot + 1 of the client window (reqwindow.go) that finds
	// the entry; 0: the hash index (reqindex.go) does. Not state.
	win   uint32
	n     uint8 // the reply's length in small, or replyBig; 0: pending (a bulk operation in progress)
	dead  bool  // forgotten, or superseded by a later entry of the same key (an expired one applied again)
	fnv   bool  // sum is payloadSumFNV's: restored from a snapshot of format 12 or older
	small [replyInline]byte
}

// replyInline is the longest reply an entry holds itself: an add's [due]
// with the largest id and due (25 bytes) fits, and so does every other
// change's reply (ok, or a bulk operation's count).
const replyInline = 25

// replyBig in reqEntry.n says the reply is in requestIDs.big.
const replyBig = 0xff

// reqEntryBytes is the bytes an entry costs apart from a reply that does
// not fit in it: its 64 bytes in the ring and 16 bytes of index: two
// 8-byte hash slots, or its place in its client's window, 4 bytes for
// each id the window spans (reqwindow.go: 4 to 32 bytes an entry, about
// 4-8 for a client that sends mostly changes). An estimate, for stats,
// the same whatever the index's layout (which is not state): the ring and
// the index grow by doubling, so they may hold up to twice as many
// entries as are live.
const reqEntryBytes = 80

// requestIDs is the Core's memory of recent identified changes: a ring of
// entries in the order they were applied, and an index from key to ring
// slot: a window per client (reqwindow.go), and for the ids that do not
// fit in their client's window a hash index (open addressing,
// reqindex.go). Positions count up from first;
// positions first to next-1 are in the ring (at pos & (len(ring)-1)),
// dead ones included until they reach its front; a ring that fills is
// compacted or doubled, and positions renumbered from 0. Nothing is
// allocated per change once the ring is large enough. Owned by the event
// loop.
type requestIDs struct {
	ring  []reqEntry // its length is 0 or a power of two
	slots []uint64   // the hash index: 2 * len(ring) slots, or none while no entry is in it (reqindex.go)
	// hashed is how many entries the hash index holds (reqEntry.win 0).
	hashed int
	// clients are the client windows (reqwindow.go), by slot; free holds
	// the free slots, byClient a client's slot, and lastClient's slot + 1
	// is lastSlot (0: none), the one looked up last.
	clients     []reqClient
	free        []uint32
	byClient    map[uint64]uint32
	lastClient  uint64
	lastSlot    uint32
	first, next uint64
	live        int               // entries not dead: in the index
	big         map[reqKey][]byte // replies longer than replyInline, of live entries
	bytes       uint64            // of the live entries (size)
	// found is the position + 1 of the entry retried found expired for
	// the change being applied (0: none), which rememberReply replaces:
	// one lookup per change, not two.
	found uint64
	hits  uint64 // retries answered from memory (not state: a counter)
}

// at returns the entry at position pos (first <= pos < next).
func (r *requestIDs) at(pos uint64) *reqEntry { return &r.ring[pos&uint64(len(r.ring)-1)] }

// reply returns e's reply frame.
func (r *requestIDs) reply(e *reqEntry) []byte {
	if e.n == replyBig {
		return r.big[e.key]
	}
	return e.small[:e.n]
}

// setReply stores reply in live entry e.
func (r *requestIDs) setReply(e *reqEntry, reply []byte) {
	if len(reply) <= len(e.small) {
		e.n = uint8(copy(e.small[:], reply))
		return
	}
	if r.big == nil {
		r.big = make(map[reqKey][]byte)
	}
	e.n, r.big[e.key] = replyBig, append([]byte(nil), reply...)
}

// size is what live entry e counts in the stats' request_id_bytes.
func (r *requestIDs) size(e *reqEntry) uint64 {
	if e.n == replyBig {
		return reqEntryBytes + uint64(len(r.big[e.key]))
	}
	return reqEntryBytes
}

// push appends entry k at position next, with no reply yet, making room
// when the ring is full (reqindex.go: grow). k must not be live.
func (r *requestIDs) push(k reqKey) *reqEntry {
	if r.next-r.first == uint64(len(r.ring)) {
		r.grow()
	}
	i := r.next & uint64(len(r.ring)-1)
	e := &r.ring[i]
	*e = reqEntry{key: k}
	r.index(k, uint32(i))
	r.next++
	r.live++
	return e
}

// drop forgets live entry e at position pos (it stays in the ring, dead,
// until it reaches the front).
func (r *requestIDs) drop(pos uint64) {
	i := uint32(pos & uint64(len(r.ring)-1))
	e := &r.ring[i]
	if s := e.win; s != 0 { // out of its window (reqwindow.go), freed when left empty
		c := &r.clients[s-1]
		c.remove(e.key.id)
		if c.n == 0 {
			r.freeClient(s - 1)
		} else if c.oversized() {
			r.shrinkClient(s - 1)
		}
	} else {
		r.hashRemove(e.key, i)
	}
	r.bytes -= r.size(e)
	if e.n == replyBig {
		delete(r.big, e.key)
	}
	e.dead = true
	r.live--
}

// payloadSum is the fingerprint of a request's payload remembered with
// its request id: XXH64 with seed 0 (github.com/cespare/xxhash/v2), the
// same on every platform and in every process, as a snapshot and a
// replica need. It reads 8 bytes at a time: about 13 ns for an add's 43
// bytes on this machine, against 55-80 ns for payloadSumFNV's byte at a
// time (docs/BENCHMARKS.md).
func payloadSum(b []byte) uint64 { return xxhash.Sum64(b) }

// payloadSumFNV is the FNV-1a hash of a request's payload: the
// fingerprint of snapshot formats 11 and 12, kept to compare a retry with
// an entry restored from one (reqEntry.fnv).
func payloadSumFNV(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// fingerprint returns payload's fingerprint as e's sum was computed.
func (e *reqEntry) fingerprint(payload []byte) uint64 {
	if e.fnv {
		return payloadSumFNV(payload)
	}
	return payloadSum(payload)
}

// retryAnswer is what retried did with a change.
type retryAnswer uint8

const (
	retryApply    retryAnswer = iota // not a retry (or one past the window): apply it
	retryAnswered                    // answered from memory, or refused: nothing changed
	retryAdopted                     // adopted a bulk operation in progress: a change, recorded
)

// retried answers the change req of session s from memory when it is a
// retry of one applied within the window: the first reply again
// (retryAnswered). A known key with another payload is answered
// request_id_reused (retryAnswered). A retry of a bulk operation still in
// progress (a pending entry) is adopted by s when the operation's session
// has closed (retryAdopted: s waits for its reply, as the first session
// did), else answered bad_state (retryAnswered). It returns retryApply
// when req must be applied. Only an adoption changes state.
func (c *Core) retried(s *Session, req *protocol.Request, payload []byte) retryAnswer {
	r := &c.reqIDs
	r.found = 0
	pos, ok := r.lookup(reqKey{req.Client, req.ID})
	if !ok {
		return retryApply
	}
	e := r.at(pos)
	if c.reqExpired(e) {
		r.found = pos + 1
		return retryApply
	}
	if e.sum != e.fingerprint(payload) {
		c.fail(s, req.ID, protocol.CodeRequestIDReused, fmt.Sprintf("request id %d of client %d was used for another request %d ticks ago: "+
			"a client numbers each change it sends apart", req.ID, req.Client, c.Now()-e.tick))
		return retryAnswered
	}
	if e.n == 0 {
		return c.retriedPending(s, req)
	}
	r.hits++
	s.out = append(s.out, r.reply(e)...)
	c.refused = true // nothing changed: recorded as its reply's length
	return retryAnswered
}

// retriedPending answers a retry of the bulk operation in progress that
// req names (see retried).
func (c *Core) retriedPending(s *Session, req *protocol.Request) retryAnswer {
	op := c.bulkOf(reqKey{req.Client, req.ID})
	if op == nil { // (cannot happen: a pending entry's operation is in progress)
		c.log.Error("session: a pending request id has no bulk operation", "client", req.Client, "id", req.ID)
		c.fail(s, req.ID, protocol.CodeInternal, fmt.Sprintf("request id %d of client %d: its operation was lost", req.ID, req.Client))
		return retryAnswered
	}
	if op.s != nil && !op.s.closed {
		c.fail(s, req.ID, protocol.CodeBadState, fmt.Sprintf("request id %d of client %d is still in progress on another connection: "+
			"retry once that connection has closed (its reply goes to the retry then), or wait for its reply there", req.ID, req.Client))
		return retryAnswered
	}
	c.reqIDs.hits++
	op.s = s
	s.waiting = true
	c.more = true
	return retryAdopted
}

// remembers reports whether the Core remembers changes with a request id
// (limits.max_request_ids is not -1).
func (c *Core) remembers() bool { return c.limits.MaxRequestIDs > 0 }

// reqExpired reports whether e is older than request_id_ticks.
func (c *Core) reqExpired(e *reqEntry) bool {
	return c.Now()-min(e.tick, c.Now()) > uint64(c.limits.RequestIDTicks)
}

// rememberReply remembers the reply of the change req that was just
// applied, found at s.out[at:], then forgets entries past the window. A
// bulk operation that did not complete in this apply has no reply yet:
// it is remembered as pending and linked to its operation (bulkOp.client),
// whose finishBulk fills in the reply.
func (c *Core) rememberReply(s *Session, req *protocol.Request, payload []byte, at int) {
	frame := replyFrame(s.out[at:])
	var op *bulkOp
	if frame == nil {
		if op = c.startedBulk(s, req.ID); op == nil {
			c.log.Error("session: a change's reply was not found to remember for retries", "op", req.Op, "id", req.ID)
			return // (cannot happen: every change is answered, or is a bulk operation in progress)
		}
	}
	r := &c.reqIDs
	if r.found != 0 { // expired, applied again
		c.forgetReq(r.found - 1)
		r.found = 0
	}
	e := r.push(reqKey{req.Client, req.ID})
	e.tick, e.sum = c.Now(), payloadSum(payload)
	if op != nil {
		op.client = req.Client // pending: n 0
	} else {
		r.setReply(e, frame)
	}
	r.bytes += r.size(e)
	c.trimRequestIDs()
	if r.hashed != 0 {
		r.prefetchNext(reqKey{req.Client, req.ID})
	}
}

// fillPending remembers reply (a frame) for the pending entry of bulk
// operation op, which just completed, and unlinks it.
func (c *Core) fillPending(op *bulkOp, reply []byte) {
	r := &c.reqIDs
	pos, ok := r.lookup(reqKey{op.client, op.id})
	op.client = 0
	if !ok || r.at(pos).n != 0 { // (cannot happen: forgetReq unlinks)
		c.log.Error("session: a bulk operation's pending request id was not found", "id", op.id)
		return
	}
	e := r.at(pos)
	r.bytes -= r.size(e)
	r.setReply(e, reply)
	r.bytes += r.size(e)
}

// forgetReq forgets the live entry at pos; a pending one's operation goes
// on unremembered (its retry would be applied as a new request).
func (c *Core) forgetReq(pos uint64) {
	r := &c.reqIDs
	if e := r.at(pos); e.n == 0 {
		if op := c.bulkOf(e.key); op != nil {
			op.client = 0
		}
	}
	r.drop(pos)
}

// replyFrame returns the first reply frame (header included; kind ok or
// error) in out, a run of whole frames, or nil: a change's reply is the
// only reply its dispatch appends, and comes before anything else it
// appends today, but the scan does not count on the latter.
func replyFrame(out []byte) []byte {
	for len(out) >= protocol.HeaderSize {
		n := protocol.HeaderSize + int(binary.BigEndian.Uint32(out))
		if n > len(out) {
			return nil
		}
		// [kind, id, ...]: a fixarray header, then the kind (a positive fixint).
		if n > protocol.HeaderSize+1 && (out[protocol.HeaderSize+1] == byte(protocol.KindOK) || out[protocol.HeaderSize+1] == byte(protocol.KindError)) {
			return out[:n]
		}
		out = out[n:]
	}
	return nil
}

// trimRequestIDs forgets the oldest entries while there are more than
// max_request_ids (all of them when it is -1: off) or they are older than
// request_id_ticks, and dead ones at the front. Ticks never decrease
// along the ring, so it stops at the first entry it keeps: O(1) per
// remembered change, amortised. With none left, the memory is freed.
func (c *Core) trimRequestIDs() {
	r := &c.reqIDs
	for ; r.first < r.next; r.first++ {
		e := r.at(r.first)
		switch {
		case e.dead:
		case r.live > c.limits.MaxRequestIDs || c.reqExpired(e):
			if e.n == 0 {
				c.forgetReq(r.first)
			} else {
				r.drop(r.first) // (forgetReq's, with no bulk operation to unlink)
			}
		default:
			return
		}
	}
	if r.live == 0 && !c.remembers() {
		*r = requestIDs{hits: r.hits}
	}
}

// RequestIDs returns how many changes the Core remembers for retries and
// their bytes (about reqEntryBytes each, plus a reply too long to fit in
// the entry).
func (c *Core) RequestIDs() (n int, bytes uint64) {
	return c.reqIDs.live, c.reqIDs.bytes
}

// appendRequestIDs appends the remembered changes to a snapshot, oldest
// first: count, then per entry client, id, tick, fingerprint (8 bytes,
// little-endian), whether the fingerprint is FNV-1a (version 13; before,
// every one was), reply (empty: pending, a bulk operation in progress that
// names it, version 12).
func (c *Core) appendRequestIDs(e *encoder) {
	q := c.reqIDs.copyLive()
	q.append(e)
}

// reqSnap is a copy of the memory's entries for a snapshot (Snapshot),
// taken on the loop and encoded off it: the entries first to next-1 in
// order, dead ones included (append skips them), and the replies too long
// for an entry. A copy is one or two memcpys of 64 bytes an entry; the
// encoding, done on the loop before, took about 12 ms at 100,000 entries
// on this machine under load (about 2 ms now).
type reqSnap struct {
	entries []reqEntry
	live    int
	big     map[reqKey][]byte // a clone of the memory's (whose reply slices are never written, only let go)
}

// copyLive returns a copy of the memory's entries, and a clone of its big
// map (the loop goes on changing the map; it is empty but for replies
// longer than replyInline, which no change sends today).
func (r *requestIDs) copyLive() reqSnap {
	n := r.next - r.first
	if n == 0 {
		return reqSnap{}
	}
	mask := uint64(len(r.ring) - 1)
	i, j := r.first&mask, r.next&mask
	var entries []reqEntry
	if i < j {
		entries = append([]reqEntry(nil), r.ring[i:j]...)
	} else {
		entries = append(append(make([]reqEntry, 0, n), r.ring[i:]...), r.ring[:j]...)
	}
	var big map[reqKey][]byte
	if len(r.big) > 0 {
		big = make(map[reqKey][]byte, len(r.big))
		for k, v := range r.big {
			big[k] = v
		}
	}
	return reqSnap{entries: entries, live: r.live, big: big}
}

// append encodes the copy as appendRequestIDs does.
func (q *reqSnap) append(e *encoder) {
	e.int(q.live)
	e.b = slices.Grow(e.b, q.live*56) // a typical entry: 10 + 3 + 3 + 8 + 1 + 20 bytes (growing as it goes copied 4 MB twice)
	for i := range q.entries {
		en := &q.entries[i]
		if en.dead {
			continue
		}
		e.uv(en.key.client)
		e.uv(en.key.id)
		e.uv(en.tick)
		e.b = binary.LittleEndian.AppendUint64(e.b, en.sum)
		e.bool(en.fnv)
		if en.n == replyBig {
			e.bytes(q.big[en.key])
		} else {
			e.bytes(en.small[:en.n])
		}
	}
}

// restoreRequestIDs reads what appendRequestIDs wrote.
func (c *Core) restoreRequestIDs(d *decoder) {
	r := &c.reqIDs
	*r = requestIDs{}
	for range d.count() {
		k := reqKey{d.uv(), d.uv()}
		tick, sum := d.uv(), d.u64()
		fnv := true // formats 11 and 12: FNV-1a
		if d.version >= 13 {
			fnv = d.byte() != 0
		}
		reply := d.bytes()
		if d.err != nil {
			return
		}
		if _, ok := r.lookup(k); ok {
			d.fail(fmt.Errorf("request id %d of client %d listed twice", k.id, k.client))
			return
		}
		if len(reply) == 0 && c.bulkOf(k) == nil {
			d.fail(fmt.Errorf("request id %d of client %d is pending with no bulk operation in progress", k.id, k.client))
			return
		}
		en := r.push(k)
		en.tick, en.sum, en.fnv = tick, sum, fnv
		r.setReply(en, reply)
		r.bytes += r.size(en)
	}
	for _, op := range c.bulk {
		if pos, ok := r.lookup(reqKey{op.client, op.id}); op.client != 0 && (!ok || r.at(pos).n != 0) {
			d.fail(fmt.Errorf("bulk operation of request id %d of client %d has no pending entry", op.id, op.client))
			return
		}
	}
}
