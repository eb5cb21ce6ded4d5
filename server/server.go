package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/server/tlsconf"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// Version is the server version reported in hello.
const Version = "0.1.0"

// Server is a running tickwheel server. One gnet event loop owns all timer
// and session state; a ticker goroutine only asks that loop, through the
// doorbell, to advance the wheel (see docs/ARCHITECTURE.md).
type Server struct {
	gnet.BuiltinEventEngine

	cfg  Config
	log  *slog.Logger
	rlog *rateLog // for log lines a peer can cause at will (failed hellos, ...)
	// core is the service's state and rules; clock is tw-time, which the
	// loop turns into core.Advance inputs. Both owned by the event loop.
	core  *session.Core
	clock *wheel.Clock
	// more says an advance turn left work: another turn is posted.
	more bool
	// commits is where each turn's record goes (commit.go); nil when
	// persistence is off. persist is the single-node log and snapshots
	// (persist.go), the committer when it is on.
	commits committer
	persist *persist
	replica *replica    // cluster mode (replica.go); nil for a single server
	checks  stateChecks // cluster mode: state checks (statecheck.go)
	wallAt  int64       // ns since origin: when the wall-clock time is next recorded (with commits)
	// wallIdleAt: when it is recorded in a turn that records nothing else
	// (a single node's: wallIdleEvery); recordAt: the last turn that
	// recorded something.
	wallIdleAt, recordAt int64
	// turnAt is when the running turn's work began, or when its last
	// record was committed (ns since origin); turnCost is the loop time
	// from it to the last commit that took a record: the work a replay of
	// that record repeats, as persist counts it (snapshot.every_replay).
	turnAt, turnCost int64

	eng   gnet.Engine
	addr  string
	ready chan error
	done  chan struct{}
	err   error

	// The acceptor (accept.go): ln is the client listener, closed by Stop;
	// conns counts open client connections (accepted, not yet closed);
	// refused counts connections turned away. Safe from any goroutine.
	ln         net.Listener
	acceptDone chan struct{}
	conns      atomic.Int64
	closed     atomic.Uint64 // client connections closed since the start (memreturn.go)
	accepted   atomic.Uint64 // client connections accepted since the start (Activity)
	refused    atomic.Uint64
	maxConns   int
	accepting  atomic.Bool   // acceptLoop was started: Stop waits for acceptDone
	refusing   chan struct{} // a slot per connection being refused in the background
	privDir    string        // holds gnet's private Unix listener

	// TLS on the client port (tlsconn.go); tls is nil without it. tlsCfg
	// serves tls's current certificate; tlsHandshake is
	// timeouts.handshake in ns, for the handshake goroutines; tlsLive are
	// the connections they serve; tlsFailed counts failed handshakes;
	// enrollMu makes enrollments one at a time. Safe from any goroutine.
	tls          *tlsconf.Reloader
	tlsCfg       *tls.Config
	tlsHandshake atomic.Int64
	tlsLive      tlsConns
	tlsFailed    atomic.Uint64
	enrollMu     sync.Mutex

	// links are the client connections by session id, and sweepAt when
	// their timeouts are next checked (ns since origin). Owned by the event
	// loop.
	links      map[uint64]*link
	deferred   []*link  // connections to read on in the next doorbell turn
	pieces     [][]byte // a write cut by powerPieces (conn.go)
	sweepAt    int64
	sweepEvery time.Duration // see Config.sweepEvery
	// ff is the fast-forward running over many turns, or nil (bell.go).
	ff *ffRun
	// base is the config as given to New (with defaults), as Reload
	// compares a new one with it: the live keys it has applied, the others
	// as at start. Owned by Reload, under reloadMu.
	base     Config
	reloadMu sync.Mutex
	// pumpWait is how long the loop waits to top up stalled sessions again
	// (ns; see pumpEvery).
	pumpWait int64

	// loop is the event loop, learnt from the doorbell's connection; set
	// before Start returns. Safe from any goroutine.
	loop atomic.Pointer[gnet.EventLoop]
	// started is closed by gnet's first OnTick: its event loop runs, so the
	// doorbell can be registered.
	started     chan struct{}
	startedOnce sync.Once
	// bell is our end of the doorbell (see bell.go), set before Start
	// returns; rung says an advance turn has been asked for and not begun.
	bell         atomic.Pointer[net.Conn]
	rung         atomic.Bool
	stopping     atomic.Bool   // Stop was called: a failing doorbell is expected
	turns        atomic.Uint64 // advance turns run (see Turns)
	requestTurns atomic.Uint64 // turns that read a client's bytes (see Activity)
	activity     activityBell  // rung at each change of Activity (idle.go)
	// What the memory limit derives from, published by the loop at the
	// end of each turn (memlimit.go); memLimit is the returning
	// goroutine's.
	memBudgets, memLive, memFrame atomic.Int64
	memMapped                     atomic.Int64 // the Core's wheel's memory outside the heap (memreturn.go)
	memLimit                      memLimiter
	gcPace                        gcPacer
	// recoveredSnapshot is the size of the snapshot New recovered from
	// (0: none): its buffer and the decoding's scratch are garbage once
	// the loop runs, which returnMemory gives back first (memreturn.go).
	// Set before Start.
	recoveredSnapshot int64

	// The ticker rings the doorbell at the tick of the wheel's next event
	// (see retime), an instant in ns since origin (the clock's monotonic
	// origin).
	origin time.Time
	tk     tickerState

	m loopMetrics // operator metrics (metrics.go)
}

// New validates cfg and builds a server; Start runs it.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	base := cfg // as configured: Reload compares with it
	if err := cfg.secure(log); err != nil {
		return nil, err
	}
	origin := time.Now()
	start := cfg.StartTick
	if start == 0 {
		start = uint64(origin.UnixNano()) / uint64(cfg.Tick)
	}
	s := &Server{cfg: cfg, log: log, ready: make(chan error, 1), done: make(chan struct{}), started: make(chan struct{}),
		origin: origin, acceptDone: make(chan struct{}), links: make(map[uint64]*link), refusing: make(chan struct{}, 64)}
	s.base = base
	s.sweepEvery = cfg.sweepEvery()
	s.rlog = newRateLog(log, 10, time.Now)
	if err := s.startTLS(); err != nil {
		return nil, err
	}
	restored, err := s.openState(start)
	if err != nil {
		return nil, err
	}
	speed, frozen := cfg.Speed, cfg.Frozen
	if restored {
		start, speed, frozen = s.resumeTick(time.Now()), s.core.Speed(), s.core.Frozen()
		s.log.Info("tw-time after the restart", "downtime", cfg.Downtime, "was", s.core.Now(), "now", start,
			"speed", speed, "frozen", frozen)
		s.warnClockIgnored(start, speed, frozen)
	}
	newClock := wheel.NewClock
	if frozen {
		newClock = wheel.NewFrozenClock // at the tick's boundary: nothing of it has passed
	}
	s.clock = newClock(start, cfg.Tick, func() time.Duration { return time.Since(origin) })
	if err := s.clock.SetSpeed(speed); err != nil {
		return nil, fmt.Errorf("config: speed: %w", err)
	}
	s.core.SetClockHook(s.applyClock)
	s.core.SetInstantHook(s.clock.Instant)
	s.initMetrics()
	if s.persist == nil && s.replica == nil {
		s.core.SetClock(speed, frozen) // startLog records it otherwise
	}
	if err := s.startLog(restored); err != nil {
		return nil, err
	}
	s.retime()
	return s, nil
}

// warnClockIgnored warns, on a start from a recovered state, about each
// of start_tick (-start-tick), frozen (-frozen) and speed that the config
// sets and the start does not follow: they say where tw-time starts on a
// new state only; on a recovered one tw-time goes on as the state
// recorded it (at tick start, with its speed and frozen state), so that
// its timers keep their due ticks. "speed" is warned about only when it
// is not 1, the default.
func (s *Server) warnClockIgnored(start uint64, speed float64, frozen bool) {
	const why = "ignored: the data dir holds a state, whose tw-time goes on as recorded; " +
		"it sets where tw-time starts on a new state only (use tickwheel freeze, resume, speed or ff; or start on an empty data dir)"
	if c := s.cfg; c.StartTick != 0 && c.StartTick != start {
		s.log.Warn("start_tick (-start-tick) "+why, "start_tick", c.StartTick, "tw_time", start, "data_dir", c.DataDir)
	}
	if c := s.cfg; c.Frozen && !frozen {
		s.log.Warn("frozen (-frozen) "+why, "tw_time", start, "frozen", false, "data_dir", c.DataDir)
	}
	if c := s.cfg; c.Speed != 1 && c.Speed != speed {
		s.log.Warn("speed "+why, "speed", c.Speed, "running_speed", speed, "data_dir", c.DataDir)
	}
}

// Start begins serving and returns once the server listens and its ticker
// runs, or fails.
func (s *Server) Start() error {
	maxConns, err := s.connectionLimit()
	if err != nil {
		s.closeLog()
		return err
	}
	s.maxConns = maxConns
	s.cfg.Limits.MaxConnections = maxConns // as hello reports it
	s.core.SetLimits(s.cfg.Limits)
	s.core.SetWire(s.cfg.wireLimits())
	s.publishMemUse() // before the loop runs: the recovered timers count (memlimit.go)
	s.tlsHandshake.Store(int64(s.cfg.Timeouts.Handshake))
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		s.closeLog()
		return fmt.Errorf("server: %w", err)
	}
	s.ln, s.addr = ln, ln.Addr().String()
	priv, err := s.privateListener()
	if err == nil {
		err = s.startTicker() // before the loop runs: its turns set the ticker
	}
	if err != nil {
		ln.Close()
		s.closeLog()
		return err
	}
	go func() {
		err := gnet.Run(s, priv,
			gnet.WithMulticore(false), gnet.WithNumEventLoop(1),
			gnet.WithTicker(true),                      // only to learn that the event loop runs: see OnTick
			gnet.WithLogger(gnetLogger{s.log, s.rlog})) // gnet's own messages, through slog
		s.err = err
		select {
		case s.ready <- err:
		default:
		}
		ln.Close()
		os.RemoveAll(s.privDir)
		if lerr := s.stopLog(); lerr != nil && s.err == nil {
			s.err = lerr
			s.log.Error("persistence: stopping", "err", lerr)
		}
		close(s.done)
	}()
	if err := <-s.ready; err != nil {
		return err
	}
	select {
	case <-s.started:
	case <-s.done:
		return fmt.Errorf("server: stopped while starting: %v", s.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.openBell(ctx); err != nil {
		_ = s.Stop(ctx)
		return err
	}
	if s.replica != nil {
		if err := s.startReplica(); err != nil {
			_ = s.Stop(ctx)
			return err
		}
		if s.cfg.Cluster.Join != "" {
			go s.join() // membership.go
		}
	}
	frozen := s.clock.Frozen() // read before clients can change it on the loop
	s.accepting.Store(true)
	go s.acceptLoop()
	s.memLimit.start(s)       // memlimit.go
	s.gcPace.start(s)         // gcpace.go
	go s.returnMemory(s.done) // memreturn.go
	s.ring()                  // requests served before the doorbell existed may have left work
	s.m.ready.Store(true)
	s.writeAddrFile()
	s.log.Info("tickwheel listening", "addr", s.addr, "tick", s.cfg.Tick, "frozen", frozen,
		"persistence", s.cfg.Persistence, "data_dir", s.cfg.DataDir, "tls", s.tls != nil, "mtls", s.tls != nil && s.tls.MutualTLS())
	return nil
}

// Turns returns the number of advance turns the event loop has run: one per
// tick with work (and per step of a burst or a fast-forward). Safe from any
// goroutine; cmd/tickwheel reads it to tell a busy server from an idle one.
func (s *Server) Turns() uint64 { return s.turns.Load() }

// Activity returns a number that changes whenever the event loop may have
// changed what ReadMetrics reports: an advance turn, a turn that read a
// client's bytes, a connection accepted, closed or refused. ok is false on a
// cluster node, whose raft state (role, term, indexes) changes off the loop:
// there the number says nothing. Safe from any goroutine; the operator's
// sampler reads it to leave an idle server's loop asleep (operator.Options
// History). A change made by a task run on the loop for another goroutine
// (a config reload, a snapshot's end) is not counted.
func (s *Server) Activity() (n uint64, ok bool) {
	n = s.turns.Load() + s.requestTurns.Load() + s.accepted.Load() + s.closed.Load() + s.refused.Load()
	return n, s.replica == nil
}

// Addr returns the address the server listens on, with the real port.
func (s *Server) Addr() string { return s.addr }

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop stops accepting, writes out what is queued, closes every connection
// and returns when the server has stopped or ctx ends. It closes the
// listener and waits for the acceptor first, so no connection is being
// handed to the event loop while it exits.
func (s *Server) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	s.m.ready.Store(false)
	if s.accepting.Load() {
		s.removeAddrFile()
	}
	if s.ln != nil {
		s.ln.Close()
	}
	if s.accepting.Load() {
		select { // no connection is being registered past this point
		case <-s.acceptDone:
		case <-ctx.Done():
		}
	}
	if s.replica != nil && s.accepting.Load() {
		s.replica.handOver() // before the loop stops: it serves until this node steps down
	}
	s.tlsLive.closeAll() // handshakes in progress and copies end; the loop's ends close with the loop
	if l := s.loop.Load(); l != nil {
		flushed := make(chan struct{})
		if (*l).Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
			s.endTurn()
			if s.commits != nil {
				s.commits.drain() // the replies held for durability go before the connections close
			}
			close(flushed)
			return nil
		})) == nil {
			select {
			case <-flushed:
			case <-ctx.Done():
			}
		}
	}
	// gnet's Stop polls every 500 ms unless its context is already done.
	stopCtx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.eng.Stop(stopCtx)
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tick returns the duration of one tick.
func (s *Server) Tick() time.Duration { return s.cfg.Tick }

// onLoop runs fn on the event loop and waits for it, or for ctx.
func (s *Server) onLoop(ctx context.Context, fn func()) error {
	l := s.loop.Load()
	if l == nil {
		return errors.New("server: not started")
	}
	ran := make(chan struct{})
	err := (*l).Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
		s.turnAt = s.nowNs() // what fn records costs from here (snapshot.every_replay), not from the last turn
		fn()
		close(ran)
		return nil
	}))
	if err != nil {
		return err
	}
	select {
	case <-ran:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Now returns the wheel's tw-time.
func (s *Server) Now(ctx context.Context) (now uint64, err error) {
	err = s.onLoop(ctx, func() { now = s.core.Now() })
	return now, err
}

// FastForward moves tw-time on by ticks, as the admin op does, and returns
// once every timer in between has fired and its event has been written to
// its connection (or backlog). It reports the new time and the firings; a
// freeze that stopped it part-way makes the new time the tick it stopped
// at. tw-time may reach at most session.MaxFastForwardTick.
func (s *Server) FastForward(ctx context.Context, ticks uint64) (now, fired uint64, err error) {
	done := make(chan [2]uint64, 1)
	var ffErr error
	err = s.onLoop(ctx, func() {
		ffErr = s.core.FastForward(ticks, func(now, fired uint64) { done <- [2]uint64{now, fired} })
		if ffErr != nil {
			return
		}
		s.endTurn()
		s.postIfMore()
		s.retime()
	})
	if err == nil {
		err = ffErr
	}
	if err != nil {
		return 0, 0, err
	}
	select {
	case r := <-done:
		return r[0], r[1], nil
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

// OnBoot keeps the engine, for registering connections.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	s.ready <- nil
	return gnet.None
}

// postIfMore asks for another advance turn when one run by a request (a
// fast-forward) stopped at max_fires_per_turn with work left. Before the
// doorbell exists the work stays noted; Start rings once it does.
func (s *Server) postIfMore() {
	if s.bell.Load() == nil {
		return
	}
	if s.core.More() || s.more {
		s.more = false
		s.ring()
	}
}

// OnTick runs on gnet's ticker goroutine once its event loop runs. It only
// tells Start so; the server's own ticker (ticker.go) drives the wheel.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.startedOnce.Do(func() { close(s.started) })
	return time.Hour, gnet.None
}

// gnetLogger passes gnet's own log messages to slog, its info as debug.
// Its warnings are rate limited: some (a stale connection's event) follow
// from what clients do.
type gnetLogger struct {
	log  *slog.Logger
	rlog *rateLog
}

func (g gnetLogger) Debugf(format string, args ...any) { g.log.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Infof(format string, args ...any)  { g.log.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Warnf(format string, args ...any) {
	g.rlog.Warn("gnet", "msg", fmt.Sprintf(format, args...))
}
func (g gnetLogger) Errorf(format string, args ...any) { g.log.Error(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.log.Error(fmt.Sprintf(format, args...)) }
