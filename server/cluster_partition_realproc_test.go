package server

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// linkedCluster is a three-node cluster of processes whose raft traffic
// goes through links the test owns: node i dials node j through
// links[i][j] (its -peers list names the link's address for j).
type linkedCluster struct {
	*clusterProcs
	links [3][3]*clustertest.Link
}

func newLinkedCluster(t *testing.T) *linkedCluster {
	t.Helper()
	c := &linkedCluster{clusterProcs: &clusterProcs{t: t}}
	var raft [3]string
	for i := range 3 {
		c.dirs[i] = t.TempDir()
		c.clients[i] = freeAddr(t)
		c.https[i] = freeAddr(t)
		raft[i] = freeAddr(t)
	}
	for i := range 3 {
		var peers []string
		for j := range 3 {
			addr := raft[j]
			if i != j {
				l, err := clustertest.NewLink(raft[j])
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
				c.links[i][j] = l
				addr = l.Addr()
			}
			peers = append(peers, fmt.Sprintf("n%d=%s=%s", j+1, addr, c.clients[j]))
		}
		c.nodePeers[i] = strings.Join(peers, ",")
	}
	for i := range 3 {
		c.start(i)
	}
	return c
}

// isolate cuts (or heals) every link to and from node i.
func (c *linkedCluster) isolate(i int, cut bool) {
	for j := range 3 {
		for _, l := range []*clustertest.Link{c.links[i][j], c.links[j][i]} {
			switch {
			case l == nil:
			case cut:
				l.Cut()
			default:
				l.Heal()
			}
		}
	}
}

// metric reads one unlabelled metric of node i's /metrics.
func (c *clusterProcs) metric(i int, name string) (float64, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + c.https[i] + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("node %d: no metric %s", i+1, name)
}

// TestClusterPartitionedLeader: the leader's raft links are cut (both
// directions, to both followers). Every add sent to it after the cut is
// refused, times out or loses its connection: it cannot commit, so it
// never acknowledges one (an OK that the new leader would not hold). The
// other two elect a new leader, which takes adds. Healed, the old leader
// follows the new one (names it in not_leader) and applies the same
// entries: the same timers and applied index on every node.
func TestClusterPartitionedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes, elections: long")
	}
	c := newLinkedCluster(t)
	defer func() {
		if t.Failed() {
			for _, p := range c.procs {
				p.logTail()
			}
		}
	}()
	old, w := c.leader(-1)
	m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 360_000})
	require.NoError(t, err)
	require.Equal(t, protocol.KindOK, m.Kind)

	c.isolate(old, true)
	w.timeout = 3 * time.Second
	var refused []string
	for tid := uint64(100); tid < 110; tid++ {
		m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 360_000})
		if err != nil {
			refused = append(refused, err.Error())
			if err != errTimeout {
				break // the connection is gone: it stepped down and closed it
			}
			continue
		}
		require.NotEqual(t, protocol.KindOK, m.Kind, "the partitioned leader acknowledged add %d", tid)
		refused = append(refused, fmt.Sprint(m.Code))
	}
	w.close()
	t.Logf("adds to the partitioned leader: %v", refused)
	// It stepped down: it answers not_leader to a new connection.
	require.Eventually(t, func() bool {
		_, _, err := c.hello(old)
		return err == errNotLeader
	}, 10*time.Second, 50*time.Millisecond, "the partitioned leader still accepts clients")

	// The other two elect a leader, which takes adds.
	lead, w := c.leader(old)
	require.NotEqual(t, old, lead)
	for tid := uint64(200); tid < 210; tid++ {
		m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 360_000})
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
	}
	want, err := w.listAll(1)
	require.NoError(t, err)
	w.close()
	require.Len(t, want, 11, "tid 1 and the 10 adds of the new leader (none of the partitioned leader's)")

	// Healed, the old leader follows and holds the same timers.
	c.isolate(old, false)
	lead, w = c.leader(-1) // every node, the old leader too, names it
	defer w.close()
	got, err := w.listAll(1)
	require.NoError(t, err)
	require.Equal(t, sorted(want), sorted(got))
	require.Eventually(t, func() bool {
		var idx, n [3]float64
		for i := range 3 {
			var err1, err2 error
			idx[i], err1 = c.metric(i, "tickwheel_raft_applied_index")
			n[i], err2 = c.metric(i, "tickwheel_timers")
			if err1 != nil || err2 != nil {
				return false
			}
		}
		return idx[0] == idx[1] && idx[1] == idx[2] && n[0] == 11 && n[1] == 11 && n[2] == 11
	}, 10*time.Second, 100*time.Millisecond, "the nodes did not converge on the same applied index and timers")
	t.Logf("old leader n%d, new leader n%d", old+1, lead+1)
}
