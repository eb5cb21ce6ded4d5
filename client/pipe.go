package client

import (
	"context"
	"errors"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// A Pipe queues requests and sends them together: Exec writes every
// queued request to the connection in one write and waits for all their
// replies, which the server sends in order. It is the batch API for
// scheduling many timers at once (go-redis's Pipeline is the model): one
// write, one wake-up and no per-request channel, where N separate calls
// pay for N of each.
//
//	p := c.Pipeline()
//	for i, player := range players {
//		p.AddAfter(player, regenTid, 30*time.Second, nil)
//	}
//	err := p.Exec(ctx) // the first error of any request, if one failed
//
// Each queued call returns a *Cmd that holds its own outcome once Exec
// returns. A Pipe is not safe for concurrent use; use one per goroutine.
// After Exec it is empty and may be reused.
//
// Changes (add, cancel, pause, resume) are retried as single calls are
// (see Client.do): when the server remembers request ids (its hello's
// request_id_ticks), each carries the Client's id and its own request id,
// and the changes answered not_leader or whose replies a lost connection
// took are sent again by Exec, with the same ids and in their order, as
// one batch on the next connection (the new leader's, in a cluster); the
// server applies each at most once and answers a retry of one it applied
// with the first reply, so each Cmd gets that reply. Commands whose
// replies arrived are not sent again. With a server that does not remember
// request ids, or once ctx ends, such a Cmd's error wraps ErrNotLeader or
// ErrDisconnected and the server may or may not have applied it. Requests
// are not atomic as a group: each succeeds or fails on its own, in order.
type Pipe struct {
	c    *Client
	reqs []protocol.Request
	cmds []*Cmd
	free []Cmd // Cmds allocated a chunk at a time
	buf  []byte
}

// Cmd is the outcome of one request of a Pipe: valid once Exec returned.
type Cmd struct {
	op       protocol.Op
	due      uint64
	err      error
	answered bool // the server replied (or the client refused it itself)
}

// Err returns the request's error: nil, an *Error from the server
// (errors.Is(err, ErrExists), ...), or the reason it got no reply.
func (c *Cmd) Err() error { return c.err }

// Due returns the tick an add's first firing is due at (0 for other
// requests, and for a failed add).
func (c *Cmd) Due() uint64 { return c.due }

// Op returns the request's op name ("add", "cancel", ...).
func (c *Cmd) Op() string { return c.op.String() }

// Pipeline returns an empty Pipe on c.
func (c *Client) Pipeline() *Pipe { return &Pipe{c: c} }

// Pipelined runs fn on a new Pipe and then Exec, and returns its Cmds, in
// the order fn queued them, and the first error (fn's, or Exec's).
func (c *Client) Pipelined(ctx context.Context, fn func(*Pipe) error) ([]*Cmd, error) {
	p := c.Pipeline()
	if err := fn(p); err != nil {
		return nil, err
	}
	cmds := append([]*Cmd(nil), p.cmds...)
	return cmds, p.Exec(ctx)
}

// Len returns the number of queued requests.
func (p *Pipe) Len() int { return len(p.reqs) }

// Add queues Client.Add: timer tid of receiver, after ticks from the
// server's now when it applies the request.
func (p *Pipe) Add(receiver, tid, after uint64, o *AddOptions) *Cmd {
	return p.add(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, After: after, Repeat: 1}, o)
}

// AddAt queues Client.AddAt: the first firing at absolute tick at.
func (p *Pipe) AddAt(receiver, tid, at uint64, o *AddOptions) *Cmd {
	return p.add(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, At: at, Repeat: 1}, o)
}

// AddAfter queues Client.AddAfter: the first firing d of tw-time after the
// server reads the request, never early; d <= 0 at the server's next tick.
// A Client that knows no tick length fails the Cmd at once
// (ErrInvalidArgument) and sends nothing for it.
func (p *Pipe) AddAfter(receiver, tid uint64, d time.Duration, o *AddOptions) *Cmd {
	after, err := p.c.afterTicks(d)
	if err != nil {
		cmd := p.cmd(protocol.OpAdd)
		cmd.err = err
		return cmd
	}
	return p.add(afterRequest(receiver, tid, after, d), o)
}

// Cancel queues Client.Cancel.
func (p *Pipe) Cancel(receiver, tid uint64) *Cmd {
	return p.queue(protocol.Request{Op: protocol.OpCancel, Receiver: receiver, Tid: tid})
}

// Pause queues Client.Pause.
func (p *Pipe) Pause(receiver, tid uint64) *Cmd {
	return p.queue(protocol.Request{Op: protocol.OpPause, Receiver: receiver, Tid: tid})
}

// Resume queues Client.Resume.
func (p *Pipe) Resume(receiver, tid uint64) *Cmd {
	return p.queue(protocol.Request{Op: protocol.OpResume, Receiver: receiver, Tid: tid})
}

// AddSchedule queues Client.AddSchedule: a timer on a calendar schedule.
func (p *Pipe) AddSchedule(receiver, tid uint64, schedule string, o *AddOptions) *Cmd {
	return p.add(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, Repeat: 1}, withSchedule(o, schedule))
}

func (p *Pipe) add(req protocol.Request, o *AddOptions) *Cmd {
	o.apply(&req)
	return p.queue(req)
}

// queue appends req and its Cmd. (A Cmd that failed before it was queued,
// by AddAfter's check, has no request: Exec skips Cmds with an error.)
func (p *Pipe) queue(req protocol.Request) *Cmd {
	cmd := p.cmd(req.Op)
	p.reqs = append(p.reqs, req)
	return cmd
}

// cmd returns a fresh Cmd for op, appended to p.cmds.
func (p *Pipe) cmd(op protocol.Op) *Cmd {
	if len(p.free) == 0 {
		p.free = make([]Cmd, min(max(len(p.cmds), 16), 1024))
	}
	cmd := &p.free[0]
	p.free = p.free[1:]
	*cmd = Cmd{op: op}
	p.cmds = append(p.cmds, cmd)
	return cmd
}

// Exec sends every queued request in one write on the current connection
// (waiting for one while reconnecting, as calls do) and waits for all the
// replies or ctx. It returns the first error of the Cmds, in queue order,
// or nil when all succeeded; each Cmd has its own. Changes cut off by
// not_leader or a lost connection are sent again first (see Pipe). When
// ctx ends first, the Cmds still waiting get ctx.Err() (the server may
// still apply them).
// The Pipe is empty afterwards; its Cmds keep their outcomes.
func (p *Pipe) Exec(ctx context.Context) error {
	cmds, reqs := p.cmds, p.reqs
	p.cmds, p.reqs = nil, p.reqs[:0]
	if len(reqs) > 0 {
		if err := p.exec(ctx, cmds, reqs); err != nil {
			for _, cmd := range cmds {
				if cmd.err == nil && !cmd.answered {
					cmd.err = err
				}
			}
		}
		clear(reqs) // drop the Data references
	}
	for _, cmd := range cmds {
		if cmd.err != nil {
			return cmd.err
		}
	}
	return nil
}

// exec sends reqs (the Cmds without an early error, in order) as one batch
// and waits for it. With request ids (see Client.do, whose rules it
// shares: prepareAttempt, retryAfter) the changes answered not_leader or
// cut off by a lost connection are sent again, in their order and with
// their ids, as one batch on the next connection; the Cmds answered keep
// their replies.
//
// A first attempt on a connection whose server remembers no request ids
// (max_request_ids -1: hello reports none) needs none of that: every
// request of a Pipe is a change, sent without the Client's id, so none may
// be sent again (prepareWith's retry is false for each) and none is
// refused. That attempt sends reqs as they are and keeps no bookkeeping
// (todo and retry stay nil: no per-request pass before or after the
// batch, nothing allocated for them), the single node's pipelined add as
// it was before request ids.
func (p *Pipe) exec(ctx context.Context, cmds []*Cmd, reqs []protocol.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The Cmds the requests belong to: those without an early error.
	sent := make([]*Cmd, 0, len(reqs))
	for _, cmd := range cmds {
		if cmd.err == nil {
			sent = append(sent, cmd)
		}
	}
	// One id per request for every attempt, consecutive: a batch finds a
	// reply's Cmd by id - base.
	n := uint64(len(reqs))
	base := p.c.nextID.Add(n) - n + 1
	for i := range reqs {
		reqs[i].ID = base + uint64(i)
	}
	var todo []int   // the indexes of the requests to send; nil: all of them (a first attempt)
	var retry []bool // whether each may be sent again; nil: none may (todo is nil)
	for {
		cn, err := p.c.waitConn(ctx)
		if err != nil {
			return err
		}
		if ids := cn.remembersIDs(); todo != nil || ids {
			if todo == nil {
				todo, retry = make([]int, len(reqs)), make([]bool, len(reqs))
				for i := range todo {
					todo[i] = i
				}
			}
			if todo = p.prepare(cn, ids, sent, reqs, todo, retry); len(todo) == 0 {
				return nil
			}
		}
		b, err := p.send(cn, base, sent, reqs, todo)
		if errors.Is(err, errConnDead) {
			continue // nothing was sent: try the next connection
		}
		if err != nil || b == nil {
			return err
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			cn.dropBatch(b)
			return ctx.Err()
		}
		if todo == nil { // sent without ids: none is sent again
			return nil
		}
		if todo = retries(sent, reqs, todo, retry); len(todo) == 0 {
			return nil
		}
		if err := p.c.awaitConnEnd(ctx, cn); err != nil {
			return err
		}
	}
}

// prepare readies the requests of todo for an attempt on cn
// (Client.prepareAttempt: a change carries the Client's id when cn's
// server remembers request ids), notes in retry whether each may be sent
// again, and returns those to send; one that may not go to cn fails its
// Cmd with prepareAttempt's error. ids is cn.remembersIDs(), read once for
// the batch, not under cn's lock for each request (a pipelined add paid a
// lock and an unlock for it).
func (p *Pipe) prepare(cn *conn, ids bool, sent []*Cmd, reqs []protocol.Request, todo []int, retry []bool) []int {
	keep := todo[:0]
	for _, i := range todo {
		r, err := p.c.prepareWith(&reqs[i], ids, cn.addr)
		if err != nil {
			sent[i].err, sent[i].answered = err, true
			continue
		}
		retry[i] = r
		keep = append(keep, i)
	}
	return keep
}

// retries returns the requests of todo, just sent as a batch that is done,
// whose Cmds are to be sent again (retryAfter: not_leader, or a change
// whose connection was lost before its reply), in order, and makes those
// Cmds wait again. The others keep their outcome.
func retries(sent []*Cmd, reqs []protocol.Request, todo []int, retry []bool) []int {
	next := todo[:0]
	for _, i := range todo {
		if cmd := sent[i]; retryAfter(reqs[i].Op, retry[i], cmd.err) {
			cmd.err, cmd.answered = nil, false
			next = append(next, i)
		}
	}
	return next
}
