package wheel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// cowRun drives a wheel with random operations while Frozen copies of it
// are encoded, for TestFreezeInterleaved.
type cowRun struct {
	t    *testing.T
	rng  *rand.Rand
	w    *Wheel
	keep []*Frozen // Frozen copies taken meanwhile, released at the end
	tid  uint64
}

func (r *cowRun) data() []byte {
	switch r.rng.IntN(4) {
	case 0:
		return bytes.Repeat([]byte{byte(r.rng.Uint32())}, 1+r.rng.IntN(16)) // inline
	case 1:
		return bytes.Repeat([]byte{byte(r.rng.Uint32())}, 17+r.rng.IntN(80)) // a buffer
	}
	return nil
}

func (r *cowRun) spec() Spec {
	s := Spec{After: 1 + r.rng.Uint64N(200), Data: r.data(), Replace: r.rng.IntN(4) == 0}
	switch r.rng.IntN(8) {
	case 0, 1:
		s.Repeat = uint32(1 + r.rng.IntN(3))
	case 2:
		s.Every = 1 + r.rng.Uint64N(50) // forever: fast-forwards fire it many times
	case 3:
		s.Every = 1 << 33 // an interval in the extras
	}
	return s
}

// key returns the key of a timer likely to exist.
func (r *cowRun) key() Key {
	return Key{r.rng.Uint64N(40), r.rng.Uint64N(r.tid + 1)}
}

func (r *cowRun) add() {
	r.tid++
	_ = r.w.Add(Key{r.rng.Uint64N(40), r.tid}, r.spec())
}

// op applies one random operation: adds, cancels, pauses, resumes,
// reschedules, firings and fast-forwards (bounded Advances across many
// ticks), with callbacks that add, cancel and freeze.
func (r *cowRun) op() {
	w := r.w
	switch r.rng.IntN(12) {
	case 0, 1, 2:
		r.add()
	case 3, 4:
		_ = w.Cancel(r.key())
	case 5:
		_ = w.Pause(r.key())
	case 6:
		_ = w.Resume(r.key())
	case 7:
		if r.rng.IntN(20) == 0 {
			w.CancelAll(r.rng.Uint64N(40))
		}
	case 8, 9:
		w.Advance(w.Now()+r.rng.Uint64N(10), 0, r.callback)
	case 10: // a fast-forward, bounded as a server's turn is
		w.Advance(w.Now()+r.rng.Uint64N(100_000), 1+r.rng.IntN(500), r.callback)
	default:
		f := w.Freeze() // another snapshot, kept for a while or dropped at once
		if r.rng.IntN(2) == 0 {
			r.hold(f)
		} else {
			f.Release()
		}
	}
}

func (r *cowRun) callback(f *Fire) {
	w := r.w
	switch r.rng.IntN(100) {
	case 0:
		r.add()
	case 1:
		_ = w.Cancel(r.key())
	case 2:
		_ = w.Reschedule(f.Key, w.Now()+1+r.rng.Uint64N(30))
	case 3: // a snapshot taken in a callback: the firing goes on afterwards
		r.hold(w.Freeze())
	}
}

// hold keeps f unreleased, with at most 3 others (each pins the pages the
// wheel copies meanwhile).
func (r *cowRun) hold(f *Frozen) {
	if len(r.keep) == 4 {
		r.keep[0].Release()
		r.keep = r.keep[1:]
	}
	r.keep = append(r.keep, f)
}

// TestFreezeInterleaved: a Frozen encoded in random pieces while adds,
// cancels, pauses, firings, fast-forwards, renumbering and other Freezes
// (some from Advance callbacks) run between the pieces decodes to exactly
// the state of the stopped-world snapshot of the instant it was taken (a
// Frozen encoded before anything changed), and restores to a wheel whose
// snapshot decodes to it too. The wheel's owner encodes the pages it
// writes first (the write barrier): without it, the later writes would
// show. The wheels span several blocks of the
// page storage, with either geometry; some runs encode on another
// goroutine while the wheel changes (run it with -race).
func TestFreezeInterleaved(t *testing.T) {
	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 77))
			cfg := Config{}
			if seed%3 == 1 {
				cfg = Config{Levels: 3, Slots: 4} // overflow list, renumbering below
			}
			w := newWheel(t, rng.Uint64N(1000), cfg)
			r := &cowRun{t: t, rng: rng, w: w}
			for range rng.IntN(3 * blockLen) {
				r.add()
			}
			for range rng.IntN(200) {
				r.op()
			}
			want := snapshotOf(t, w, 0) // the stopped world
			if seed%4 == 2 {
				w.seqMax = w.seq + 300 // renumbers while the Frozen is read
			}
			f := w.Freeze()
			var got []byte
			if seed%5 == 4 {
				var wg sync.WaitGroup
				wg.Go(func() {
					for done := false; !done; {
						got, done = f.AppendNext(got, 1+rng2(len(got)))
					}
				})
				for range 300 {
					r.op()
				}
				wg.Wait()
			} else {
				for done := false; !done; {
					got, done = f.AppendNext(got, 1+rng.IntN(4000))
					for range rng.IntN(20) {
						r.op()
					}
				}
			}
			f.Release()
			w.seqMax = seqMask
			requireSameState(t, want, got, "the snapshot is not the state at its instant")
			requireSameState(t, want, snapshotOf(t, restoreOf(t, cfg, got, rng), 0), "the restored wheel freezes to another state")
			for _, k := range r.keep {
				k.Release()
			}
			require.Zero(t, w.frz.pins.Load())
			// Released: the wheel writes its pages in place again.
			before := w.nodes.arr.blocks[len(w.nodes.arr.blocks)-1].page(blockPages - 1)
			w.nodes.at(w.nodes.arr.len()-1).due++
			w.nodes.at(w.nodes.arr.len()-1).due--
			require.Same(t, before, w.nodes.arr.blocks[len(w.nodes.arr.blocks)-1].page(blockPages-1))
		})
	}
}

// TestFreezeSavesWrittenNodes: after Freeze, the first write to a node
// whose page the encoder has not reached saves the node into the
// barrier's log and writes it in place: no page is copied, a node is
// saved once, and the snapshot is the state at the Freeze.
func TestFreezeSavesWrittenNodes(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for i := range uint64(3 * blockLen) {
		require.NoError(t, w.Add(Key{1, i}, Spec{After: 1_000_000 + i}))
	}
	want := snapshotOf(t, w, 0)
	f := w.Freeze()
	defer f.Release()
	pages := func(bl []*cowBlock[node]) []*cowPage[node] {
		var out []*cowPage[node]
		for _, b := range bl {
			for p := range uint32(blockPages) {
				out = append(out, b.page(p))
			}
		}
		return out
	}
	shared := pages(f.nodes)
	require.NoError(t, w.Pause(Key{1, 5000})) // unlinks it: its neighbours in its slot too
	saved := f.bar.tail.n.Load()
	require.Equal(t, int64(3), saved, "the timer and its neighbours in its slot")
	require.NoError(t, w.Resume(Key{1, 5000})) // written again, and the slot's tail
	require.LessOrEqual(t, f.bar.tail.n.Load(), saved+1, "a node is saved once")
	require.Equal(t, shared, pages(w.nodes.arr.blocks), "no page is copied")
	var got []byte
	for done := false; !done; {
		got, done = f.AppendNext(got, 100)
		k := Key{1, uint64(len(got)) % 4096} // not 5000 or 5001, paused
		require.NoError(t, w.Pause(k))
		require.NoError(t, w.Resume(k))
	}
	requireSameState(t, want, got)
}

// TestFreezeWaitsForPageBeingCopied: a write to a node of a page the
// encoder has claimed and not copied yet waits for the copy, and then
// writes the page in place (a copy of the page would lose the writes made
// through pointers the operation took before: TestFreezeWalkEndRace).
func TestFreezeWaitsForPageBeingCopied(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for i := range uint64(blockLen) {
		require.NoError(t, w.Add(Key{1, i}, Spec{After: 1_000_000 + i}))
	}
	f := w.Freeze()
	defer f.Release()
	i := w.index.find(Key{1, 100})
	p := i / pageLen
	require.Zero(t, f.bar.claimPage(p)) // as the encoder does before copying it
	before := w.nodes.arr.blocks[0].page(p)
	var copied atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		copied.Store(true)
		f.bar.doneTo.Store(p + 1) // as the encoder does once it has the copy
	}()
	require.NoError(t, w.Pause(Key{1, 100}))
	require.True(t, copied.Load(), "the write waited for the encoder's copy")
	require.Same(t, before, w.nodes.arr.blocks[0].page(p), "written in place")
	require.Equal(t, uint32(markPaused), w.nodes.get(i).wprev)
}

// TestFreezeWalkEndRace: many small snapshots encoded on another goroutine
// while the wheel's owner keeps writing timers, so that the owner saves
// nodes while the encoder ends its walk: every node saved is in the
// snapshot (the encoder drains the log once more after its last page).
func TestFreezeWalkEndRace(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for i := range uint64(40) {
		require.NoError(t, w.Add(Key{i % 3, i}, Spec{After: 1000 + i}))
	}
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	for round := range rounds {
		want := snapshotOf(t, w, 0)
		f := w.Freeze()
		done := make(chan []byte)
		go func() {
			var got []byte
			for fin := false; !fin; {
				got, fin = f.AppendNext(got, 1+round%50)
			}
			done <- got
		}()
		var got []byte
		for k := uint64(round); got == nil; k++ {
			select {
			case got = <-done:
			default:
				key := Key{k % 40 % 3, k % 40}
				require.NoError(t, w.Pause(key))
				require.NoError(t, w.Resume(key))
			}
		}
		f.Release()
		requireSameState(t, want, got, "round %d", round)
	}
}

// TestSlabBlockIsOneAllocation: a block of the slab's node pages is one
// allocation (its pages side by side, in order), so the runtime keeps no
// span record or unused span tail per few pages (about 2 bytes a timer at
// 100M), and it stays so through a snapshot written while the loop
// changes timers on every page (the write barrier saves nodes; it never
// moves a node page out of its block). The extras' pages, copied on
// write, stay allocations of their own.
func TestSlabBlockIsOneAllocation(t *testing.T) {
	w := newWheel(t, 0, Config{})
	n := uint64(2 * blockLen)
	for i := range n {
		require.NoError(t, w.Add(Key{1 + i%7, i}, Spec{After: 1_000 + i%5000}))
	}
	together := func() {
		t.Helper()
		for bi, b := range w.nodes.arr.blocks {
			require.Nil(t, b.refs, "block %d: a slab block holds no page pointers", bi)
			base := uintptr(unsafe.Pointer(b.page(0)))
			require.Equal(t, base, uintptr(unsafe.Pointer(b.all)), "block %d: slab.get reads its nodes through all", bi)
			for p := range uint32(blockPages) {
				require.Equal(t, base+uintptr(p)*unsafe.Sizeof(cowPage[node]{}), uintptr(unsafe.Pointer(b.page(p))),
					"block %d page %d is not in the block's allocation", bi, p)
			}
		}
	}
	together()
	want := snapshotOf(t, w, 0)
	f := w.Freeze()
	var got []byte
	for done := false; !done; {
		got, done = f.AppendNext(got, 100)
		for i := uint64(len(got)) % 97; i < n; i += 97 {
			require.NoError(t, w.Pause(Key{1 + i%7, i}))
			require.NoError(t, w.Resume(Key{1 + i%7, i}))
		}
		w.Advance(w.Now()+1, 0, func(*Fire) {})
	}
	f.Release()
	requireSameState(t, want, got)
	together()
}
