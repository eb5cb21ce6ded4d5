package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
)

// TestClusterApplyFailureStops: a follower that cannot replay a committed
// record (its Core is no longer the cluster's state: here it lost its
// sessions, as a bug would) stops, as a failed rebuild does, instead of
// staying a voter that reports itself caught up and may be elected to
// serve a state that lacks every record since.
func TestClusterApplyFailureStops(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	srvs := startCluster(t, nil)
	lead := waitLeader(t, srvs[:], -1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, srvs[lead].Addr(), client.WithToken(testAdminToken))
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.Add(ctx, 5, 1, 100_000, nil)
	require.NoError(t, err)

	bad := (lead + 1) % 3
	require.Eventually(t, func() bool { return srvs[bad].clusterMetrics().AppliedIndex >= srvs[lead].clusterMetrics().CommitIndex },
		10*time.Second, 10*time.Millisecond)
	require.NoError(t, srvs[bad].onLoop(ctx, func() { require.NoError(t, srvs[bad].replica.restore(nil)) })) // its sessions gone
	_, err = cl.Add(ctx, 5, 2, 100_000, nil)                                                                 // from a session the bad node no longer has
	require.NoError(t, err)
	select {
	case <-srvs[bad].Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("node %d could not replay a committed record and still runs (role %s, ready %v)", bad+1,
			srvs[bad].clusterMetrics().Role, srvs[bad].replica.ready())
	}
}
