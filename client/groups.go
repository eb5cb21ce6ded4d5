package client

import (
	"context"
	"fmt"

	"github.com/tickwheel/tickwheel/protocol"
)

// Bulk operations on a receiver's timers or a group's (AddOptions.Group),
// each one request and one reply. The server does a large one in chunks
// between its other work, so a call on a million timers takes a while
// (ctx bounds it) without stalling anyone else; it covers the timers there
// when it began (none added later), and a timer that comes due before the
// server reaches it fires first. Under the server's add_only_bound, a
// receiver's operation needs the receiver bound by this Client, a group's
// every receiver with timers in the group; else ErrUnauthorized.

// bulk sends a bulk op and returns its count.
func (c *Client) bulk(ctx context.Context, op protocol.Op, receiver, group uint64) (int, error) {
	v, err := c.uints(ctx, &protocol.Request{Op: op, Receiver: receiver, Group: group}, 1, nil)
	if err != nil {
		return 0, err
	}
	return int(v[0]), nil
}

// CancelGroup removes every timer of group (non-zero) and returns how many
// it removed. A server that predates groups answers ErrUnknownOp.
func (c *Client) CancelGroup(ctx context.Context, group uint64) (int, error) {
	if group == 0 {
		return 0, errNoGroup(protocol.OpCancelGroup)
	}
	return c.bulk(ctx, protocol.OpCancelGroup, 0, group)
}

// PauseAll pauses every running timer of receiver, each keeping the ticks
// it had left (as Pause does), and returns how many it paused. Until
// ResumeAll, timers added to the receiver start paused.
func (c *Client) PauseAll(ctx context.Context, receiver uint64) (int, error) {
	return c.bulk(ctx, protocol.OpPauseAll, receiver, 0)
}

// ResumeAll resumes every paused timer of receiver (however it was paused),
// each with the ticks it had left, and returns how many it resumed.
func (c *Client) ResumeAll(ctx context.Context, receiver uint64) (int, error) {
	return c.bulk(ctx, protocol.OpResumeAll, receiver, 0)
}

// PauseGroup pauses every running timer of group (non-zero), each keeping
// the ticks it had left, and returns how many it paused. Until
// ResumeGroup, timers added to the group start paused.
func (c *Client) PauseGroup(ctx context.Context, group uint64) (int, error) {
	if group == 0 {
		return 0, errNoGroup(protocol.OpPauseAll)
	}
	return c.bulk(ctx, protocol.OpPauseAll, 0, group)
}

// ResumeGroup resumes every paused timer of group (non-zero), each with
// the ticks it had left, and returns how many it resumed.
func (c *Client) ResumeGroup(ctx context.Context, group uint64) (int, error) {
	if group == 0 {
		return 0, errNoGroup(protocol.OpResumeAll)
	}
	return c.bulk(ctx, protocol.OpResumeAll, 0, group)
}

func errNoGroup(op protocol.Op) error {
	return &Error{Op: op, Code: protocol.CodeInvalidArgument, Message: "group 0 is no group: name one"}
}

// GroupCursor is where a page of a group's timers starts: its timers are
// listed in (Receiver, Tid) order. The zero value starts at the first.
type GroupCursor struct{ Receiver, Tid uint64 }

// ListGroup returns every live timer of group in (receiver, tid) order
// (none: an empty slice), a page at a time; see List for what changes
// while it pages.
func (c *Client) ListGroup(ctx context.Context, group uint64) ([]Timer, error) {
	all := []Timer{}
	var from GroupCursor
	for {
		ts, next, err := c.listGroupPage(ctx, group, from, 0, all)
		if err != nil {
			return nil, err
		}
		all = ts
		if next == (GroupCursor{}) {
			return all, nil
		}
		from = next
	}
}

// ListGroupPage returns one page of group's live timers from from on, in
// (receiver, tid) order, bounded as ListPage's pages are; next is where
// the following page starts, the zero GroupCursor when this is the last.
func (c *Client) ListGroupPage(ctx context.Context, group uint64, from GroupCursor, limit int) (timers []Timer, next GroupCursor, err error) {
	return c.listGroupPage(ctx, group, from, limit, []Timer{})
}

func (c *Client) listGroupPage(ctx context.Context, group uint64, from GroupCursor, limit int, dst []Timer) ([]Timer, GroupCursor, error) {
	req := protocol.Request{Op: protocol.OpListGroup, Group: group, FromReceiver: from.Receiver, FromTid: from.Tid, Limit: uint64(max(limit, 0))}
	res, err := c.do(ctx, &req, nil)
	if err != nil {
		return nil, GroupCursor{}, err
	}
	n := len(dst)
	ts, nr, nt, err := protocol.DecodeListGroupPage(res, dst)
	next := GroupCursor{nr, nt}
	if err == nil && next != (GroupCursor{}) && (!cursorAfter(next, from, false) || len(ts) > n && !cursorAfter(next, GroupCursor{ts[len(ts)-1].Receiver, ts[len(ts)-1].Tid}, false)) {
		err = fmt.Errorf("%w: next %v is not past the cursor %v and the page", protocol.ErrMalformed, next, from)
	}
	if err != nil {
		return nil, GroupCursor{}, badReply(protocol.OpListGroup, err)
	}
	for i := n; i < len(ts); i++ {
		ts[i].Repeat = userRepeat(ts[i].Repeat)
	}
	return ts, next, nil
}

// cursorAfter reports whether a is past b (or equal, with orEqual): a next
// that does not move on would have ListGroup loop forever.
func cursorAfter(a, b GroupCursor, orEqual bool) bool {
	if a.Receiver != b.Receiver {
		return a.Receiver > b.Receiver
	}
	return a.Tid > b.Tid || orEqual && a.Tid == b.Tid
}
