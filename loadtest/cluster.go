package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// The cluster scenario (issue 25): three tickwheel processes in cluster
// mode on 127.0.0.1, each node's raft traffic to each other node through a
// clustertest.Link forwarder this process owns, under a nemesis that every
// few seconds kills a node (SIGKILL, restarted after a while), pauses one
// (SIGSTOP, then SIGCONT) or cuts one off (every link to and from it cut,
// then healed), while clients add, cancel, get and consume acknowledged
// events (cluster_check.go). See ClusterNemesis.

// ClusterParams configures ClusterNemesis.
type ClusterParams struct {
	Bin      string        // the tickwheel binary
	Dir      string        // the nodes' data directories go under it
	Duration time.Duration // how long the traffic and the faults run
	// Every is the time between the end of one fault and the start of the
	// next (jittered ±50%); each fault lasts 0.5–2.5 s. Default 3 s.
	Every time.Duration
	// Clients make the linearizability history (default 4) over Keys
	// timers (default 16).
	Clients, Keys int
	Log           io.Writer // the servers' logs (nil: discarded)
	// LogDir, when set, takes each node's log instead, appended to
	// LogDir/<node id>.log across its restarts.
	LogDir string
	// LogLevel is the servers' -log-level (default warn).
	LogLevel string
	// ClientLog is where the clients log (nil: discarded); the consumer's
	// client logs its binds and the duplicates it drops at debug level.
	ClientLog *slog.Logger
	Logf      func(format string, args ...any)
	Seed      uint64 // the nemesis's choices (0: random)
}

// clusterNode is one process of the cluster and its addresses.
type clusterNode struct {
	id                  string
	dir                 string
	client, raft, peers string
	http                string // the operator listener (its status page has the node's state check)
	proc                *Spawned
	paused              bool
}

// nemCluster is the three nodes, their links and the faults in force.
// Owned by the nemesis goroutine, except the addresses (read-only).
type nemCluster struct {
	p     ClusterParams
	token string
	nodes [3]*clusterNode
	links [3][3]*clustertest.Link // [from][to]
}

// freeNodeAddr returns a free 127.0.0.1 address below the ephemeral port
// range, for a node restarted on it (clustertest.Listen).
func freeNodeAddr() (string, error) {
	ln, err := clustertest.Listen()
	if err != nil {
		return "", err
	}
	a := ln.Addr().String()
	ln.Close()
	return a, nil
}

func newNemCluster(ctx context.Context, p ClusterParams) (*nemCluster, error) {
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	c := &nemCluster{p: p, token: hex.EncodeToString(tok[:])}
	for i := range c.nodes {
		n := &clusterNode{id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(p.Dir, fmt.Sprintf("n%d", i+1))}
		var err error
		if n.http, err = freeNodeAddr(); err != nil {
			return nil, err
		}
		if n.client, err = freeNodeAddr(); err != nil {
			return nil, err
		}
		if n.raft, err = freeNodeAddr(); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			return nil, err
		}
		c.nodes[i] = n
	}
	for i, n := range c.nodes {
		var peers []string
		for j, m := range c.nodes {
			addr := m.raft
			if i != j {
				l, err := clustertest.NewLink(m.raft)
				if err != nil {
					c.close()
					return nil, err
				}
				c.links[i][j] = l
				addr = l.Addr()
			}
			peers = append(peers, fmt.Sprintf("%s=%s=%s", m.id, addr, m.client))
		}
		n.peers = strings.Join(peers, ",")
	}
	for i := range c.nodes {
		if err := c.start(ctx, i); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// start runs node i (again). The cluster id is the run's own: on loopback
// without a token file the cluster token derives from it, so that nodes of
// two runs on one machine (ports are picked at random) refuse each other's
// raft connections instead of joining one cluster.
func (c *nemCluster) start(ctx context.Context, i int) error {
	n := c.nodes[i]
	log := c.p.Log
	if log == nil {
		log = io.Discard
	}
	if c.p.LogDir != "" {
		f, err := os.OpenFile(filepath.Join(c.p.LogDir, n.id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close() // the child has its own descriptor
		log = f
	}
	s, err := SpawnWith(ctx, SpawnOptions{Path: c.p.Bin, Addr: n.client, Log: log,
		Env: []string{"TICKWHEEL_ADMIN_TOKEN=" + c.token},
		Args: []string{"-data-dir", n.dir, "-cluster-id", "nemesis-" + c.token[:12], "-node-id", n.id, "-peers", n.peers,
			"-raft-addr", n.raft, "-http-addr", n.http, "-fsync", "always", "-log-level", cmp.Or(c.p.LogLevel, "warn")}})
	if err != nil {
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	n.proc, n.paused = s, false
	return nil
}

// addrs is the client address list.
func (c *nemCluster) addrs() string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.client)
	}
	return strings.Join(a, ",")
}

// isolate cuts or heals every link to and from node i.
func (c *nemCluster) isolate(i int, cut bool) {
	for j := range c.nodes {
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

// close heals and resumes everything, then stops the nodes (SIGTERM) and
// the links.
func (c *nemCluster) close() {
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		if n.proc != nil {
			if n.paused {
				_ = n.proc.Cmd.Process.Signal(syscall.SIGCONT)
			}
			n.proc.StopWait = 10 * time.Second
			_ = n.proc.Stop()
		}
		for j := range c.nodes {
			if l := c.links[i][j]; l != nil {
				l.Close()
			}
		}
	}
}

// serving reports whether node i answers hello with OK (it leads and
// serves clients) within timeout.
func (c *nemCluster) serving(i int, timeout time.Duration) bool {
	nc, err := net.DialTimeout("tcp", c.nodes[i].client, timeout)
	if err != nil {
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(timeout))
	req := protocol.Request{ID: 1, Op: protocol.OpHello, Version: protocol.Version, Name: "nemesis-probe", Token: c.token}
	if _, err := nc.Write(protocol.AppendRequest(nil, &req)); err != nil {
		return false
	}
	var hdr [4]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return false
	}
	payload := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(nc, payload); err != nil {
		return false
	}
	var m protocol.Message
	return protocol.DecodeMessage(payload, &m) == nil && m.Kind == protocol.KindOK
}

// leaderWatch polls which nodes serve every 50 ms until ctx ends, and
// counts the failovers (the serving node changed) and the longest time no
// node served.
type leaderWatch struct {
	mu        sync.Mutex
	leader    int // -1: none
	since     time.Time
	failovers int
	longest   time.Duration
	longestAt time.Duration // when it ended, from the start
	start     time.Time
}

func (c *nemCluster) watch(ctx context.Context) *leaderWatch {
	w := &leaderWatch{leader: -1, since: time.Now(), start: time.Now()}
	go func() {
		last := -1
		for ctx.Err() == nil {
			var wg sync.WaitGroup
			var ok [3]bool
			for i := range c.nodes {
				wg.Go(func() { ok[i] = c.serving(i, 200*time.Millisecond) })
			}
			wg.Wait()
			now := -1
			for i := range ok {
				if ok[i] && (now < 0 || i == last) {
					now = i
				}
			}
			w.mu.Lock()
			switch {
			case now >= 0 && w.leader < 0: // a leader again
				if d := time.Since(w.since); d > w.longest {
					w.longest, w.longestAt = d, time.Since(w.start)
				}
				if last >= 0 && now != last {
					w.failovers++
				}
			case now < 0 && w.leader >= 0:
				w.since = time.Now()
			case now >= 0 && now != w.leader:
				w.failovers++ // a change with no gap seen between polls
			}
			w.leader = now
			if now >= 0 {
				last = now
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// current returns the serving node (-1: none seen at the last poll).
func (w *leaderWatch) current() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leader
}

// Fault counts, by kind.
type FaultCounts struct {
	Kills, Pauses, Cuts int
	LeaderFaults        int // of them, those that hit the node serving at the time
}

// nemesis injects faults until ctx ends, one at a time, each healed before
// the next: kill -9 (restarted after the fault's time), SIGSTOP (then
// SIGCONT), or every link of the node cut (then healed). Half of the
// faults hit the serving node, the others a random one.
func (c *nemCluster) nemesis(ctx context.Context, w *leaderWatch, rng *mrand.Rand, logf func(string, ...any)) (FaultCounts, error) {
	var fc FaultCounts
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	jitter := func(d time.Duration) time.Duration { return d/2 + time.Duration(rng.Int64N(int64(d))) }
	for sleep(jitter(c.p.Every)) {
		i := rng.IntN(3)
		if l := w.current(); l >= 0 && rng.IntN(2) == 0 {
			i = l
			fc.LeaderFaults++
		}
		hold := 500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
		n := c.nodes[i]
		var undo func() error
		switch rng.IntN(3) {
		case 0:
			fc.Kills++
			logf("nemesis: kill -9 %s for %v", n.id, hold)
			n.proc.Kill()
			undo = func() error { return c.start(context.Background(), i) }
		case 1:
			fc.Pauses++
			logf("nemesis: SIGSTOP %s for %v", n.id, hold)
			_ = n.proc.Cmd.Process.Signal(syscall.SIGSTOP)
			n.paused = true
			undo = func() error {
				n.paused = false
				return n.proc.Cmd.Process.Signal(syscall.SIGCONT)
			}
		default:
			fc.Cuts++
			logf("nemesis: links of %s cut for %v", n.id, hold)
			c.isolate(i, true)
			undo = func() error { c.isolate(i, false); return nil }
		}
		time.Sleep(hold) // a fault is always healed, even at the end
		if err := undo(); err != nil {
			return fc, err
		}
	}
	return fc, nil
}
