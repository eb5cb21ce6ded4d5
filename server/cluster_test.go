package server

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestClusterInProcess runs three cluster nodes in this process: one
// leads, the followers name its client address in not_leader (at hello
// and at any other first request) and close the connection (one that
// sends nothing after the handshake timeout), and the
// metrics and readiness say who leads; an add on the leader reaches every
// node's Core.
func TestClusterInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	srvs := startCluster(t, func(c *Config) { c.Timeouts.Handshake = 300 * time.Millisecond })
	lead := waitLeader(t, srvs[:], -1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
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
		silent := dial(t, s) // sends nothing: closed after the handshake timeout
		require.Eventually(t, silent.closed, 5*time.Second, 50*time.Millisecond)
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

// startCluster starts three cluster nodes in this process; each is stopped
// at the end of the test unless the test stopped it.
func startCluster(t *testing.T, mutate func(*Config)) [3]*Server {
	t.Helper()
	peers := ""
	for i := range 3 {
		if i > 0 {
			peers += ","
		}
		peers += fmt.Sprintf("n%d=%s", i+1, freeAddr(t)) // client address: each node's own
	}
	var srvs [3]*Server
	for i := range srvs {
		srv := newServer(t, func(c *Config) {
			c.Frozen, c.StartTick, c.Persistence = false, 0, "on"
			c.Cluster = ClusterConfig{ID: "inproc", NodeID: fmt.Sprintf("n%d", i+1), Peers: peers}
			if mutate != nil {
				mutate(c)
			}
		})
		srvs[i] = srv
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			select {
			case <-srv.Done():
			default:
				if err := srv.Stop(ctx); err != nil {
					var b strings.Builder
					_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
					t.Fatalf("node %d: stop: %v; goroutines:\n%s", i+1, err, b.String())
				}
			}
		})
	}
	return srvs
}

// waitLeader waits until one of srvs (but skip) leads and is ready, and
// every other running one names its client address and has caught up.
func waitLeader(t *testing.T, srvs []*Server, skip int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	running := func(i int) bool {
		select {
		case <-srvs[i].Done():
			return false
		default:
			return i != skip
		}
	}
	lead := -1
	require.Eventually(t, func() bool {
		lead = -1
		for i, s := range srvs {
			if !running(i) {
				continue
			}
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
		for i, s := range srvs {
			if !running(i) {
				continue
			}
			m, _ := s.ReadMetrics(ctx, 0)
			if m.Cluster.LeaderAddr != srvs[lead].Addr() || !s.Ready() {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond)
	return lead
}

// TestClusterFailoverFires: a timer due while the cluster has no leader
// (its leader stopped, the others electing one) fires once the new leader
// serves: tw-time continues from the replicated state and the leaderless
// time is caught up as downtime; the event waits in the receiver's backlog
// and arrives at bind, with the tick it was due at.
func TestClusterFailoverFires(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	srvs := startCluster(t, nil)
	lead := waitLeader(t, srvs[:], -1)
	c := helloClient(t, srvs[lead], "before")
	due := c.add(protocol.Request{Receiver: 5, Tid: 1, After: 30, Repeat: 1}) // 300 ms: inside the election
	c.conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	began := time.Now()
	require.NoError(t, srvs[lead].Stop(ctx))
	next := waitLeader(t, srvs[:], lead)
	took := time.Since(began)
	require.NotEqual(t, lead, next)
	d := helloClient(t, srvs[next], "after")
	d.bind(5, false)
	var fs []protocol.Fire
	require.Eventually(t, func() bool {
		d.ping() // reads the events that came meanwhile
		fs = append(fs, d.fires()...)
		return len(fs) > 0
	}, 5*time.Second, 20*time.Millisecond)
	require.Len(t, fs, 1)
	require.Equal(t, uint64(1), fs[0].Tid)
	require.Equal(t, due, fs[0].Tick)
	t.Logf("failover (stop to a ready leader named by the follower) %v; the timer fired %d ticks late", took.Round(time.Millisecond), fs[0].Late)
}
