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
// its payload, and its reply frame as first sent (header included).
// Owned by the event loop, like the Core.
type reqEntry struct {
	key   reqKey
	tick  uint64
	sum   uint64
	reply []byte
	dead  bool // superseded by a later entry of the same key (an expired one applied again)
}

// reqEntryOverhead is the bytes an entry costs besides its reply: the entry,
// its map slot and its place in the queue (an estimate, for stats).
const reqEntryOverhead = 112

// requestIDs is the Core's memory of recent identified changes. Owned by
// the event loop.
type requestIDs struct {
	byKey map[reqKey]*reqEntry
	// fifo holds the entries in the order they were applied (dead ones
	// included until they reach its front); head is its first live index.
	fifo  []*reqEntry
	head  int
	bytes uint64 // of the live entries: reqEntryOverhead + len(reply) each
	hits  uint64 // retries answered from memory (not state: a counter)
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
	e := c.reqIDs.byKey[reqKey{req.Client, req.ID}]
	if e == nil || c.reqExpired(e) {
		return false
	}
	if e.sum != payloadSum(payload) {
		c.fail(s, req.ID, protocol.CodeRequestIDReused, fmt.Sprintf("request id %d of client %d was used for another request %d ticks ago: "+
			"a client numbers each change it sends apart", req.ID, req.Client, c.Now()-e.tick))
		return true
	}
	c.reqIDs.hits++
	s.out = append(s.out, e.reply...)
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
	reply := append([]byte(nil), frame...)
	r := &c.reqIDs
	if r.byKey == nil {
		r.byKey = make(map[reqKey]*reqEntry)
	}
	k := reqKey{req.Client, req.ID}
	if old := r.byKey[k]; old != nil { // expired, applied again
		r.drop(old)
	}
	e := &reqEntry{key: k, tick: c.Now(), sum: payloadSum(payload), reply: reply}
	r.byKey[k] = e
	r.fifo = append(r.fifo, e)
	r.bytes += reqEntryOverhead + uint64(len(reply))
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

// drop forgets live entry e (it stays in fifo, dead, until it reaches the
// front).
func (r *requestIDs) drop(e *reqEntry) {
	delete(r.byKey, e.key)
	r.bytes -= reqEntryOverhead + uint64(len(e.reply))
	e.dead, e.reply = true, nil
}

// trimRequestIDs forgets the oldest entries while there are more than
// max_request_ids or they are older than request_id_ticks, and dead ones
// at the front.
func (c *Core) trimRequestIDs() {
	r := &c.reqIDs
	for r.head < len(r.fifo) {
		e := r.fifo[r.head]
		switch {
		case e.dead:
		case len(r.byKey) > c.limits.MaxRequestIDs || c.reqExpired(e):
			r.drop(e)
		default:
			r.compact()
			return
		}
		r.fifo[r.head] = nil
		r.head++
	}
	r.compact()
}

// compact moves the live part of fifo to its front once the dead part is
// at least half of it.
func (r *requestIDs) compact() {
	if r.head > 0 && r.head >= len(r.fifo)/2 {
		n := copy(r.fifo, r.fifo[r.head:])
		clear(r.fifo[n:])
		r.fifo, r.head = r.fifo[:n], 0
	}
}

// RequestIDs returns how many changes the Core remembers for retries and
// their bytes (reqEntryOverhead plus the reply, each).
func (c *Core) RequestIDs() (n int, bytes uint64) {
	return len(c.reqIDs.byKey), c.reqIDs.bytes
}

// appendRequestIDs appends the remembered changes to a snapshot, oldest
// first: count, then per entry client, id, tick, fingerprint, reply.
func (c *Core) appendRequestIDs(e *encoder) {
	r := &c.reqIDs
	e.int(len(r.byKey))
	for _, en := range r.fifo[r.head:] {
		if en.dead {
			continue
		}
		e.uv(en.key.client)
		e.uv(en.key.id)
		e.uv(en.tick)
		e.b = binary.LittleEndian.AppendUint64(e.b, en.sum)
		e.bytes(en.reply)
	}
}

// restoreRequestIDs reads what appendRequestIDs wrote.
func (c *Core) restoreRequestIDs(d *decoder) {
	r := &c.reqIDs
	*r = requestIDs{}
	n := d.count()
	if n > 0 {
		r.byKey = make(map[reqKey]*reqEntry, n)
	}
	for range n {
		en := &reqEntry{key: reqKey{d.uv(), d.uv()}, tick: d.uv(), sum: d.u64(), reply: append([]byte(nil), d.bytes()...)}
		if d.err != nil {
			return
		}
		if r.byKey[en.key] != nil {
			d.fail(fmt.Errorf("request id %d of client %d listed twice", en.key.id, en.key.client))
			return
		}
		r.byKey[en.key] = en
		r.fifo = append(r.fifo, en)
		r.bytes += reqEntryOverhead + uint64(len(en.reply))
	}
}
