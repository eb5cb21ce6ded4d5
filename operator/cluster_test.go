package operator

import (
	"context"
	"encoding/json"
	"github.com/tickwheel/tickwheel/client"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestClusterMetrics: a cluster node's raft state shows in the
// tickwheel_raft_* metrics (a cluster of one elects itself: leader, a
// term, indexes, a voter, one member), /readyz says ready once it leads
// and has committed, and a single server has tickwheel_raft_cluster 0 and
// no other raft metric. The node goes on committing after it is ready
// (its first records as leader): its applied index reaches the commit
// index read before it, not necessarily at the same instant.
func TestClusterMetrics(t *testing.T) {
	op, raftAddr := clusterOfOne(t, "metrics")
	hs := httptest.NewServer(op.Handler())
	defer hs.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d: the single node did not lead within 20s", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// /status.json carries the raft state and the members.
	var st struct {
		Cluster *clusterStatus `json:"cluster"`
	}
	readStatus(t, op, hs.URL, &st)
	if k := st.Cluster; k == nil || k.Role != "leader" || k.Suffrage != "voter" || k.Leader != "n1" || k.Term < 1 || k.CommitIndex < 1 ||
		len(k.Members) != 1 || k.Members[0] != (member{ID: "n1", RaftAddr: raftAddr, Voter: true}) {
		t.Errorf("/status.json cluster: %+v", st.Cluster)
	}
	fams := scrape(t, hs.URL, "")
	for name, want := range map[string]float64{"tickwheel_raft_cluster": 1, "tickwheel_raft_leader": 1,
		"tickwheel_raft_leader_known": 1} {
		if got := value(t, fams, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := value(t, fams, "tickwheel_raft_state", "role", "leader"); got != 1 {
		t.Errorf(`tickwheel_raft_state{role="leader"} = %v`, got)
	}
	if got := value(t, fams, "tickwheel_raft_state", "role", "follower"); got != 0 {
		t.Errorf(`tickwheel_raft_state{role="follower"} = %v`, got)
	}
	if got := value(t, fams, "tickwheel_raft_term"); got < 1 {
		t.Errorf("tickwheel_raft_term = %v", got)
	}
	for label, want := range map[string]float64{"voter": 1, "nonvoter": 0} {
		if got := value(t, fams, "tickwheel_raft_suffrage", "suffrage", label); got != want {
			t.Errorf(`tickwheel_raft_suffrage{suffrage=%q} = %v, want %v`, label, got, want)
		}
		if got := value(t, fams, "tickwheel_raft_members", "suffrage", label); got != want {
			t.Errorf(`tickwheel_raft_members{suffrage=%q} = %v, want %v`, label, got, want)
		}
	}
	if c := value(t, fams, "tickwheel_raft_commit_index"); c < 1 || value(t, fams, "tickwheel_raft_leader_commit_index") < c {
		t.Errorf("commit index %v, the leader's as it reports it %v", c, value(t, fams, "tickwheel_raft_leader_commit_index"))
	}
	// Commit and applied index are read one after the other while the new
	// leader's first records commit: the applied index reaches the commit
	// index read first.
	c := value(t, fams, "tickwheel_raft_commit_index")
	deadline = time.Now().Add(10 * time.Second)
	for a := value(t, fams, "tickwheel_raft_applied_index"); a < c; a = value(t, fams, "tickwheel_raft_applied_index") {
		if time.Now().After(deadline) {
			t.Fatalf("applied index %v did not reach the commit index %v", a, c)
		}
		time.Sleep(10 * time.Millisecond)
		fams = scrape(t, hs.URL, "")
	}

	single := servertest.RunT(t)
	op2, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	op2.Attach(single.Server())
	hs2 := httptest.NewServer(op2.Handler())
	defer hs2.Close()
	fams = scrape(t, hs2.URL, "")
	if got := value(t, fams, "tickwheel_raft_cluster"); got != 0 {
		t.Errorf("single server: tickwheel_raft_cluster = %v", got)
	}
	if fams["tickwheel_raft_leader"] != nil {
		t.Errorf("single server: tickwheel_raft_leader present")
	}
	st.Cluster = nil
	readStatus(t, op2, hs2.URL, &st)
	if st.Cluster != nil {
		t.Errorf("single server: /status.json has cluster %+v", st.Cluster)
	}
}

// readStatus takes a sample of op's server, as its sampler does once a
// second, and decodes /status.json into v.
func readStatus(t *testing.T, op *Operator, base string, v any) {
	t.Helper()
	m, err := op.source().ReadMetrics(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	op.hist.add(m)
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// clusterOfOne starts an in-process server that is a cluster of one
// (node n1 of cluster id, which elects itself, raft on raftAddr) and an
// operator attached to it, not yet serving.
// TestClusterStateCheckStatus: after a cluster check, /status.json shows
// the node's state check: the check's id, a digest, the timers.
func TestClusterStateCheckStatus(t *testing.T) {
	ts, op, _ := clusterOfOneServer(t, "check")
	hs := httptest.NewServer(op.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, ts.Addr(), client.WithToken(ts.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var id uint64
	for id == 0 { // until the node leads
		if _, err := cl.Add(ctx, 1, 2, 1000, nil); err != nil {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c, err := cl.ClusterCheck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id = c.Check
	}
	var st struct {
		Cluster *clusterStatus `json:"cluster"`
	}
	for {
		readStatus(t, op, hs.URL, &st)
		if k := st.Cluster; k != nil && k.StateCheck != nil && k.StateCheck.ID == strconv.FormatUint(id, 10) {
			if len(k.StateCheck.Digest) != 16 || k.StateCheck.Timers != 1 {
				t.Fatalf("state check %+v", *k.StateCheck)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("/status.json has no state check %d: %+v", id, st.Cluster)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func clusterOfOne(t *testing.T, id string) (op *Operator, raftAddr string) {
	t.Helper()
	_, op, raftAddr = clusterOfOneServer(t, id)
	return op, raftAddr
}

// clusterOfOneServer is clusterOfOne's server and operator.
func clusterOfOneServer(t *testing.T, id string) (*servertest.Server, *Operator, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := ln.Addr().String()
	ln.Close()
	ts := servertest.RunT(t, servertest.WithDataDir(t.TempDir()), servertest.WithConfig(func(c *servertest.Config) {
		c.Cluster = server.ClusterConfig{ID: id, NodeID: "n1", Peers: "n1=" + raftAddr}
	}))
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(ts.Server())
	return ts, op, raftAddr
}

// Two nodes' reads of one check agree whatever their raft state; another
// digest, timer count or check does not.
func TestStateCheckAgrees(t *testing.T) {
	a := StateCheck{ID: 7, Digest: 0xabc, Timers: 3, Role: "leader", AppliedIndex: 90, CommitIndex: 90}
	b := StateCheck{ID: 7, Digest: 0xabc, Timers: 3, Role: "follower", AppliedIndex: 88, CommitIndex: 90}
	if !a.Agrees(b) {
		t.Error("the same check, another raft state: must agree")
	}
	for _, c := range []StateCheck{{ID: 7, Digest: 0xabd, Timers: 3}, {ID: 7, Digest: 0xabc, Timers: 4}, {ID: 8, Digest: 0xabc, Timers: 3}} {
		if a.Agrees(c) {
			t.Errorf("%+v agrees with %+v", c, a)
		}
	}
}
