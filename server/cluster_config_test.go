package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The cluster keys are checked before anything starts: a bad peers list,
// a node missing from it, a joining node given peers too or a bad join
// address, join_nonvoter without join, a negative catch-up timeout, a
// short token, and a raft address beyond loopback without a token are
// refused, naming the key; the catch-up bounds get their defaults.
func TestClusterConfigChecked(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.token")
	require.NoError(t, os.WriteFile(short, []byte("fifteen-bytes!!"), 0o600))
	good := filepath.Join(dir, "good.token")
	require.NoError(t, os.WriteFile(good, []byte("sixteen-bytes!!!"), 0o600))
	peers := "n1=127.0.0.1:7531=127.0.0.1:7431,n2=127.0.0.1:7532,n3=127.0.0.1:7533"
	for _, tc := range []struct {
		name string
		k    ClusterConfig
		key  string // "" = accepted
	}{
		{"loopback, no token", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers}, ""},
		{"token", ClusterConfig{ID: "c", NodeID: "n2", Peers: peers, TokenFile: good}, ""},
		{"no id", ClusterConfig{NodeID: "n1", Peers: peers}, "cluster.id"},
		{"no node id", ClusterConfig{ID: "c", Peers: peers}, "cluster.node_id"},
		{"not in peers", ClusterConfig{ID: "c", NodeID: "n4", Peers: peers}, "cluster.peers"},
		{"bad peer", ClusterConfig{ID: "c", NodeID: "n1", Peers: "n1"}, "cluster.peers"},
		{"joining", ClusterConfig{ID: "c", NodeID: "n4", RaftAddr: "127.0.0.1:7534", Join: "127.0.0.1:7431, 127.0.0.1:7432"}, ""},
		{"waiting to be added", ClusterConfig{ID: "c", NodeID: "n4", RaftAddr: "127.0.0.1:7534"}, ""},
		{"joining with peers", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, Join: "127.0.0.1:7432"}, "cluster.join"},
		{"joining, bad address", ClusterConfig{ID: "c", NodeID: "n4", RaftAddr: "127.0.0.1:7534", Join: "localhost"}, "cluster.join"},
		{"joining, no raft address", ClusterConfig{ID: "c", NodeID: "n4", Join: "127.0.0.1:7431"}, "cluster.raft_addr"},
		{"short token", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, TokenFile: short}, "cluster.token_file"},
		{"exposed without token", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, RaftAddr: "0.0.0.0:7531"}, "cluster.token_file"},
		{"joining as a non-voter", ClusterConfig{ID: "c", NodeID: "r1", RaftAddr: "127.0.0.1:7534", Join: "127.0.0.1:7431", JoinNonvoter: true}, ""},
		{"non-voter, not joining", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, JoinNonvoter: true}, "cluster.join_nonvoter"},
		{"negative catch-up timeout", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, CatchUpTimeout: -time.Second}, "cluster.catch_up_timeout"},
		{"catch-up keys without a cluster", ClusterConfig{CatchUpEntries: 5}, "cluster.id"},
		{"tiny log segments", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, LogSegmentBytes: 100}, "cluster.log_segment_bytes"},
		{"negative snapshot interval", ClusterConfig{ID: "c", NodeID: "n1", Peers: peers, SnapshotInterval: -time.Second}, "cluster.snapshot_interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{DataDir: dir, AdminToken: testAdminToken, Cluster: tc.k}
			cfg, err := cfg.withDefaults()
			if err == nil {
				err = cfg.secure(testLogger())
			}
			if tc.key == "" {
				require.NoError(t, err)
				require.Equal(t, filepath.Join(dir, "raft"), cfg.Cluster.DataDir)
				require.Equal(t, uint64(DefaultCatchUpEntries), cfg.Cluster.CatchUpEntries)
				require.Equal(t, DefaultCatchUpTimeout, cfg.Cluster.CatchUpTimeout)
				return
			}
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Equal(t, tc.key, ce.Key, "%v", err)
		})
	}
}

// The example configs of README's "Running three nodes" load and name one
// cluster with three nodes, each its own raft and client address.
func TestClusterExampleConfigs(t *testing.T) {
	seen := map[string]bool{}
	for i := 1; i <= 3; i++ {
		cfg, err := LoadConfig(filepath.Join("..", "configs", "cluster-node"+string(rune('0'+i))+".yaml"))
		require.NoError(t, err)
		cfg, err = cfg.withDefaults()
		require.NoError(t, err)
		k := cfg.Cluster
		require.Equal(t, "demo", k.ID)
		require.Len(t, k.peers, 3)
		require.Equal(t, cfg.Addr, k.clientAddr, "node %d's client address in peers", i)
		require.False(t, seen[k.RaftAddr] || seen[cfg.Addr] || seen[cfg.HTTPAddr])
		seen[k.RaftAddr], seen[cfg.Addr], seen[cfg.HTTPAddr] = true, true, true
	}
}
