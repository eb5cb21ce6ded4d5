package wheel

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// restoreBuilding restores snapshot b written in pieces (random ones with
// rng, else of at most 64 bytes), with the index built by an IndexBuilder
// on another goroutine from the marks of the pieces written, and the
// nodes' memory populated by a Prefaulter on a third, as a caller with two
// cores does (session.restoreWheel); a partitioned builder's regions
// (restorepart.go) are then filled in two parts on two goroutines.
func restoreBuilding(cfg Config, b []byte, rng *rand.Rand) (*Wheel, error) {
	r, err := NewRestorer(cfg)
	if err != nil {
		return nil, err
	}
	var marks, pfMarks chan RestoreMark
	done, pfDone := make(chan bool, 1), make(chan bool, 1)
	var werr error
	var ib *IndexBuilder
	for rest := b; len(rest) > 0 && werr == nil; {
		k := min(len(rest), 64)
		if rng != nil {
			k = min(len(rest), 1+rng.IntN(200))
		}
		_, werr = r.Write(rest[:k])
		rest = rest[k:]
		if marks == nil {
			if ib = r.IndexBuilder(); ib != nil {
				marks = make(chan RestoreMark, 4)
				go func() { // as session.buildIndex: Tidy while no mark waits
					ok := true
					for {
						var m RestoreMark
						var more bool
						select {
						case m, more = <-marks:
						default:
							if ib.Tidy() {
								continue
							}
							m, more = <-marks
						}
						if !more {
							break
						}
						ok = ok && ib.Add(m)
					}
					done <- ok
				}()
				if pf := r.Prefaulter(); pf != nil {
					pfMarks = make(chan RestoreMark, 4)
					go func() {
						for m := range pfMarks {
							pf.Upto(m)
						}
						pfDone <- true
					}()
				}
			}
		}
		if marks != nil && werr == nil {
			marks <- r.Ready()
			if pfMarks != nil {
				pfMarks <- r.Ready()
			}
		}
	}
	if marks != nil {
		close(marks)
		<-done
		fillParts(ib.Parts(2))
	}
	if pfMarks != nil {
		close(pfMarks)
		<-pfDone
	}
	if werr != nil {
		return nil, werr
	}
	return r.Wheel()
}

// fillParts fills parts, each on a goroutine of its own, as
// session.restoreWheel does, and returns once all are filled.
func fillParts(parts []*IndexPart) {
	done := make(chan struct{}, len(parts))
	for _, p := range parts {
		go func() {
			p.Fill()
			done <- struct{}{}
		}()
	}
	for range parts {
		<-done
	}
}

// TestRestoreIndexBuilder: a wheel whose index was built on another
// goroutine while it was decoded is the one Restore returns, down to the
// index table, for the current format and an old one (records without
// seqs).
func TestRestoreIndexBuilder(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	w := newWheel(t, 500, Config{})
	for i := range 20_000 {
		k := Key{uint64(rng.IntN(300)), uint64(i)}
		require.NoError(t, w.Add(k, Spec{After: 1 + rng.Uint64N(100_000)}))
		if i%3 == 0 { // holes in the slab, refilled by later adds
			_ = w.Cancel(Key{k.Receiver, uint64(rng.IntN(i + 1))})
		}
	}
	w.Advance(w.Now()+50_000, 1000, nil)
	snaps := map[string][]byte{
		"current": snapshotOf(t, w, 1000),
		"v2":      rawSnapshot(7, 3, rec(recEveryDelay, 1, 1, 5), rec(recSameRecv|recEveryDelay, 2, 9), rec(recEveryDelay, 4, 1, 3)),
	}
	for name, snap := range snaps {
		want, err := Restore(Config{}, snap)
		require.NoError(t, err, name)
		got, err := restoreBuilding(Config{}, snap, rng)
		require.NoError(t, err, name)
		require.Equal(t, want.index.table, got.index.table, name)
		require.Equal(t, [3]uint64{want.index.mask, uint64(want.index.count), 0},
			[3]uint64{got.index.mask, uint64(got.index.count), uint64(got.index.tombs)}, name)
		require.Equal(t, dumpState(want), dumpState(got), name)
		requireSameWheels(t, want, got, receiversOf(want))
	}
}

// TestRestoreIndexBuilderDuplicate: two timers with one key are refused
// when the builder meets them on its goroutine, as when Wheel does.
func TestRestoreIndexBuilderDuplicate(t *testing.T) {
	recs := [][]byte{rec(recEveryDelay, 1, 1, 5)}
	for i := range 200 {
		recs = append(recs, rec(recEveryDelay|recSameRecv, uint64(i+2), 5))
	}
	recs = append(recs, rec(recEveryDelay, 3, 1, 5), rec(recEveryDelay, 1, 1, 6)) // (1, 1) again
	snap := rawSnapshot(7, len(recs), recs...)
	_, err := Restore(Config{}, snap)
	require.ErrorIs(t, err, ErrSnapshot)
	_, err = restoreBuilding(Config{}, snap, nil)
	require.ErrorIs(t, err, ErrSnapshot)
	require.ErrorContains(t, err, "same key")
}

// TestRestoreHeaderCountCostsNothing: a header announcing far more timers
// than follow makes the Restorer allocate for the records there are, not
// for the count (2^27 timers would be 512 MiB of index table and 7 GiB of
// nodes), so that a corrupt snapshot fails with an error, not an
// out-of-memory crash.
func TestRestoreHeaderCountCostsNothing(t *testing.T) {
	snap := rawSnapshot(7, 1<<27, rec(recEveryDelay, 1, 1, 5))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := restoreBuilding(Config{}, snap, nil)
	require.ErrorIs(t, err, ErrSnapshot)
	require.ErrorContains(t, err, "records missing")
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated")
}

// TestGetUvarint: getUvarint, with its fast path for up to 8 bytes (read
// when 8 bytes follow), reads what binary.Uvarint reads, and refuses a
// varint that is not in its shortest form (a last byte of 0) or is cut,
// whatever follows it: varints of every length, each followed by nothing,
// by too few bytes for the fast path, and by enough.
func TestGetUvarint(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	var cases [][]byte
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<35 + 3,
		1<<42 - 1, 1 << 42, 1<<49 - 1, 1 << 49, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, 1<<64 - 1} {
		cases = append(cases, binary.AppendUvarint(nil, v))
	}
	for range 2000 {
		cases = append(cases, binary.AppendUvarint(nil, rng.Uint64()>>rng.IntN(64)))
	}
	cases = append(cases, []byte{0x80, 0}, []byte{0xff, 0x80, 0}, []byte{0x81, 0x80, 0x80, 0}, []byte{0x80, 0x80, 0x80, 0x80, 0},
		[]byte{0x80}, []byte{0xff, 0xff, 0xff}, []byte{0x80, 0x80, 0x80, 0x80},
		[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, []byte{0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, // not shortest
		[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, // overflow
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}) // cut
	for _, c := range cases {
		for _, tail := range [][]byte{nil, {0x05}, {0x80, 0x80, 0x80, 0x80}, {0, 1, 2, 3, 4, 5, 6, 7}, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}} {
			b := append(append([]byte{0x99}, c...), tail...)
			v, off := getUvarint(b, 1)
			want, k := binary.Uvarint(b[1:])
			switch {
			case k == 0:
				require.Equal(t, varShort, off, "% x", b)
			case k < 0 || b[k] == 0 && k > 1:
				require.Equal(t, varBad, off, "% x", b)
			default:
				require.Equal(t, [2]uint64{want, uint64(1 + k)}, [2]uint64{v, uint64(off)}, "% x", b)
			}
		}
	}
}

// TestRestoreIndexBuilderReadsFewNodes: building the index of 200k timers
// reads the node of an entry to compare keys only when 12 bits of the
// hashes match (IndexBuilder.ext), about 1 insertion in 4096 per entry
// passed, where the entry's 4-bit tag alone matched 1 in 16: each such
// read is a cache miss in a large slab, and they were a third of the
// builder's time at 10M timers. The index is the one Add would make.
func TestRestoreIndexBuilderReadsFewNodes(t *testing.T) {
	const n = 200_000
	w := newWheel(t, 0, Config{})
	for i := range uint64(n) {
		require.NoError(t, w.Add(Key{i % 1000, i}, Spec{After: 1 + i%5000}))
	}
	snap := snapshotOf(t, w, 0)
	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write(snap)
	require.NoError(t, err)
	ib := r.IndexBuilder()
	got, err := r.Wheel()
	require.NoError(t, err)
	require.Less(t, ib.reads, uint32(n/1000), "nodes read to compare keys")
	requireSameWheels(t, w, got, receiversOf(w))
}
