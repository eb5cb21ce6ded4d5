package cluster

import (
	"errors"
	"fmt"
	"sync"
)

// ErrNotCommitted is the error a proposal's done callback gets when this
// node did not see it committed: leadership was lost (or passed) before
// or while it was replicated, or the node shut down. No reply may leave on
// its account. It may still be committed under the next leader (a leader
// that lost leadership cannot tell): then it reaches Consumer.Apply like
// any other entry, with a Stint that is no longer the current one.
var ErrNotCommitted = errors.New("cluster: the proposal was not committed by this leader")

// ErrShutdown is the cause of proposals failed by Node.Shutdown.
var ErrShutdown = errors.New("cluster: node shut down")

// Done is called once per proposal, in proposal order, on the node's
// proposer goroutine: with the raft index of the entry that carries the
// record once it is committed (and applied on this node), or with an error
// wrapping ErrNotCommitted. It must not block (ring the event loop's
// doorbell).
type Done func(index uint64, err error)

type proposal struct {
	rec   []byte
	stint uint64
	done  Done
}

// proposer is the queue between Propose (any goroutine, typically the
// event loop) and the node's proposer goroutine, which has at most one
// raft entry in flight: whatever is proposed meanwhile goes into the next
// entry, up to Config.MaxEntryBytes.
type proposer struct {
	mu     sync.Mutex
	queue  []proposal // guarded by mu
	bytes  int        // guarded by mu: the records' bytes in queue
	closed bool       // guarded by mu
	wake   chan struct{}
}

func (p *proposer) init() { p.wake = make(chan struct{}, 1) }

func (p *proposer) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *proposer) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.kick()
}

// take removes the next entry's proposals: those of the first one's
// stint, at least one, at most max bytes of records.
func (p *proposer) take(max int) []proposal {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, size := 0, 0
	for n < len(p.queue) && p.queue[n].stint == p.queue[0].stint {
		if n > 0 && size+len(p.queue[n].rec) > max {
			break
		}
		size += len(p.queue[n].rec)
		n++
	}
	batch := append([]proposal(nil), p.queue[:n]...)
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	p.bytes -= size
	return batch
}

// Propose queues rec, the record of one event-loop turn, for the next raft
// entry, and returns at once: done reports the outcome. rec must not be
// changed until done is called. On a node that is not the leader (or not
// yet ready to propose) it returns a *NotLeaderError and done is never
// called.
func (n *Node) Propose(rec []byte, done Done) error {
	n.mu.Lock()
	stint := n.stint
	n.mu.Unlock()
	if stint == 0 {
		return n.notLeader()
	}
	p := &n.prop
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrNotCommitted, ErrShutdown)
	}
	p.queue = append(p.queue, proposal{rec: rec, stint: stint, done: done})
	p.bytes += len(rec)
	p.mu.Unlock()
	p.kick()
	return nil
}

// Pending is the number of proposals and their bytes not yet reported,
// apart from the entry in flight (for the caller's own budget).
func (n *Node) Pending() (count, bytes int) {
	n.prop.mu.Lock()
	defer n.prop.mu.Unlock()
	return len(n.prop.queue), n.prop.bytes
}

// propose is the proposer goroutine.
func (n *Node) propose() {
	defer n.wg.Done()
	for {
		select {
		case <-n.prop.wake:
		case <-n.stop:
		}
		for {
			n.prop.mu.Lock()
			closed := n.prop.closed
			n.prop.mu.Unlock()
			batch := n.prop.take(n.cfg.MaxEntryBytes)
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			if closed {
				fail(batch, ErrShutdown)
				continue
			}
			n.commit(batch)
		}
	}
}

// commit replicates one entry and reports its proposals.
func (n *Node) commit(batch []proposal) {
	n.mu.Lock()
	cur := n.stint
	n.mu.Unlock()
	if batch[0].stint != cur {
		fail(batch, errors.New("leadership lost before it was proposed"))
		return
	}
	recs := make([][]byte, len(batch))
	size := 16
	for i, p := range batch {
		recs[i] = p.rec
		size += len(p.rec) + 5
	}
	// raft keeps the entry's bytes (in flight, in its cache): a new buffer
	// each time.
	f := n.raft.Apply(appendRecords(make([]byte, 0, size), cur, recs), n.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		fail(batch, err)
		return
	}
	idx := f.Index()
	for _, p := range batch {
		p.done(idx, nil)
	}
}

func fail(batch []proposal, cause error) {
	err := fmt.Errorf("%w: %w", ErrNotCommitted, cause)
	for _, p := range batch {
		p.done(0, err)
	}
}
