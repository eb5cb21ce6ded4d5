package client

import "github.com/tickwheel/tickwheel/protocol"

// Lost events. The server numbers each receiver's events (Event.Seq, +1
// per event) and reports in every bind reply how many of the receiver's
// events it gave up on since it was last bound. The Client turns both into
// Dropped events and the Dropped counter:
//
//   - A bind reply, of Bind or of a re-bind after a reconnect, with dropped
//     > 0 gives a Dropped event with that count, ahead of the backlog
//     events that follow the reply.
//   - A fire whose seq jumps past the last one seen of its receiver, plus
//     one, gives a Dropped event for the missing count, just before it. The
//     dropped count of a bind reply moves the expected seq on by as much,
//     so the same events are not counted twice.
//
// The last seq is kept per bound receiver, across reconnects, and forgotten
// on Unbind and Takeover (another session's events are not drops). Seq 1
// means the server started the receiver's count again (it had forgotten
// the receiver, or restarted): no drop. Nor is a seq at or below the last
// one (a server whose count restarted and dropped its first events): the
// Client cannot tell what was lost, and starts over from it.

// Dropped returns how many events the Client has reported in Dropped
// events since Dial: the ones the server said it gave up on, plus the gaps
// seen in sequence numbers. Safe from any goroutine.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

// bindReplied returns the hook for the ok reply of a bind of receiver: it
// moves the receiver's expected seq past the dropped events and returns
// the Dropped event to deliver, if any.
func (c *Client) bindReplied(receiver uint64) okHook {
	return func(result []byte) Event {
		var buf [2]uint64
		v, err := protocol.DecodeUints(result, buf[:0])
		if err != nil || len(v) < 2 || v[1] == 0 {
			return Event{} // a malformed reply fails the call itself
		}
		n := v[1]
		c.seqMu.Lock()
		if last, ok := c.seqs[receiver]; ok {
			c.seqs[receiver] = satAdd(last, n)
		}
		c.seqMu.Unlock()
		c.dropped.Add(n)
		return Event{Kind: Dropped, Receiver: receiver, Count: n}
	}
}

// reportDropped counts n events of receiver as lost and delivers the
// Dropped event. It returns false when the Client was closed meanwhile.
func (c *Client) reportDropped(receiver, n uint64) bool {
	c.dropped.Add(n)
	return c.deliver(Event{Kind: Dropped, Receiver: receiver, Count: n})
}

// seqGap records seq as receiver's last event and returns how many events
// are missing before it: 0 when none, when no seq of the receiver is known
// yet, and when seq is 1 or not past the last (the count restarted).
// Seq 0 (a server without sequence numbers) is not recorded.
func (c *Client) seqGap(receiver, seq uint64) uint64 {
	if seq == 0 {
		return 0
	}
	c.seqMu.Lock()
	defer c.seqMu.Unlock()
	last, known := c.seqs[receiver]
	c.seqs[receiver] = seq
	if !known || seq <= last || seq-last == 1 {
		return 0
	}
	return seq - last - 1
}

// forgetSeq forgets receiver's last seq: it is no longer bound here.
func (c *Client) forgetSeq(receiver uint64) {
	c.seqMu.Lock()
	delete(c.seqs, receiver)
	c.seqMu.Unlock()
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}
