package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Server is a running tickwheel server. One gnet event loop owns all timer
// and session state; a ticker goroutine only asks that loop, through the
// doorbell, to advance the wheel (see docs/ARCHITECTURE.md).
type Server struct {
	gnet.BuiltinEventEngine

	cfg Config
	log *slog.Logger
	st  *state

	eng   gnet.Engine
	addr  string
	ready chan error
	done  chan struct{}
	err   error

	// loop is the event loop, learnt from the doorbell's connection; set
	// before Start returns. Safe from any goroutine.
	loop atomic.Pointer[gnet.EventLoop]
	// started is closed by gnet's first OnTick: its event loop runs, so the
	// doorbell can be registered.
	started     chan struct{}
	startedOnce sync.Once
	// bell is our end of the doorbell (see bell.go), set before Start
	// returns; rung says an advance turn has been asked for and not begun.
	bell     atomic.Pointer[net.Conn]
	rung     atomic.Bool
	stopping atomic.Bool // Stop was called: a failing doorbell is expected

	// The ticker sleeps until the tick of the wheel's next event: wakeAt is
	// that instant in ns since origin (the clock's monotonic origin), set on
	// the loop; rearm tells the ticker it moved earlier, or that a chain of
	// advance turns has finished.
	origin time.Time
	wakeAt atomic.Int64
	rearm  chan struct{}
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
	if err := cfg.secure(log); err != nil {
		return nil, err
	}
	origin := time.Now()
	start := cfg.StartTick
	if start == 0 {
		start = uint64(origin.UnixNano()) / uint64(cfg.Tick)
	}
	w, err := wheel.New(start, wheel.Config{})
	if err != nil {
		return nil, err
	}
	clock := wheel.NewClock(start, cfg.Tick, func() time.Duration { return time.Since(origin) })
	if err := clock.SetSpeed(cfg.Speed); err != nil {
		return nil, fmt.Errorf("config: speed: %w", err)
	}
	if cfg.Frozen {
		clock.Freeze()
	}
	s := &Server{cfg: cfg, log: log, ready: make(chan error, 1), done: make(chan struct{}), started: make(chan struct{}),
		origin: origin, rearm: make(chan struct{}, 1)}
	s.st = newState(cfg, log, w, clock)
	s.st.onSpeed = func(float64, bool) { s.retime() }
	s.retime()
	return s, nil
}

// Start begins serving and returns once the server listens and its ticker
// runs, or fails.
func (s *Server) Start() error {
	go func() {
		err := gnet.Run(s, "tcp://"+s.cfg.Addr,
			gnet.WithMulticore(false), gnet.WithNumEventLoop(1),
			gnet.WithTicker(true), // only to learn that the event loop runs: see OnTick
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLoadBalancing(gnet.SourceAddrHash),
			gnet.WithReuseAddr(true),           // a restart can listen again despite TIME_WAIT
			gnet.WithLogger(gnetLogger{s.log})) // gnet's own messages, through slog
		s.err = err
		select {
		case s.ready <- err:
		default:
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
	go s.runTicker()
	s.ring() // requests served before the doorbell existed may have left work
	return nil
}

// Addr returns the address the server listens on, with the real port.
func (s *Server) Addr() string { return s.addr }

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop stops accepting, writes out what is queued, closes every connection
// and returns when the server has stopped or ctx ends.
//
// A connection accepted in the very moment Stop begins may escape: gnet's
// acceptor hands new connections to the event loop asynchronously, and one
// still in flight when the loop exits is neither opened nor closed. The
// process exiting closes it; an in-process server (servertest) leaves it open.
func (s *Server) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	if l := s.loop.Load(); l != nil {
		flushed := make(chan struct{})
		if (*l).Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
			s.flush()
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
	err = s.onLoop(ctx, func() { now = s.st.now() })
	return now, err
}

// FastForward moves tw-time on by ticks, as the admin op does, and returns
// once every timer in between has fired and its event has been written to
// its connection (or backlog). It reports the new time and the firings.
func (s *Server) FastForward(ctx context.Context, ticks uint64) (now, fired uint64, err error) {
	done := make(chan [2]uint64, 1)
	var ffErr error
	err = s.onLoop(ctx, func() {
		if ffErr = s.st.clock.FastForward(ticks); ffErr != nil {
			return
		}
		s.st.waiters = append(s.st.waiters, waiter{done: done, target: s.st.clock.Now(), fired: s.st.firedTotal})
		s.st.more = s.st.advance()
		s.flush()
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

// OnBoot learns the real listening address.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	fd, err := eng.Dup()
	if err == nil {
		f := os.NewFile(uintptr(fd), "listener")
		var ln net.Listener
		if ln, err = net.FileListener(f); err == nil {
			s.addr = ln.Addr().String()
			ln.Close()
		}
		f.Close()
	}
	if err != nil {
		s.ready <- fmt.Errorf("server: reading the listening address: %w", err)
		return gnet.Shutdown
	}
	s.log.Info("tickwheel listening", "addr", s.addr, "tick", s.cfg.Tick, "now", s.st.wheel.Now(), "frozen", s.cfg.Frozen)
	s.ready <- nil
	return gnet.None
}

// OnOpen registers a client session, or learns the event loop from the doorbell.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if _, ok := c.Context().(bellMarker); ok {
		l := c.EventLoop()
		s.loop.Store(&l)
		return nil, gnet.None
	}
	c.SetContext(s.st.open(c))
	return nil, gnet.None
}

// OnClose forgets the session of a closed connection.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	if sess, ok := c.Context().(*session); ok {
		s.st.closeSession(sess)
		s.log.Debug("connection closed", "session", sess.id, "err", err)
		s.flush()
	}
	return gnet.None
}

// OnTraffic decodes and applies every complete frame, then writes replies
// and events with one write per connection.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	sess, ok := c.Context().(*session)
	if !ok {
		s.onBell(c)
		return gnet.None
	}
	// Requests see the current tw-time: the ticker sleeps while nothing is due.
	if s.st.advance() {
		s.st.more = true
	}
	s.readFrames(c, sess)
	s.flush()
	s.postIfMore()
	s.retime()
	return gnet.None
}

// postIfMore asks for another advance turn when one run by a request (a
// fast-forward) stopped at max_fires_per_turn with work left. Before the
// doorbell exists the work stays noted; Start rings once it does.
func (s *Server) postIfMore() {
	if s.st.more && s.bell.Load() != nil {
		s.st.more = false
		s.ring()
	}
}

func (s *Server) readFrames(c gnet.Conn, sess *session) {
	buf, _ := c.Peek(-1)
	off := 0
	for !sess.waiting && !sess.kill && !sess.closed {
		payload, n, err := protocol.SplitFrame(buf[off:], s.cfg.Limits.MaxFrame)
		if errors.Is(err, protocol.ErrIncomplete) {
			break
		}
		if err != nil {
			s.st.malformed(sess, 0, fmt.Errorf("%w (limit max_frame is %d bytes)", err, s.cfg.Limits.MaxFrame))
			off = len(buf)
			break
		}
		s.st.handle(sess, payload)
		off += n
	}
	// gnet's Discard(n) with n <= 0 discards everything buffered, so a
	// partial frame (or frames held back behind a fast-forward) would be
	// lost: discard only what was consumed.
	if off > 0 {
		_, _ = c.Discard(off)
	}
	if len(sess.out) > 0 {
		s.st.markDirty(sess)
	}
	if sess.waiting && c.InboundBuffered() > s.cfg.Limits.MaxOutbound {
		s.st.malformed(sess, 0, errors.New("too many requests pipelined behind a fast-forward"))
		s.st.markDirty(sess)
	}
}

// flush writes each dirty session's output with one write, closes the
// sessions marked for closing, and resumes reading sessions whose
// fast-forward has been answered.
//
// A write to a peer that has reset the connection makes gnet call OnClose
// inside Write, and closing a session can mark others dirty: flush is
// therefore re-entrant by design. A nested call returns at once; the outer
// loop, which reads the dirty list by index, picks up what it appended.
func (s *Server) flush() {
	st := s.st
	if st.flushing {
		return
	}
	st.flushing = true
	for i := 0; i < len(st.dirty); i++ {
		sess := st.dirty[i]
		sess.dirty = false
		c, _ := sess.conn.(gnet.Conn)
		if c == nil || sess.closed && !sess.kill {
			sess.out = sess.out[:0]
			continue
		}
		if len(sess.out) > 0 {
			out := sess.out
			sess.out = sess.out[:0]
			_, _ = c.Write(out) // may run OnClose for sess
		}
		if sess.kill {
			_ = c.Close()
		} else if !sess.waiting && !sess.closed && c.InboundBuffered() > 0 {
			_ = c.Wake(nil) // frames queued behind a fast-forward
		}
	}
	clear(st.dirty)
	st.dirty = st.dirty[:0]
	st.flushing = false
}

// OnTick runs on gnet's ticker goroutine once its event loop runs. It only
// tells Start so; the server's own ticker (ticker.go) drives the wheel.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.startedOnce.Do(func() { close(s.started) })
	return time.Hour, gnet.None
}

// gnetLogger passes gnet's own log messages to slog, its info as debug.
type gnetLogger struct{ log *slog.Logger }

func (g gnetLogger) Debugf(format string, args ...any) { g.log.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Infof(format string, args ...any)  { g.log.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.log.Warn(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Errorf(format string, args ...any) { g.log.Error(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.log.Error(fmt.Sprintf(format, args...)) }
