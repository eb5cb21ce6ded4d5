package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestClusterInProcess runs three cluster nodes in this process: one
// leads, the followers name its client address in not_leader (at hello
// and at any other first request) and close the connection, and the
// metrics and readiness say who leads; an add on the leader reaches every
// node's Core.
func TestClusterInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	peers := ""
	for i := range 3 {
		if i > 0 {
			peers += ","
		}
		peers += fmt.Sprintf("n%d=%s", i+1, freeAddr(t)) // client address: each node's own
	}
	var srvs [3]*Server
	for i := range srvs {
		srvs[i] = startServer(t, func(c *Config) {
			c.Frozen, c.StartTick, c.Persistence = false, 0, "on"
			c.Cluster = ClusterConfig{ID: "inproc", NodeID: fmt.Sprintf("n%d", i+1), Peers: peers}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lead := -1
	require.Eventually(t, func() bool {
		lead = -1
		for i, s := range srvs {
			m, err := s.ReadMetrics(ctx, 0)
			require.NoError(t, err)
			require.True(t, m.Cluster.On)
			if m.Cluster.Role == "leader" && s.Ready() {
				lead = i
			}
		}
		if lead < 0 {
			return false
		}
		for _, s := range srvs { // every follower knows the leader and has caught up
			m, _ := s.ReadMetrics(ctx, 0)
			if m.Cluster.LeaderAddr != srvs[lead].Addr() || !s.Ready() {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond)
	c := helloClient(t, srvs[lead], "leader")
	c.add(protocol.Request{Receiver: 3, Tid: 4, After: 1000})
	st := c.stats() // the raft keys, additive
	require.Equal(t, "leader", st.Role)
	require.Equal(t, fmt.Sprintf("n%d", lead+1), st.Leader)
	require.NotZero(t, st.Term)
	require.NotZero(t, st.CommitIndex)
	require.GreaterOrEqual(t, st.AppliedIndex, st.CommitIndex-1)
	for i, s := range srvs {
		if i == lead {
			continue
		}
		f := dial(t, s)
		hid := f.send(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "follower", Token: testAdminToken})
		m, err := f.read()
		require.NoError(t, err)
		require.Equal(t, hid, m.ID)
		require.Equal(t, protocol.CodeNotLeader, m.Code, "%+v", m)
		require.Equal(t, srvs[lead].Addr(), m.Leader)
		require.True(t, f.closed(), "the follower keeps the connection open")
		g := dial(t, s)
		id := g.send(protocol.Request{Op: protocol.OpPing})
		m, err = g.read()
		require.NoError(t, err)
		require.Equal(t, id, m.ID)
		require.Equal(t, protocol.CodeNotLeader, m.Code)
		m2, err := s.ReadMetrics(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, "follower", m2.Cluster.Role)
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, s.onLoop(ctx, func() { n = s.core.Wheel().Len() }))
			return n == 1
		}, 5*time.Second, 10*time.Millisecond, "node %d did not replay the add", i+1)
	}
}

// A single server's stats reply has none of the cluster keys.
func TestStatsWithoutCluster(t *testing.T) {
	srv := startServer(t, nil)
	st := helloClient(t, srv, "single").stats()
	require.Empty(t, st.Role)
	require.Zero(t, st.Term)
}
