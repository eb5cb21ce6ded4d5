package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/wheel"
)

// TestClusterStateCheck: after adds, cancels, firings and acks, a cluster
// check gives one digest on every node; a node whose state lost its
// agreement with the log (here: a timer put straight into its wheel, as a
// record skipped or replayed twice would) gives another at the next check,
// and the others still agree.
func TestClusterStateCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	srvs := startCluster(t, nil)
	lead := waitLeader(t, srvs[:], -1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var addrs []string
	for _, s := range srvs {
		addrs = append(addrs, s.Addr())
	}
	cl, err := client.Dial(ctx, strings.Join(addrs, ","), client.WithToken(testAdminToken),
		client.WithReconnect(20*time.Millisecond, 200*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.Bind(ctx, 5, &client.BindOptions{Ack: client.AckAuto})
	require.NoError(t, err)
	for tid := uint64(1); tid <= 40; tid++ {
		_, err := cl.Add(ctx, 5, tid, 1+tid%5, nil)
		require.NoError(t, err)
		_, err = cl.Add(ctx, 6, tid, 100_000, nil) // live at the checks
		require.NoError(t, err)
		if tid%7 == 0 {
			require.NoError(t, cl.Cancel(ctx, 6, tid-1))
		}
	}
	for n := 0; n < 10; {
		select {
		case ev := <-cl.Events():
			if ev.Kind == client.Fire {
				n++
			}
		case <-ctx.Done():
			t.Fatal("no events")
		}
	}

	check := func() uint64 {
		t.Helper()
		for try := 0; ; try++ {
			c, err := cl.ClusterCheck(ctx)
			if err == nil {
				require.NotZero(t, c.Check)
				return c.Check
			}
			require.Less(t, try, 5, "cluster check: %v", err)
			t.Logf("cluster check: %v; again", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	first := nodeChecks(t, srvs, check())
	for i := range first {
		require.Equal(t, first[0].Digest, first[i].Digest, "node %d's state differs from node 1's", i+1)
		require.Equal(t, first[0].Timers, first[i].Timers)
	}
	require.NotZero(t, first[0].Timers)

	odd := (lead + 1) % 3
	require.NoError(t, srvs[odd].onLoop(ctx, func() {
		require.NoError(t, srvs[odd].core.Wheel().Add(wheel.Key{Receiver: 6, Tid: 1000}, wheel.Spec{After: 100_000}))
	}))
	second := nodeChecks(t, srvs, check())
	same := (odd + 1) % 3
	for i := range second {
		if i == odd {
			require.NotEqual(t, second[same].Digest, second[i].Digest, "node %d's changed state hashes alike", i+1)
		} else {
			require.Equal(t, second[same].Digest, second[i].Digest, "node %d's state differs from node %d's", i+1, same+1)
		}
	}
	m, err := srvs[same].ReadMetrics(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, second[same], m.Cluster.Check, "the metrics carry the latest check")
}

// TestClusterStateCheckUnderLoad: checks marked while adds are in flight
// and a quiet session reads (its replies wait for the turns in flight,
// in its output, when the leader marks) agree on every node: the nodes
// are in one state at each mark.
func TestClusterStateCheckUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	srvs := startCluster(t, nil)
	lead := waitLeader(t, srvs[:], -1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func() *client.Client {
		cl, err := client.Dial(ctx, srvs[lead].Addr(), client.WithToken(testAdminToken))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	adder, reader, admin := dial(), dial(), dial()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := uint64(0); g < 8; g++ {
		wg.Add(1)
		go func() { // pipelined adds: records are in flight at each mark
			defer wg.Done()
			for tid := uint64(1); loadCtx.Err() == nil; tid++ {
				_, _ = adder.Add(loadCtx, 10+g, tid, 1_000_000, nil)
			}
		}()
	}
	wg.Add(1)
	go func() { // a quiet session's reads: their replies wait for those records
		defer wg.Done()
		for loadCtx.Err() == nil {
			_, _ = reader.Stats(loadCtx)
		}
	}()
	var ids []uint64
	for range maxStateChecks {
		time.Sleep(20 * time.Millisecond)
		c, err := admin.ClusterCheck(ctx)
		require.NoError(t, err)
		ids = append(ids, c.Check)
	}
	stopLoad()
	wg.Wait()
	for _, id := range ids {
		out := nodeChecks(t, srvs, id)
		for i := range out {
			require.Equal(t, out[lead].Digest, out[i].Digest, "check %d: node %d's digest differs from the leader's (node %d)", id, i+1, lead+1)
		}
	}
}

// nodeChecks waits until every node of srvs has hashed its state at check
// id, and returns their results.
func nodeChecks(t *testing.T, srvs [3]*Server, id uint64) [3]StateCheck {
	t.Helper()
	var out [3]StateCheck
	require.Eventually(t, func() bool {
		for i, s := range srvs {
			out[i] = StateCheck{}
			for _, sc := range s.StateChecks() {
				if sc.ID == id {
					out[i] = sc
				}
			}
			if out[i].ID == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every node hashes its state at check %d", id)
	return out
}
