package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// addPipelined adds timers from..to of receiver through the leader among
// nodes, batch requests written at once before their replies are read. A
// leader that steps down (on a loaded machine one may: it did not hear
// from a quorum for its lease) closes the connection: the batch goes again
// to the next leader, where an add the first one committed is answered
// exists.
func addPipelined(t *testing.T, nodes []*memberNode, receiver, from, to uint64) {
	t.Helper()
	const batch = 2000
	_, w := memberLeader(t, nodes...)
	defer func() { w.close() }()
	for first, tries := from, 0; first <= to; {
		last := min(first+batch-1, to)
		if err := addBatch(w, receiver, first, last); err != nil {
			tries++
			require.Less(t, tries, 10, "adds %d..%d: %v", first, last, err)
			t.Logf("adds %d..%d: %v; again on the leader", first, last, err)
			w.close()
			_, w = memberLeader(t, nodes...)
			continue
		}
		first = last + 1
	}
}

// addBatch sends adds first..last of receiver on w at once and reads
// their replies: nil when each was added (or exists), else the first
// failure.
func addBatch(w *wire, receiver, first, last uint64) error {
	var b []byte
	for tid := first; tid <= last; tid++ {
		w.id++
		b = protocol.AppendRequest(b, &protocol.Request{Op: protocol.OpAdd, ID: w.id, Receiver: receiver, Tid: tid,
			After: 360_000})
	}
	w.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := w.c.Write(b); err != nil {
		return err
	}
	for tid := first; tid <= last; tid++ {
		m, err := w.next()
		switch {
		case err != nil:
			return fmt.Errorf("the reply to add %d: %w", tid, err)
		case m.Kind == protocol.KindError && m.Code != protocol.CodeExists:
			return fmt.Errorf("add %d: %s %s", tid, m.Code, m.Text)
		}
	}
	return nil
}

// metric reads an unlabelled gauge, or the series of labels ("" for
// none), from the operator at addr: -1 when it is absent.
func metric(t *testing.T, addr, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if labels != "" {
		name += "{" + labels + "}"
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// readyz is the operator's /readyz status at addr.
func readyz(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterNonvoterRealProc: a fourth node added with `tickwheel
// cluster add` to three processes holding 200k timers, which take raft
// snapshots and keep little log behind them (so the new node must install
// a snapshot), is a non-voter until it has caught up, then a voter. While
// the leader cannot reach it (its raft address is a link the test cuts)
// the add waits, status shows it a non-voter, its /readyz says not ready,
// and with one voter stopped (SIGSTOP) as well the leader still commits
// adds: the non-voter counts in no quorum (the old add, a voter at once,
// made 2 of 4 no quorum here). Once reachable it installs the snapshot,
// the add returns with it a voter, and it is ready, a voter in /metrics,
// with every timer.
func TestClusterNonvoterRealProc(t *testing.T) {
	if testing.Short() {
		t.Skip("four processes, 200k timers, snapshots: long")
	}
	conf := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("cluster:\n  snapshot_entries: 32\n  snapshot_interval: 1s\n  trailing_entries: 8\n  log_segment_bytes: 65536\n"), 0o600))
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
	var peers []string
	for _, n := range nodes[:3] {
		peers = append(peers, fmt.Sprintf("%s=%s=%s", n.id, n.raft, n.client))
	}
	for _, n := range nodes[:3] {
		startMember(t, n, "-config", conf, "-peers", strings.Join(peers, ","))
	}
	const count = 200_000 // 100k each of receivers 7 and 8 (limits.max_timers_per_receiver)
	addPipelined(t, nodes[:3], 7, 1, count/2)
	addPipelined(t, nodes[:3], 8, 1, count/2)
	require.Eventually(t, func() bool {
		for _, n := range nodes[:3] {
			if !strings.Contains(n.p.stderr.String(), "compacting logs") {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "the nodes took raft snapshots and compacted their logs")

	// n4 waits to be added; the leader reaches it only through a link.
	n4 := nodes[3]
	http4 := freeAddr(t)
	startMember(t, n4, "-config", conf, "-http-addr", http4)
	link, err := clustertest.NewLink(n4.raft)
	require.NoError(t, err)
	defer link.Close()
	link.Cut()
	var addrs []string
	for _, n := range nodes[:3] {
		addrs = append(addrs, n.client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type cliResult struct {
		out []byte
		err error
	}
	added := make(chan cliResult, 1)
	go func() {
		cmd := exec.CommandContext(ctx, serverBinary(t), "cluster", "add", "n4", link.Addr(), "-addr", strings.Join(addrs, ","),
			"-token", procToken, "-json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		added <- cliResult{out, err}
	}()
	require.Eventually(t, func() bool {
		k := clusterCLI(t, nodes[:3], "status")
		for _, m := range k.Members {
			if m.ID == "n4" {
				return !m.Voter
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "n4 in the configuration as a non-voter")
	require.Equal(t, http.StatusServiceUnavailable, readyz(t, http4), "n4 has not caught up: not ready")

	// A voter stopped too: the leader and the other voter commit.
	lead, w := memberLeader(t, nodes[:3]...)
	w.close()
	var paused *proc
	var running []*memberNode
	for _, n := range nodes[:3] {
		if n != lead && paused == nil {
			paused = n.p
		} else {
			running = append(running, n)
		}
	}
	paused.pause(t)
	addPipelined(t, running, 9, 1, 100)
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	select {
	case r := <-added:
		t.Fatalf("cluster add returned before n4 was reachable: %s %v", r.out, r.err)
	default:
	}
	k := clusterCLI(t, nodes[:3], "status")
	require.Equal(t, []string{"n1", "n2", "n3"}, memberIDs(k), "n4 is not a voter yet")

	// Reachable: it installs the snapshot, catches up, and is promoted.
	link.Heal()
	var r cliResult
	select {
	case r = <-added:
	case <-time.After(2 * time.Minute):
		t.Fatal("cluster add did not return within 2 minutes of n4 being reachable")
	}
	require.NoError(t, r.err)
	var st struct {
		Members []struct {
			ID    string `json:"id"`
			Voter bool   `json:"voter"`
		} `json:"members"`
	}
	require.NoError(t, json.Unmarshal(r.out, &st), "%s", r.out)
	require.Contains(t, st.Members, struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
	}{"n4", true}, "cluster add printed n4 a voter: %s", r.out)
	n4.p.logged(t, "Installed remote snapshot")
	require.Eventually(t, func() bool { return readyz(t, http4) == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"n4 ready once caught up")
	// n4 learns of its promotion from the leader's next entries (the
	// leader answered once the other voters had it).
	require.Eventually(t, func() bool {
		return metric(t, http4, "tickwheel_raft_suffrage", `suffrage="voter"`) == 1 &&
			metric(t, http4, "tickwheel_raft_members", `suffrage="voter"`) == 4
	}, 30*time.Second, 50*time.Millisecond, "n4 a voter in its /metrics")
	require.Eventually(t, func() bool { return metric(t, http4, "tickwheel_timers", "") == count+100 }, 30*time.Second,
		50*time.Millisecond, "n4 holds every timer: %v", metric(t, http4, "tickwheel_timers", ""))
}
