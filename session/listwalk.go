package session

import (
	"math"

	"github.com/tickwheel/tickwheel/protocol"
)

// A list page is gathered by a walk of the receiver's timers, or look-ups of
// its sorted tids (wheel.BeginPage, StepPage), of at most
// Config.MaxListWalkPerTurn units of work a loop turn: the first step when
// the request is applied, and when the page needs more, one at the start of
// each Advance (each loop turn), so that a page of a receiver with 10,000
// timers or more never takes a long turn (at 100M timers each unit is a
// cache miss: 10-25 ms for 10,000 in one turn warm, 27 ms for 4,096 on a
// cold cache). The reply leaves once the page is made; until then the session's
// next requests are not read (Session.Waiting), so replies keep request
// order. Lists run one at a time, in the order they were asked for.
//
// A list changes nothing and is not recorded: its reply is recorded by its
// length when it is made (a pad, as every reply a replay does not
// reproduce), and nothing of a list in progress is state — a snapshot does
// not hold it, and a replay never has one.
//
// What a page holds when timers change between its steps is what
// docs/PROTOCOL.md promises of pages: a timer present from the request to
// the reply is in it when its tid is in the page's range; one added
// meanwhile is not, one removed meanwhile is not (see wheel.pageWalk).

// listOp is a list request whose page is being gathered. Owned by the event
// loop.
type listOp struct {
	s              *Session // nil once its session closed: dropped unanswered
	id             uint64
	receiver, from uint64
	limit          int
	started        bool // its walk is the wheel's (the first of Core.lists)
}

// list answers a list request with one page of the receiver's timers: those
// with tid >= req.FromTid in ascending tid order, at most req.Limit of them
// (0, or more than max_list_page, means max_list_page), and no more than fit
// in a reply frame of max_list_bytes — but always at least one when any is
// left (the config makes max_list_bytes hold a timer with max_data). The
// reply's next is the tid of the first timer left out, or, when timers were
// removed while the page was gathered over several turns, the tid past the
// page's last from which timers may be left; 0 when none is.
//
// Cost: a page of a receiver being paged through costs about the page (the
// wheel keeps the sorted tids of the receiver it pages); otherwise the
// wheel walks the receiver's timers, at most MaxListWalkPerTurn in a turn.
// The timers walked count as work (ListWork). Only the page, one timer
// more, is copied and encoded.
func (c *Core) list(s *Session, req *protocol.Request) {
	limit := c.limits.MaxListPage
	if req.Limit != 0 && req.Limit < uint64(limit) {
		limit = int(req.Limit)
	}
	op := &listOp{s: s, id: req.ID, receiver: req.Receiver, from: req.FromTid, limit: limit}
	c.lists = append(c.lists, op)
	if len(c.lists) == 1 {
		c.stepLists(false)
	}
	if len(c.lists) > 0 && c.lists[len(c.lists)-1] == op { // not done yet: the reply waits
		s.listing = true
		c.more = true
	}
}

// stepLists goes on with the lists in progress, oldest first, doing at
// most the work left to lists in this loop turn (listLeft: a turn's share
// is MaxListWalkPerTurn, from one Advance to the next, however many
// sessions' lists the turn applies, as the doorbell's deferred reads can),
// and answers those it completes. A list applied once the turn's share is
// spent waits for the next turn.
// later says it runs in a turn after their requests were applied (their
// replies are then recorded here). It asks for another turn when one is
// left.
func (c *Core) stepLists(later bool) {
	for len(c.lists) > 0 && c.listLeft > 0 {
		op := c.lists[0]
		if op.s == nil {
			if op.started {
				c.wheel.EndPage()
			}
		} else {
			if !op.started {
				// One timer more than the page says whether another page
				// follows, and where it starts.
				c.wheel.BeginPage(op.receiver, op.from, op.limit+1)
				op.started = true
			}
			var resume uint64
			var done bool
			c.listBuf, resume, done = c.wheel.StepPage(c.listLeft, c.listBuf[:0])
			c.work += c.wheel.ListWork()
			c.listLeft -= c.wheel.ListWork()
			if !done {
				break
			}
			c.answerList(op, resume, later)
		}
		c.lists[0] = nil
		c.lists = c.lists[1:]
	}
	if len(c.lists) == 0 {
		c.lists = nil
	} else {
		c.more = true
	}
}

// listBudget is the work lists may do in a loop turn: MaxListWalkPerTurn,
// or no bound when that is not positive.
func (c *Core) listBudget() int {
	if b := c.cfg.MaxListWalkPerTurn; b > 0 {
		return b
	}
	return math.MaxInt
}

// answerList appends the reply of op, whose page is c.listBuf (resume as
// StepPage's), to its session's output.
func (c *Core) answerList(op *listOp, resume uint64, later bool) {
	s, l, limit := op.s, &c.limits, op.limit
	c.timerBuf = c.timerBuf[:0]
	size := protocol.ListReplyOverhead
	next := resume
	for i := range c.listBuf {
		t := timerOf(&c.listBuf[i])
		c.describePlan(&t)
		c.describeGroup(&t)
		n := protocol.TimerSize(&t)
		if i == limit || (i > 0 && size+n > l.MaxListBytes) {
			next = t.Tid // > the tids before it, so never 0
			break
		}
		size += n
		c.timerBuf = append(c.timerBuf, t)
	}
	at := len(s.out)
	s.out = protocol.AppendListOK(s.out, op.id, c.timerBuf, next)
	// Drop the views into the wheel's memory.
	clear(c.listBuf)
	clear(c.timerBuf)
	if !later { // (Apply records it)
		return
	}
	s.listing = false
	c.unreproduced(s, len(s.out)-at)
	if c.readsWait && !s.replied {
		c.noteReplied(s, at) // behind the changes in flight (SetReadsWait)
	}
	c.markDirty(s)
}

// closeLists drops the lists of closing session s.
func (c *Core) closeLists(s *Session) {
	for _, op := range c.lists {
		if op.s == s {
			op.s = nil
		}
	}
}
