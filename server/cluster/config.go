package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults tuned for nodes on one LAN (round trips well under a
// millisecond, fsync in the hundreds of microseconds). hashicorp/raft's own
// defaults (1 s heartbeat and election timeouts, 500 ms lease) are meant for
// WANs. A follower starts an election after a random time between one and
// two ElectionTimeouts without hearing from the leader; a leader that has
// not heard from a quorum for LeaderLeaseTimeout steps down. Lower values
// fail over faster but risk elections on a loaded machine (a GC pause or a
// slow fsync longer than the timeout).
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	// DefaultCommitTimeout bounds how late followers learn the commit
	// index when no new entries flow (raft's heartbeat with the index).
	DefaultCommitTimeout = 50 * time.Millisecond
	// DefaultApplyTimeout is how long a proposal may wait to be enqueued
	// in raft before it is reported failed.
	DefaultApplyTimeout = 10 * time.Second
	// DefaultMaxEntryBytes bounds the turn records batched into one raft
	// entry (a single record larger than it still goes alone).
	DefaultMaxEntryBytes = 1 << 20
	// DefaultMaxInFlight is how many raft entries of turn records the
	// leader has proposed and not yet seen committed, at most (raft
	// pipelines them to the followers); records proposed meanwhile wait
	// for the next entry.
	DefaultMaxInFlight = 1
	// logCacheEntries is how many of the last raft entries are kept in
	// memory for replication (each at most MaxEntryBytes; typically a few
	// KiB).
	logCacheEntries = 64
	// DefaultSnapshotThreshold is the number of entries after which raft
	// takes a snapshot (checked every SnapshotInterval).
	DefaultSnapshotThreshold = 8192
	DefaultSnapshotInterval  = 30 * time.Second
	// DefaultTrailingLogs is how many entries are kept behind a snapshot,
	// so that a briefly lagging follower catches up from the log rather
	// than from a whole snapshot.
	DefaultTrailingLogs = 10240
	// DefaultSegmentBytes is the size of the raft log's segment files
	// (raft-wal's default). Compaction after a snapshot deletes whole
	// segments only: entries in a segment that still holds live ones stay
	// readable, and a lagging follower is sent them rather than a snapshot.
	DefaultSegmentBytes = 64 << 20
	// MinTokenLen is the shortest cluster token accepted.
	MinTokenLen = 16
)

// Peer is a voting member of a static cluster.
type Peer struct {
	ID   string // node id, unique in the cluster
	Addr string // its raft address, host:port
}

// Config is a node's configuration. ClusterID, NodeID, DataDir, Token and
// an address (BindAddr or Listener) are required.
type Config struct {
	// ClusterID names the cluster (at most 255 bytes); a peer with another
	// is refused at the handshake.
	ClusterID string
	// NodeID is this node's id in the cluster (at most 255 bytes).
	NodeID string
	// BindAddr is the raft listening address (host:port). Ignored when
	// Listener is set.
	BindAddr string
	// Listener, when set, is the raft listener to use (a test's, or a
	// socket handed over); the node closes it at Shutdown.
	Listener net.Listener
	// AdvertiseAddr is the raft address other nodes dial; defaults to the
	// listener's address, which must then not be unspecified (0.0.0.0).
	AdvertiseAddr string
	// ClientAddr is the address clients reach this node's server at; the
	// node publishes it when it becomes leader, for followers' not_leader
	// replies.
	ClientAddr string
	// Peers is the static member list, this node included. A node whose
	// data directory holds no raft state bootstraps the cluster from it
	// (every member must be given the same list). Empty: the node joins,
	// waiting for a leader to add it (Node.AddVoter).
	Peers []Peer
	// DataDir holds the raft log and snapshots.
	DataDir string
	// Token is the shared cluster secret (at least MinTokenLen bytes)
	// every raft connection is authenticated with.
	Token string
	// Route, when set, overrides where this node dials a peer by id (a
	// proxy, or a test's link forwarder); ok false falls back to the
	// peer's raft address (raft logs a warning each time).
	Route func(id string) (addr string, ok bool)
	// TLSServer and TLSClient, when set (both or neither), put every raft
	// connection under TLS before the token handshake: the listener
	// handshakes with TLSServer (which should require and verify a client
	// certificate), the dialer with TLSClient(host), host being that of
	// the address dialled, which the peer's certificate must be valid for.
	// The cluster token is checked inside TLS as without it.
	TLSServer *tls.Config
	TLSClient func(host string) *tls.Config

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	ApplyTimeout       time.Duration
	MaxEntryBytes      int
	MaxInFlight        int
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	SegmentBytes       int

	// OnLeadership is called on the node's watcher goroutine, in order,
	// whenever this node becomes leader (after every earlier entry was
	// applied and its announcement committed: it may propose) or stops
	// being leader (its uncommitted proposals are failing). It must not
	// block for long.
	OnLeadership func(Leadership)
	// Log receives the node's and raft's log lines; nil discards them.
	Log *slog.Logger
}

func (c *Config) withDefaults() error {
	if c.ClusterID == "" || len(c.ClusterID) > 255 {
		return errors.New("cluster: the cluster id must be 1 to 255 bytes")
	}
	if c.NodeID == "" || len(c.NodeID) > 255 {
		return errors.New("cluster: the node id must be 1 to 255 bytes")
	}
	if c.DataDir == "" {
		return errors.New("cluster: a data directory is required")
	}
	if len(c.Token) < MinTokenLen {
		return fmt.Errorf("cluster: the cluster token must be at least %d bytes", MinTokenLen)
	}
	if c.Listener == nil && c.BindAddr == "" {
		return errors.New("cluster: a raft address is required")
	}
	if (c.TLSServer == nil) != (c.TLSClient == nil) {
		return errors.New("cluster: raft TLS needs both a server and a client config")
	}
	seen := map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if p.ID == "" || p.Addr == "" || seen[p.ID] {
			return fmt.Errorf("cluster: peer %q: each peer needs a unique id and an address", p.ID)
		}
		seen[p.ID] = true
		self = self || p.ID == c.NodeID
	}
	if len(c.Peers) > 0 && !self {
		return fmt.Errorf("cluster: the peers list must include this node (%q)", c.NodeID)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.ElectionTimeout, DefaultElectionTimeout)
	def(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	def(&c.CommitTimeout, DefaultCommitTimeout)
	def(&c.ApplyTimeout, DefaultApplyTimeout)
	def(&c.SnapshotInterval, DefaultSnapshotInterval)
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return errors.New("cluster: the leader lease timeout must not exceed the heartbeat timeout")
	}
	if c.MaxEntryBytes <= 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}
