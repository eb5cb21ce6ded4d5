package cluster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
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
// event loop) and the node's proposer goroutine, which has at most
// Config.MaxInFlight raft entries in flight: whatever is proposed
// meanwhile goes into the next entry, up to Config.MaxEntryBytes. The
// entries in flight are awaited in order by the node's await goroutine,
// which reports their proposals.
type proposer struct {
	mu     sync.Mutex
	queue  []proposal // guarded by mu
	bytes  int        // guarded by mu: the records' bytes in queue
	closed bool       // guarded by mu
	wake   chan struct{}
	// slots holds a token per entry in flight (capacity MaxInFlight);
	// flights carries them, in proposal order, to the await goroutine.
	slots   chan struct{}
	flights chan flight
}

// flight is an entry in flight (f), or proposals failed before they
// became one (err), reported in their turn.
type flight struct {
	f     raft.ApplyFuture
	err   error
	batch []proposal
}

func (p *proposer) init(inFlight int) {
	p.wake = make(chan struct{}, 1)
	p.slots = make(chan struct{}, inFlight)
	p.flights = make(chan flight, inFlight)
}

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
// apart from the entries in flight (for the caller's own budget).
func (n *Node) Pending() (count, bytes int) {
	n.prop.mu.Lock()
	defer n.prop.mu.Unlock()
	return len(n.prop.queue), n.prop.bytes
}

// propose is the proposer goroutine: it takes a slot, then the next
// entry's proposals, and proposes them.
func (n *Node) propose() {
	defer n.wg.Done()
	p := &n.prop
	defer close(p.flights)
	for {
		select {
		case <-p.wake:
		case <-n.stop:
		}
		for {
			p.slots <- struct{}{} // the await goroutine frees one per entry reported
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			batch := p.take(n.cfg.MaxEntryBytes)
			if len(batch) == 0 {
				<-p.slots
				if closed {
					return
				}
				break
			}
			if closed {
				p.flights <- flight{err: ErrShutdown, batch: batch}
				continue
			}
			p.flights <- n.apply(batch)
		}
	}
}

// apply hands one entry to raft, without waiting for its commit.
func (n *Node) apply(batch []proposal) flight {
	n.mu.Lock()
	cur := n.stint
	n.mu.Unlock()
	if batch[0].stint != cur {
		return flight{err: errors.New("leadership lost before it was proposed"), batch: batch}
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
	return flight{f: f, batch: batch}
}

// await is the goroutine that waits for the entries in flight, in
// proposal order, and reports their proposals (raft commits, and applies,
// its entries in index order).
func (n *Node) await() {
	defer n.wg.Done()
	for fl := range n.prop.flights {
		err := fl.err
		if err == nil {
			err = fl.f.Error()
		}
		if err != nil {
			fail(fl.batch, err)
		} else {
			idx := fl.f.Index()
			for _, p := range fl.batch {
				p.done(idx, nil)
			}
		}
		<-n.prop.slots
	}
}

func fail(batch []proposal, cause error) {
	err := fmt.Errorf("%w: %w", ErrNotCommitted, cause)
	for _, p := range batch {
		p.done(0, err)
	}
}
