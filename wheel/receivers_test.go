package wheel

import "testing"

func TestEachReceiver(t *testing.T) {
	w, err := New(0, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]int{1: 3, 2: 1, 900: 2}
	for r, n := range want {
		for tid := range n {
			if err := w.Add(Key{Receiver: r, Tid: uint64(tid + 1)}, Spec{After: 10}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Cancel(Key{Receiver: 2, Tid: 1}); err != nil {
		t.Fatal(err)
	}
	delete(want, 2)
	got := map[uint64]int{}
	if next := w.EachReceiver(0, func(r uint64, n int) bool { got[r] = n; return true }); next != 0 {
		t.Fatalf("a whole walk returned %d", next)
	}
	if len(got) != len(want) || w.Receivers() != len(want) {
		t.Fatalf("got %v (Receivers %d), want %v", got, w.Receivers(), want)
	}
	for r, n := range want {
		if got[r] != n {
			t.Fatalf("receiver %d: %d timers, want %d", r, got[r], n)
		}
	}
	calls := 0
	w.EachReceiver(0, func(uint64, int) bool { calls++; return false })
	if calls != 1 {
		t.Fatalf("EachReceiver went on after false: %d calls", calls)
	}
	// One receiver at a time, each walk going on from the last: every
	// receiver once, then round again.
	seen := map[uint64]int{}
	from := 0
	for range len(want) {
		from = w.EachReceiver(from, func(r uint64, _ int) bool { seen[r]++; return false })
	}
	for r := range want {
		if seen[r] != 1 {
			t.Fatalf("resumed walks saw %v, want each of %v once", seen, want)
		}
	}
	w.EachReceiver(-5, func(uint64, int) bool { return true }) // any start is valid
}
