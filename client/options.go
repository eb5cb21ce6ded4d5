package client

import (
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Option configures a Client; pass options to Dial.
type Option func(*options)

type options struct {
	token        string
	name         string
	handler      func(Event)
	eventBuffer  int
	reconnectMin time.Duration
	reconnectMax time.Duration
	dialTimeout  time.Duration
	log          *slog.Logger
	onLost       func(error)
	onReconnect  func()
	addrs        []string // WithAddrs's, after Dial's
	leaderHops   int
	tls          *tls.Config // nil: plaintext (tls.go)
	tlsErr       error       // WithTLSFiles's, returned by Dial
}

// Defaults.
const (
	DefaultEventBuffer  = 1024
	DefaultReconnectMin = 100 * time.Millisecond
	DefaultReconnectMax = 5 * time.Second
	DefaultDialTimeout  = 10 * time.Second
)

func defaultOptions() options {
	return options{
		name:         filepath.Base(os.Args[0]),
		eventBuffer:  DefaultEventBuffer,
		reconnectMin: DefaultReconnectMin,
		reconnectMax: DefaultReconnectMax,
		dialTimeout:  DefaultDialTimeout,
		leaderHops:   DefaultLeaderHops,
		log:          slog.New(slog.DiscardHandler),
	}
}

// WithToken sets the hello token: the server's client token, or its admin
// token for admin ops (FastForward, Freeze, ResumeSync, SetSpeed, Stats).
func WithToken(tok string) Option { return func(o *options) { o.token = tok } }

// WithName sets the client name the server shows in its logs and stats.
// Default: the program's base name.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithHandler has events delivered by calling fn, in order, from one
// goroutine the Client owns; Events then returns nil.
//
// fn must not block for long: while it runs, the next events wait in a
// buffer of WithEventBuffer's size, and when that is full the Client stops
// reading its connection — replies to calls included — until fn returns
// (see the package doc on backpressure). For the same reason, calls made
// from fn must have a deadline, and fn must not call Close (Close waits for
// fn to return); use `go c.Close()`.
func WithHandler(fn func(Event)) Option { return func(o *options) { o.handler = fn } }

// WithEventBuffer sets how many events may wait for the consumer: the
// capacity of the Events channel, or of the handler's queue. n <= 0 means
// the default, 1024.
func WithEventBuffer(n int) Option {
	return func(o *options) {
		if n <= 0 {
			n = DefaultEventBuffer
		}
		o.eventBuffer = n
	}
}

// WithDialTimeout bounds each connection attempt — the TCP dial, the
// hello and, on a reconnection, the re-binds — to d: Dial's when its ctx
// has no deadline, and every reconnection's. Default 10 s; d <= 0 leaves
// Dial to its ctx and reconnection attempts unbounded.
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithReconnect sets the backoff between reconnection attempts after the
// connection drops: the first attempt waits about min, each further one
// twice as long up to max, each wait drawn at random from [d/2, d]
// (jitter). The default is on, 100ms..5s. min <= 0 disables reconnection:
// the first connection loss then ends the Client (calls return
// ErrDisconnected, the Events channel is closed). max < min means max = min.
func WithReconnect(min, max time.Duration) Option {
	return func(o *options) {
		if min <= 0 {
			min, max = 0, 0
		}
		if max < min {
			max = min
		}
		o.reconnectMin, o.reconnectMax = min, max
	}
}

// WithLogger sets where the Client logs connection losses and reconnects.
// Default: nowhere. nil means the default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.log = l
	}
}

// WithConnectionHooks has lost called when the connection drops and the
// Client starts reconnecting, with the cause, and reconnected called when
// a reconnection succeeded and the re-binds were answered (a receiver the
// server refused to bind again is then no longer bound). Each is called
// from a goroutine of the Client, once per loss and reconnection (lost
// first), never for Dial's first connection nor once Close has returned;
// either may be nil. They must return quickly and must not call Close.
// With reconnection off (WithReconnect(0, 0)) neither is called: the
// Events channel closes instead.
func WithConnectionHooks(lost func(cause error), reconnected func()) Option {
	return func(o *options) { o.onLost, o.onReconnect = lost, reconnected }
}

// WithAddrs adds server addresses (host:port each, or comma-separated
// lists) after those of Dial's addr, which may then be "": the nodes of a
// cluster. The Client connects to the leader among them, following
// followers' not_leader replies, on Dial and on every reconnection (see
// DefaultLeaderHops). Duplicates are dropped.
func WithAddrs(addrs ...string) Option {
	return func(o *options) { o.addrs = append(o.addrs, addrs...) }
}

// WithLeaderHops sets how many not_leader redirections the Client follows
// from one address before it tries the next one of its list (default
// DefaultLeaderHops, 3): nodes that name each other in a loop, or a chain
// of stale leaders, end there. n < 0 means the default; 0 follows none.
func WithLeaderHops(n int) Option {
	return func(o *options) {
		if n < 0 {
			n = DefaultLeaderHops
		}
		o.leaderHops = n
	}
}
