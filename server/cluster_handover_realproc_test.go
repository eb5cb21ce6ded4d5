package server

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestClusterGracefulStopHandsOver: a leader stopped with SIGTERM hands
// leadership to another node before it shuts down (it logs so, and exits
// 0), and an add is accepted by another node right after: ten rounds, the
// stopped node restarted between them. The time from SIGTERM to the first
// add accepted elsewhere is logged (docs/BENCHMARKS.md), not asserted.
func TestClusterGracefulStopHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes, ten graceful stops: long")
	}
	c := newClusterProcs(t)
	defer func() {
		if t.Failed() {
			for _, p := range c.procs {
				if p != nil {
					p.logTail()
				}
			}
		}
	}()
	lead, w := c.leader(-1)
	w.close()
	const rounds = 10
	var gaps []time.Duration
	tid := uint64(1)
	for round := range rounds {
		p := c.procs[lead]
		stopped := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		var gap time.Duration
		for gap == 0 {
			require.Less(t, time.Since(stopped), 20*time.Second, "round %d: no node took an add within 20 s", round+1)
			for i := range c.procs {
				if i == lead {
					continue
				}
				w, _, err := c.hello(i)
				if err != nil {
					continue
				}
				m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 12, Tid: tid, After: 360_000})
				w.close()
				if err == nil && m.Kind == protocol.KindOK {
					gap = time.Since(stopped)
					lead = i
					tid++
					break
				}
			}
			if gap == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
		gaps = append(gaps, gap)
		p.logged(t, "cluster: stopping: leadership handed over")
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: n%d did not exit within 10 s of SIGTERM", round+1, slices.Index(c.procs[:], p)+1)
		}
		require.NoError(t, p.err, "exit status after SIGTERM")
		prev := slices.Index(c.procs[:], p)
		c.start(prev)
		// The next round stops whichever node leads once the restarted one
		// has rejoined (every other live node names the leader, the
		// restarted one included). That need not be the node that took the
		// add: a leader that hears from no quorum for LeaderLeaseTimeout
		// (250 ms) steps down, as it may on a loaded machine while the
		// restarted node catches up.
		lead, w = c.leader(-1)
		w.close()
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	t.Logf("SIGTERM of the leader to the first add accepted by another node, %d rounds: median %v, max %v, all %v",
		rounds, sorted[rounds/2].Round(time.Millisecond), sorted[rounds-1].Round(time.Millisecond), gaps)
}
