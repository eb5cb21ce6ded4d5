package main

import "testing"

// The adapter starts with two Ps and gives one back after quietFor of
// quiet; then it takes a second P from the first busy step, keeps it
// through short lulls, and gives it back after quietFor of quiet.
func TestProcsAdapter(t *testing.T) {
	a := procsAdapter{two: true} // as a server starts
	for range quietSteps - 1 {
		if procs, change := a.step(busyTurns - 1); procs != 2 || change {
			t.Fatalf("gave the P back too early")
		}
	}
	if procs, change := a.step(0); procs != 1 || !change {
		t.Fatalf("kept two Ps after quietFor")
	}
	type step struct {
		turns  uint64
		procs  int
		change bool
	}
	quiet := quietSteps
	steps := []step{{0, 1, false}, {busyTurns - 1, 1, false}, {busyTurns, 2, true}, {5000, 2, false}}
	for range quiet - 1 {
		steps = append(steps, step{3, 2, false})
	}
	steps = append(steps, step{busyTurns, 2, false}) // a busy step resets the count
	for range quiet - 1 {
		steps = append(steps, step{0, 2, false})
	}
	steps = append(steps, step{0, 1, true}, step{0, 1, false}, step{10 * busyTurns, 2, true})
	for i, s := range steps {
		procs, change := a.step(s.turns)
		if procs != s.procs || change != s.change {
			t.Fatalf("step %d (%d turns): got %d Ps, change %v; want %d, %v", i, s.turns, procs, change, s.procs, s.change)
		}
	}
}
