// Package cluster replicates the server's turn records on
// github.com/hashicorp/raft. It is the only package that imports raft:
// the server proposes opaque record bytes through a Node and receives the
// committed ones, on every node, through its Consumer; snapshots are the
// consumer's bytes. See docs/ARCHITECTURE.md, "Replication".
package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
)

// Leadership is a change of this node's role, reported to
// Config.OnLeadership.
type Leadership struct {
	Leader bool   // this node is now leader (and may propose)
	Term   uint64 // raft term of the change
	// Stint identifies this leadership (non-zero while leader): entries
	// carrying it were proposed by this node in it (Entry.Stint).
	Stint uint64
	// AppliedIndex: when Leader, every entry up to it was handed to the
	// consumer before this report (the state the leader starts from).
	AppliedIndex uint64
}

// Status is a node's view of the cluster, for stats and metrics.
type Status struct {
	Role             string // "leader", "follower", "candidate" or "shutdown"
	LeaderID         string // "" when no leader is known
	LeaderClientAddr string // the leader's published client address, "" when unknown
	Term             uint64
	CommitIndex      uint64
	AppliedIndex     uint64
	LastIndex        uint64
	Stint            uint64 // this node's leadership stint, 0 when it may not propose
	LastContact      time.Time
	AuthRefused      uint64 // raft connections refused at the token handshake
	// Suffrage is this node's in the latest configuration: "voter",
	// "nonvoter" (it gets the log but does not vote or count in the
	// quorum), or "" when it is not a member (a node waiting to be added).
	Suffrage string
	// Voters and Nonvoters count the members of the latest configuration.
	Voters, Nonvoters int
	// LeaderCommit is the commit index the leader sent in the last
	// AppendEntries this node received (0 before the first); on a leader,
	// its own commit index. AppliedIndex within a few entries of it means
	// the node has caught up.
	LeaderCommit uint64
}

// ErrNotLeader is returned (as a *NotLeaderError) by what only the leader
// may do.
var ErrNotLeader = errors.New("cluster: not the leader")

// NotLeaderError names the leader, when known.
type NotLeaderError struct {
	LeaderID         string
	LeaderClientAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "cluster: not the leader (no leader known)"
	}
	return fmt.Sprintf("cluster: not the leader (the leader is %s at %q)", e.LeaderID, e.LeaderClientAddr)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Node is one member of a cluster. Its methods are safe for concurrent use.
type Node struct {
	cfg   Config
	hlog  hclog.Logger // raft's logger, bridged to cfg.Log
	raft  *raft.Raft
	trans *progressTransport
	prog  progress // the others' logs, as raft's traffic shows them (progress.go)
	layer *authLayer
	store *raftwal.WAL
	snaps *raft.FileSnapshotStore
	fsm   *fsm

	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	stint uint64 // guarded by mu: the current leadership stint, 0 when not proposing
	prop  proposer

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start opens the node's data directory, starts raft and, when the
// directory holds no raft state and Peers is given, bootstraps the
// cluster. The node then follows or campaigns; OnLeadership reports when
// it leads.
func Start(cfg Config, consumer Consumer) (*Node, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, stop: make(chan struct{})}
	n.hlog = newHclog(cfg.Log)
	n.fsm = &fsm{node: n, consumer: consumer, clients: map[string]string{}}
	n.prop.init(cfg.MaxInFlight)
	ok := false
	defer func() {
		if !ok {
			n.closeAll()
		}
	}()
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "wal"), 0o750); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var err error
	n.store, err = raftwal.Open(filepath.Join(cfg.DataDir, "wal"), raftwal.WithLogger(n.hlog.Named("wal")),
		raftwal.WithSegmentSize(cfg.SegmentBytes))
	if err != nil {
		return nil, fmt.Errorf("cluster: opening the raft log: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, n.hlog.Named("snapshots"))
	n.snaps = snaps
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := n.listen(); err != nil {
		return nil, err
	}
	rc := n.raftConfig()
	if len(cfg.Peers) > 0 {
		has, err := raft.HasExistingState(n.store, n.store, snaps)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if !has {
			var conf raft.Configuration
			for _, p := range cfg.Peers {
				conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter,
					ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
			}
			if err := raft.BootstrapCluster(rc, n.store, n.store, snaps, n.trans, conf); err != nil {
				return nil, fmt.Errorf("cluster: bootstrapping: %w", err)
			}
		}
	}
	// The last entries stay in memory for the leader's replication, which
	// reads each one back as it sends it (else a read from the WAL each).
	logs, err := raft.NewLogCache(logCacheEntries, n.store)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.store, snaps, n.trans)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ok = true
	n.wg.Add(3)
	go n.watch()
	go n.propose()
	go n.await()
	return n, nil
}

func (n *Node) listen() error {
	ln := n.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", n.cfg.BindAddr); err != nil {
			return fmt.Errorf("cluster: raft address: %w", err)
		}
	}
	adv := ln.Addr()
	if n.cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", n.cfg.AdvertiseAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("cluster: advertise address: %w", err)
		}
		adv = a
	}
	if t, ok := adv.(*net.TCPAddr); !ok || t.IP.IsUnspecified() {
		ln.Close()
		return fmt.Errorf("cluster: the raft address %s cannot be dialled: set an advertise address", adv)
	}
	n.layer = newAuthLayer(ln, adv, n.cfg.ClusterID, []byte(n.cfg.Token), n.cfg.Log, n.cfg.TLSServer, n.cfg.TLSClient)
	tc := &raft.NetworkTransportConfig{Stream: n.layer, MaxPool: 3, Timeout: 10 * time.Second,
		Logger: n.hlog.Named("transport")}
	if route := n.cfg.Route; route != nil {
		self, own := n.cfg.NodeID, adv.String()
		tc.ServerAddressProvider = routeProvider(func(id string) (string, bool) {
			if id == self {
				return own, true
			}
			return route(id)
		})
	}
	n.trans = newProgressTransport(raft.NewNetworkTransportWithConfig(tc), &n.prog)
	return nil
}

type routeProvider func(id string) (string, bool)

func (r routeProvider) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := r(string(id)); ok {
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("cluster: no route to %s", id)
}

func (n *Node) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.NodeID)
	c.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	c.ElectionTimeout = n.cfg.ElectionTimeout
	c.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	c.CommitTimeout = n.cfg.CommitTimeout
	c.SnapshotThreshold = n.cfg.SnapshotThreshold
	c.SnapshotInterval = n.cfg.SnapshotInterval
	c.TrailingLogs = n.cfg.TrailingLogs
	c.Logger = n.hlog.Named("raft")
	return c
}

// watch follows leadership: on gaining it, waits for every earlier entry
// to be applied, commits the leader announcement, then lets proposals in
// and reports; on losing it, stops proposals first, then reports. raft's
// LeaderCh keeps only the latest change (it never blocks raft): a "leader"
// while this node still proposes means it lost leadership and regained it
// meanwhile, and is handled as both, so reports always alternate.
func (n *Node) watch() {
	defer n.wg.Done()
	ch := n.raft.LeaderCh()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-ch:
			n.mu.Lock()
			proposing := n.stint != 0
			n.mu.Unlock()
			if !leader || proposing {
				n.follow()
			}
			if leader {
				n.lead()
			}
		}
	}
}

func (n *Node) lead() {
	term := n.raft.CurrentTerm()
	stint := randomStint()
	if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		n.cfg.Log.Warn("cluster: leader, but could not apply earlier entries", "term", term, "err", err)
		return
	}
	f := n.raft.Apply(appendLeader(nil, stint, n.cfg.NodeID, n.cfg.ClientAddr), n.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		n.cfg.Log.Warn("cluster: leader, but could not commit its announcement", "term", term, "err", err)
		return
	}
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return // lost again meanwhile: LeaderCh says so
	}
	n.mu.Lock()
	n.stint = stint
	n.mu.Unlock()
	n.cfg.Log.Info("cluster: this node leads", "term", term, "index", f.Index())
	if n.cfg.OnLeadership != nil {
		n.cfg.OnLeadership(Leadership{Leader: true, Term: term, Stint: stint, AppliedIndex: f.Index()})
	}
}

func (n *Node) follow() {
	n.mu.Lock()
	was := n.stint
	n.stint = 0
	n.mu.Unlock()
	n.prop.kick()
	if was == 0 {
		return // it never got to propose: nothing to report
	}
	term := n.raft.CurrentTerm()
	n.cfg.Log.Info("cluster: this node no longer leads", "term", term)
	if n.cfg.OnLeadership != nil {
		n.cfg.OnLeadership(Leadership{Term: term})
	}
}

func randomStint() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if s := binary.LittleEndian.Uint64(b[:]); s != 0 {
			return s
		}
	}
}

// Status reports the node's view of the cluster.
func (n *Node) Status() Status {
	_, id := n.raft.LeaderWithID()
	n.mu.Lock()
	stint := n.stint
	n.mu.Unlock()
	st := Status{
		Role: roleName(n.raft.State()), LeaderID: string(id), LeaderClientAddr: n.fsm.clientAddr(string(id)),
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
		LastIndex: n.raft.LastIndex(), Stint: stint, LastContact: n.raft.LastContact(),
		AuthRefused: n.layer.refusals.count(), LeaderCommit: n.prog.heard.Load(),
	}
	if st.Role == "leader" {
		st.LeaderCommit = st.CommitIndex
	}
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if s.Suffrage == raft.Voter {
			st.Voters++
		} else {
			st.Nonvoters++
		}
		if string(s.ID) == n.cfg.NodeID {
			st.Suffrage = suffrageName(s.Suffrage)
		}
	}
	return st
}

func roleName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Shutdown:
		return "shutdown"
	default:
		return "follower"
	}
}

func (n *Node) notLeader() error {
	_, id := n.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderClientAddr: n.fsm.clientAddr(string(id))}
}

// RaftAddr is the address other nodes dial this one at.
func (n *Node) RaftAddr() string { return n.layer.Addr().String() }

// Snapshot asks raft for a snapshot now (through Consumer.Snapshot) and
// waits for it to be written.
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// TransferLeadership hands leadership over before a graceful stop, so that
// the others need not wait an election timeout: on a leader it asks raft
// to transfer leadership to the most up-to-date follower (raft stops
// taking proposals, brings that follower up to date, and has it start an
// election at once) and waits for the outcome, which raft bounds by an
// election timeout. led reports whether this node led; to is the id of the
// node that leads after it, as this node knows it ("" when not yet
// known); err says the transfer failed (the others then elect a leader
// after an election timeout, as after Shutdown alone). On a node that does
// not lead it does nothing. Safe from any goroutine.
func (n *Node) TransferLeadership() (led bool, to string, err error) {
	if n.raft == nil || n.raft.State() != raft.Leader {
		return false, "", nil
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		return true, "", fmt.Errorf("cluster: leadership transfer: %w", err)
	}
	_, id := n.raft.LeaderWithID()
	return true, string(id), nil
}

// Shutdown stops the node: pending proposals fail with ErrShutdown, raft
// stops (without handing leadership over: call TransferLeadership first,
// or the others elect a leader after an election timeout), the listener
// and the log close. Idempotent.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		close(n.stop)
		n.prop.close()
		var errs []error
		if n.raft != nil {
			errs = append(errs, n.raft.Shutdown().Error())
		}
		n.wg.Wait()
		errs = append(errs, n.closeAll())
		n.shutdownErr = errors.Join(errs...)
	})
	return n.shutdownErr
}

func (n *Node) closeAll() error {
	var errs []error
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	} else if n.layer != nil {
		errs = append(errs, n.layer.Close())
	} else if n.cfg.Listener != nil {
		n.cfg.Listener.Close()
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}
