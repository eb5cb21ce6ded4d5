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
// add timers, each tid once, without replace (a third of them in
// Pipelines of ten adds, with a scratch timer added and cancelled in the
// same Pipeline: pipeAdds), while the leader is killed
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
	var slow atomic.Int64      // adds whose call spanned the failover
	var slowPipes atomic.Int64 // pipelines whose Exec spanned the failover
	errs := make(chan error, 2*clients*each)
	var wg sync.WaitGroup
	for g := range clients {
		cl, err := client.Dial(context.Background(), strings.Join(c.clients[:], ","), client.WithToken(procToken),
			client.WithName(fmt.Sprintf("retry-%d", g)), client.WithReconnect(20*time.Millisecond, 200*time.Millisecond))
		require.NoError(t, err)
		defer cl.Close()
		if g%3 == 0 {
			wg.Go(func() { pipeAdds(cl, receiver, uint64(g), each, &acked, &slowPipes, errs) })
			continue
		}
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
	t.Logf("leaders killed: %s acknowledged adds; n%d leads with %d timers, one per add; %d adds and %d pipelines waited through a failover",
		strings.Join(kills, ", "), lead+1, len(ts), slow.Load(), slowPipes.Load())
}

// pipeAdds is a pipelining client of TestClusterRetryAcrossKill: it adds
// tids g*1000+1 ... g*1000+each of receiver in Pipelines of pipeBatch
// adds, each Pipeline also adding a scratch timer (g*1000+500+batch) and
// cancelling it after the adds. Exec sends again, with the same request
// ids and in order, the changes whose replies a kill took; so every Cmd
// succeeds (an add applied twice answers exists, a cancel not_found) and
// no scratch timer is left. It counts the acknowledged adds in acked.
func pipeAdds(cl *client.Client, receiver, g uint64, each int, acked, slow *atomic.Int64, errs chan<- error) {
	const pipeBatch = 10
	for b := uint64(0); b*pipeBatch < uint64(each); b++ {
		p := cl.Pipeline()
		scratch := g*1000 + 500 + b
		cmds := []*client.Cmd{p.Add(receiver, scratch, 360_000, nil)}
		for k := b * pipeBatch; k < min((b+1)*pipeBatch, uint64(each)); k++ {
			cmds = append(cmds, p.Add(receiver, g*1000+k+1, 360_000, nil))
		}
		cmds = append(cmds, p.Cancel(receiver, scratch))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		began := time.Now()
		_ = p.Exec(ctx) // each Cmd has its own outcome
		cancel()
		if time.Since(began) > 300*time.Millisecond {
			slow.Add(1)
		}
		for i, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				errs <- fmt.Errorf("client %d pipeline %d: %s #%d: %w", g, b, cmd.Op(), i, err)
			} else if i > 0 && i < len(cmds)-1 {
				acked.Add(1)
			}
		}
	}
}
