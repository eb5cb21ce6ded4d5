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
// DropConnections resets every client connection, so that a test can check
// how its code handles a reconnect: with receivers bound in acknowledged
// mode (client.BindOptions.Ack), that every event is handled once:
//
//	c.Bind(ctx, 7, &client.BindOptions{Ack: client.AckAuto})
//	c.Add(ctx, 7, 1, 1, &client.AddOptions{Repeat: 4})
//	srv.AdvanceTicks(2)                    // events 1 and 2 reach the client, not taken yet
//	srv.DropConnections()                  // the client reconnects and re-binds
//	srv.AdvanceTicks(2)
//	for i := 1; i <= 4; i++ { <-c.Events() } // 1, 2, 3, 4: once each
//	c.Redelivered()                        // 2: the client dropped them
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
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

// Server is a running in-process server.
type Server struct {
	t     testing.TB
	srv   *server.Server
	cfg   server.Config
	relay *relay // what clients dial (Addr): forwards to srv, for DropConnections
}

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
	var tok [16]byte
	_, _ = rand.Read(tok[:]) // never fails (crypto/rand)
	cfg := server.Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1_000_000,
		AdminToken: hex.EncodeToString(tok[:]), DataDir: t.TempDir(), Persistence: "off"}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{t: t, cfg: cfg}
	s.start()
	r, err := newRelay(s.srv.Addr())
	if err != nil {
		s.stop()
		t.Fatalf("servertest: %v", err)
	}
	s.relay = r
	t.Cleanup(func() {
		if s.srv != nil {
			s.stop()
		}
		s.relay.stop()
	})
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.New(s.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		s.t.Fatalf("servertest: %v", err)
	}
	if err := srv.Start(); err != nil {
		s.t.Fatalf("servertest: %v", err)
	}
	s.srv = srv
}

func (s *Server) stop() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Stop(ctx); err != nil {
		s.t.Errorf("servertest: stop: %v", err)
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
	addr := s.srv.Addr()
	s.stop()
	s.cfg.Addr = addr
	s.start()
}

// Addr returns the server's address, for client.Dial. Clients reach the
// server through a relay of the servertest's own, byte for byte, so that
// DropConnections can cut their connections; Server().Addr() is the
// server's own address, which DropConnections does not reach.
func (s *Server) Addr() string { return s.relay.addr() }

// DropConnections cuts every client connection made to Addr with a TCP
// reset (RST), both ways, as a network failure would, and returns how many
// it cut. The server closes their sessions; clients that reconnect
// (client.WithReconnect, on by default) bind their receivers again and get
// what the server kept meanwhile: in acknowledged mode, every event they
// had not acknowledged, from the bind reply's first seq. Events in flight
// when the connection was cut are lost with it, as they would be in
// production. New connections are accepted at once.
func (s *Server) DropConnections() int { return s.relay.reset() }

// Tick returns the duration of one tick.
func (s *Server) Tick() time.Duration { return s.srv.Tick() }

// AdminToken returns the server's admin token, for a client that calls
// admin ops: client.Dial(ctx, srv.Addr(), client.WithToken(srv.AdminToken())).
func (s *Server) AdminToken() string { return s.srv.AdminToken() }

// Server returns the underlying server.
func (s *Server) Server() *server.Server { return s.srv }

// Advance moves tw-time on by d, rounded up to whole ticks, and returns once
// every timer due in between has fired and its event is written. It returns
// the number of firings.
func (s *Server) Advance(d time.Duration) int {
	s.t.Helper()
	if d <= 0 {
		return 0
	}
	tick := s.Tick()
	return s.AdvanceTicks(uint64((d + tick - 1) / tick))
}

// AdvanceTicks moves tw-time on by n ticks; see Advance.
func (s *Server) AdvanceTicks(n uint64) int {
	s.t.Helper()
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := s.srv.Now(ctx)
	if err != nil {
		s.t.Fatalf("servertest: now: %v", err)
	}
	return now
}
