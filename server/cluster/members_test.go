package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// memberOf returns member id of the leader's latest configuration (with
// its match index).
func (tc *tcluster) memberOf(id string) (Member, bool) {
	ms, err := tc.nodes[tc.leader()].n.Members()
	require.NoError(tc.t, err)
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// onLeader runs fn on the node that leads until it returns something else
// than ErrNotLeader (leadership may change on a loaded machine; the
// membership calls may be repeated), and returns that.
func (tc *tcluster) onLeader(fn func(n *Node) error) error {
	for {
		if err := fn(tc.nodes[tc.leader()].n); !errors.Is(err, ErrNotLeader) {
			return err
		}
	}
}

// TestAddCaughtUp: a node added to a 3-node cluster with state (a
// snapshot to install: the log it would need is compacted) is a non-voter
// until it has caught up, and a voter after. While it cannot be reached
// it counts in no quorum: with one voter stopped too, the two others
// still commit (were it a voter from the start, as AddVoter made it
// before, 2 of 4 would not be a quorum and these proposals would fail).
// It installs the leader's snapshot, and its Status says it is a voter
// that has caught up.
func TestAddCaughtUp(t *testing.T) {
	if testing.Short() {
		t.Skip("long: snapshots, a fourth node")
	}
	tc := newCluster(t, 3, func(i int, c *Config) {
		c.TrailingLogs = 2
		c.SegmentBytes = 8 << 10
		c.SnapshotInterval = time.Hour
	})
	var want []string
	for i := 0; i < 40; i++ {
		want = append(want, fmt.Sprintf("a-%03d-%s", i, strings.Repeat("x", 1000)))
		tc.commit(want[i])
	}
	tc.converge(len(want))
	for i := range tc.nodes {
		require.NoError(t, tc.nodes[i].n.Snapshot())
	}

	// n3, reached through a link the test cuts until it has seen n3 a
	// non-voter that counts in no quorum.
	nn := &tnode{id: "n3", logs: &syncBuffer{}}
	nn.cfg = Config{ClusterID: "test", NodeID: "n3", BindAddr: "127.0.0.1:0", ClientAddr: "client-n3",
		DataDir: t.TempDir(), Token: testToken, Log: newTestLog(nn.logs)}
	nn.c = newRecConsumer()
	n, err := Start(nn.cfg, nn.c)
	require.NoError(t, err)
	nn.n = n
	link, err := clustertest.NewLink(n.RaftAddr())
	require.NoError(t, err)
	defer link.Close()
	link.Cut()
	require.Empty(t, n.Status().Suffrage, "not a member yet")

	added := make(chan error, 1)
	go func() {
		added <- tc.onLeader(func(n *Node) error {
			return n.AddCaughtUp(context.Background(), "n3", link.Addr(), 8, 10*time.Second)
		})
	}()
	require.Eventually(t, func() bool { m, ok := tc.memberOf("n3"); return ok && !m.Voter }, 10*time.Second,
		5*time.Millisecond, "n3 in the configuration as a non-voter")
	follower := (tc.leader() + 1) % 3
	tc.stop(follower)
	b := names("b", 5)
	tc.commit(b...) // two of three voters commit: the non-voter counts in no quorum
	want = append(want, b...)
	select {
	case err := <-added:
		t.Fatalf("the add returned before n3 was reachable: %v", err)
	default:
	}
	m, _ := tc.memberOf("n3")
	require.False(t, m.Voter, "still a non-voter: it has not caught up")
	require.Zero(t, m.Match, "the leader has replicated nothing to it")

	// A wait bounded by a context that ends says how far behind it is.
	err = tc.onLeader(func(n *Node) error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return n.WaitCaughtUp(ctx, "n3", 8)
	})
	var nc *NotCaughtUpError
	require.ErrorAs(t, err, &nc)
	require.Equal(t, "n3", nc.ID)
	require.Contains(t, err.Error(), "has not yet replicated")

	link.Heal()
	tc.start(follower)
	select {
	case err := <-added:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("n3 was not promoted within 30 s of being reachable")
	}
	m, _ = tc.memberOf("n3")
	require.True(t, m.Voter, "promoted once caught up")
	require.NotZero(t, m.Match)
	tc.nodes = append(tc.nodes, nn)
	require.Equal(t, want, strs(tc.converge(len(want))))
	nn.c.mu.Lock()
	restores := nn.c.restores
	nn.c.mu.Unlock()
	require.Equal(t, 1, restores, "n3 installed the leader's snapshot")
	require.Eventually(t, func() bool {
		st := n.Status()
		return st.Suffrage == "voter" && st.LeaderCommit > 0 && st.AppliedIndex >= st.LeaderCommit
	}, 10*time.Second, 10*time.Millisecond, "n3 knows it votes and has applied what the leader committed: %+v", n.Status())
}

// TestPromote: a node added as a non-voter stays one (a read replica):
// its failure blocks nothing; Promote makes it a voter once it has caught
// up, leaves a voter as it is, and refuses a node not in the cluster.
func TestPromote(t *testing.T) {
	tc := newCluster(t, 3, nil)
	tc.commit(names("a", 10)...)
	ln, err := clustertest.Listen() // stopped and restarted on it
	require.NoError(t, err)
	nn := &tnode{id: "r1", addr: ln.Addr().String(), logs: &syncBuffer{}}
	nn.cfg = Config{ClusterID: "test", NodeID: "r1", Listener: ln, DataDir: t.TempDir(), Token: testToken,
		Log: newTestLog(nn.logs)}
	nn.c = newRecConsumer()
	n, err := Start(nn.cfg, nn.c)
	require.NoError(t, err)
	nn.n = n
	tc.nodes = append(tc.nodes, nn)
	require.NoError(t, tc.onLeader(func(n *Node) error { return n.AddNonvoter("r1", nn.n.RaftAddr(), 10*time.Second) }))
	tc.converge(10)
	require.Eventually(t, func() bool { return n.Status().Suffrage == "nonvoter" }, 10*time.Second, 10*time.Millisecond)
	m, _ := tc.memberOf("r1")
	require.False(t, m.Voter)

	// The read replica and a voter down: the two other voters commit.
	tc.stop(3)
	follower := (tc.leader() + 1) % 3
	tc.stop(follower)
	tc.commit(names("b", 5)...) // a non-voter's failure does not block commits
	tc.start(follower)
	tc.start(3)
	tc.converge(15)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	promote := func(id string) error {
		return tc.onLeader(func(n *Node) error { return n.Promote(ctx, id, 8, 10*time.Second) })
	}
	require.NoError(t, promote("r1"))
	m, _ = tc.memberOf("r1")
	require.True(t, m.Voter)
	require.NoError(t, promote("r1"), "a voter is left as it is")
	require.True(t, errors.Is(promote("nobody"), ErrNotMember))
	other := (tc.leader() + 1) % 4
	err = tc.nodes[other].n.WaitCaughtUp(ctx, "r1", 8)
	require.True(t, errors.Is(err, ErrNotLeader), "only the leader knows the followers' progress: %v", err)
}
