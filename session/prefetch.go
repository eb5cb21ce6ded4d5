package session

import (
	"unsafe"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Prefetch hints that payload, a request frame's payload, is the next one
// Apply will be given: when it looks like an add (protocol.PeekAdd), the
// CPU is asked for the wheel's index entries its key's look-up reads first
// and, when it carries a client id and changes are remembered, the
// request-id index line of its key. The server calls it with the frame
// after the one it is about to apply, so that those loads, a cache miss
// each in a big wheel or a full memory, land while that one is applied: in
// a pipelined client's adds the wheel's look-up of a new key was the
// largest single cost (docs/BENCHMARKS.md, "The single node's pipelined
// add against base, again"). It changes nothing, records nothing, and any
// bytes are allowed: a payload that is not an add, or not valid, is
// ignored, or its hint wasted.
func (c *Core) Prefetch(payload []byte) {
	id, receiver, tid, client, ok := protocol.PeekAdd(payload)
	if !ok {
		return
	}
	c.wheel.Prefetch(wheel.Key{Receiver: receiver, Tid: tid})
	if client != 0 && c.reqIDs.live > 0 {
		c.reqIDs.prefetchKey(reqKey{client, id})
	}
}

// prefetchKey asks the CPU for the index line of k's home (a live
// memory's: slots is not empty).
func (r *requestIDs) prefetchKey(k reqKey) {
	prefetch(unsafe.Pointer(&r.slots[reqHash(k)&uint64(len(r.slots)-1)]))
}
