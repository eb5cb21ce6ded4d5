package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server/cluster/clustertest"
)

// Receivers of the cluster scenario's clients.
const (
	nemLinearReceiver  = 1 // adds, cancels and gets of timers that never fire: the porcupine history
	nemDurableReceiver = 2 // adds only, of timers that never fire: every acknowledged one must be there at the end
	nemEventReceiver   = 3 // timers due within a second, bound in acknowledged mode: every acknowledged add must arrive
)

// ClusterReport is what ClusterNemesis found.
type ClusterReport struct {
	Duration time.Duration
	Faults   FaultCounts
	// Failovers: how often the node serving clients changed;
	// LongestLeaderless: the longest time no node served (polled every
	// 50 ms), ending LongestAt after the start.
	Failovers                    int
	LongestLeaderless, LongestAt time.Duration

	AddsAcked, AddsUnsure, AddsLost int // nemDurableReceiver: lost = acknowledged, absent at the end
	// Events: the adds of nemEventReceiver acknowledged (each must be
	// delivered), with an unknown outcome (may be), delivered (distinct
	// tids), lost (acknowledged, never delivered), duplicates (deliveries
	// of a tid already delivered), out of order (a seq not above the last
	// one, in one connection), and the client's own counts of redelivered
	// events it dropped and of events reported dropped.
	EventsAcked, EventsUnsure, EventsDelivered, EventsLost, Duplicates, OutOfOrder int
	Redelivered, Dropped                                                           uint64
	// EventsDetail names the first lost and duplicated events: each lost
	// tid with when its add was acknowledged, and the seqs its neighbours
	// came with; each duplicate with its seqs (what to look for in the
	// nodes' logs).
	EventsDetail string

	// StateCheck says how the nodes' states compared at the end (a cluster
	// check: every node's digest of its state at one point of the log);
	// StateDiverged that they did not agree, or a node did not report.
	StateCheck    string
	StateDiverged bool

	// The porcupine history: operations, outcomes, and the verdict.
	Operations   int
	Outcomes     map[clustertest.Outcome]int
	Linearizable porcupine.CheckResult
	Violation    string // the operations of a key porcupine could not linearize
}

// Failed reports whether the zero-tolerance figures are not zero: an
// acknowledged add lost, an event lost, a history that is not
// linearizable, nodes whose states differ at the end.
func (r *ClusterReport) Failed() bool {
	return r.AddsLost > 0 || r.EventsLost > 0 || r.Linearizable == porcupine.Illegal || r.StateDiverged
}

// Print writes the report.
func (r *ClusterReport) Print(w io.Writer) {
	fmt.Fprintf(w, "cluster nemesis: %v, 3 nodes, faults: %d kill -9, %d SIGSTOP, %d link cuts (%d of them on the serving node)\n",
		r.Duration.Round(time.Second), r.Faults.Kills, r.Faults.Pauses, r.Faults.Cuts, r.Faults.LeaderFaults)
	fmt.Fprintf(w, "failovers: %d; longest time without a serving leader: %v (ended at %v)\n",
		r.Failovers, r.LongestLeaderless.Round(time.Millisecond), r.LongestAt.Round(time.Second))
	fmt.Fprintf(w, "acknowledged adds: %d, lost: %d (outcome unknown: %d)\n", r.AddsAcked, r.AddsLost, r.AddsUnsure)
	fmt.Fprintf(w, "events: %d acknowledged adds, %d delivered, lost: %d, duplicates: %d, out of order: %d (unknown adds: %d; redelivered and dropped by the client: %d; reported dropped: %d)\n",
		r.EventsAcked, r.EventsDelivered, r.EventsLost, r.Duplicates, r.OutOfOrder, r.EventsUnsure, r.Redelivered, r.Dropped)
	fmt.Fprintf(w, "linearizability (porcupine, add/cancel/get of a key→present map): %s over %d operations (ok %d, exists %d, not_found %d, unknown %d)\n",
		verdict(r.Linearizable), r.Operations, r.Outcomes[clustertest.OK], r.Outcomes[clustertest.Exists],
		r.Outcomes[clustertest.NotFound], r.Outcomes[clustertest.Unknown])
	fmt.Fprintf(w, "state check: %s\n", r.StateCheck)
	if r.EventsDetail != "" {
		fmt.Fprintf(w, "events lost or duplicated:\n%s", r.EventsDetail)
	}
	if r.Violation != "" {
		fmt.Fprintf(w, "violation:\n%s", r.Violation)
	}
}

func verdict(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	}
	return "unknown (the check timed out)"
}

// ClusterNemesis runs the cluster scenario for p.Duration and reports.
// The faults stop at the end, the cluster settles (a leader serves, the
// events due are delivered), then the figures are counted and the history
// checked.
func ClusterNemesis(ctx context.Context, p ClusterParams) (*ClusterReport, error) {
	if p.Every <= 0 {
		p.Every = 3 * time.Second
	}
	if p.Clients <= 0 {
		p.Clients = 4
	}
	if p.Keys <= 0 {
		p.Keys = 16
	}
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	seed := p.Seed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	logf("cluster nemesis: seed %d", seed)
	c, err := newNemCluster(ctx, p)
	if err != nil {
		return nil, err
	}
	defer c.close()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := c.watch(wctx)
	dial := func(name string, opts ...client.Option) (*client.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		base := []client.Option{client.WithToken(c.token), client.WithName(name),
			client.WithReconnect(20*time.Millisecond, 300*time.Millisecond)}
		if p.ClientLog != nil {
			base = append(base, client.WithLogger(p.ClientLog.With("client", name)))
		}
		return client.Dial(dctx, c.addrs(), append(base, opts...)...)
	}
	cons, err := newConsumer(ctx, dial)
	if err != nil {
		return nil, err
	}
	defer cons.c.Close()

	rep := &ClusterReport{}
	start := time.Now()
	run, stop := context.WithTimeout(ctx, p.Duration)
	defer stop()
	h := clustertest.NewHistory()
	var wg sync.WaitGroup
	var werr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { werr = err; stop() }) }
	for id := range p.Clients {
		cl, err := dial(fmt.Sprintf("linear-%d", id))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		wg.Go(func() { linearWorker(run, cl, id, seed, p.Keys, h) })
	}
	durable, events := &adder{}, &adder{}
	for _, a := range []struct {
		ad       *adder
		receiver uint64
	}{{durable, nemDurableReceiver}, {events, nemEventReceiver}} {
		cl, err := dial(fmt.Sprintf("adder-%d", a.receiver))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		wg.Go(func() { a.ad.run(run, cl, a.receiver) })
	}
	faults, nerr := c.nemesis(run, watch, mrand.New(mrand.NewPCG(seed, 25)), logf)
	if nerr != nil {
		fail(nerr)
	}
	<-run.Done()
	wg.Wait()
	rep.Duration, rep.Faults = time.Since(start), faults
	if werr != nil {
		return nil, werr
	}
	if err := settle(ctx, c, watch, cons, events, logf); err != nil {
		return nil, err
	}
	stopWatch()
	watch.mu.Lock()
	rep.Failovers, rep.LongestLeaderless, rep.LongestAt = watch.failovers, watch.longest, watch.longestAt
	watch.mu.Unlock()
	if err := countAdds(ctx, dial, durable, rep); err != nil {
		return nil, err
	}
	cons.count(events, rep)
	rep.Operations, rep.Outcomes = h.Len(), h.Counts()
	rep.Linearizable, rep.Violation = h.Check(2 * time.Minute)
	rep.StateCheck, rep.StateDiverged = c.stateCheck(ctx, cons.c)
	return rep, nil
}

// linearWorker makes random adds, cancels and gets of nemLinearReceiver's
// keys, one at a time, recording them in h, until ctx ends.
func linearWorker(ctx context.Context, cl *client.Client, id int, seed uint64, keys int, h *clustertest.History) {
	rng := mrand.New(mrand.NewPCG(seed, uint64(id)))
	for ctx.Err() == nil {
		key := clustertest.Key{Receiver: nemLinearReceiver, Tid: 1 + rng.Uint64N(uint64(keys))}
		kind := clustertest.Kind(rng.IntN(3))
		octx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		call := h.Begin(id, kind, key)
		var err error
		switch kind {
		case clustertest.Add:
			_, err = cl.Add(octx, key.Receiver, key.Tid, 3_600_000, nil) // ticks: hours
		case clustertest.Cancel:
			err = cl.Cancel(octx, key.Receiver, key.Tid)
		case clustertest.Get:
			_, err = cl.Get(octx, key.Receiver, key.Tid)
		}
		cancel()
		o := clustertest.OutcomeOf(err, client.ErrExists, client.ErrNotFound)
		call.End(o)
		if o == clustertest.Unknown {
			time.Sleep(50 * time.Millisecond) // no storm of unknown operations while the cluster fails over
		}
	}
}

// adder adds timers of one receiver with increasing tids, one at a time,
// and notes which were acknowledged and which have an unknown outcome.
type adder struct {
	mu            sync.Mutex
	acked, unsure map[uint64]bool
	lastDue       time.Time // the latest due of an add sent
	start         time.Time
	ackedAt       map[uint64]time.Duration // since start, for the report's detail
}

func (a *adder) run(ctx context.Context, cl *client.Client, receiver uint64) {
	a.acked, a.unsure = map[uint64]bool{}, map[uint64]bool{}
	a.start, a.ackedAt = time.Now(), map[uint64]time.Duration{}
	for tid := uint64(1); ctx.Err() == nil; tid++ {
		after := 24 * time.Hour // never fires in the run
		if receiver == nemEventReceiver {
			after = 100*time.Millisecond + time.Duration(tid%10)*100*time.Millisecond
		}
		octx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cl.AddAfter(octx, receiver, tid, after, nil)
		cancel()
		a.mu.Lock()
		if err == nil {
			a.acked[tid] = true
			a.ackedAt[tid] = time.Since(a.start)
		} else {
			a.unsure[tid] = true
		}
		if due := time.Now().Add(after); due.After(a.lastDue) {
			a.lastDue = due
		}
		a.mu.Unlock()
		if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// consumer reads nemEventReceiver's events, bound in acknowledged mode (the
// client acks each once received, and re-binds after each failover).
type consumer struct {
	c        *client.Client
	mu       sync.Mutex
	got      map[uint64]int      // deliveries by tid
	seqs     map[uint64][]uint64 // the seqs each tid came with
	lastSeq  uint64
	outOrder int
	n        atomic.Int64
}

func newConsumer(ctx context.Context, dial func(string, ...client.Option) (*client.Client, error)) (*consumer, error) {
	cl, err := dial("consumer")
	if err != nil {
		return nil, err
	}
	k := &consumer{c: cl, got: map[uint64]int{}, seqs: map[uint64][]uint64{}}
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cl.Bind(bctx, nemEventReceiver, &client.BindOptions{Ack: client.AckAuto}); err != nil {
		cl.Close()
		return nil, fmt.Errorf("bind: %w", err)
	}
	go func() {
		for ev := range cl.Events() {
			if ev.Kind != client.Fire {
				continue
			}
			k.mu.Lock()
			k.got[ev.Tid]++
			k.seqs[ev.Tid] = append(k.seqs[ev.Tid], ev.Seq)
			if ev.Seq <= k.lastSeq && k.got[ev.Tid] == 1 {
				k.outOrder++ // a new event with a seq not above the last one
			}
			k.lastSeq = max(k.lastSeq, ev.Seq)
			k.mu.Unlock()
			k.n.Add(1)
		}
	}()
	return k, nil
}

// missing counts the acknowledged adds of a not delivered yet.
func (k *consumer) missing(a *adder) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for tid := range a.acked {
		if k.got[tid] == 0 {
			n++
		}
	}
	return n
}

func (k *consumer) count(a *adder, r *ClusterReport) {
	r.EventsLost = k.missing(a)
	a.mu.Lock()
	r.EventsAcked, r.EventsUnsure = len(a.acked), len(a.unsure)
	a.mu.Unlock()
	k.mu.Lock()
	for _, n := range k.got {
		r.EventsDelivered++
		r.Duplicates += n - 1
	}
	r.OutOfOrder = k.outOrder
	k.mu.Unlock()
	r.EventsDetail = k.detail(a)
	r.Redelivered, r.Dropped = k.c.Redelivered(), k.c.Dropped()
}

// settle waits for a serving leader, then until every acknowledged event
// is delivered or 20 s after the last one was due.
func settle(ctx context.Context, c *nemCluster, w *leaderWatch, k *consumer, a *adder, logf func(string, ...any)) error {
	deadline := time.Now().Add(60 * time.Second)
	for w.current() < 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("cluster nemesis: no leader within 60 s of the last fault")
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.mu.Lock()
	until := a.lastDue.Add(20 * time.Second)
	a.mu.Unlock()
	for k.missing(a) > 0 && time.Now().Before(until) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	logf("cluster nemesis: settled, %d events still missing", k.missing(a))
	return nil
}

// countAdds lists nemDurableReceiver's timers and counts the acknowledged
// adds missing.
func countAdds(ctx context.Context, dial func(string, ...client.Option) (*client.Client, error), a *adder, r *ClusterReport) error {
	cl, err := dial("check")
	if err != nil {
		return err
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ts, err := cl.List(lctx, nemDurableReceiver)
	if err != nil {
		return fmt.Errorf("listing the acknowledged adds: %w", err)
	}
	have := map[uint64]bool{}
	for _, t := range ts {
		have[t.Tid] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r.AddsAcked, r.AddsUnsure = len(a.acked), len(a.unsure)
	for tid := range a.acked {
		if !have[tid] {
			r.AddsLost++
		}
	}
	return nil
}

// detail describes the first few lost and duplicated events of a's adds.
func (k *consumer) detail(a *adder) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	var lost, dup []uint64
	for tid := range a.acked {
		if k.got[tid] == 0 {
			lost = append(lost, tid)
		}
	}
	for tid, n := range k.got {
		if n > 1 {
			dup = append(dup, tid)
		}
	}
	slices.Sort(lost)
	slices.Sort(dup)
	var b strings.Builder
	for _, tid := range lost[:min(len(lost), 5)] {
		fmt.Fprintf(&b, "  lost tid %d: add acknowledged at +%v; tid %d came as seqs %v, tid %d as %v\n", tid,
			a.ackedAt[tid].Round(time.Millisecond), tid-1, k.seqs[tid-1], tid+1, k.seqs[tid+1])
	}
	for _, tid := range dup[:min(len(dup), 5)] {
		fmt.Fprintf(&b, "  duplicate tid %d: seqs %v (add acknowledged at +%v)\n", tid, k.seqs[tid], a.ackedAt[tid].Round(time.Millisecond))
	}
	return b.String()
}
