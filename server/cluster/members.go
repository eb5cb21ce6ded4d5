package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Membership: voters (which vote and count in the quorum) and non-voters
// (which get the log and snapshots, and count in nothing: a read replica,
// or a new node catching up). A node is added as a non-voter, and
// promoted to a voter only once it has caught up, as etcd does with
// learners and Consul's autopilot with new servers: a new, empty node that
// counted in the quorum at once would make a 3-node cluster a 4-node one
// needing 3 acknowledgements while it receives its snapshot (commits then
// wait for both other followers; one more failure blocks writes).

// Member is one server in the raft configuration.
type Member struct {
	ID    string
	Addr  string
	Voter bool // false: a non-voter
	// Match is how far the member's log is known to match the leader's,
	// as this node sees it while it leads (its own last index for
	// itself); 0 when unknown (this node does not lead, or has not heard
	// from the member in its current term).
	Match uint64
}

// ErrNotMember is returned by Promote for a node that is not in the
// configuration, and by WaitCaughtUp when it left it meanwhile.
var ErrNotMember = errors.New("cluster: not a member")

// NotCaughtUpError is WaitCaughtUp's error when the member had not caught
// up by the deadline.
type NotCaughtUpError struct {
	ID            string
	Match, Commit uint64 // the member's match index and the leader's commit index, last seen
	MaxLag        uint64
}

func (e *NotCaughtUpError) Error() string {
	if e.Match == 0 {
		return fmt.Sprintf("cluster: %s has not caught up: the leader has not yet replicated its log or snapshot to it (commit index %d)",
			e.ID, e.Commit)
	}
	return fmt.Sprintf("cluster: %s has not caught up: its log reaches index %d, the commit index is %d (at most %d behind wanted)",
		e.ID, e.Match, e.Commit, e.MaxLag)
}

func suffrageName(s raft.ServerSuffrage) string {
	if s == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}

// member returns server id of the latest configuration (which may not be
// committed yet). Lock-free in raft: safe from any goroutine, the event
// loop included.
func (n *Node) member(id raft.ServerID) (raft.Server, bool) {
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if s.ID == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// Member returns member id of the latest configuration (Match is not
// filled in). Safe from any goroutine.
func (n *Node) Member(id string) (Member, bool) {
	s, ok := n.member(raft.ServerID(id))
	return Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter}, ok
}

// Members lists the latest raft configuration, with each member's match
// index when this node leads.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	leading, term := n.raft.State() == raft.Leader, n.raft.CurrentTerm()
	var ms []Member
	for _, s := range f.Configuration().Servers {
		m := Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter}
		switch {
		case leading && string(s.ID) == n.cfg.NodeID:
			m.Match = n.raft.LastIndex()
		case leading:
			m.Match = n.prog.matchOf(s.ID, term)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// AddVoter adds node id at raft address addr as a voter at once (on the
// leader only; elsewhere a *NotLeaderError); a non-voter id becomes a
// voter. The new node must have been started with no Peers (joining) and
// the same cluster id and token; it catches up from a snapshot and the
// log. Returns once the change is committed. Prefer AddCaughtUp for a new
// node: it votes and counts in the quorum from the start.
func (n *Node) AddVoter(id, addr string, timeout time.Duration) error {
	return n.membership(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout))
}

// AddNonvoter adds node id at raft address addr as a non-voter (on the
// leader only): it receives the log and snapshots, answers clients
// not_leader as a follower, and neither votes nor counts in the quorum, so
// its failure blocks nothing. A voter id stays a voter (raft's rule): the
// caller checks first. Returns once the change is committed.
func (n *Node) AddNonvoter(id, addr string, timeout time.Duration) error {
	return n.membership(n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout))
}

// AddCaughtUp adds node id at addr as a voter once it has caught up: it
// is added as a non-voter, WaitCaughtUp waits (ctx bounds the wait), and
// then it is promoted. A voter id has its address set (no wait); a
// non-voter id is promoted once caught up. On a *NotCaughtUpError the node
// stays a non-voter (Promote later). timeout bounds each configuration
// change's wait to be enqueued in raft.
func (n *Node) AddCaughtUp(ctx context.Context, id, addr string, maxLag uint64, timeout time.Duration) error {
	if s, ok := n.member(raft.ServerID(id)); ok && s.Suffrage == raft.Voter {
		return n.AddVoter(id, addr, timeout)
	}
	if err := n.AddNonvoter(id, addr, timeout); err != nil {
		return err
	}
	n.cfg.Log.Info("cluster: added a non-voter; it is promoted to a voter once it has caught up", "member", id, "raft_addr", addr)
	if err := n.WaitCaughtUp(ctx, id, maxLag); err != nil {
		return err
	}
	if err := n.AddVoter(id, addr, timeout); err != nil {
		return err
	}
	n.cfg.Log.Info("cluster: a member caught up and was promoted to a voter", "member", id)
	return nil
}

// Promote makes non-voter id a voter once it has caught up (WaitCaughtUp,
// bounded by ctx). A voter is left as it is; a node not in the
// configuration is ErrNotMember.
func (n *Node) Promote(ctx context.Context, id string, maxLag uint64, timeout time.Duration) error {
	s, ok := n.member(raft.ServerID(id))
	switch {
	case !ok:
		return fmt.Errorf("%w: %s is not in the cluster's configuration: add it", ErrNotMember, id)
	case s.Suffrage == raft.Voter:
		return nil
	}
	if err := n.WaitCaughtUp(ctx, id, maxLag); err != nil {
		return err
	}
	if err := n.AddVoter(id, string(s.Address), timeout); err != nil {
		return err
	}
	n.cfg.Log.Info("cluster: a non-voter caught up and was promoted to a voter", "member", id)
	return nil
}

// caughtUpPoll is how often WaitCaughtUp looks at the member's progress.
const caughtUpPoll = 20 * time.Millisecond

// WaitCaughtUp waits until member id's log, as this leader knows it from
// replication, reaches within maxLag entries of the commit index: it has
// installed the snapshot it needed and received the log after it. It
// fails with a *NotLeaderError when this node stops leading, with
// ErrNotMember when id leaves the configuration, and with a
// *NotCaughtUpError when ctx ends first.
func (n *Node) WaitCaughtUp(ctx context.Context, id string, maxLag uint64) error {
	t := time.NewTicker(caughtUpPoll)
	defer t.Stop()
	for {
		if n.raft.State() != raft.Leader {
			return n.notLeader()
		}
		if _, ok := n.member(raft.ServerID(id)); !ok {
			return fmt.Errorf("%w: %s left the configuration while it caught up", ErrNotMember, id)
		}
		match, commit := n.prog.matchOf(raft.ServerID(id), n.raft.CurrentTerm()), n.raft.CommitIndex()
		if match > 0 && match+maxLag >= commit {
			return nil
		}
		select {
		case <-ctx.Done():
			return &NotCaughtUpError{ID: id, Match: match, Commit: commit, MaxLag: maxLag}
		case <-t.C:
		}
	}
}

// RemoveServer removes node id from the cluster (on the leader only).
// Removing the leader itself makes it step down once committed.
func (n *Node) RemoveServer(id string, timeout time.Duration) error {
	return n.membership(n.raft.RemoveServer(raft.ServerID(id), 0, timeout))
}

func (n *Node) membership(f raft.IndexFuture) error {
	err := f.Error()
	if errors.Is(err, raft.ErrNotLeader) {
		return n.notLeader()
	}
	return err
}
