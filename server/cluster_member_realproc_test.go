package server

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// memberNode is a cluster node process of the membership test.
type memberNode struct {
	id, raft, client string
	p                *proc
}

// startMember runs node n with the extra serve flags.
func startMember(t *testing.T, n *memberNode, extra ...string) {
	t.Helper()
	args := append([]string{"-addr", n.client, "-data-dir", t.TempDir(), "-cluster-id", "test", "-node-id", n.id,
		"-raft-addr", n.raft, "-fsync", "always"}, extra...)
	n.p = startProc(t, args...)
}

// memberLeader waits until one of the live nodes answers hello as the
// leader, and returns it with a session on it.
func memberLeader(t *testing.T, nodes ...*memberNode) (*memberNode, *wire) {
	t.Helper()
	c := &clusterProcs{t: t}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.p == nil || !n.p.alive() {
				continue
			}
			c.clients[0] = n.client
			if w, _, err := c.hello(0); err == nil {
				return n, w
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no leader within 20s")
	return nil, nil
}

// clusterCLI runs `tickwheel cluster ARGS... -json` against the nodes'
// client addresses and returns the state it printed.
func clusterCLI(t *testing.T, nodes []*memberNode, args ...string) protocol.Cluster {
	t.Helper()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.client)
	}
	cmd := exec.Command(serverBinary(t), append(append([]string{"cluster"}, args...),
		"-addr", strings.Join(addrs, ","), "-token", procToken, "-json", "-timeout", "20s")...)
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "tickwheel cluster %v: %s", args, stderr)
	var k struct {
		Role, Leader string
		Members      []struct {
			ID       string `json:"id"`
			RaftAddr string `json:"raft_addr"`
			Voter    bool   `json:"voter"`
		}
	}
	require.NoError(t, json.Unmarshal(out, &k), "%s", out)
	res := protocol.Cluster{Role: k.Role, Leader: k.Leader}
	for _, m := range k.Members {
		res.Members = append(res.Members, protocol.ClusterMember{ID: m.ID, RaftAddr: m.RaftAddr, Voter: m.Voter})
	}
	return res
}

// memberIDs lists a state's voters' ids, sorted.
func memberIDs(k protocol.Cluster) []string {
	var ids []string
	for _, m := range k.Members {
		if m.Voter {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestClusterMembershipRealProc: a two-node cluster grows and shrinks at
// run time while it commits: a third node started with -join is added by
// the leader and catches up; `tickwheel cluster remove` takes the
// follower out, and the leader then commits with the new node's vote
// only; a fourth node started without peers is added with `tickwheel
// cluster add`; the original leader stops, the two added nodes elect one
// of them, and it holds every acknowledged timer, those added before
// either joined included.
func TestClusterMembershipRealProc(t *testing.T) {
	if testing.Short() {
		t.Skip("four processes, elections: long")
	}
	nodes := make([]*memberNode, 4)
	for i := range nodes {
		nodes[i] = &memberNode{id: fmt.Sprintf("n%d", i+1), raft: freeAddr(t), client: freeAddr(t)}
	}
	defer func() {
		if t.Failed() {
			for _, n := range nodes {
				if n.p != nil {
					n.p.logTail()
				}
			}
		}
	}()
	n1, n2, n3, n4 := nodes[0], nodes[1], nodes[2], nodes[3]
	peers := fmt.Sprintf("n1=%s=%s,n2=%s=%s", n1.raft, n1.client, n2.raft, n2.client)
	startMember(t, n1, "-peers", peers)
	startMember(t, n2, "-peers", peers)
	lead, w := memberLeader(t, n1, n2)
	follower := n1
	if lead == n1 {
		follower = n2
	}
	const receiver = 5
	var want []uint64
	add := func(w *wire, from, to uint64) {
		t.Helper()
		for tid := from; tid <= to; tid++ {
			m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, After: 360_000})
			require.NoError(t, err)
			require.Equal(t, protocol.KindOK, m.Kind, "add %d: %s %s", tid, m.Code, m.Text)
			want = append(want, tid)
		}
	}
	add(w, 1, 50)

	// A node started with -join asks the leader to add it.
	startMember(t, n3, "-join", follower.client+","+lead.client)
	n3.p.logged(t, "cluster: joined: the leader added this node")
	k := clusterCLI(t, nodes[:3], "status")
	require.Equal(t, []string{"n1", "n2", "n3"}, memberIDs(k))
	require.Equal(t, lead.id, k.Leader)
	add(w, 51, 80)

	// The follower is removed, then stopped: the leader and n3 commit.
	k = clusterCLI(t, nodes[:3], "remove", follower.id)
	require.Equal(t, sorted2(lead.id, "n3"), memberIDs(k))
	follower.p.term()
	add(w, 81, 120) // a quorum of {leader, n3} needs n3's vote

	// A node started without peers waits; `tickwheel cluster add` adds it.
	startMember(t, n4)
	k = clusterCLI(t, []*memberNode{lead}, "add", "n4", n4.raft)
	require.Equal(t, sorted2(lead.id, "n3", "n4"), memberIDs(k))
	add(w, 121, 150)
	w.close()

	// The original leader stops: the added nodes elect one of them, which
	// holds every acknowledged timer.
	lead.p.term()
	next, w := memberLeader(t, n3, n4)
	defer w.close()
	ts, err := w.listAll(receiver)
	require.NoError(t, err)
	var got []uint64
	for _, tm := range ts {
		got = append(got, tm.Tid)
	}
	require.Equal(t, want, got, "node %s's timers", next.id)
	m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: 151, After: 360_000})
	require.NoError(t, err)
	require.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
	t.Logf("node %s leads the grown and shrunk cluster with all %d timers", next.id, len(got))
}

// sorted2 returns ids sorted.
func sorted2(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
