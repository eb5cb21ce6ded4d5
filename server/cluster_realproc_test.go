package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// The cluster tests run three real tickwheel processes in cluster mode on
// 127.0.0.1, kill them with SIGKILL and stop them with SIGTERM.

// clusterProcs is a three-node cluster of tickwheel processes.
type clusterProcs struct {
	t       *testing.T
	dirs    [3]string
	clients [3]string // client addresses
	peers   string
	procs   [3]*proc
	// nodePeers, when set, is node i's own -peers list (in which the other
	// nodes' raft addresses are those of links the test owns).
	nodePeers [3]string
	https     [3]string // operator HTTP addresses, when set
}

// freeAddr returns a free 127.0.0.1 address below the ephemeral port
// range, so that a node restarted on it finds it free, and never one it
// returned before in this process: the addresses of a test are picked
// before its servers start, and clustertest.Listen picks ports at random,
// so two picks could get the same port while it was still free (a CI run
// had a node's client address be another's: "bind: address already in
// use").
func freeAddr(t *testing.T) string {
	t.Helper()
	freeAddrsMu.Lock()
	defer freeAddrsMu.Unlock()
	for {
		ln, err := clustertest.Listen()
		require.NoError(t, err)
		a := ln.Addr().String()
		ln.Close()
		if !freeAddrsGiven[a] {
			freeAddrsGiven[a] = true
			return a
		}
	}
}

var (
	freeAddrsMu    sync.Mutex
	freeAddrsGiven = map[string]bool{}
)

func newClusterProcs(t *testing.T) *clusterProcs {
	t.Helper()
	c := &clusterProcs{t: t}
	for i := range 3 {
		c.dirs[i] = t.TempDir()
		c.clients[i] = freeAddr(t)
		c.https[i] = freeAddr(t)
		if i > 0 {
			c.peers += ","
		}
		c.peers += fmt.Sprintf("n%d=%s=%s", i+1, freeAddr(t), c.clients[i])
	}
	for i := range 3 {
		c.start(i)
	}
	return c
}

// start runs node i (again).
func (c *clusterProcs) start(i int) {
	c.t.Helper()
	peers := c.peers
	if c.nodePeers[i] != "" {
		peers = c.nodePeers[i]
	}
	args := []string{"-addr", c.clients[i], "-data-dir", c.dirs[i], "-cluster-id", "test",
		"-node-id", fmt.Sprintf("n%d", i+1), "-peers", peers, "-fsync", "always"}
	if c.https[i] != "" {
		args = append(args, "-http-addr", c.https[i])
	}
	c.procs[i] = startProc(c.t, args...)
}

// hello says hello to node i: the session when it leads, or the not_leader
// error's leader address ("" when it knows none) when it follows.
func (c *clusterProcs) hello(i int) (w *wire, leader string, err error) {
	nc, err := net.DialTimeout("tcp", c.clients[i], 2*time.Second)
	if err != nil {
		return nil, "", err
	}
	w = &wire{c: nc, timeout: 5 * time.Second}
	w.r = bufio.NewReader(nc)
	m, err := w.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "cluster-test", Token: procToken})
	if err != nil {
		nc.Close()
		return nil, "", err
	}
	if m.Kind == protocol.KindOK {
		return w, "", nil
	}
	nc.Close()
	if m.Code != protocol.CodeNotLeader {
		return nil, "", fmt.Errorf("hello: %s %s", m.Code, m.Text)
	}
	return nil, m.Leader, errNotLeader
}

var errNotLeader = errors.New("not_leader")

// leader waits until a live node other than not leads and every other
// live node names its client address in not_leader, and returns its index
// and a session on it.
func (c *clusterProcs) leader(not int) (int, *wire) {
	c.t.Helper()
	live := func(i int) bool { return i != not && c.procs[i] != nil && c.procs[i].alive() }
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i := range c.procs {
			if !live(i) {
				continue
			}
			w, _, err := c.hello(i)
			if err != nil {
				continue
			}
			named := true // by every other live node
			for j := range c.procs {
				if j == i || !live(j) {
					continue
				}
				_, addr, err := c.hello(j)
				named = named && err == errNotLeader && addr == c.clients[i]
			}
			if named {
				return i, w
			}
			w.close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no leader named by every follower within 20s")
	return -1, nil
}

// TestClusterKillLeader: three tickwheel processes; a stream of adds and
// cancels goes to the leader, which is killed with SIGKILL in the middle
// of it; another node is elected and named by the followers' not_leader;
// no add whose reply arrived is lost and no cancelled timer comes back;
// after more changes on the new leader, the killed node restarts and
// catches up, and the node that takes over each time the leader is
// stopped (SIGTERM, then restarted; until every node has led, at most four
// times) holds the same timers.
func TestClusterKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes, elections: long")
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
	first, w := c.leader(-1)
	const receiver = 9
	live := map[uint64]bool{}      // acknowledged adds not cancelled
	cancelled := map[uint64]bool{} // acknowledged cancels
	unsure := map[uint64]bool{}    // no reply: the leader died with it in flight
	next := uint64(1)
	op := func(w *wire, killAt int, kill func()) bool {
		for n := 0; ; n++ {
			if n == killAt {
				kill()
			}
			tid := next
			var req protocol.Request
			cancel := tid%3 == 0 && live[tid-1]
			if cancel {
				tid--
				req = protocol.Request{Op: protocol.OpCancel, Receiver: receiver, Tid: tid}
			} else {
				next++
				req = protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, After: 360_000}
			}
			m, err := w.call(req)
			if err != nil {
				unsure[tid] = true
				return false
			}
			require.Equal(t, protocol.KindOK, m.Kind, "%v: %s %s", req.Op, m.Code, m.Text)
			if cancel {
				delete(live, tid)
				cancelled[tid] = true
				next++
			} else {
				live[tid] = true
			}
			if killAt < 0 && n == 150 {
				return true
			}
		}
	}
	// Adds and cancels, the leader killed after 200 of them, mid-stream.
	var killed time.Time
	require.False(t, op(w, 200, func() { killed = time.Now(); c.procs[first].kill() }))
	w.close()
	second, w := c.leader(first)
	require.NotEqual(t, first, second)
	named := time.Since(killed)
	m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: next, After: 360_000})
	require.NoError(t, err)
	require.Equal(t, protocol.KindOK, m.Kind, "the new leader's first add: %s %s", m.Code, m.Text)
	live[next] = true
	next++
	t.Logf("failover: kill -9 to a leader named by the follower %v (polled every 100 ms), to the first add it accepted %v",
		named.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	check := func(w *wire, who int) []protocol.Timer {
		ts, err := w.listAll(receiver)
		require.NoError(t, err)
		have := map[uint64]bool{}
		for _, tm := range ts {
			have[tm.Tid] = true
		}
		for tid := range live {
			require.True(t, have[tid] || unsure[tid], "node %d lost acknowledged add %d", who+1, tid)
		}
		for tid := range cancelled {
			require.False(t, have[tid] && !unsure[tid], "node %d holds cancelled timer %d", who+1, tid)
		}
		return ts
	}
	check(w, second)
	// More changes on the new leader, then the killed node comes back.
	require.True(t, op(w, -1, nil))
	want := check(w, second)
	w.close()
	c.start(first)
	time.Sleep(2 * time.Second) // it catches up from the others
	seen := map[int]bool{second: true}
	for round := 0; round < 4 && len(seen) < 3; round++ { // until each node has led (usually)
		// Stop the leader gracefully: another takes over with the same state.
		prev := second
		c.procs[prev].term()
		second, w = c.leader(prev)
		got := check(w, second)
		w.close()
		require.Equal(t, sorted(want), sorted(got), "node %d's timers differ from node %d's", second+1, prev+1)
		seen[second] = true
		c.start(prev)
		time.Sleep(2 * time.Second)
	}
	// Every node's whole state (not only the timers) is the same.
	_, w = c.leader(-1)
	c.agreeAtCheck(w)
	w.close()
	t.Logf("nodes that led with the same timers: %v; acknowledged adds live %d, cancelled %d, unsure %d",
		slices.Sorted(func(yield func(int) bool) {
			for k := range seen {
				if !yield(k + 1) {
					return
				}
			}
		}), len(live), len(cancelled), len(unsure))
}

// agreeAtCheck runs a cluster state check through w (a session on the
// leader) and waits until every node's status page shows its digest for
// it; it fails the test unless the three are equal.
func (c *clusterProcs) agreeAtCheck(w *wire) {
	c.t.Helper()
	m, err := w.call(protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterCheck})
	require.NoError(c.t, err)
	require.Equal(c.t, protocol.KindOK, m.Kind, "cluster check: %s %s", m.Code, m.Text)
	var k protocol.Cluster
	require.NoError(c.t, protocol.DecodeCluster(m.Result, &k))
	want := strconv.FormatUint(k.Check, 10)
	var digests [3]string
	hc := &http.Client{Timeout: 2 * time.Second}
	require.Eventually(c.t, func() bool {
		done := true
		for i := range digests {
			if digests[i] == "" {
				digests[i] = nodeCheckDigest(hc, c.https[i], want)
				done = done && digests[i] != ""
			}
		}
		return done
	}, 30*time.Second, 100*time.Millisecond, "every node reports its digest for check %s: %v", want, digests)
	require.Equal(c.t, digests[0], digests[1], "the states of nodes 1 and 2 differ at check %s", want)
	require.Equal(c.t, digests[0], digests[2], "the states of nodes 1 and 3 differ at check %s", want)
	c.t.Logf("state check %s: the three nodes agree (digest %s)", want, digests[0])
}

// nodeCheckDigest is the digest of state check id on the status page at
// addr, or "" when the page does not show that check (yet).
func nodeCheckDigest(hc *http.Client, addr, id string) string {
	resp, err := hc.Get("http://" + addr + "/status.json")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var st struct {
		Cluster *struct {
			StateCheck *struct{ ID, Digest string } `json:"state_check"`
		} `json:"cluster"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil || st.Cluster == nil || st.Cluster.StateCheck == nil ||
		st.Cluster.StateCheck.ID != id {
		return ""
	}
	return st.Cluster.StateCheck.Digest
}

// sorted returns ts by tid, without what depends on when they were listed.
func sorted(ts []protocol.Timer) []protocol.Timer {
	out := slices.Clone(ts)
	for i := range out {
		out[i].Remaining = 0 // relative to the node's tw-time when listed
	}
	slices.SortFunc(out, func(a, b protocol.Timer) int {
		switch {
		case a.Tid < b.Tid:
			return -1
		case a.Tid > b.Tid:
			return 1
		}
		return 0
	})
	return out
}

// TestClusterLeaderWithoutQuorum: with both followers stopped (SIGSTOP),
// the leader acknowledges no add: it cannot commit it, and once its lease
// runs out it steps down and closes the client's connection without the
// reply. Resumed, the nodes elect a leader that holds the acknowledged
// add.
func TestClusterLeaderWithoutQuorum(t *testing.T) {
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
	lead, w := c.leader(-1)
	t.Logf("leader n%d at %s; peers %s", lead+1, c.clients[lead], c.peers)
	m, err := w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 360_000})
	require.NoError(t, err)
	require.Equal(t, protocol.KindOK, m.Kind)
	var stopped []*proc
	defer func() {
		for _, p := range stopped {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	for i, p := range c.procs {
		if i != lead {
			stopped = append(stopped, p)
			p.pause(t) // every thread stopped: none can still acknowledge an entry
		}
	}
	m, err = w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 2, After: 360_000})
	require.Error(t, err, "an add was acknowledged without a quorum: %+v", m)
	w.close()
	// It stepped down and rebuilt its state from committed entries only.
	c.procs[lead].logged(t, "no longer leading: client connections closed, the state rebuilt from committed entries")
	for _, p := range stopped {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
	}
	stopped = nil
	_, w = c.leader(-1)
	defer w.close()
	ts, err := w.listAll(1)
	require.NoError(t, err)
	// The unacknowledged add may still commit: the old leader's log holds
	// it, and with the longest log it may win the election.
	require.NotEmpty(t, ts)
	require.Equal(t, uint64(1), ts[0].Tid, "the acknowledged add is lost: %+v", ts)
	t.Logf("timers after the election: %d (the unacknowledged add committed later: %v)", len(ts), len(ts) == 2)
}
