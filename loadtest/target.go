// Package loadtest is tickwheel's load generator: scenarios that drive a
// timer service (a Target) and check what comes back.
//
// A scenario decides every timer in advance on the generator's monotonic
// clock (Now), hands timers to the Target in batches, and records every
// delivery: its receipt time against the intended due instant (lateness, in
// an HdrHistogram), and its identity (receiver, tid, fired) to count
// duplicates, early, missing and cancelled-but-fired deliveries. A run whose
// counts break the invariant (delivered == scheduled − cancelled, everything
// else 0) is marked FAILED.
//
// # Targets
//
// Four Targets exist: TickwheelTarget (the server over TCP, raw protocol,
// pipelined over many connections), AfterFuncTarget (time.AfterFunc in this
// process: the "hand-rolled in-process" peer), and two external peers that
// need their servers running (loadtest/peers.sh):
//
//   - RedisTarget: the sorted-set delay queue. Add is a pipelined ZADD with
//     score = due (µs on the generator's clock since an epoch taken at
//     Open) and a member that carries the timer; Cancel is ZREM; delivery
//     is a poller running a Lua script every millisecond that pops the due
//     members (ZRANGEBYSCORE … LIMIT + ZREMRANGEBYRANK, looping while the
//     batch is full) and re-adds repeating ones from their scheduled time.
//     No virtual time.
//   - BeanstalkdTarget: Add is put with delay = ceil((due−now)/1s) (whole
//     seconds only, so lateness up to 1 s is expected and its Tick() reports
//     1 s; every result carries that note); Cancel is delete by job id (the
//     adapter keeps key → job id); delivery is reserve/delete consumers.
//
// Capabilities beyond Target are optional interfaces, checked by type
// assertion: Virtual (freeze and fast-forward, tickwheel only), Idler (open
// many idle connections), Process (a pid whose CPU and RSS to report),
// Counter (the target's own firing and drop totals, cross-checked against
// the generator's counts), Noter (notes added to every result).
package loadtest

import (
	"context"
	"time"
)

// epoch is the origin of the generator's monotonic clock.
var epoch = time.Now()

// Now returns the generator's monotonic clock: nanoseconds since the
// process started using this package. Intended due instants and receipt
// times are both read from it.
func Now() int64 { return int64(time.Since(epoch)) }

// Timer is one timer a scenario schedules.
type Timer struct {
	Receiver, Tid uint64
	// Due is the intended instant of the first firing, ns on Now's clock.
	// The target fires it at that instant or as soon after as it can (a
	// ticked target at the first tick boundary at or after it).
	Due int64
	// AtTick, when non-zero, schedules the first firing at this absolute
	// tick of a Virtual target instead of at Due (frozen-clock scenarios).
	AtTick uint64
	// Every is the interval between firings (a whole number of ticks for a
	// ticked target); 0 for a one-shot timer.
	Every time.Duration
	// Repeat is the total number of firings, at least 1.
	Repeat uint32
	// Data is carried opaquely and returned in every Delivery. Scenarios
	// put the intended due instant there (8 bytes, big-endian).
	Data []byte
}

// Key names a timer.
type Key struct{ Receiver, Tid uint64 }

// Delivery is one firing received by the generator.
type Delivery struct {
	Receiver, Tid uint64
	Fired         uint32 // 1-based firing number
	Last          bool
	Recv          int64 // receipt instant on Now's clock
	// Socket, when not 0, is the instant the kernel received the bytes that
	// completed the delivery (the socket's receive stamp, on Now's clock):
	// Recv minus the generator's own delay in reading them.
	Socket int64
	// Sched, when not 0, is the instant the target itself was asked to fire
	// at, when it differs from the intended due by a quantisation the target
	// cannot avoid and the adapter knows per firing (beanstalkd's
	// whole-second delays). Ticked targets implement DueInstant instead.
	Sched int64
	Data  []byte // valid only during the sink call
}

// Sink receives deliveries. It is called concurrently (from one goroutine
// per connection, or from timer goroutines) and must not keep d.Data.
type Sink func(worker int, d *Delivery)

// AddResult counts the outcome of an Add.
type AddResult struct {
	OK     int
	Errors map[string]int // by error code or message
}

// Target is a timer service under test.
type Target interface {
	// Name identifies the target in reports ("tickwheel", "afterfunc").
	Name() string
	// Tick is the target's time quantum: a timer fires at the first tick
	// boundary at or after its due instant (0 for an unticked target).
	Tick() time.Duration
	// Open prepares conns workers (connections) whose deliveries go to sink.
	// Every receiver is owned by the worker that first adds a timer for it:
	// its firings are delivered to that worker. A Target may be opened again
	// after Close.
	Open(ctx context.Context, conns int, sink Sink) error
	// Add schedules ts through worker w, pipelined, and returns when every
	// add was acknowledged. Add may be called concurrently for different
	// workers, never for the same one.
	Add(ctx context.Context, w int, ts []Timer) (AddResult, error)
	// Cancel cancels ks through worker w and returns the keys whose cancel
	// succeeded (the timer existed and will not fire again).
	Cancel(ctx context.Context, w int, ks []Key) ([]Key, error)
	// Clear removes every timer added since Open, without delivering them.
	Clear(ctx context.Context) error
	// Close closes the workers (not the service itself).
	Close() error
}

// Virtual is a Target whose clock can be frozen and fast-forwarded.
type Virtual interface {
	// Freeze stops the target's clock and returns the current tick.
	Freeze(ctx context.Context) (now uint64, err error)
	// Resume makes the clock follow real time again.
	Resume(ctx context.Context) error
	// FastForward advances the clock by ticks and returns, once every
	// firing on the way has been sent, how many fired.
	FastForward(ctx context.Context, ticks uint64) (fired uint64, err error)
}

// Idler is a Target reached over connections that can hold many idle ones.
type Idler interface {
	// OpenIdle opens n connections that say hello and then stay idle; close
	// releases them.
	OpenIdle(ctx context.Context, n int) (close func(), err error)
}

// Process is a Target running in its own process.
type Process interface {
	PID() int
}

// Counter is a Target that counts what it sends (tickwheel's admin stats).
// The totals are server-wide: the target must serve only the load test.
type Counter interface {
	Counters(ctx context.Context) (Counters, error)
}

// Counters are a target's running totals (or, in a Result, their change
// over the scenario).
type Counters struct {
	Fired   uint64 // firings sent to receivers
	Dropped uint64 // events discarded (backlog overflow, lost connections)
}

// Noter is a Target with notes for every result (a capability limit that
// shapes its numbers, e.g. beanstalkd's whole-second delays).
type Noter interface {
	Notes() []string
}
