package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// An idle server's sleep.
//
// An idle server's CPU is its wake-ups, not its work: each wake of a Go
// timer costs the runtime's poller thread, its monitor (sysmon) and often a
// third thread (docs/BENCHMARKS.md, "Idle CPU: the wake-ups that are
// left"). So the goroutines that look at the server once a second (the
// memory returner here, the operator's history sampler) wait, once the
// server has been idle a while, for its next activity (ActivityAfter) or a
// look every idleLook, whichever comes first; the journal's syncer waits
// for a write.

// idleLook is how often a goroutine that sleeps through an idle server
// looks at it anyway: what changes without activity (an HTTP handler's
// garbage, the lifting of the memory limit running out) is seen that late.
const idleLook = 10 * time.Second

// activityBell wakes the goroutines waiting for a server's next activity.
// ring costs one atomic load while nobody waits. Safe from any goroutine.
type activityBell struct {
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{} // closed at the next ring; nil: nobody waits
}

// wait returns a channel closed at the next ring.
func (b *activityBell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	b.waiting.Store(true)
	return b.ch
}

// ring closes the channel of those waiting, if any. The caller has counted
// the activity first (see ActivityAfter).
func (b *activityBell) ring() {
	if !b.waiting.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.waiting.Store(false)
}

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// count adds one to an Activity counter and wakes those waiting for it.
func (s *Server) count(c *atomic.Uint64) {
	c.Add(1)
	s.activity.ring()
}

// ActivityAfter returns a channel that is closed once Activity differs from
// n (at once if it does already), or at a Poke, after which the waiter
// looks again. A cluster node's Activity says nothing
// (see Activity); there the channel is closed at once. Safe from any
// goroutine; the operator's sampler sleeps on it while the server is idle.
func (s *Server) ActivityAfter(n uint64) <-chan struct{} {
	ch := s.activity.wait() // before reading the counters: count adds, then rings
	if a, ok := s.Activity(); !ok || a != n {
		return closedChan
	}
	return ch
}

// idleSteps is how many looks in a row the memory returner sees no
// activity before it sleeps through the idleness: the collector's rest
// (gcrest.go) begins after restAfter of them.
const idleSteps = restAfter + 2

// idleWatch counts a once-a-second goroutine's looks without activity.
type idleWatch struct {
	last  uint64
	quiet int
}

// step takes the Activity of this look and reports whether the server has
// been idle for idleSteps looks.
func (w *idleWatch) step(a uint64, ok bool) bool {
	if !ok || a != w.last {
		w.last, w.quiet = a, 0
		return false
	}
	w.quiet++
	return w.quiet >= idleSteps
}

// Poke wakes the goroutines sleeping through an idle server for a look,
// without counting as activity: the operator's HTTP requests allocate, and
// the memory returner keeps the collector's rest within its budget
// (gcrest.go). Safe from any goroutine.
func (s *Server) Poke() { s.activity.ring() }
