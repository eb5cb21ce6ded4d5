package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

const testToken = "a-test-cluster-token-0123456789"

// recConsumer is a consumer whose state is the list of every record
// committed, in order (what a server's Core would Replay). Its snapshot is
// that list.
type recConsumer struct {
	mu       sync.Mutex
	recs     [][]byte
	stints   []uint64 // each record's entry's stint (since the last restore)
	last     uint64   // index of the last entry applied
	restores int
	applied  chan struct{} // rung after each Apply and Restore
	// afterApply, when set, runs at the end of each Apply with the index
	// of its last entry, where a server's event loop would run its next
	// task (e.g. a follow's rebuild) before raft's Apply call returns.
	afterApply func(last uint64)
}

func newRecConsumer() *recConsumer { return &recConsumer{applied: make(chan struct{}, 1)} }

func (c *recConsumer) ring() {
	select {
	case c.applied <- struct{}{}:
	default:
	}
}

func (c *recConsumer) Apply(entries []Entry) error {
	c.mu.Lock()
	for _, e := range entries {
		if e.Index <= c.last {
			c.mu.Unlock()
			return fmt.Errorf("index %d after %d", e.Index, c.last)
		}
		c.last = e.Index
		for _, r := range e.Records {
			c.recs = append(c.recs, bytes.Clone(r))
			c.stints = append(c.stints, e.Stint)
		}
	}
	last, after := c.last, c.afterApply
	c.mu.Unlock()
	if after != nil {
		after(last)
	}
	c.ring()
	return nil
}

type recSnapshot struct{ recs [][]byte }

func (c *recConsumer) Snapshot() (Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &recSnapshot{recs: append([][]byte(nil), c.recs...)}, nil
}

func (s *recSnapshot) Write(w io.Writer) error {
	b := binary.AppendUvarint(nil, uint64(len(s.recs)))
	for _, r := range s.recs {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	_, err := w.Write(b)
	return err
}

func (s *recSnapshot) Release() {}

func (c *recConsumer) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return errors.New("bad snapshot")
	}
	off := k
	recs := make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		f, err := field(b, &off)
		if err != nil {
			return err
		}
		recs = append(recs, bytes.Clone(f))
	}
	c.mu.Lock()
	c.recs, c.last, c.stints = recs, 0, nil
	c.restores++
	c.mu.Unlock()
	c.ring()
	return nil
}

func (c *recConsumer) records() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.recs...)
}

// tnode is one node of a test cluster.
type tnode struct {
	id   string
	addr string // raft address (real listener)
	cfg  Config
	n    *Node
	c    *recConsumer
	logs *syncBuffer

	mu     sync.Mutex
	events []Leadership // OnLeadership's reports, in order
}

func (tn *tnode) lastEvent() (Leadership, bool) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if len(tn.events) == 0 {
		return Leadership{}, false
	}
	return tn.events[len(tn.events)-1], true
}

type tcluster struct {
	t     testing.TB
	nodes []*tnode
	links map[[2]int]*clustertest.Link // [from, to]
}

// syncBuffer collects a node's log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newCluster starts size nodes on 127.0.0.1 whose raft traffic goes
// through one clustertest.Link per direction between each pair.
func newCluster(t testing.TB, size int, tune func(i int, c *Config)) *tcluster {
	tc := &tcluster{t: t, links: map[[2]int]*clustertest.Link{}}
	var peers []Peer
	lns := make([]net.Listener, size)
	for i := 0; i < size; i++ {
		ln, err := clustertest.Listen()
		require.NoError(t, err)
		lns[i] = ln
		id := fmt.Sprintf("n%d", i)
		peers = append(peers, Peer{ID: id, Addr: ln.Addr().String()})
		tc.nodes = append(tc.nodes, &tnode{id: id, addr: ln.Addr().String()})
	}
	for i := 0; i < size; i++ {
		for j := 0; j < size; j++ {
			if i != j {
				l, err := clustertest.NewLink(peers[j].Addr)
				require.NoError(t, err)
				tc.links[[2]int{i, j}] = l
				t.Cleanup(func() { l.Close() })
			}
		}
	}
	for i, tn := range tc.nodes {
		tn.logs = &syncBuffer{}
		tn.cfg = Config{ClusterID: "test", NodeID: tn.id, Listener: lns[i], ClientAddr: "client-" + tn.id,
			Peers: peers, DataDir: t.TempDir(), Token: testToken, Route: tc.route(i),
			Log: slog.New(slog.NewTextHandler(tn.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
		tn.cfg.OnLeadership = func(l Leadership) {
			tn.mu.Lock()
			tn.events = append(tn.events, l)
			tn.mu.Unlock()
		}
		if tune != nil {
			tune(i, &tn.cfg)
		}
		tc.start(i)
	}
	t.Cleanup(func() {
		for _, tn := range tc.nodes {
			if tn.n != nil {
				tn.n.Shutdown()
			}
		}
	})
	return tc
}

// route is node from's Config.Route: each peer through its link. It reads
// only what is fixed at newCluster (nodes added later are reached directly).
func (tc *tcluster) route(from int) func(string) (string, bool) {
	addrs := map[string]string{}
	for j, tn := range tc.nodes {
		if l := tc.links[[2]int{from, j}]; l != nil {
			addrs[tn.id] = l.Addr()
		}
	}
	return func(id string) (string, bool) {
		a, ok := addrs[id]
		return a, ok
	}
}

// start starts node i with a fresh consumer (its data directory kept).
func (tc *tcluster) start(i int) {
	tn := tc.nodes[i]
	tn.c = newRecConsumer()
	n, err := Start(tn.cfg, tn.c)
	require.NoError(tc.t, err)
	tn.n = n
}

// stop shuts node i down; start(i) restarts it on the same address.
func (tc *tcluster) stop(i int) {
	require.NoError(tc.t, tc.nodes[i].n.Shutdown())
	tc.nodes[i].n = nil
	tc.nodes[i].cfg.Listener, tc.nodes[i].cfg.BindAddr = nil, tc.nodes[i].addr
}

// isolate cuts (or heals) every link to and from node i.
func (tc *tcluster) isolate(i int, cut bool) {
	for k, l := range tc.links {
		if k[0] == i || k[1] == i {
			if cut {
				l.Cut()
			} else {
				l.Heal()
			}
		}
	}
}

// leader waits for a node among those running (and not in skip) that may
// propose, and returns its position.
func (tc *tcluster) leader(skip ...int) int {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
	nodes:
		for i, tn := range tc.nodes {
			for _, s := range skip {
				if s == i {
					continue nodes
				}
			}
			if tn.n != nil && tn.n.Status().Stint != 0 {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.t.Fatal("no leader elected within 20 s")
	return -1
}

// result is one proposal's outcome.
type result struct {
	rec   string
	index uint64
	err   error
}

// proposeAll proposes recs on node i without waiting and returns a channel
// of their outcomes (buffered; one each, in order). A proposal refused at
// once (not the leader) is reported like a failed one.
func (tc *tcluster) proposeAll(i int, recs ...string) <-chan result {
	out := make(chan result, len(recs))
	for _, r := range recs {
		r := r
		err := tc.nodes[i].n.Propose([]byte(r), func(idx uint64, err error) { out <- result{r, idx, err} })
		if err != nil {
			out <- result{r, 0, err}
		}
	}
	return out
}

// commit proposes recs one at a time on the node that leads, each once
// its predecessor is committed, and returns when all are. On a loaded
// machine leadership may change in the middle of a test (a leader that
// does not hear from a quorum for the lease timeout steps down): a
// proposal refused (not the leader) or failed (ErrNotCommitted:
// leadership lost with it in flight) goes to the next leader, unless that
// leader holds it already (the old leader's entry, committed by the new
// one), so none commits twice. A new leader has applied every committed
// entry before it may propose (its Stint is set after a barrier).
func (tc *tcluster) commit(recs ...string) {
	tc.t.Helper()
	for _, rec := range recs {
		for try := 0; ; try++ {
			l := tc.leader()
			stint := tc.nodes[l].n.Status().Stint
			r := collect(tc.t, tc.proposeAll(l, rec), 1)[0]
			if r.err == nil {
				break
			}
			if try == 20 || !errors.Is(r.err, ErrNotLeader) && !errors.Is(r.err, ErrNotCommitted) {
				tc.t.Fatalf("proposal %.30q on %s: %v", rec, tc.nodes[l].id, r.err)
			}
			tc.t.Logf("proposal %.30q on %s: %v; again on the next leader", rec, tc.nodes[l].id, r.err)
			next := tc.leaderSince(l, stint)
			if slices.Contains(strs(tc.nodes[next].c.records()), rec) {
				break
			}
		}
	}
}

// leaderSince waits for a node that leads in another stint than stint of
// node old (another node, or old leading again) and returns its position.
func (tc *tcluster) leaderSince(old int, stint uint64) int {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, tn := range tc.nodes {
			if tn.n == nil {
				continue
			}
			if s := tn.n.Status().Stint; s != 0 && (i != old || s != stint) {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.t.Fatal("no new leader within 20 s")
	return -1
}

func collect(t testing.TB, ch <-chan result, n int) []result {
	var rs []result
	timeout := time.After(30 * time.Second)
	for len(rs) < n {
		select {
		case r := <-ch:
			rs = append(rs, r)
		case <-timeout:
			t.Fatalf("only %d of %d proposals reported", len(rs), n)
		}
	}
	return rs
}

// converge waits until the consumers of the running nodes hold the same
// records, at least min of them, and returns them.
func (tc *tcluster) converge(min int) [][]byte {
	deadline := time.Now().Add(30 * time.Second)
	var last [][]byte
	for {
		same, first := true, true
		last = nil
		for _, tn := range tc.nodes {
			if tn.n == nil {
				continue
			}
			r := tn.c.records()
			if first {
				last, first = r, false
			} else if !equalRecs(last, r) {
				same = false
			}
		}
		if same && len(last) >= min {
			return last
		}
		if time.Now().After(deadline) {
			for _, tn := range tc.nodes {
				if tn.n != nil {
					tc.t.Logf("%s: %d records", tn.id, len(tn.c.records()))
				}
			}
			tc.t.Fatalf("the nodes' committed records did not converge to %d or more", min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func equalRecs(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func strs(recs [][]byte) []string {
	s := make([]string, len(recs))
	for i, r := range recs {
		s[i] = string(r)
	}
	return s
}

func names(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return s
}

func newTestLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
