package client

import (
	"fmt"

	"github.com/tickwheel/tickwheel/protocol"
)

// batch is a Pipe's requests in flight on a conn: request ids base,
// base+1, ... belong to cmds in order; those already answered (by an
// earlier attempt of a retried Pipe) were not sent again and a reply to
// their ids is ignored. The reader fills in each Cmd as its reply arrives,
// under the conn's lock, and closes done after the last (left) one.
type batch struct {
	base uint64
	cmds []*Cmd
	left int // replies still to come
	done chan struct{}
}

// has reports whether id is one of b's requests.
func (b *batch) has(id uint64) bool { return id-b.base < uint64(len(b.cmds)) }

// send encodes the requests of todo (indexes into reqs, in order; nil: all
// of reqs; their ids already set: reqs[i].ID is base+i) and queues them
// for the writer at once, and returns their batch (nil when none could be sent: each request
// over the server's max_frame fails its Cmd without being sent, as the
// server would close the connection). sent holds the Cmds of reqs, in
// order; those not in todo are answered (by an earlier attempt) and a
// reply to their ids is ignored. errConnDead means nothing was sent.
func (p *Pipe) send(cn *conn, base uint64, sent []*Cmd, reqs []protocol.Request, todo []int) (*batch, error) {
	cn.mu.Lock()
	maxFrame := cn.maxFrame
	cn.mu.Unlock()
	b := &batch{base: base, cmds: sent, done: make(chan struct{})}
	buf := p.buf[:0]
	n := len(reqs)
	if todo != nil {
		n = len(todo)
	}
	for k := range n {
		i := k
		if todo != nil {
			i = todo[k]
		}
		start := len(buf)
		buf = protocol.AppendRequest(buf, &reqs[i])
		if size := len(buf) - start - protocol.HeaderSize; size > maxFrame {
			buf = buf[:start]
			sent[i].err = &Error{Op: reqs[i].Op, Code: protocol.CodeLimitExceeded,
				Message: fmt.Sprintf("request of %d bytes exceeds the server's max_frame (%d bytes)", size, maxFrame)}
			sent[i].answered = true
			continue
		}
		b.left++
	}
	if cap(buf) <= keepBuf {
		p.buf = buf
	}
	if b.left == 0 {
		return nil, nil
	}
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		return nil, errConnDead
	}
	cn.wbuf = append(cn.wbuf, buf...)
	cn.batches = append(cn.batches, b)
	cn.mu.Unlock()
	cn.ring()
	return b, nil
}

// batchReply hands reply m to the Cmd of a batch it answers, and reports
// whether one did. cn.mu must be held. Replies of one batch arrive one
// after another, so the batch of the last reply is tried first.
func (cn *conn) batchReply(m *protocol.Message) bool {
	i := cn.lastBatch
	if i >= len(cn.batches) || !cn.batches[i].has(m.ID) {
		i = -1
		for j, b := range cn.batches {
			if b.has(m.ID) {
				i = j
				break
			}
		}
		if i < 0 {
			return false
		}
		cn.lastBatch = i
	}
	b := cn.batches[i]
	cmd := b.cmds[m.ID-b.base]
	if cmd.answered { // a duplicate id: not this batch's reply
		return false
	}
	cmd.answered = true
	switch {
	case m.Kind == protocol.KindError:
		cmd.err = &Error{Op: cmd.op, Code: m.Code, Message: m.Text, Leader: m.Leader}
	case cmd.op == protocol.OpAdd:
		v, err := protocol.DecodeUints(m.Result, cn.scratch[:0])
		if err == nil && len(v) == 0 {
			err = fmt.Errorf("%w: want 1 value, got 0", protocol.ErrMalformed)
		}
		if err != nil {
			cmd.err = badReply(cmd.op, err)
		} else {
			cmd.due = v[0]
		}
	}
	if b.left--; b.left == 0 {
		cn.batches = append(cn.batches[:i], cn.batches[i+1:]...)
		close(b.done)
	}
	return true
}

// dropBatch forgets b, whose caller gave up: later replies to it are
// discarded. Its Cmds are not touched after it returns.
func (cn *conn) dropBatch(b *batch) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for i, x := range cn.batches {
		if x == b {
			cn.batches = append(cn.batches[:i], cn.batches[i+1:]...)
			return
		}
	}
}

// failBatches gives err to every Cmd still waiting on cn and releases
// their Pipes. cn.mu must be held.
func (cn *conn) failBatches(err error) {
	for _, b := range cn.batches {
		for _, cmd := range b.cmds {
			if !cmd.answered {
				cmd.answered, cmd.err = true, err
			}
		}
		close(b.done)
	}
	cn.batches = nil
}
