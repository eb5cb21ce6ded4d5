package cluster

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Three nodes: the leader's proposals are committed in the order proposed,
// each reported once with its entry's index, and every node's consumer
// sees the same records in the same order.
func TestReplicate(t *testing.T) {
	t.Run("one entry in flight", func(t *testing.T) { testReplicate(t, 1) })
	// Several entries in flight (raft pipelines them): the reports still
	// come in proposal order and every node holds the same records.
	t.Run("four entries in flight", func(t *testing.T) { testReplicate(t, 4) })
}

func testReplicate(t *testing.T, inFlight int) {
	tc := newCluster(t, 3, func(_ int, c *Config) { c.MaxInFlight = inFlight })
	l := tc.leader()
	st := tc.nodes[l].n.Status()
	require.Equal(t, "leader", st.Role)
	require.Equal(t, tc.nodes[l].id, st.LeaderID)

	recs := names("rec", 300)
	rs := collect(t, tc.proposeAll(l, recs...), len(recs))
	var last uint64
	for i, r := range rs {
		require.NoError(t, r.err, "proposal %d", i)
		require.Equal(t, recs[i], r.rec, "reported in proposal order")
		require.GreaterOrEqual(t, r.index, last, "indices never go back")
		last = r.index
	}
	got := tc.converge(len(recs))
	require.Equal(t, recs, strs(got))
	// Every node sees which leadership proposed each record: the leader
	// can tell its own (already executed) from the rest.
	for _, tn := range tc.nodes {
		tn.c.mu.Lock()
		for i, s := range tn.c.stints {
			require.Equal(t, st.Stint, s, "%s: record %d", tn.id, i)
		}
		tn.c.mu.Unlock()
	}
	require.NotZero(t, st.Stint)

	// Followers know the leader and its client address (for not_leader).
	for i, tn := range tc.nodes {
		if i == l {
			continue
		}
		st := tn.n.Status()
		require.Equal(t, "follower", st.Role)
		require.Equal(t, tc.nodes[l].id, st.LeaderID)
		require.Equal(t, "client-"+tc.nodes[l].id, st.LeaderClientAddr)
		require.GreaterOrEqual(t, st.AppliedIndex, last)
		err := tn.n.Propose([]byte("x"), func(uint64, error) { t.Error("a follower's proposal was reported") })
		var nl *NotLeaderError
		require.ErrorAs(t, err, &nl)
		require.True(t, errors.Is(err, ErrNotLeader))
		require.Equal(t, "client-"+tc.nodes[l].id, nl.LeaderClientAddr)
	}
}
