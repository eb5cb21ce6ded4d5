package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel"
)

// piecesTimers is how many timers piecesSnapshot's wheel holds: about 4
// pieces of restorePiece.
const piecesTimers = 120_000

// piecesSnapshot returns the snapshot of a wheel of piecesTimers timers over
// 97 receivers, due over 5,000 ticks: one that restoreWheelFrom writes to
// the Restorer in several pieces.
func piecesSnapshot(t *testing.T) []byte {
	t.Helper()
	w, err := wheel.New(100, wheel.Config{})
	require.NoError(t, err)
	for i := range piecesTimers {
		require.NoError(t, w.Add(wheel.Key{Receiver: uint64(i % 97), Tid: uint64(i)}, wheel.Spec{After: uint64(1 + i%5000)}))
	}
	f := w.Freeze()
	defer f.Release()
	return f.Encode(nil)
}

// TestRestoreWheelIndexAside: restoreWheel, which builds the index on a
// second goroutine when it has two CPUs, restores a wheel of many pieces
// to the same wheel as wheel.Restore, with one CPU or two, and refuses a
// corrupt one (cut in the middle, or with a key twice) with an error,
// leaving no goroutine behind.
func TestRestoreWheelIndexAside(t *testing.T) {
	snap := piecesSnapshot(t)
	require.Greater(t, len(snap), 3*restorePiece)
	want, err := wheel.Restore(wheel.Config{}, snap)
	require.NoError(t, err)
	encode := func(w *wheel.Wheel) []byte {
		f := w.Freeze()
		defer f.Release()
		return f.Encode(nil)
	}
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		got, err := restoreWheel(snap)
		runtime.GOMAXPROCS(prev)
		require.NoError(t, err, "GOMAXPROCS %d", procs)
		require.Equal(t, want.Len(), got.Len())
		require.Equal(t, encode(want), encode(got), "GOMAXPROCS %d", procs)
		in, err := got.Get(wheel.Key{Receiver: 5, Tid: 5})
		require.NoError(t, err)
		require.Equal(t, uint64(6), in.Due-got.Now())
	}
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	_, err = restoreWheel(snap[:len(snap)-restorePiece/2])
	require.ErrorIs(t, err, wheel.ErrSnapshot)
	bad := append([]byte(nil), snap...)
	bad[len(bad)/2] ^= 0x40 // a flipped bit: the checksum fails, or a record does
	_, err = restoreWheel(bad)
	require.ErrorIs(t, err, wheel.ErrSnapshot)
	requireNoIndexBuilder(t)
}

// requireNoIndexBuilder fails t if a goroutine of buildIndex is left, once
// those that closed their done have had a while to end. (Counting all
// goroutines does not do: the runtime starts goroutines of its own, to run
// the cleanups of released Frozens among others.)
func requireNoIndexBuilder(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	n := 0
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		k := runtime.Stack(buf, true)
		n = bytes.Count(buf[:k], []byte("session.buildIndex("))
		if n == 0 || time.Now().After(end) {
			break
		}
	}
	require.Zero(t, n, "index builder goroutines left")
}

// TestRestoreFromStream: RestoreFrom, which reads the snapshot as it
// decodes it, restores the same Core as Restore of the whole bytes,
// whatever the reads return at a time and also when the core section is
// longer than the first read (read again, longer); a snapshot cut short
// is ErrSnapshot, and an error of the reader, in the core section or in
// the wheel's, is returned as it is.
func TestRestoreFromStream(t *testing.T) {
	w, err := wheel.New(100, wheel.Config{})
	require.NoError(t, err)
	const n = 60_000 // about 3.5 pieces of restorePiece
	for i := range n {
		spec := wheel.Spec{After: uint64(1 + i%3000), Repeat: 1 + uint32(i%3)}
		if i%7 == 0 {
			spec.Data = []byte(fmt.Sprintf("payload of timer %d, longer than 16 bytes", i))
		}
		require.NoError(t, w.Add(wheel.Key{Receiver: uint64(i % 50), Tid: uint64(i)}, spec))
	}
	cfg := Config{TickNs: 10_000_000}
	snap := New(cfg, Limits{}, w, testLogger(), nil).Snapshot()
	data, _ := snap.AppendNext(nil, 0)
	snap.Release()
	require.Greater(t, len(data), 2*restorePiece)
	restore := func() *Core {
		c, err := Restore(cfg, data, testLogger(), nil)
		require.NoError(t, err)
		return c
	}
	core := coreSection(restore())
	require.Greater(t, len(core), 32)
	defer func(v int) { coreFirstRead = v }(coreFirstRead)
	for _, first := range []int{coreFirstRead, 16} {
		coreFirstRead = first
		for name, rd := range map[string]func() io.Reader{
			"whole": func() io.Reader { return bytes.NewReader(data) },
			"half":  func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		} {
			got, err := RestoreFrom(cfg, rd(), testLogger(), nil)
			require.NoError(t, err, "%s, first read %d", name, first)
			require.Equal(t, core, coreSection(got), "%s, first read %d", name, first)
			require.Equal(t, encodeWheel(restore().wheel), encodeWheel(got.wheel), "%s, first read %d", name, first)
		}
		_, err := RestoreFrom(cfg, bytes.NewReader(data[:len(data)-restorePiece/2]), testLogger(), nil)
		require.ErrorIs(t, err, ErrSnapshot, "cut, first read %d", first)
		_, err = RestoreFrom(cfg, bytes.NewReader(data[:len(core)/2]), testLogger(), nil)
		require.ErrorIs(t, err, ErrSnapshot, "cut in the core section, first read %d", first)
		boom := errors.New("boom")
		for _, at := range []int{len(core) / 2, len(data) / 2} {
			_, err = RestoreFrom(cfg, io.MultiReader(bytes.NewReader(data[:at]), iotest.ErrReader(boom)), testLogger(), nil)
			require.ErrorIs(t, err, boom, "error at %d, first read %d", at, first)
			require.NotErrorIs(t, err, ErrSnapshot)
		}
	}
	requireNoIndexBuilder(t)
}

// encodeWheel returns w's snapshot: two wheels restored from the same
// snapshot have the same layout, so the same bytes.
func encodeWheel(w *wheel.Wheel) []byte {
	f := w.Freeze()
	defer f.Release()
	return f.Encode(nil)
}

// TestRestoreWheelLogsTimeline: restoreWheelFrom logs the end of each
// goroutine's phase at debug level, the restart's timeline: the records
// decoded and the index builder done before the wheel is built, whose
// record counts its timers; a restore that fails logs no "wheel built".
// At info level it logs nothing.
func TestRestoreWheelLogsTimeline(t *testing.T) {
	snap := piecesSnapshot(t)
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)

	restore := func(b []byte, level slog.Level) ([]string, string, error) {
		var out bytes.Buffer
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level}))
		_, err := restoreWheelFrom(b, nil, log, 0)
		var msgs []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if _, m, ok := strings.Cut(line, `msg="`); ok {
				msgs = append(msgs, m[:strings.IndexByte(m, '"')])
			}
		}
		return msgs, out.String(), err
	}
	msgs, out, err := restore(snap, slog.LevelDebug)
	require.NoError(t, err)
	require.Equal(t, "restore: wheel built", msgs[len(msgs)-1], out)
	require.Contains(t, out, fmt.Sprintf("timers=%d", piecesTimers))
	require.Less(t, slices.Index(msgs, "restore: records decoded"), len(msgs)-1, out)
	require.Less(t, slices.Index(msgs, "restore: index builder done"), len(msgs)-1, out)
	require.GreaterOrEqual(t, slices.Index(msgs, "restore: records decoded"), 0, out)
	require.GreaterOrEqual(t, slices.Index(msgs, "restore: index builder done"), 0, out)

	msgs, out, err = restore(snap[:len(snap)-restorePiece/2], slog.LevelDebug)
	require.ErrorIs(t, err, wheel.ErrSnapshot)
	require.NotContains(t, msgs, "restore: wheel built", out)

	_, out, err = restore(snap, slog.LevelInfo)
	require.NoError(t, err)
	require.Empty(t, out)
	requireNoIndexBuilder(t)
}
