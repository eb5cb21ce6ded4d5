// Package servertest runs an in-process tickwheel server for tests, so that
// tests of timer-driven game logic never sleep.
//
// RunT starts a server on 127.0.0.1 with a free port and tw-time frozen: it
// moves only when the test calls Advance. Advance fires every timer in
// between, in order, and returns once their events have been written to the
// connections, so the test then simply reads its client's events:
//
//	func TestPoison(t *testing.T) {
//		srv := servertest.RunT(t)                  // stopped by t.Cleanup
//		c, _ := client.Dial(ctx, srv.Addr())
//		c.Bind(ctx, player, nil)
//		c.AddAfter(ctx, player, poisonTick, time.Second, &client.AddOptions{Repeat: 10})
//		srv.Advance(10 * time.Second)              // ten ticks of poison, in milliseconds
//		for range 10 { <-c.Events() }
//	}
//
// This is the tickwheel counterpart of miniredis's FastForward.
//
// Advance needs no token. A client that calls admin ops itself (FastForward,
// Stats, ...) dials with client.WithToken(srv.AdminToken()): each server has
// a random admin token, and a temporary data directory, so a test never
// touches the working tree.
//
// Advance returns once the events are written towards the clients, not
// once a client has them: they still cross a relay (below) and the
// client's reader. Reading them from Events waits for them; a test that
// needs them inside the client before it goes on waits for that, as the
// DropConnections example does.
//
// Events a test does not read pile up. A client keeps at most its event
// buffer of them (client.WithEventBuffer, 1024 by default); when it is
// full the client stops reading its connection, so its next call waits
// for a reply stuck behind events nobody reads: a test that advances past
// more firings than that without reading hangs at its next call (Advance
// itself still returns; the server holds the rest, as the client package
// doc's "Events and backpressure" says). Read the events as you go, after
// each Advance, or dial with a larger client.WithEventBuffer when a test
// means to advance far first and read afterwards.
//
// DropConnections resets every client connection, so that a test can check
// how its code handles a reconnect: with receivers bound in acknowledged
// mode (client.BindOptions.Ack), that every event is handled once. See
// ExampleServer_DropConnections (Run and Close there stand for RunT in an
// Example, which has no testing.T).
//
// The server keeps its state in memory, unless the test gives it a data
// directory with WithDataDir: then Restart stops it gracefully and starts
// it again on the same directory and address, as a deploy would, and the
// test's clients reconnect to find their timers.
package servertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

// Server is a running in-process server.
type Server struct {
	t     failer
	srv   *server.Server
	cfg   server.Config
	relay *relay // what clients dial (Addr): forwards to srv, for DropConnections
	dir   string // the data directory Run made, removed by Close ("" for RunT)

	// Kept from the start, so that they still answer after Close.
	addr, token string
	tick        time.Duration

	closeMu sync.Mutex // Close may be called from several goroutines
}

// failer is how a Server reports a failure: the test's testing.TB (RunT),
// or panics (Run).
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// panicker is the failer of a Server from Run.
type panicker struct{}

func (panicker) Helper()                           {}
func (panicker) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (panicker) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Config is the server configuration, for WithConfig.
type Config = server.Config

// Option adjusts the server's config before it starts.
type Option func(*server.Config)

// WithConfig lets a test change any server setting (limits, tokens, tick).
func WithConfig(fn func(*Config)) Option { return Option(fn) }

// WithStartTick sets tw-time at start (default 1,000,000).
func WithStartTick(tick uint64) Option { return func(c *server.Config) { c.StartTick = tick } }

// WithDataDir makes the server durable, keeping its log and snapshots in
// dir (a t.TempDir(), typically), so that Restart (or another server on
// dir) finds the state again. fsync is "always" unless the config says
// otherwise.
func WithDataDir(dir string) Option {
	return func(c *server.Config) {
		c.DataDir, c.Persistence = dir, "on"
		if c.Fsync == "" {
			c.Fsync = "always"
		}
	}
}

// RunT starts a frozen server on 127.0.0.1:0 with a 10 ms tick, a random
// admin token and a data directory from t.TempDir, and stops it when the
// test ends. It fails the test if the server cannot start.
func RunT(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := run(t, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(s.close)
	return s
}

// Run is RunT for code without a testing.TB, such as an Example: it
// starts the same server, with a data directory of its own, and the caller
// stops it with Close. Where a Server from RunT fails the test (Advance,
// Now, Restart, ...), one from Run panics.
func Run(opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "servertest-")
	if err != nil {
		return nil, fmt.Errorf("servertest: %w", err)
	}
	s, err := run(panicker{}, dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servertest: %w", err)
	}
	s.dir = dir
	return s, nil
}

// Close stops a server from Run and removes its data directory (RunT's
// server stops by itself when the test ends). Calling it again does
// nothing.
func (s *Server) Close() {
	s.close()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// run starts a server and its relay, reporting later failures to t.
func run(t failer, dataDir string, opts []Option) (*Server, error) {
	var tok [16]byte
	_, _ = rand.Read(tok[:]) // never fails (crypto/rand)
	cfg := server.Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1_000_000,
		AdminToken: hex.EncodeToString(tok[:]), DataDir: dataDir, Persistence: "off"}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{t: t, cfg: cfg}
	if err := s.start(); err != nil {
		return nil, err
	}
	r, err := newRelay(s.srv.Addr())
	if err != nil {
		s.stop()
		return nil, err
	}
	s.relay, s.addr, s.token, s.tick = r, r.addr(), s.srv.AdminToken(), s.srv.Tick()
	return s, nil
}

func (s *Server) start() error {
	srv, err := server.New(s.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	s.srv = srv
	return nil
}

// close stops the server, if it runs, and the relay.
func (s *Server) close() {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.srv != nil {
		s.stop()
		s.srv = nil
	}
	if s.relay != nil {
		s.relay.stop()
		s.relay = nil
	}
}

func (s *Server) stop() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Stop(ctx); err != nil {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		s.t.Errorf("servertest: stop: %v; the goroutines then:\n%s", err, buf)
	}
}

// Restart stops the server gracefully and starts a new one on the same
// data directory and address: connections drop (a client reconnects and
// binds again) and the state comes back from the log. It fails the test
// without WithDataDir.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cfg.Persistence != "on" {
		s.t.Fatalf("servertest: Restart needs WithDataDir")
	}
	s.live("Restart")
	addr := s.srv.Addr()
	s.stop()
	s.srv = nil
	s.cfg.Addr = addr
	if err := s.start(); err != nil {
		s.t.Fatalf("servertest: restart: %v", err)
	}
}

// Addr returns the server's address, for client.Dial. Clients reach the
// server through a relay of the servertest's own, byte for byte, so that
// DropConnections can cut their connections; Server().Addr() is the
// server's own address, which DropConnections does not reach.
func (s *Server) Addr() string { return s.addr }

// live fails the test (panics for Run's server) when the server was
// closed: op needs it running.
func (s *Server) live(op string) {
	if s.srv == nil || s.relay == nil {
		s.t.Helper()
		s.t.Fatalf("servertest: %s after Close", op)
	}
}

// DropConnections cuts every client connection made to Addr with a TCP
// reset (RST), both ways, as a network failure would, and returns how many
// it cut. The server closes their sessions; clients that reconnect
// (client.WithReconnect, on by default) bind their receivers again and get
// what the server kept meanwhile: in acknowledged mode, every event they
// had not acknowledged, from the bind reply's first seq. Events in flight
// when the connection was cut are lost with it, as they would be in
// production. New connections are accepted at once.
func (s *Server) DropConnections() int {
	s.t.Helper()
	s.live("DropConnections")
	return s.relay.reset()
}

// Tick returns the duration of one tick.
func (s *Server) Tick() time.Duration { return s.tick }

// AdminToken returns the server's admin token, for a client that calls
// admin ops: client.Dial(ctx, srv.Addr(), client.WithToken(srv.AdminToken())).
func (s *Server) AdminToken() string { return s.token }

// Server returns the underlying server.
func (s *Server) Server() *server.Server { return s.srv }

// Advance moves tw-time on by d, rounded up to whole ticks, and returns once
// every timer due in between has fired and its event is written towards
// its client (the client may not have read it yet: see the package doc).
// It returns the number of firings.
//
// Read the events as you go: a client holds at most its event buffer of
// unread events (client.WithEventBuffer, 1024 by default); past that it
// stops reading its connection, and its next call hangs until the events
// are read. To advance past more firings first and read them afterwards,
// dial with a larger client.WithEventBuffer.
func (s *Server) Advance(d time.Duration) int {
	s.t.Helper()
	if d <= 0 {
		return 0
	}
	tick := s.Tick()
	return s.AdvanceTicks(uint64((d + tick - 1) / tick))
}

// AdvanceTicks moves tw-time on by n ticks; see Advance, and its warning
// about unread events.
func (s *Server) AdvanceTicks(n uint64) int {
	s.t.Helper()
	s.live("AdvanceTicks")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, fired, err := s.srv.FastForward(ctx, n)
	if err != nil {
		s.t.Fatalf("servertest: advance %d ticks: %v", n, err)
	}
	return int(fired)
}

// Now returns the server's tw-time.
func (s *Server) Now() uint64 {
	s.t.Helper()
	s.live("Now")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := s.srv.Now(ctx)
	if err != nil {
		s.t.Fatalf("servertest: now: %v", err)
	}
	return now
}
