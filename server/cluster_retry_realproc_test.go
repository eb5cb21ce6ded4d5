package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
)

// TestClusterRetryAcrossKill: twelve Go clients of a three-node cluster
// add timers, each tid once, without replace, while the leader is killed
// with SIGKILL in the middle of the stream (three times, the killed node
// restarted 0.5 s later). The clients send again, with the
// same request id, every add whose reply the kill took (not_leader, or the
// connection lost); the new leader answers those it already holds (the
// dead leader's committed entries) with the first reply and applies the
// others once. So every add succeeds — an add applied twice would have
// answered exists, and one lost would be missing — and the new leader
// holds exactly one timer per add.
func TestClusterRetryAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes, elections: long")
	}
	c := newClusterProcs(t)
	defer func() {
		if t.Failed() {
			for _, p := range c.procs {
				if p != nil && p.alive() {
					p.logTail()
				}
			}
		}
	}()
	const (
		receiver = 11
		clients  = 12
		each     = 150
	)
	killsAt := []int64{300, 800, 1300} // adds acknowledged before each kill
	var acked atomic.Int64
	var slow atomic.Int64 // adds whose call spanned the failover
	errs := make(chan error, clients*each)
	var wg sync.WaitGroup
	for g := range clients {
		cl, err := client.Dial(context.Background(), strings.Join(c.clients[:], ","), client.WithToken(procToken),
			client.WithName(fmt.Sprintf("retry-%d", g)), client.WithReconnect(20*time.Millisecond, 200*time.Millisecond))
		require.NoError(t, err)
		defer cl.Close()
		wg.Go(func() {
			for k := range uint64(each) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				began := time.Now()
				_, err := cl.Add(ctx, receiver, uint64(g)*1000+k+1, 360_000, nil)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("client %d add %d: %w", g, k+1, err)
					continue
				}
				if time.Since(began) > 300*time.Millisecond {
					slow.Add(1)
				}
				acked.Add(1)
			}
		})
	}
	var kills []string
	for _, at := range killsAt {
		deadline := time.Now().Add(30 * time.Second)
		for acked.Load() < at && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		require.GreaterOrEqual(t, acked.Load(), at, "adds before kill %d", len(kills)+1)
		lead, w := c.leader(-1)
		w.close()
		c.procs[lead].kill()
		kills = append(kills, fmt.Sprintf("n%d after %d", lead+1, acked.Load()))
		time.Sleep(500 * time.Millisecond)
		c.start(lead)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err) // an add applied twice answers exists; one not retried, ErrNotLeader or ErrDisconnected
	}
	lead, w := c.leader(-1)
	defer w.close()
	ts, err := w.listAll(receiver)
	require.NoError(t, err)
	seen := map[uint64]int{}
	for _, tm := range ts {
		seen[tm.Tid]++
	}
	for g := range uint64(clients) {
		for k := range uint64(each) {
			require.Equal(t, 1, seen[g*1000+k+1], "timer %d on the leader n%d", g*1000+k+1, lead+1)
		}
	}
	require.Len(t, ts, clients*each)
	t.Logf("leaders killed: %s acknowledged adds; n%d leads with %d timers, one per add; %d adds waited through a failover",
		strings.Join(kills, ", "), lead+1, len(ts), slow.Load())
}
