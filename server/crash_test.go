package server

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestCrashKill9: the real server, frozen, fsync always, is killed with
// SIGKILL at a random moment while four connections add, cancel, pause,
// resume and read timers and a fifth fast-forwards between their bursts;
// after each restart on the same data directory the state must be exactly
// what the acknowledged requests made it (see crashRun).
func TestCrashKill9(t *testing.T) {
	newCrashRun(t, "always").run()
}

// TestCrashKill9EverySec is TestCrashKill9 with fsync everysec. A process
// crash loses nothing with it either (Config.Fsync: only a machine crash
// may lose the last second): each record is written to the kernel before
// the turn's replies leave, so every acknowledged change must be there.
// (The second of a power loss cannot be simulated by killing a process.)
func TestCrashKill9EverySec(t *testing.T) {
	newCrashRun(t, "everysec").run()
}

// crashWorkers is the number of connections changing timers at once; each
// owns crashReceivers receivers, so the order of the changes to a receiver
// is the order of its worker's requests.
const (
	crashWorkers   = 4
	crashReceivers = 3
)

// crashRun drives one crash test. Each round starts the server on the data
// directory, checks the state against the model (from the second round on),
// then works until the server is killed after a random delay. Work goes in
// phases: the workers send a burst of requests each, one at a time, then
// the controller fast-forwards a few ticks (so one-shots fire and repeating
// timers count on), so that tw-time is fixed during a burst and the model
// exact. A request in flight at the kill (no reply) may or may not have
// been applied: both are accepted, and the check after the restart learns
// which from the state (pendingOps, pendingFF).
type crashRun struct {
	t         *testing.T
	seed      uint64
	rng       *rand.Rand
	args      []string
	rounds    int
	minDelay  time.Duration
	maxDelay  time.Duration
	model     *crashModel
	receivers [crashWorkers][]uint64
	pending   [crashWorkers]*protocol.Request // a worker's request with no reply
	pendingFF uint64                          // ticks of a fast-forward with no reply
	acked     atomic.Int64                    // requests answered, for the log
	errors    atomic.Int64                    // of which error replies
	applied   [3]int                          // requests in flight at a kill: not applied, applied, no visible change
}

func newCrashRun(t *testing.T, fsync string) *crashRun {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TICKWHEEL_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (set TICKWHEEL_CRASH_SEED to repeat the requests; the kill moments vary)", seed)
	cr := &crashRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 1)), rounds: 5,
		minDelay: 100 * time.Millisecond, maxDelay: 600 * time.Millisecond}
	if testing.Short() {
		cr.rounds, cr.minDelay, cr.maxDelay = 2, 50*time.Millisecond, 200*time.Millisecond
	}
	cr.args = []string{"-data-dir", t.TempDir(), "-fsync", fsync, "-frozen", "-start-tick", "1000", "-downtime", "pause"}
	var all []uint64
	for w := range crashWorkers {
		for i := range crashReceivers {
			r := uint64(100*(w+1) + i)
			cr.receivers[w] = append(cr.receivers[w], r)
			all = append(all, r)
		}
	}
	cr.model = newCrashModel(1000, all)
	return cr
}

func (cr *crashRun) run() {
	for round := 0; ; round++ {
		p := startProc(cr.t, cr.args...)
		if round > 0 {
			cr.check(p, round)
		}
		if round == cr.rounds {
			p.term()
			return
		}
		cr.work(p, round)
	}
}

// errKilled marks a request cut off by the kill.
var errKilled = errors.New("killed")

// work runs phases until the server is killed.
func (cr *crashRun) work(p *proc, round int) {
	t := cr.t
	ctrl, err := dialWire(p.addr, "controller", procToken)
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.close()
	var conns [crashWorkers]*wire
	for w := range conns {
		if conns[w], err = dialWire(p.addr, fmt.Sprintf("worker-%d", w), ""); err != nil {
			t.Fatal(err)
		}
		defer conns[w].close()
	}
	var killed atomic.Bool
	delay := cr.minDelay + time.Duration(cr.rng.Int64N(int64(cr.maxDelay-cr.minDelay)))
	timer := time.AfterFunc(delay, func() { killed.Store(true); p.kill() })
	defer timer.Stop()
	// lost tells a connection cut by the kill from a failure.
	lost := func(err error) error {
		if killed.Load() && !errors.Is(err, errTimeout) {
			return errKilled
		}
		p.logTail()
		return fmt.Errorf("round %d: the connection failed before the kill: %w", round, err)
	}
	phases := 0
	for ; ; phases++ {
		var errs [crashWorkers]error
		var wg sync.WaitGroup
		for w := range crashWorkers {
			rng := rand.New(rand.NewPCG(cr.seed, uint64(round<<20|phases<<4|w)))
			wg.Go(func() { errs[w] = cr.burst(w, conns[w], rng, lost) })
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			for _, e := range errs {
				if e != nil && e != errKilled {
					t.Fatal(e)
				}
			}
			break
		}
		n := 1 + cr.rng.Uint64N(6)
		if err := cr.fastForward(ctrl, n); err != nil {
			if lost(err) != errKilled {
				t.Fatal(lost(err))
			}
			cr.pendingFF = n
			break
		}
	}
	<-p.exited
	t.Logf("round %d: killed after %v, in phase %d; %d requests answered so far (%d with an error); in flight: %d ops, ff %d",
		round, delay, phases, cr.acked.Load(), cr.errors.Load(), cr.inFlight(), cr.pendingFF)
}

func (cr *crashRun) inFlight() (n int) {
	for _, p := range cr.pending {
		if p != nil {
			n++
		}
	}
	return n
}

// burst sends worker w's requests of one phase, one at a time, checking
// each reply against the model and applying it there.
func (cr *crashRun) burst(w int, c *wire, rng *rand.Rand, lost func(error) error) error {
	for range 2 + rng.IntN(7) {
		req := randomOp(rng, cr.model, cr.receivers[w])
		r := cr.model.recv[req.Receiver]
		next := r.clone()
		want := next.apply(req.Receiver, cr.model.now, &req)
		m, err := c.call(req)
		if err != nil {
			cr.pending[w] = &req
			return lost(err)
		}
		if err := want.check(&req, m); err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
		*r = *next
		cr.acked.Add(1)
		if m.Kind == protocol.KindError {
			cr.errors.Add(1)
		}
	}
	return nil
}

// fastForward moves tw-time on by n ticks and checks the reply.
func (cr *crashRun) fastForward(c *wire, n uint64) error {
	got, err := c.uints(protocol.Request{Op: protocol.OpFastForward, Ticks: n})
	if err != nil {
		return err
	}
	fired := cr.model.ff(n)
	cr.acked.Add(1)
	if want := []uint64{cr.model.now, fired}; !slices.Equal(got, want) {
		cr.t.Fatalf("fast_forward %d: got [now fired] %v, want %v", n, got, want)
	}
	return nil
}

// check compares the restarted server with the model, once the requests
// in flight at the kill are resolved, then takes every backlog (checking
// its events) so the next round starts with empty ones.
func (cr *crashRun) check(p *proc, round int) {
	t := cr.t
	c, err := dialWire(p.addr, "checker", procToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	st, err := c.waitCaughtUp()
	if err != nil {
		t.Fatal(err)
	}
	m := cr.model
	switch {
	case cr.pendingFF != 0 && st.Target == m.now+cr.pendingFF:
		m.ff(cr.pendingFF)
	case st.Target != m.now:
		p.logTail()
		t.Fatalf("round %d: tw-time %d after the restart, want %d (a fast-forward of %d in flight)", round, st.Target, m.now, cr.pendingFF)
	}
	cr.pendingFF = 0
	for w, req := range cr.pending {
		if req != nil {
			cr.resolve(c, req)
			cr.pending[w] = nil
		}
	}
	for _, id := range slices.Sorted(maps.Keys(m.recv)) {
		got, err := c.listAll(id)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTimers(got, m.recv[id].list(id, m.now)); d != "" {
			p.logTail()
			t.Fatalf("round %d: receiver %d after the restart: %s", round, id, d)
		}
	}
	if st, err = c.stats(); err != nil {
		t.Fatal(err)
	}
	if st.Timers != m.timers() || st.FiredTotal != m.fired || st.BacklogEvents != m.backlog() {
		t.Fatalf("round %d: stats timers %d fired_total %d backlog_events %d, want %d %d %d", round,
			st.Timers, st.FiredTotal, st.BacklogEvents, m.timers(), m.fired, m.backlog())
	}
	for _, id := range slices.Sorted(maps.Keys(m.recv)) {
		if err := takeBacklog(c, id, m.recv[id]); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	t.Logf("round %d: restarted with %d timers at tw-time %d, %d firings so far: as the model says (in flight at the kills: %d not applied, %d applied, %d the same either way)",
		round, st.Timers, m.now, m.fired, cr.applied[0], cr.applied[1], cr.applied[2])
}

// resolve learns from the server's state whether the request in flight at
// the kill was applied, and applies it to the model if it was.
func (cr *crashRun) resolve(c *wire, req *protocol.Request) {
	m := cr.model
	r := m.recv[req.Receiver]
	got, err := c.listAll(req.Receiver)
	if err != nil {
		cr.t.Fatal(err)
	}
	applied := r.clone()
	applied.apply(req.Receiver, m.now, req)
	before, after := r.list(req.Receiver, m.now), applied.list(req.Receiver, m.now)
	without, with := diffTimers(got, before), diffTimers(got, after)
	switch {
	case without == "" && with == "":
		cr.applied[2]++ // a refusal or a get: the same either way
		return
	case without == "":
		cr.applied[0]++
		return
	}
	if with != "" {
		cr.t.Fatalf("receiver %d after the restart is neither as before nor as after the request in flight %+v:\nbefore: %s\nafter: %s",
			req.Receiver, *req, without, with)
	}
	*r = *applied
	cr.applied[1]++
}

// takeBacklog binds receiver id, checks the events it delivers against
// the model's backlog (all of them, none dropped, seqs consecutive and
// continuing the receiver's, firing order), and unbinds it.
func takeBacklog(c *wire, id uint64, r *mReceiver) error {
	v, err := c.uints(protocol.Request{Op: protocol.OpBind, Receiver: id})
	if err != nil {
		return err
	}
	if want := []uint64{uint64(len(r.events)), 0, r.seq + 1 - uint64(len(r.events))}; !slices.Equal(v, want) {
		return fmt.Errorf("bind %d: [delivered dropped first_seq] %v, want %v", id, v, want)
	}
	fires, err := c.waitFires(len(r.events))
	if err != nil {
		return err
	}
	got := make([]mEvent, len(fires))
	for i, f := range fires {
		if want := r.seq - uint64(len(fires)) + 1 + uint64(i); f.Seq != want || f.Receiver != id {
			return fmt.Errorf("receiver %d: event %d has receiver %d seq %d, want seq %d", id, i, f.Receiver, f.Seq, want)
		}
		if i > 0 && f.Tick < fires[i-1].Tick {
			return fmt.Errorf("receiver %d: event %d of tick %d after one of tick %d", id, i, f.Tick, fires[i-1].Tick)
		}
		got[i] = mEvent{tid: f.Tid, tick: f.Tick, fired: f.Fired, repeat: f.Repeat, last: f.Last, data: string(f.Data)}
	}
	slices.SortFunc(got, cmpEvent)
	if !slices.Equal(got, r.events) {
		return fmt.Errorf("receiver %d: backlog events\n got %+v\nwant %+v", id, got, r.events)
	}
	if _, err := c.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: id}); err != nil {
		return err
	}
	r.events = nil
	r.tidy()
	return nil
}
