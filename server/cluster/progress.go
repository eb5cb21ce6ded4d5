package cluster

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// hashicorp/raft keeps what the leader knows of each follower's log (its
// match index) to itself, and a follower does not keep the leader's commit
// index as it heard it (only the part of it that its own log reaches).
// Both are needed to tell whether a member has caught up: the leader, to
// promote a non-voter (etcd promotes a learner, and Consul's autopilot a
// non-voter, only once it is in sync); a follower, to say it is ready.
// progressTransport learns them from raft's own traffic, passing every call
// through unchanged: a successful AppendEntries or InstallSnapshot tells
// the leader how far the follower's log matches its own; an AppendEntries
// received tells a follower the leader's commit index.

// progress is a node's view of how far the logs of the others reach.
// Safe for concurrent use.
type progress struct {
	mu    sync.Mutex
	match map[raft.ServerID]matchAt // guarded by mu; the leader's view, per follower
	// heard is the commit index in the last AppendEntries this node
	// received (the leader's), 0 before the first.
	heard atomic.Uint64
}

// matchAt is a follower's match index as a leader of term learnt it.
type matchAt struct{ term, index uint64 }

// matched notes that follower id's log matches that of the leader of term
// up to index. What a leader of an earlier term learnt is forgotten: a
// follower's log may since have lost entries that leader had sent it but
// never committed.
func (p *progress) matched(id raft.ServerID, term, index uint64) {
	p.mu.Lock()
	if p.match == nil {
		p.match = map[raft.ServerID]matchAt{}
	}
	if m := p.match[id]; term > m.term || term == m.term && index > m.index {
		p.match[id] = matchAt{term, index}
	}
	p.mu.Unlock()
}

// matchOf is how far follower id's log is known to match the log of this
// node as the leader of term (0: not known).
func (p *progress) matchOf(id raft.ServerID, term uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.match[id]; m.term == term {
		return m.index
	}
	return 0
}

// appendMatch is the index up to which a follower that accepted req holds
// the leader's log: the last entry sent, or the entry before them when
// none was; 0 for a heartbeat (it carries no log position).
func appendMatch(req *raft.AppendEntriesRequest) uint64 {
	if n := len(req.Entries); n > 0 {
		return req.Entries[n-1].Index
	}
	return req.PrevLogEntry
}

// progressTransport is raft's transport with the progress noted; every
// method is the network transport's.
type progressTransport struct {
	*raft.NetworkTransport
	p *progress

	consumeOnce sync.Once
	rpcs        chan raft.RPC
	done        chan struct{}
	closeOnce   sync.Once
}

func newProgressTransport(t *raft.NetworkTransport, p *progress) *progressTransport {
	return &progressTransport{NetworkTransport: t, p: p, done: make(chan struct{})}
}

// AppendEntries notes a follower's match index when it accepts.
func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Success && resp.Term <= args.Term {
		if m := appendMatch(args); m > 0 {
			t.p.matched(id, args.Term, m)
		}
	}
	return err
}

// InstallSnapshot notes a follower's match index: the snapshot's last
// index, once it has installed it.
func (t *progressTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Success {
		t.p.matched(id, args.Term, args.LastLogIndex)
	}
	return err
}

// AppendEntriesPipeline is the network transport's pipeline, its
// responses noted as they are consumed.
func (t *progressTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &progressPipeline{AppendPipeline: inner, id: id, p: t.p, out: make(chan raft.AppendFuture), done: make(chan struct{})}
	go p.forward()
	return p, nil
}

// Consumer is the network transport's channel of incoming RPCs, each
// passed on after an AppendEntries' commit index is noted (by a goroutine
// started at the first call, which raft makes once, and stopped by Close).
func (t *progressTransport) Consumer() <-chan raft.RPC {
	t.consumeOnce.Do(func() {
		t.rpcs = make(chan raft.RPC)
		in := t.NetworkTransport.Consumer()
		go func() {
			for {
				select {
				case rpc := <-in:
					if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && req.LeaderCommitIndex > 0 {
						t.p.heard.Store(req.LeaderCommitIndex) // (a heartbeat carries none)
					}
					select {
					case t.rpcs <- rpc:
					case <-t.done:
						return
					}
				case <-t.done:
					return
				}
			}
		}()
	})
	return t.rpcs
}

// Close stops the forwarding and closes the network transport.
func (t *progressTransport) Close() error {
	t.closeOnce.Do(func() { close(t.done) })
	return t.NetworkTransport.Close()
}

// progressPipeline passes the network pipeline's responses on to raft,
// noting the follower's match index from each success.
type progressPipeline struct {
	raft.AppendPipeline
	id        raft.ServerID
	p         *progress
	out       chan raft.AppendFuture
	done      chan struct{}
	closeOnce sync.Once
}

// forward runs until Close. raft reads a future's Request and Response
// only (the network pipeline queues one once its response is decoded, or
// failed: then Response is not a success).
func (p *progressPipeline) forward() {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if req, resp := f.Request(), f.Response(); resp != nil && resp.Success && resp.Term <= req.Term {
				if m := appendMatch(req); m > 0 {
					p.p.matched(p.id, req.Term, m)
				}
			}
			select {
			case p.out <- f:
			case <-p.done:
				return
			}
		case <-p.done:
			return
		}
	}
}

func (p *progressPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *progressPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	return p.AppendPipeline.Close()
}
