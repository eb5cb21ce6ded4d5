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

// bindReplied returns the hook for the ok reply of a bind of receiver with
// opts: it moves the receiver's expected seq past the dropped events — or,
// in acknowledged mode, to the reply's first_seq — and returns the Dropped
// event to deliver, if any.
func (c *Client) bindReplied(receiver uint64, opts BindOptions) okHook {
	return func(cn *conn, result []byte) Event {
		v, ack := bindReply(result, opts.Ack)
		if len(v) < 2 {
			return Event{} // a malformed reply fails the call itself
		}
		pending, n := v[0], v[1]
		c.seqMu.Lock()
		last, known := c.seqs[receiver]
		switch {
		case ack:
			// first_seq is authoritative: a jump forward is no drop, and
			// a redelivery goes on after the last seq seen (duplicates
			// are dropped before they reach seqGap).
			if next := satSub(v[2], 1); !known || next > last {
				c.seqs[receiver] = next
			}
		case known:
			c.seqs[receiver] = satAdd(last, n)
		}
		c.seqMu.Unlock()
		if ack {
			c.acks.bound(cn, receiver, opts.Ack, pending, v[2])
		} else {
			c.acks.forget(receiver)
		}
		if n == 0 {
			return Event{}
		}
		c.dropped.Add(n)
		return Event{Kind: Dropped, Receiver: receiver, Count: n}
	}
}

// bindReply decodes a bind result: [pending, dropped], or in acknowledged
// mode [pending, dropped, first_seq]. ack reports whether the receiver is
// bound in acknowledged mode: asked for, and the reply has first_seq.
func bindReply(result []byte, mode AckMode) (v []uint64, ack bool) {
	v, err := protocol.DecodeUints(result, make([]uint64, 0, 3))
	if err != nil {
		return nil, false
	}
	return v, mode != AckNone && len(v) >= 3
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

// seqPast moves receiver's expected seq past last: the server's notice
// that the events up to last were dropped, reported as such, so that the
// gap they leave is not counted again.
func (c *Client) seqPast(receiver, last uint64) {
	c.seqMu.Lock()
	if cur, known := c.seqs[receiver]; !known || cur < last {
		c.seqs[receiver] = last
	}
	c.seqMu.Unlock()
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
