package wheel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// Near 3/4 full, a big index maps the table of its next move ahead and
// hands it out once, to be backed with memory elsewhere; the move then
// writes that table. Before, the move mapped it then, and its first
// insertions each waited for the kernel to back a page: at 100M timers
// the loop stood still for 5 s.
func TestIndexAheadTakenByTheMove(t *testing.T) {
	g := newGrowing(t)
	w := g.w
	add := func() { g.add(g.i % 1000) }
	g.until(func() bool { return w.index.mask+1 >= 1<<18 && !w.index.moving() }, add) // a mapped table of 2^18, its move done
	size := w.index.mask + 1
	start := size*3/4 - aheadOf(size)
	for uint64(w.index.count+w.index.tombs) < start {
		add()
		require.Nil(t, w.IndexAhead(), "mapped ahead %d entries short of 3/4", size*3/4-uint64(w.Len()))
	}
	before := w.MappedBytes()
	add()
	a := w.IndexAhead()
	require.NotNil(t, a, "nothing mapped ahead at %d of %d entries", w.Len(), size)
	require.Nil(t, w.IndexAhead(), "handed out once")
	require.Equal(t, int(2*size*4), a.Bytes(), "the doubled table of the next move")
	require.Equal(t, before+int64(a.Bytes()), w.MappedBytes(), "counted in the wheel's mapped bytes")
	if !a.Populate() {
		t.Log("the kernel cannot populate (before Linux 5.14): the table is mapped, not backed")
	}
	for !w.index.moving() {
		add()
		require.Nil(t, w.IndexAhead())
	}
	require.Same(t, a.m, w.index.table.mem, "the move writes the table mapped ahead")
	require.Nil(t, w.index.next)
	for w.index.moving() {
		add()
	}
	checkIndexInvariants(t, w)
}

// A table mapped ahead for a doubling that the move no longer needs (the
// live entries fell to 3/8 meanwhile, so the move rebuilds at the same
// size) is freed when the move takes its table, and the wheel goes on.
func TestIndexAheadFreedWhenTheSizeChanged(t *testing.T) {
	g := aheadMapped(t)
	w := g.w
	size := w.index.mask + 1
	a := w.IndexAhead()
	require.Equal(t, int(2*size*4), a.Bytes())
	mapped := bigmem.Mapped()
	require.Nil(t, w.index.takeAhead(size), "a move at the same size does not take a doubled table")
	require.False(t, a.Populate(), "the table mapped ahead was freed")
	require.Equal(t, mapped-int64(a.Bytes()), bigmem.Mapped())
	require.Nil(t, w.index.next)
	g.until(w.index.moving, func() { g.add(2) })
	g.until(func() bool { return !w.index.moving() }, func() { g.add(2) })
	checkIndexInvariants(t, w)
}

// Populate runs on a goroutine of its own while the wheel goes on, and may
// meet the table's Free (the move took another size): the race detector
// sees no race, and the wheel stays whole.
func TestIndexAheadPopulateConcurrent(t *testing.T) {
	g := aheadMapped(t)
	w := g.w
	a := w.IndexAhead()
	done := make(chan bool)
	go func() { done <- a.Populate() }()
	size := w.index.mask + 1
	w.index.takeAhead(size) // frees it, as a move at the same size would
	for range 10_000 {
		g.add(2)
	}
	<-done
	checkIndexInvariants(t, w)
}

// growing is a wheel whose index tables of 2^18 entries and more are mapped
// outside the heap, and the tid its next add takes.
type growing struct {
	t *testing.T
	w *Wheel
	i uint64
}

func newGrowing(t *testing.T) *growing {
	withMapping(t, 64, 1<<18)
	w, err := New(0, Config{})
	require.NoError(t, err)
	return &growing{t: t, w: w}
}

// add adds a timer of receiver with the next tid.
func (g *growing) add(receiver uint64) {
	g.t.Helper()
	require.NoError(g.t, g.w.Add(Key{receiver, g.i}, Spec{After: 1 + g.i%5000}))
	g.i++
}

// until calls add until done reports true.
func (g *growing) until(done func() bool, add func()) {
	for !done() {
		add()
	}
}

// aheadMapped returns a growing wheel of receiver 1's timers whose 2^18
// table has just mapped the next one ahead.
func aheadMapped(t *testing.T) *growing {
	g := newGrowing(t)
	x := &g.w.index
	g.until(func() bool { return x.mask+1 >= 1<<18 && !x.moving() && x.next != nil }, func() { g.add(1) })
	return g
}
