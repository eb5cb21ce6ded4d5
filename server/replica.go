package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/cluster"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// Cluster mode (issue 25; docs/ARCHITECTURE.md, "Replication"). The
// server is one node of a raft cluster (server/cluster): the leader's event
// loop executes turns as a single server does and its committer, the
// replica, proposes each turn's record; a reply to a request that changed
// state leaves once its record is committed by a quorum. Every node's Core,
// the leader's included, receives the committed records through the
// replica's cluster.Consumer methods, on the event loop: a follower
// replays them, the leader skips those of its own leadership (its Core
// executed them already). Followers serve no clients: they answer the first
// request of every connection with not_leader, naming the leader's client
// address, and close it. A leader that loses leadership closes its client
// connections and rebuilds its Core from committed state only
// (cluster.Node.Committed); a node that becomes leader closes the old
// leader's sessions (Core.Restart, recorded: its first record makes every
// node agree they are gone), sets tw-time as after a restart (the time with
// no leader is downtime: catch-up or pause), and serves. Only the leader
// reads the clock and fires.

// replica is the server's committer and raft consumer in cluster mode.
// node is set once Start has started it; the other fields are owned by
// the event loop.
type replica struct {
	s    *Server
	node *cluster.Node
	// ctx ends when the server stops: consumer calls waiting for the loop
	// give up.
	ctx    context.Context
	cancel context.CancelFunc

	leading bool
	// stint is the leadership whose records the Core executed (0 when
	// following): committed entries carrying it are skipped.
	stint uint64
	// skipUpto: entries up to this index are in the Core already (it was
	// rebuilt from committed state up to it).
	skipUpto uint64
	// gen counts leadership changes: a proposal's report from an earlier
	// one is ignored.
	gen uint64
	// proposed counts this leadership's proposals, reported those whose
	// outcome arrived: a turn's held replies (Core.HoldTurn, numbered by
	// its proposal) leave once it is reported committed. failed: a
	// proposal was not committed (leadership is being lost; its replies,
	// and those of every later turn, never leave).
	proposed, reported uint64
	failed             bool
	// applied counts this leadership's proposals seen in committed entries
	// (Apply).
	applied uint64

	// The latest proposal reported committed, from the proposer goroutine
	// to the loop: one loop task takes however many reports arrived
	// before it ran (queued: one is on its way).
	repMu     sync.Mutex
	repGen    uint64 // guarded by repMu
	repSeq    uint64 // guarded by repMu
	repQueued bool   // guarded by repMu
}

// openReplica makes the state of a cluster node: an empty Core (tw-time 0,
// as on every node, until the first leader sets it) that raft fills at
// Start.
func (s *Server) openReplica() error {
	w, err := wheel.New(0, wheel.Config{})
	if err != nil {
		return err
	}
	s.core = session.New(s.cfg.sessionConfig(), s.cfg.Limits, w, s.log, s.rlog)
	s.core.SetStatsHook(s.clusterStats)
	s.core.SetClusterHook(s.clusterOp) // membership.go
	ctx, cancel := context.WithCancel(context.Background())
	s.replica = &replica{s: s, ctx: ctx, cancel: cancel}
	s.commits = s.replica
	s.wallAt = math.MaxInt64 // only a leader records the wall-clock time
	s.log.Info("cluster mode: the state is replicated by raft", "cluster", s.cfg.Cluster.ID,
		"node", s.cfg.Cluster.NodeID, "raft_addr", s.cfg.Cluster.RaftAddr, "raft_dir", s.cfg.Cluster.DataDir, "raft_tls", s.cfg.Cluster.TLS)
	return nil
}

// startReplica starts the raft node, once the event loop runs (raft hands
// its local snapshot and log to the consumer, on the loop, as it starts).
func (s *Server) startReplica() error {
	r := s.replica
	cfg := s.cfg.nodeConfig(s.addr, s.log)
	cfg.OnLeadership = r.onLeadership
	if s.cfg.Cluster.TLS { // clusterDefaults checked the files are set; startTLS loaded them
		var err error
		if cfg.TLSServer, cfg.TLSClient, err = s.tls.PeerConfigs(); err != nil {
			return tlsKeyErr("tls.", err)
		}
	}
	node, err := cluster.Start(cfg, r)
	if err != nil {
		return err
	}
	r.node = node
	return nil
}

// NotLeader reports, in cluster mode, whether this node may not serve
// clients now, and the leader's client address ("" when unknown). Safe
// from the event loop only.
func (s *Server) notLeader() (bool, string) {
	r := s.replica
	if r == nil || r.leading {
		return false, ""
	}
	if r.node == nil {
		return true, ""
	}
	return true, r.node.Status().LeaderClientAddr
}

// commit proposes the turn's record (committer.commit). Only the leader's
// Core records: a follower's changes only by replay.
func (r *replica) commit(rec []byte, replies, _ bool) {
	if !r.leading {
		return
	}
	s := r.s
	if rec == nil {
		if replies && r.reported < r.proposed {
			s.core.HoldTurn(r.proposed) // behind the records in flight
		}
		return
	}
	r.proposed++
	seq, gen := r.proposed, r.gen
	if replies {
		s.core.HoldTurn(seq)
	}
	// Propose keeps the bytes until done; the Core reuses its buffer.
	err := r.node.Propose(bytes.Clone(rec), func(_ uint64, err error) { r.report(gen, seq, err) })
	if err != nil {
		r.failed = true
		s.log.Warn("cluster: a turn's record could not be proposed; leadership is being lost", "err", err)
	}
}

// report takes a proposal's outcome, on the node's proposer goroutine
// (one call per proposal, in proposal order), to the loop. Commits are
// coalesced: one loop task takes the latest reported when it runs.
func (r *replica) report(gen, seq uint64, err error) {
	l := r.s.loop.Load()
	if l == nil {
		return
	}
	if err != nil {
		_ = (*l).Execute(r.ctx, gnet.RunnableFunc(func(context.Context) error {
			r.onReport(gen, seq, err)
			return nil
		}))
		return
	}
	r.repMu.Lock()
	r.repGen, r.repSeq = gen, seq
	queued := r.repQueued
	r.repQueued = true
	r.repMu.Unlock()
	if queued {
		return
	}
	if (*l).Execute(r.ctx, gnet.RunnableFunc(func(context.Context) error {
		r.repMu.Lock()
		gen, seq := r.repGen, r.repSeq
		r.repQueued = false
		r.repMu.Unlock()
		r.onReport(gen, seq, nil)
		return nil
	})) != nil {
		r.repMu.Lock()
		r.repQueued = false
		r.repMu.Unlock()
	}
}

// onReport lets go the held replies of every turn up to proposal seq, now
// committed (in proposal order: seq covers the earlier ones). Runs on the
// loop.
func (r *replica) onReport(gen, seq uint64, err error) {
	if gen != r.gen || !r.leading {
		return
	}
	s := r.s
	if err != nil {
		if !r.failed {
			s.log.Warn("cluster: a turn's record was not committed; its replies will not leave", "err", err)
		}
		r.failed = true
		return
	}
	r.committed(seq)
}

// committed takes the news that this leadership's proposals up to seq are
// committed (from their reports, or sooner from Apply, which sees the
// entries that carry them) and lets their turns' held replies go. Runs on
// the loop.
func (r *replica) committed(seq uint64) {
	if seq <= r.reported {
		return
	}
	r.reported = seq
	s := r.s
	if !r.failed && s.core.Held() > 0 {
		s.core.ReleaseTurns(seq)
		s.flush()
		s.retime()
	}
}

// drain: held replies leave only on commit (committer.drain).
func (r *replica) drain() {}

// handOver hands leadership to another node, if this one leads, before a
// graceful stop (Server.Stop): clients then find a new leader after a
// round of raft messages instead of an election timeout. Not on the event
// loop, which keeps serving meanwhile (raft takes no proposal during the
// transfer: their turns' replies wait, and go with the connections when
// this node steps down; the clients send those changes again with their
// request ids).
func (r *replica) handOver() {
	if r.node == nil {
		return
	}
	began := time.Now()
	led, to, err := r.node.TransferLeadership()
	switch {
	case err != nil:
		r.s.log.Warn("cluster: stopping: leadership could not be handed over; the others elect a leader after an election timeout", "err", err)
	case led:
		r.s.log.Info("cluster: stopping: leadership handed over", "to", to, "took", time.Since(began).Round(time.Millisecond))
	}
}

// stop shuts the raft node down (committer.stop).
func (r *replica) stop() error {
	r.cancel()
	if r.node == nil {
		return nil
	}
	return r.node.Shutdown()
}

// close is stop for a server that failed to start (committer.close).
func (r *replica) close() { _ = r.stop() }

// onLoop runs fn on the event loop for a consumer call, and returns its
// error, or the context's when the server stops first.
func (r *replica) onLoop(fn func() error) error {
	var err error
	if lerr := r.s.onLoop(r.ctx, func() { err = fn() }); lerr != nil {
		return lerr
	}
	return err
}

// Apply replays committed entries into the Core (cluster.Consumer): all
// of them on a follower, those of other leaderships on the leader. The
// leader's own entries carry its proposals in proposal order, one record
// each: seeing them committed here lets their replies go without waiting
// for the proposals' reports (which come after raft has applied them).
//
// A record that cannot be replayed means this node's Core is no longer the
// cluster's state: the node stops (as when a rebuild fails), rather than
// stay a voter that raft counts as caught up and may elect to serve it.
func (r *replica) Apply(entries []cluster.Entry) error {
	err := r.onLoop(func() error {
		own := uint64(0)
		for _, e := range entries {
			if e.Index <= r.skipUpto {
				continue
			}
			if r.stint != 0 && e.Stint == r.stint {
				own += uint64(len(e.Records))
				continue
			}
			if err := r.replay(e, true); err != nil {
				return err
			}
		}
		if own > 0 {
			r.applied += own
			r.committed(r.applied)
		}
		return nil
	})
	if err != nil && r.ctx.Err() == nil {
		r.fail("cluster: a committed record could not be replayed: this node's state is no longer the cluster's; stopping", err)
	}
	return err
}

// fail logs msg and stops the server, on a goroutine of its own (Stop
// waits for raft, whose goroutine may be the caller's). Safe from any
// goroutine.
func (r *replica) fail(msg string, err error) {
	r.s.log.Error(msg, "err", err)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.s.Stop(ctx)
	}()
}

// replay replays a committed entry's records into the Core and, when
// check, hashes the state at each state check's mark (statecheck.go); a
// rebuild does not (its checks were made when the records were first
// applied).
func (r *replica) replay(e cluster.Entry, check bool) error {
	for i, rec := range e.Records {
		if err := r.s.core.Replay(rec); err != nil {
			return fmt.Errorf("replaying record %d of entry %d: %w", i, e.Index, err)
		}
		if id, ok := r.s.core.TakeCheck(); ok && check {
			r.s.startCheck(id)
		}
		r.s.populateIndexAhead()
	}
	return nil
}

// errBusy: the leader has turns in flight; raft tries again later.
var errBusy = errors.New("cluster: turns are being committed; the snapshot is taken later")

// Snapshot takes an immutable copy of the Core (cluster.Consumer). It
// must be the state as of the last entry applied: a leader with records
// not yet committed refuses (raft tries again at its next interval).
func (r *replica) Snapshot() (cluster.Snapshot, error) {
	var snap *session.Snapshot
	err := r.onLoop(func() error {
		if r.leading {
			r.s.commit() // inputs recorded outside a turn (a connection opened or closed)
			if r.reported < r.proposed {
				return errBusy
			}
		}
		snap = r.s.core.Snapshot()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &replicaSnapshot{r: r, snap: snap}, nil
}

// replicaSnapshot is a Core's copy being written into a raft snapshot.
type replicaSnapshot struct {
	r    *replica
	snap *session.Snapshot
}

// Write encodes the copy piecewise, yielding between pieces (see
// snapshotWrite.write; it runs at the server's own priority).
func (rs *replicaSnapshot) Write(w io.Writer) error {
	buf := make([]byte, 0, snapshotPiece)
	rs.snap.SetYield(runtime.Gosched)
	for done := false; !done; {
		buf, done = rs.snap.AppendNext(buf[:0], snapshotPiece)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// Release gives the copy's memory back, on the loop.
func (rs *replicaSnapshot) Release() {
	l := rs.r.s.loop.Load()
	if l == nil {
		return
	}
	_ = (*l).Execute(rs.r.ctx, gnet.RunnableFunc(func(context.Context) error {
		rs.snap.Release()
		return nil
	}))
}

// Restore replaces the Core with a snapshot's (cluster.Consumer).
func (r *replica) Restore(rd io.Reader) error {
	b, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	return r.onLoop(func() error { return r.restore(b) })
}

// restore makes the Core the one in snapshot bytes b, or an empty one when
// b is nil. Runs on the loop.
func (r *replica) restore(b []byte) error {
	s := r.s
	var core *session.Core
	if b == nil {
		w, err := wheel.New(0, wheel.Config{})
		if err != nil {
			return err
		}
		core = session.New(s.cfg.sessionConfig(), s.cfg.Limits, w, s.log, s.rlog)
	} else {
		var err error
		if core, err = session.Restore(s.cfg.sessionConfig(), b, s.log, s.rlog); err != nil {
			return err
		}
	}
	s.adoptCore(core)
	return nil
}

// adoptCore makes c the server's Core, not recording (a follower's).
func (s *Server) adoptCore(c *session.Core) {
	s.core = c
	c.SetClockHook(s.applyClock)
	c.SetInstantHook(s.clock.Instant)
	c.SetWire(s.cfg.wireLimits())
	c.SetStatsHook(s.clusterStats)
	c.SetClusterHook(s.clusterOp)
	s.setReadOnly("")
}

// clusterStats adds the node's raft state to a stats reply.
func (s *Server) clusterStats(st *protocol.Stats) {
	k := s.clusterMetrics()
	st.Role, st.Leader, st.Term, st.CommitIndex, st.AppliedIndex = k.Role, k.Leader, k.Term, k.CommitIndex, k.AppliedIndex
	st.Suffrage, st.Voters, st.Nonvoters = k.Suffrage, uint64(k.Voters), uint64(k.Nonvoters)
}

// onLeadership takes a change of role, on the node's watcher goroutine,
// to the loop.
func (r *replica) onLeadership(l cluster.Leadership) {
	loop := r.s.loop.Load()
	if loop == nil {
		return
	}
	_ = (*loop).Execute(r.ctx, gnet.RunnableFunc(func(context.Context) error {
		if l.Leader {
			r.lead(l)
		} else {
			r.follow()
		}
		return nil
	}))
}

// lead makes this node serve: the old leader's sessions are closed and
// tw-time set as after a restart, recorded in its first record. Runs on
// the loop.
func (r *replica) lead(l cluster.Leadership) {
	s := r.s
	s.closeClients()
	r.gen++
	r.leading, r.stint = true, l.Stint
	r.proposed, r.reported, r.applied, r.failed = 0, 0, 0, false
	c := s.core
	c.Record(true)
	c.SetReadsWait(true) // no reply shows a change that may not commit
	c.Restart()
	now := time.Now()
	wallNs, _ := c.Wall()
	start, speed, frozen := s.resumeTick(now), c.Speed(), c.Frozen()
	fresh := wallNs == 0 && c.Now() == 0 // no leader ever set tw-time
	if fresh {
		start, speed, frozen = s.cfg.StartTick, s.cfg.Speed, s.cfg.Frozen
		if start == 0 {
			start = uint64(now.UnixNano()) / uint64(s.cfg.Tick)
		}
	}
	newClock := wheel.NewClock
	if frozen {
		newClock = wheel.NewFrozenClock
	}
	origin := s.origin
	s.clock = newClock(start, s.cfg.Tick, func() time.Duration { return time.Since(origin) })
	if err := s.clock.SetSpeed(speed); err != nil {
		s.log.Error("cluster: the replicated speed is out of range", "speed", speed, "err", err)
	}
	c.SetInstantHook(s.clock.Instant)
	if !fresh {
		s.noteDowntime()
	}
	c.SetLimits(s.cfg.Limits)
	c.SetAddOnlyBound(s.cfg.AddOnlyBound)
	c.SetClock(s.clock.Speed(), s.clock.Frozen())
	s.recordWall()
	s.log.Info("cluster: leading: serving clients", "term", l.Term, "tw_time", start, "was", c.Now(), "fresh", fresh,
		"downtime", s.cfg.Downtime)
	s.commit()
	s.flush()
	s.retime()
	s.ring()
}

// follow stops serving: the client connections are closed and the Core is
// rebuilt from committed state only (its last turns may never commit).
// Runs on the loop.
func (r *replica) follow() {
	s := r.s
	r.gen++
	r.leading, r.stint = false, 0
	s.wallAt = math.MaxInt64
	s.closeClients()
	s.core.Record(false)
	upto, err := r.node.Committed(func(rd io.Reader) error {
		if rd == nil {
			return r.restore(nil)
		}
		b, err := io.ReadAll(rd)
		if err != nil {
			return err
		}
		return r.restore(b)
	}, func(entries []cluster.Entry) error {
		for _, e := range entries {
			if err := r.replay(e, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.fail("cluster: cannot rebuild the state from committed entries; stopping", err)
		return
	}
	r.skipUpto = upto
	s.setWake(math.MaxInt64)
	s.log.Info("cluster: no longer leading: client connections closed, the state rebuilt from committed entries",
		"upto", upto, "timers", s.core.Wheel().Len())
}

// closeClients closes every client connection (a change of leadership).
// Their sessions are the old Core's: OnClose does not touch the Core for
// them. Runs on the loop.
func (s *Server) closeClients() {
	for id, l := range s.links {
		l.gone = true
		delete(s.links, id)
		_ = l.c.Close()
	}
	s.deferred = nil
}

// notLeaderText is the message of a follower's not_leader reply.
const notLeaderText = "this node is a cluster follower: connect to the leader"

// openFollower takes a client connection to a follower: it will be
// answered not_leader at its first request, or closed after the handshake
// timeout if it sends none (it holds a descriptor: max_connections counts
// it).
func (s *Server) openFollower(c gnet.Conn) {
	c.SetContext(followerMarker{})
	if d := s.cfg.Timeouts.Handshake; d > 0 {
		time.AfterFunc(d, func() { _ = c.Close() }) // (Close is safe from any goroutine)
	}
}

// refuseFollower answers the first request of a connection to a follower
// with not_leader, naming the leader's client address, and closes it.
func (s *Server) refuseFollower(c gnet.Conn) gnet.Action {
	var id uint64
	buf, _ := c.Peek(-1)
	if payload, _, err := protocol.SplitFrame(buf, s.cfg.Limits.MaxFrame); err == nil {
		var req protocol.Request
		_ = protocol.DecodeRequest(payload, &req) // the id is read first; 0 when it cannot be
		id = req.ID
	}
	_, _ = c.Discard(-1)
	_, leader := s.notLeader()
	_, _ = c.Write(protocol.AppendNotLeader(nil, id, notLeaderText, leader))
	return gnet.Close
}

// clusterMetrics reads the node's raft state (safe from any goroutine).
func (s *Server) clusterMetrics() ClusterMetrics {
	r := s.replica
	if r == nil || r.node == nil {
		return ClusterMetrics{On: r != nil}
	}
	st := r.node.Status()
	return ClusterMetrics{On: true, Role: st.Role, Leader: st.LeaderID, LeaderAddr: st.LeaderClientAddr, Term: st.Term,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, LastIndex: st.LastIndex, AuthRefused: st.AuthRefused,
		Suffrage: st.Suffrage, Voters: st.Voters, Nonvoters: st.Nonvoters, LeaderCommit: st.LeaderCommit, Check: s.lastCheck()}
}

// ready: a node is ready when a leader is known, it is a member, and it
// has caught up: it has applied every entry it knows committed, and (a
// follower, voter or not) its applied index is within
// cluster.catch_up_entries of the commit index the leader last sent it.
// A node just added, that has heard from the leader but not yet received
// its snapshot, is not ready (its own commit index is still 0). Safe from
// any goroutine, once Start has started the node.
func (r *replica) ready() bool {
	if r.node == nil {
		return false
	}
	return caughtUp(r.node.Status(), r.s.cfg.Cluster.CatchUpEntries)
}

// caughtUp is ready's rule over a node's status.
func caughtUp(st cluster.Status, maxLag uint64) bool {
	return st.LeaderID != "" && st.Suffrage != "" && st.AppliedIndex >= st.CommitIndex &&
		st.LeaderCommit > 0 && st.AppliedIndex+maxLag >= st.LeaderCommit
}
