package server

import (
	"sync"
	"sync/atomic"
	"testing"
)

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestActivityAfter: the channel is closed by the next activity of any
// kind, and at once when the activity has moved on already; the waiters of
// one idleness share a channel, and a waiter after a ring gets a new one.
func TestActivityAfter(t *testing.T) {
	var s Server
	n, _ := s.Activity()
	a, b := s.ActivityAfter(n), s.ActivityAfter(n)
	if isClosed(a) || isClosed(b) {
		t.Fatal("closed before any activity")
	}
	s.count(&s.requestTurns)
	if !isClosed(a) || !isClosed(b) {
		t.Fatal("not closed by a request turn")
	}
	if !isClosed(s.ActivityAfter(n)) {
		t.Fatal("a wait for an activity count that has moved on is not closed at once")
	}
	n, _ = s.Activity()
	c := s.ActivityAfter(n)
	if isClosed(c) {
		t.Fatal("a new wait is closed by the earlier activity")
	}
	for name, ctr := range map[string]*atomic.Uint64{"turns": &s.turns, "accepted": &s.accepted, "closed": &s.closed, "refused": &s.refused} {
		n, _ = s.Activity()
		c = s.ActivityAfter(n)
		s.count(ctr)
		if !isClosed(c) {
			t.Fatalf("not closed by %s", name)
		}
	}
}

// TestActivityAfterRace: a wait begun while activity is counted on another
// goroutine is never left asleep past it.
func TestActivityAfterRace(t *testing.T) {
	var s Server
	for i := 0; i < 2000; i++ {
		n, _ := s.Activity()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.count(&s.turns)
		}()
		c := s.ActivityAfter(n)
		wg.Wait()
		<-c // hangs (the test times out) if the wait missed the count
	}
}

// TestIdleWatch: idle after idleSteps looks in a row with the same
// activity; any change, or a cluster node's activity, starts it over.
func TestIdleWatch(t *testing.T) {
	var w idleWatch
	for i := 1; i < idleSteps; i++ {
		if w.step(0, true) {
			t.Fatalf("idle after %d looks", i)
		}
	}
	if !w.step(0, true) {
		t.Fatalf("not idle after %d looks", idleSteps)
	}
	if w.step(1, true) || w.step(1, false) {
		t.Fatal("idle after a change")
	}
	for i := 0; i < 2*idleSteps; i++ {
		if w.step(1, false) {
			t.Fatal("a cluster node's activity made it idle")
		}
	}
}

// TestPoke: a Poke wakes those waiting for activity without being one.
func TestPoke(t *testing.T) {
	var s Server
	n, _ := s.Activity()
	c := s.ActivityAfter(n)
	s.Poke()
	if !isClosed(c) {
		t.Fatal("a Poke did not wake the waiter")
	}
	if a, _ := s.Activity(); a != n {
		t.Fatalf("a Poke counted as activity: %d, was %d", a, n)
	}
	if isClosed(s.ActivityAfter(n)) {
		t.Fatal("a wait after the Poke is closed at once")
	}
}
