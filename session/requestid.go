package session

import (
	"encoding/binary"
	"fmt"

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
// past either is applied as a new request.
//
// The key includes a fingerprint of the request's bytes (FNV-1a): a known
// client and id with other bytes is a client's bug (one id for two
// requests), answered request_id_reused and not applied.

// reqKey identifies a request: its client id and request id.
type reqKey struct{ client, id uint64 }

// reqEntry is a remembered change: when it was applied, a fingerprint of
// its payload, and its reply frame as first sent (header included), in
// small when it fits (an add's, a cancel_all's, any ok []), else in big.
// Owned by the event loop, like the Core.
type reqEntry struct {
	key   reqKey
	tick  uint64
	sum   uint64
	big   []byte
	n     uint8 // the reply's length in small
	dead  bool  // forgotten, or superseded by a later entry of the same key (an expired one applied again)
	small [replyInline]byte
}

// replyInline is the longest reply an entry holds without an allocation:
// an add's [due] with the largest id and due (25 bytes) fits.
const replyInline = 30

// reqEntryBytes is the bytes an entry costs apart from a reply that does
// not fit in it: the entry in the ring and its map slot (an estimate, for
// stats).
const reqEntryBytes = 128

func (e *reqEntry) reply() []byte {
	if e.big != nil {
		return e.big
	}
	return e.small[:e.n]
}

func (e *reqEntry) setReply(reply []byte) {
	if len(reply) <= len(e.small) {
		e.n, e.big = uint8(copy(e.small[:], reply)), nil
		return
	}
	e.n, e.big = 0, append([]byte(nil), reply...)
}

// size is what the entry counts in the stats' request_id_bytes.
func (e *reqEntry) size() uint64 { return reqEntryBytes + uint64(len(e.big)) }

// requestIDs is the Core's memory of recent identified changes: a ring of
// entries in the order they were applied, and a map from key to position.
// Positions count from 0 for the Core's life; positions first to next-1
// are in the ring, dead ones included until they reach its front. Owned
// by the event loop.
type requestIDs struct {
	byKey       map[reqKey]uint64
	ring        []reqEntry // its length is 0 or a power of two
	first, next uint64
	bytes       uint64 // of the live entries (reqEntry.size)
	// found is the position + 1 of the entry retried found expired for
	// the change being applied (0: none), which rememberReply replaces:
	// one map lookup per change, not two.
	found uint64
	hits  uint64 // retries answered from memory (not state: a counter)
}

// at returns the entry at position pos (first <= pos < next).
func (r *requestIDs) at(pos uint64) *reqEntry { return &r.ring[pos&uint64(len(r.ring)-1)] }

// push appends a zeroed entry at position next, growing the ring (by
// doubling: no allocation in the steady state) when it is full.
func (r *requestIDs) push(k reqKey) *reqEntry {
	if r.byKey == nil {
		r.byKey = make(map[reqKey]uint64)
	}
	if r.next-r.first == uint64(len(r.ring)) {
		ring := make([]reqEntry, max(64, 2*len(r.ring)))
		for p := r.first; p < r.next; p++ {
			ring[p&uint64(len(ring)-1)] = *r.at(p)
		}
		r.ring = ring
	}
	e := r.at(r.next)
	*e = reqEntry{key: k}
	r.byKey[k] = r.next
	r.next++
	return e
}

// payloadSum is the FNV-1a hash of a request's payload.
func payloadSum(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// retried answers the change req of session s from memory when it is a
// retry of one applied within the window: the first reply again (true).
// A known key with another payload is answered request_id_reused (true).
// It returns false when req must be applied. Neither answer changes state.
func (c *Core) retried(s *Session, req *protocol.Request, payload []byte) bool {
	c.reqIDs.found = 0
	pos, ok := c.reqIDs.byKey[reqKey{req.Client, req.ID}]
	if !ok {
		return false
	}
	e := c.reqIDs.at(pos)
	if c.reqExpired(e) {
		c.reqIDs.found = pos + 1
		return false
	}
	if e.sum != payloadSum(payload) {
		c.fail(s, req.ID, protocol.CodeRequestIDReused, fmt.Sprintf("request id %d of client %d was used for another request %d ticks ago: "+
			"a client numbers each change it sends apart", req.ID, req.Client, c.Now()-e.tick))
		return true
	}
	c.reqIDs.hits++
	s.out = append(s.out, e.reply()...)
	c.refused = true // nothing changed: recorded as its reply's length
	return true
}

// reqExpired reports whether e is older than request_id_ticks.
func (c *Core) reqExpired(e *reqEntry) bool {
	return c.Now()-min(e.tick, c.Now()) > uint64(c.limits.RequestIDTicks)
}

// rememberReply remembers the reply of the change req that was just
// applied, found at s.out[at:], then forgets entries past the window.
func (c *Core) rememberReply(s *Session, req *protocol.Request, payload []byte, at int) {
	frame := replyFrame(s.out[at:])
	if frame == nil {
		c.log.Error("session: a change's reply was not found to remember for retries", "op", req.Op, "id", req.ID)
		return // (cannot happen: every change is answered)
	}
	r := &c.reqIDs
	k := reqKey{req.Client, req.ID}
	if r.found != 0 { // expired, applied again
		r.drop(r.at(r.found - 1))
		r.found = 0
	}
	e := r.push(k)
	e.tick, e.sum = c.Now(), payloadSum(payload)
	e.setReply(frame)
	r.bytes += e.size()
	c.trimRequestIDs()
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

// drop forgets live entry e (it stays in the ring, dead, until it
// reaches the front).
func (r *requestIDs) drop(e *reqEntry) {
	delete(r.byKey, e.key)
	r.bytes -= e.size()
	e.dead, e.big = true, nil
}

// trimRequestIDs forgets the oldest entries while there are more than
// max_request_ids or they are older than request_id_ticks, and dead ones
// at the front. Ticks never decrease along the ring, so it stops at the
// first entry it keeps.
func (c *Core) trimRequestIDs() {
	r := &c.reqIDs
	for ; r.first < r.next; r.first++ {
		e := r.at(r.first)
		switch {
		case e.dead:
		case len(r.byKey) > c.limits.MaxRequestIDs || c.reqExpired(e):
			r.drop(e)
		default:
			return
		}
		*e = reqEntry{}
	}
}

// RequestIDs returns how many changes the Core remembers for retries and
// their bytes (about reqEntryBytes each, plus a reply too long to fit in
// the entry).
func (c *Core) RequestIDs() (n int, bytes uint64) {
	return len(c.reqIDs.byKey), c.reqIDs.bytes
}

// appendRequestIDs appends the remembered changes to a snapshot, oldest
// first: count, then per entry client, id, tick, fingerprint, reply.
func (c *Core) appendRequestIDs(e *encoder) {
	r := &c.reqIDs
	e.int(len(r.byKey))
	for p := r.first; p < r.next; p++ {
		en := r.at(p)
		if en.dead {
			continue
		}
		e.uv(en.key.client)
		e.uv(en.key.id)
		e.uv(en.tick)
		e.b = binary.LittleEndian.AppendUint64(e.b, en.sum)
		e.bytes(en.reply())
	}
}

// restoreRequestIDs reads what appendRequestIDs wrote.
func (c *Core) restoreRequestIDs(d *decoder) {
	r := &c.reqIDs
	*r = requestIDs{}
	for range d.count() {
		k := reqKey{d.uv(), d.uv()}
		tick, sum, reply := d.uv(), d.u64(), d.bytes()
		if d.err != nil {
			return
		}
		if _, ok := r.byKey[k]; ok {
			d.fail(fmt.Errorf("request id %d of client %d listed twice", k.id, k.client))
			return
		}
		en := r.push(k)
		en.tick, en.sum = tick, sum
		en.setReply(reply)
		r.bytes += en.size()
	}
}
