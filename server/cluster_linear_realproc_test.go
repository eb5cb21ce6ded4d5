package server

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// linearClients runs n clients of the cluster at addrs until ctx ends,
// each making random adds (without replace, of timers that do not fire
// during the run), cancels and gets of keys (receiver 1, tids 1..keys)
// one at a time, and records them in h. Each call is bounded by a 2 s
// timeout (unknown when it runs out).
func linearClients(ctx context.Context, t *testing.T, addrs string, n, keys int, h *clustertest.History) *sync.WaitGroup {
	var wg sync.WaitGroup
	for id := range n {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		c, err := client.Dial(dctx, addrs, client.WithToken(procToken), client.WithName("linear"),
			client.WithReconnect(20*time.Millisecond, 200*time.Millisecond))
		cancel()
		require.NoError(t, err)
		wg.Go(func() {
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(id), 25))
			for ctx.Err() == nil {
				key := clustertest.Key{Receiver: 1, Tid: 1 + rng.Uint64N(uint64(keys))}
				kind := clustertest.Kind(rng.IntN(3))
				octx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				call := h.Begin(id, kind, key)
				var err error
				switch kind {
				case clustertest.Add:
					_, err = c.Add(octx, key.Receiver, key.Tid, 3_600_000, nil)
				case clustertest.Cancel:
					err = c.Cancel(octx, key.Receiver, key.Tid)
				case clustertest.Get:
					_, err = c.Get(octx, key.Receiver, key.Tid)
				}
				cancel()
				o := clustertest.OutcomeOf(err, client.ErrExists, client.ErrNotFound)
				call.End(o)
				if o == clustertest.Unknown {
					time.Sleep(50 * time.Millisecond) // no storm of unknown operations while the cluster fails over
				}
			}
		})
	}
	return &wg
}

// TestClusterLinearizable: four clients add, cancel and get timers of a
// three-node cluster (the Go client following not_leader) while the
// leader is killed with SIGKILL and restarted, three times; the history
// of their operations, with the unknown ones (timed out, connection lost,
// not_leader) allowed to take effect at any time after their call or
// never, must be linearizable with respect to a map of timer keys to
// present/absent (porcupine): no acknowledged add lost, no cancelled timer
// back, no stale read.
func TestClusterLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes, elections: long")
	}
	c := newClusterProcs(t)
	defer func() {
		if t.Failed() {
			for _, p := range c.procs {
				p.logTail()
			}
		}
	}()
	_, w := c.leader(-1)
	w.close()
	h := clustertest.NewHistory()
	ctx, stop := context.WithCancel(context.Background())
	wg := linearClients(ctx, t, strings.Join(c.clients[:], ","), 4, 12, h)
	for range 3 {
		time.Sleep(1500 * time.Millisecond)
		lead, w := c.leader(-1)
		w.close()
		c.procs[lead].kill()
		t.Logf("%v: n%d (leader) killed", h.Since(), lead+1)
		time.Sleep(500 * time.Millisecond)
		c.start(lead)
	}
	time.Sleep(1500 * time.Millisecond)
	stop()
	wg.Wait()
	counts := h.Counts()
	t.Logf("operations: %d recorded; outcomes %v", h.Len(), counts)
	require.Greater(t, counts[clustertest.OK], 100, "too few operations succeeded to check anything")
	res, bad := h.Check(time.Minute)
	require.NotEqual(t, porcupine.Illegal, res, "not linearizable:\n%s", bad)
	require.Equal(t, porcupine.Ok, res, "porcupine did not finish within a minute")
}
