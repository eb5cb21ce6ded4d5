package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/journal"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// Operator metrics. The event loop keeps its counters as plain integers
// (no lock, no atomic, no allocation on its hot path); ReadMetrics copies
// them on the loop, between two turns, into a Metrics value that any
// goroutine may then read. Counters that other goroutines update
// (refused connections) are atomics already.

// LatenessBuckets are the upper bounds, in seconds, of the fire lateness
// histogram: from a firing's tick boundary to the end of the loop turn
// that wrote its event to the connection (or queued it).
var LatenessBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// TurnBuckets are the upper bounds, in seconds, of the loop turn duration
// histogram.
var TurnBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05, 0.1, 0.25, 1}

// Histogram is a cumulative-free histogram: Counts[i] observations fell
// at or below Bounds[i] and above Bounds[i-1]; Counts[len(Bounds)] are
// above the last bound. Count is their total and Sum their sum.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

// observe adds n observations of v. Bounds are few: a linear scan.
func (h *Histogram) observe(v float64, n uint64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i] += n
	h.Count += n
	h.Sum += v * float64(n)
}

func (h *Histogram) clone() Histogram {
	c := *h
	c.Counts = append([]uint64(nil), h.Counts...)
	return c
}

// loopMetrics are the counters the event loop keeps for ReadMetrics.
// Owned by the event loop, but ready, which is safe from any goroutine.
type loopMetrics struct {
	// on: Config.Metrics; the turn and lateness histograms are kept (a
	// clock read or two per turn) only then.
	on bool
	// turnStart is when the running turn began (ns since origin), 0 when
	// no turn is timed.
	turnStart int64
	// now is when the turn ended (endTurnMetrics), for observeLates.
	now               int64
	turns, lateness   Histogram
	bytesIn, bytesOut uint64
	slowCloses        uint64 // see Metrics.SlowConsumerCloses
	// lateFn is observeLates, made once (a method value per turn would
	// allocate).
	lateFn func([]session.LateRun)
	ready  atomic.Bool // Start has returned and Stop has not been called
	// readOnly holds why changes are refused (a string; "" or unset: they
	// are not): set on the loop (setReadOnly), read anywhere (ReadOnly).
	readOnly atomic.Value
}

func (s *Server) initMetrics() {
	m := &s.m
	m.on = s.cfg.Metrics
	m.turns, m.lateness = newHistogram(TurnBuckets), newHistogram(LatenessBuckets)
	m.lateFn = s.observeLates
	s.core.SetMetrics(m.on)
}

// Clock reads cost about 100 ns on a VM, and a turn of one small request
// a few µs: a turn reads the clock once more with metrics on (at its
// end; its start is the read the turn makes anyway, or one more for a
// doorbell turn), and once more when it fired timers.

// beginTurn notes that a loop turn began at now (ns since origin).
func (s *Server) beginTurn(now int64) {
	s.turnAt = now
	if s.m.on {
		s.m.turnStart = now
	}
}

// beginTurnNow notes that a loop turn begins now.
func (s *Server) beginTurnNow() {
	s.turnAt = s.nowNs()
	if s.m.on {
		s.m.turnStart = s.turnAt
	}
}

// endTurnMetrics observes the turn's duration and the lateness of its
// firings, once its output has been handed to the connections.
func (s *Server) endTurnMetrics() {
	m := &s.m
	if !m.on {
		return
	}
	m.now = s.nowNs()
	s.core.TakeLates(m.lateFn)
	if m.turnStart != 0 {
		m.turns.observe(float64(m.now-m.turnStart)/1e9, 1)
		m.turnStart = 0
	}
}

// observeLates adds the turn's firings to the lateness histogram. A
// firing late L ticks (session.LateRun) was due L ticks before the
// boundary of tw-time's current tick t, the Core's; that boundary lies
// one tick before t+1's, which Clock.Until gives (in real time, at the
// clock's speed). When t+1 has begun already (a turn longer than a tick)
// the clock's own tick c stands in: t's boundary is c+1-t ticks before
// c+1's. A firing fast-forwarded over (L 0) so counts from the boundary
// of the tick the fast-forward reached. While the clock is frozen the
// boundary is taken as the start of the turn.
func (s *Server) observeLates(runs []session.LateRun) {
	m := &s.m
	perTick := s.clock.Tick().Seconds() / s.clock.Speed()
	t := s.core.Now()
	var base float64
	d, ok := s.clock.Until(t + 1)
	switch {
	case ok && d > 0:
		base = perTick - d.Seconds()
	case ok:
		c := s.clock.Now()
		if d, ok := s.clock.Until(c + 1); ok {
			base = float64(c+1-min(t, c+1))*perTick - d.Seconds()
		}
	case m.turnStart != 0:
		base = float64(m.now-m.turnStart) / 1e9
	}
	base = max(base, 0)
	for _, r := range runs {
		m.lateness.observe(base+float64(r.Late)*perTick, r.N)
	}
}

// Metrics is a copy of the server's counters and gauges at one instant,
// taken on the event loop (ReadMetrics).
type Metrics struct {
	Taken time.Time
	// Ready: the server accepts clients (Start has returned, Stop has not
	// been called).
	Ready    bool
	Stats    protocol.Stats
	Counters session.Counters
	Load     session.Load
	// Requests by op name and error replies by code name, since start.
	Requests, Errors map[string]uint64
	// Lateness and TurnDuration are empty histograms unless Config.Metrics.
	Lateness, TurnDuration Histogram
	// BytesIn are request bytes read, BytesOut bytes handed to
	// connections (replies and events).
	BytesIn, BytesOut uint64
	// Refused counts connections turned away by max_connections or for
	// want of a descriptor; Connections are the open client connections.
	Refused     uint64
	Connections int64
	// TLSHandshakeFailures counts TLS connections closed at their
	// handshake (an untrusted or missing client certificate, a client
	// without TLS, a handshake past timeouts.handshake); 0 without TLS.
	TLSHandshakeFailures uint64
	// SlowConsumerCloses counts connections closed for pipelining more
	// than max_inbound while max_outbound bytes of their replies and
	// events waited unread.
	SlowConsumerCloses uint64
	// MappedBytes is the memory the wheels map outside the Go heap (their
	// big arrays: wheel.MappedBytes), which the runtime's statistics leave
	// out and RSS counts once written.
	MappedBytes int64
	// Tick is tw-time's tick; Clock is the clock's tw-time now, which the
	// wheel reaches at its next turn (Stats.Now is where it is).
	Tick  time.Duration
	Clock uint64
	// Persistence: zero unless the log is on.
	Persist PersistMetrics
	// Cluster: zero unless the server is a cluster node.
	Cluster ClusterMetrics
}

// ClusterMetrics describe a cluster node's raft state (cluster.Status).
type ClusterMetrics struct {
	On bool
	// Role is "leader", "follower", "candidate" or "shutdown"; Leader the
	// leader's node id and LeaderAddr its client address ("" unknown).
	Role, Leader, LeaderAddr                   string
	Term, CommitIndex, AppliedIndex, LastIndex uint64
	// Suffrage is this node's, "voter" or "nonvoter" ("" when it is not a
	// member); Voters and Nonvoters count the members.
	Suffrage          string
	Voters, Nonvoters int
	// LeaderCommit is the commit index the leader last sent this node (its
	// own on the leader; 0 before the first).
	LeaderCommit uint64
	// AuthRefused counts raft connections refused at the token handshake.
	AuthRefused uint64
	// Check is this node's latest state check (zero: none).
	Check StateCheck
}

// PersistMetrics describe the log and snapshots.
type PersistMetrics struct {
	On bool
	// LogBytes is the size of the log's segment files; Fsync the
	// durations of the fsyncs the event loop ran.
	LogBytes int64
	Fsync    Histogram
	// LastSnapshot is when the last snapshot was completed (zero: none
	// since start) and LastSnapshotDuration how long it took; Snapshots
	// counts them.
	LastSnapshot         time.Time
	LastSnapshotDuration time.Duration
	Snapshots            uint64
	// SnapshotAge is the age of the newest snapshot file, when HasSnapshot
	// (one written before this start counts).
	SnapshotAge time.Duration
	HasSnapshot bool
	// ReadOnly: changes are refused because the log cannot be written or
	// fsynced (Server.ReadOnly says why). FsyncFailures counts the log's
	// failed fsyncs since start.
	ReadOnly      bool
	FsyncFailures uint64
}

// Ready reports whether the server accepts clients: Start has returned
// (recovery is over) and Stop has not been called. Safe from any
// goroutine.
func (s *Server) Ready() bool { return s.m.ready.Load() && (s.replica == nil || s.replica.ready()) }

// ReadMetrics copies the server's counters on the event loop; top is how
// many receivers the Load's top lists hold (the walk behind them, and
// behind the Load's backlog figures, covers at most loadRecords receiver
// records and loadTimers receivers with timers: see
// session.Core.LoadOf). Safe from any goroutine; it fails
// when the server is not running or ctx ends first.
func (s *Server) ReadMetrics(ctx context.Context, top int) (Metrics, error) {
	var m Metrics
	err := s.onLoop(ctx, func() {
		m = Metrics{Taken: time.Now(), Ready: s.Ready(), Stats: s.core.Stats(), Counters: s.core.Counters(),
			Load:     s.core.LoadOf(top, loadRecords, loadTimers),
			Requests: map[string]uint64{}, Errors: map[string]uint64{},
			Lateness: s.m.lateness.clone(), TurnDuration: s.m.turns.clone(),
			BytesIn: s.m.bytesIn, BytesOut: s.m.bytesOut,
			Refused: s.refused.Load(), Connections: s.conns.Load(), SlowConsumerCloses: s.m.slowCloses,
			TLSHandshakeFailures: s.tlsFailed.Load(), MappedBytes: wheel.MappedBytes(),
			Tick: s.cfg.Tick, Clock: s.clock.Now(), Persist: s.persistMetrics(), Cluster: s.clusterMetrics()}
		for op := protocol.Op(1); op < 255; op++ {
			if op.Valid() {
				m.Requests[op.String()] = s.core.Requests(op)
			}
		}
		for code := protocol.Code(1); code < 64; code++ {
			if name := code.String(); name[len(name)-1] != ')' { // defined codes only
				m.Errors[name] = s.core.Errors(code)
			}
		}
	})
	return m, err
}

// loadRecords and loadTimers bound the receivers ReadMetrics walks (see
// session.Core.LoadOf): together about a millisecond of the event loop's
// time at worst (BenchmarkLoadOf), once a second for the status page and
// once per scrape.
const (
	loadRecords = 1_000
	loadTimers  = 10_000
)

// fsyncBounds are journal.SyncBuckets in seconds.
var fsyncBounds = func() []float64 {
	b := make([]float64, len(journal.SyncBuckets))
	for i, d := range journal.SyncBuckets {
		b[i] = d.Seconds()
	}
	return b
}()

// persistMetrics describes the log and snapshots. Runs on the loop.
func (s *Server) persistMetrics() PersistMetrics {
	p := s.persist
	if p == nil {
		return PersistMetrics{}
	}
	st := p.j.Stats()
	return PersistMetrics{On: true, LogBytes: st.LogBytes,
		Fsync:        Histogram{Bounds: fsyncBounds, Counts: st.SyncCounts[:], Count: st.Syncs, Sum: st.SyncTime.Seconds()},
		LastSnapshot: p.snapDone, LastSnapshotDuration: p.snapTook, Snapshots: p.snapshots,
		SnapshotAge: st.SnapshotAge, HasSnapshot: st.SnapshotIndex != 0 || st.SnapshotBytes != 0,
		ReadOnly: p.failing != nil || p.gap, FsyncFailures: st.SyncFails}
}
