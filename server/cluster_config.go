package server

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/server/cluster"
)

// ClusterConfig makes the server one node of a raft cluster (issue 25;
// docs/ARCHITECTURE.md, "Replication"). Off unless ID is set: a single
// server keeps its own journal.
type ClusterConfig struct {
	// ID names the cluster; every node has the same (flag -cluster-id).
	ID string `yaml:"id"`
	// NodeID is this node's id, one of Peers' (flag -node-id).
	NodeID string `yaml:"node_id"`
	// RaftAddr is the address the node's raft traffic listens on, host:port
	// (flag -raft-addr). Default: this node's raft address in Peers.
	RaftAddr string `yaml:"raft_addr"`
	// Peers is the static member list, this node included:
	// "id=raftaddr=clientaddr,..." (flag -peers). Every node gets the same
	// list; a node whose raft data directory is empty bootstraps the
	// cluster from it. A node started without it joins a running cluster:
	// it waits to be added (tickwheel cluster add, or Join). clientaddr is where clients reach that node (the
	// address a follower names in not_leader); default its listen address.
	Peers string `yaml:"peers"`
	// Join lists client addresses (host:port,...) of a running cluster's
	// nodes (flag -join): a node started with it and without Peers asks
	// the leader, with its admin token (the same on every node), to add it
	// (the cluster op add: a non-voter until it has caught up from a
	// snapshot and the log, then a voter), retrying each second until it
	// is added. Skipped when the node's own raft state lists it as a
	// member already (a restart: it rejoins by itself).
	Join string `yaml:"join"`
	// JoinNonvoter makes a joining node ask to stay a non-voter (a read
	// replica, e.g. at a standby site; the cluster op add_nonvoter; flag
	// -join-nonvoter); promote it later with tickwheel cluster promote.
	JoinNonvoter bool `yaml:"join_nonvoter"`
	// CatchUpEntries is how many entries behind the leader's commit index
	// a new member's log may be for it to count as caught up: promoted to
	// a voter by cluster add or promote. Default 100.
	CatchUpEntries uint64 `yaml:"catch_up_entries"`
	// CatchUpTimeout bounds how long cluster add and promote, on the
	// leader, wait for a new member to catch up (a big snapshot takes a
	// while) before they answer that it stays a non-voter for now.
	// Default 10m.
	CatchUpTimeout time.Duration `yaml:"catch_up_timeout"`
	// SnapshotEntries is how many raft entries after the last raft
	// snapshot make the node take another (checked every
	// SnapshotInterval to twice that); TrailingEntries how many entries
	// it keeps behind a snapshot, so that a briefly lagging follower
	// catches up from the log rather than from a whole snapshot; a node
	// further behind, or a new one, is sent the snapshot. Defaults 8192,
	// 30s and 10240 (server/cluster's).
	SnapshotEntries  uint64        `yaml:"snapshot_entries"`
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`
	TrailingEntries  uint64        `yaml:"trailing_entries"`
	// LogSegmentBytes is the size of the raft log's segment files
	// (default 64 MiB). Compaction after a snapshot deletes whole segments
	// only, so the entries of the segment it is in stay, and a follower
	// that lags by fewer than a segment's entries is sent the log rather
	// than the snapshot.
	LogSegmentBytes int `yaml:"log_segment_bytes"`
	// TokenFile names a file holding the shared cluster token (at least 16
	// bytes) that authenticates raft traffic between nodes. Required when
	// RaftAddr is not loopback; on loopback, without it, the nodes use a
	// token derived from the cluster id (no secret: anyone on the machine
	// may connect).
	TokenFile string `yaml:"token_file"`
	// DataDir holds the raft log and snapshots. Default <data_dir>/raft.
	DataDir string `yaml:"data_dir"`
	// TLS puts the raft traffic between nodes under TLS (flag
	// -cluster-tls), with the client port's certificates (tls.cert_file,
	// tls.key_file, reloaded on SIGHUP with them): each node presents its
	// certificate to its peers and verifies theirs against
	// tls.client_ca_file, which is then required; a node's certificate
	// must be valid for the host of its raft address. The cluster token is
	// still checked, inside TLS. Off by default.
	TLS bool `yaml:"tls"`

	peers      []cluster.Peer
	clientAddr string // this node's, from Peers ("" = its listen address)
	token      string
}

// clustered reports whether the server is a cluster node.
func (c *Config) clustered() bool { return c.Cluster.ID != "" }

// clusterDefaults completes and checks the cluster settings (after the
// persistence ones).
func (c *Config) clusterDefaults() error {
	k := &c.Cluster
	if k.ID == "" {
		if k.NodeID != "" || k.RaftAddr != "" || k.Peers != "" || k.Join != "" || k.TokenFile != "" || k.DataDir != "" || k.TLS ||
			k.JoinNonvoter || k.CatchUpEntries != 0 || k.CatchUpTimeout != 0 || k.SnapshotEntries != 0 ||
			k.SnapshotInterval != 0 || k.TrailingEntries != 0 || k.LogSegmentBytes != 0 {
			return keyErr("cluster.id", "the cluster keys need cluster.id (-cluster-id)")
		}
		return nil
	}
	if !c.persistent() {
		return keyErr("cluster.id", "a cluster node needs persistence on (a data directory)")
	}
	if k.NodeID == "" {
		return keyErr("cluster.node_id", "a cluster node needs its node id (-node-id)")
	}
	k.peers, k.clientAddr = nil, ""
	self := false
	for _, item := range strings.Split(k.Peers, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return keyErr("cluster.peers", "%q: want id=raftaddr or id=raftaddr=clientaddr", item)
		}
		p := cluster.Peer{ID: parts[0], Addr: parts[1]}
		k.peers = append(k.peers, p)
		if p.ID == k.NodeID {
			self = true
			if k.RaftAddr == "" {
				k.RaftAddr = p.Addr
			}
			if len(parts) == 3 {
				k.clientAddr = parts[2]
			}
		}
	}
	switch {
	case k.Join != "" && len(k.peers) > 0:
		return keyErr("cluster.join", "a joining node takes no peers list: the cluster's configuration comes from its leader")
	case k.Join != "":
		for _, a := range strings.Split(k.Join, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
				return keyErr("cluster.join", "%q: want client addresses host:port,...", a)
			}
		}
	case !self && len(k.peers) > 0:
		return keyErr("cluster.peers", "the peers list must name this node (%q); a node joining a running cluster takes none", k.NodeID)
	}
	if k.RaftAddr == "" {
		return keyErr("cluster.raft_addr", "a cluster node needs a raft address (-raft-addr)")
	}
	if k.TLS && (c.TLS.CertFile == "" || c.TLS.ClientCAFile == "") {
		return keyErr("cluster.tls", "raft over TLS uses tls.cert_file, tls.key_file and tls.client_ca_file (the CA of the nodes' certificates): set them")
	}
	if k.DataDir == "" {
		k.DataDir = filepath.Join(c.DataDir, "raft")
	}
	if k.JoinNonvoter && k.Join == "" {
		return keyErr("cluster.join_nonvoter", "it says how a joining node asks to be added: set cluster.join (-join) too")
	}
	if k.CatchUpEntries == 0 {
		k.CatchUpEntries = DefaultCatchUpEntries
	}
	switch {
	case k.CatchUpTimeout < 0:
		return keyErr("cluster.catch_up_timeout", "%v: want a positive duration", k.CatchUpTimeout)
	case k.CatchUpTimeout == 0:
		k.CatchUpTimeout = DefaultCatchUpTimeout
	}
	if k.SnapshotInterval < 0 {
		return keyErr("cluster.snapshot_interval", "%v: want a positive duration", k.SnapshotInterval)
	}
	if k.SnapshotEntries == 0 {
		k.SnapshotEntries = cluster.DefaultSnapshotThreshold
	}
	if k.SnapshotInterval == 0 {
		k.SnapshotInterval = cluster.DefaultSnapshotInterval
	}
	if k.TrailingEntries == 0 {
		k.TrailingEntries = cluster.DefaultTrailingLogs
	}
	switch {
	case k.LogSegmentBytes < 0 || k.LogSegmentBytes > 0 && k.LogSegmentBytes < 4096:
		return keyErr("cluster.log_segment_bytes", "%d: want at least 4096 bytes", k.LogSegmentBytes)
	case k.LogSegmentBytes == 0:
		k.LogSegmentBytes = cluster.DefaultSegmentBytes
	}
	return nil
}

// The defaults of cluster.catch_up_entries and cluster.catch_up_timeout.
const (
	DefaultCatchUpEntries = 100
	DefaultCatchUpTimeout = 10 * time.Minute
)

// clusterToken reads the cluster token (after clusterDefaults).
func (c *Config) clusterToken(log *slog.Logger) error {
	k := &c.Cluster
	if !c.clustered() {
		return nil
	}
	exp, err := exposed(k.RaftAddr)
	if err != nil {
		return keyErr("cluster.raft_addr", "%q: %v", k.RaftAddr, err)
	}
	if k.TokenFile == "" {
		if exp {
			return keyErr("cluster.token_file", "raft_addr %s is not loopback: a cluster token file is required", k.RaftAddr)
		}
		k.token = "tickwheel-loopback-cluster:" + k.ID
		return nil
	}
	tok, err := readGivenTokenFile(k.TokenFile, log)
	if err != nil {
		return keyErr("cluster.token_file", "%v", err)
	}
	if len(tok) < cluster.MinTokenLen {
		return keyErr("cluster.token_file", "the cluster token must be at least %d bytes (it has %d)", cluster.MinTokenLen, len(tok))
	}
	k.token = tok
	return nil
}

// nodeConfig is the raft node's configuration.
func (c *Config) nodeConfig(clientAddr string, log *slog.Logger) cluster.Config {
	k := &c.Cluster
	if k.clientAddr != "" {
		clientAddr = k.clientAddr
	}
	return cluster.Config{ClusterID: k.ID, NodeID: k.NodeID, BindAddr: k.RaftAddr, ClientAddr: clientAddr,
		Peers: k.peers, DataDir: k.DataDir, Token: k.token, Log: log.With("cluster", k.ID, "node", k.NodeID),
		SnapshotThreshold: k.SnapshotEntries, SnapshotInterval: k.SnapshotInterval, TrailingLogs: k.TrailingEntries,
		SegmentBytes: k.LogSegmentBytes}
}

func (k ClusterConfig) String() string {
	return fmt.Sprintf("cluster %s node %s raft %s", k.ID, k.NodeID, k.RaftAddr)
}
