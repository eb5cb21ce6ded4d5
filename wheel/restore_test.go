package wheel

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawSnapshot builds a version 2 snapshot by hand: the header for now
// and count, the records as given (the due order section too, when a
// record is due now), and a correct checksum.
func rawSnapshot(now uint64, count int, records ...[]byte) []byte {
	return rawSnapshotV(2, now, count, records...)
}

// rawSnapshotV is rawSnapshot of format version v.
func rawSnapshotV(v byte, now uint64, count int, records ...[]byte) []byte {
	b := append(snapMagic[:], v)
	b = binary.AppendUvarint(b, now)
	b = binary.AppendUvarint(b, uint64(count))
	for _, r := range records {
		b = append(b, r...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// rec builds a record: the flags, then each field as a varint.
func rec(flags byte, fields ...uint64) []byte {
	b := []byte{flags}
	for _, v := range fields {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// TestRestoreRaw: hand-built records restore as documented.
func TestRestoreRaw(t *testing.T) {
	snap := rawSnapshot(100, 4,
		rec(0, 5, 1, 10, 3),                                  // receiver 5, tid 1, due 110, every 3
		rec(recSameRecv|recEveryDelay|recPaused, 2, 7),       // receiver 5, tid 2, paused with 7 left
		rec(recEveryDelay|recRepeat|recFired, 6, 1, 4, 3, 2), // receiver 6: repeat 3, fired 2
		append(rec(recData, 0, 9, 0, 1, 2), 'h', 'i'),        // receiver 0, tid 9, due now, every 1
		[]byte{0}, // the due order: the one due timer
	)
	w, err := Restore(Config{}, snap)
	require.NoError(t, err)
	requireSameState(t, snap, snapshotOf(t, w, 0))
	assert.Equal(t, uint64(100), w.Now())
	assert.Equal(t, 4, w.Len())
	assert.Equal(t, uint64(2), w.DataBytes())
	in, err := w.Get(Key{5, 2})
	require.NoError(t, err)
	assert.Equal(t, Info{Key: Key{5, 2}, Due: 107, Remaining: 7, Every: 7, Paused: true}, in)
	in, _ = w.Get(Key{6, 1})
	assert.Equal(t, Info{Key: Key{6, 1}, Due: 104, Remaining: 4, Every: 4, Fired: 2, Repeat: 3}, in)
	tick, ok := w.NextEvent()
	assert.True(t, ok)
	assert.Equal(t, uint64(100), tick, "a timer is due now")
	fires := collect(w, 104)
	require.Len(t, fires, 6)
	assert.Equal(t, Fire{Key: Key{0, 9}, Tick: 100, Fired: 1, Data: []byte("hi")}, fires[0])
	assert.Equal(t, Fire{Key: Key{0, 9}, Tick: 101, Fired: 2, Data: []byte("hi")}, fires[1])
	// On tick 104, {6 1} (its last firing) comes before {0 9}, added after it.
	assert.Equal(t, Fire{Key: Key{6, 1}, Tick: 104, Fired: 3, Repeat: 3, Last: true}, fires[4])
	assert.Equal(t, Key{0, 9}, fires[5].Key)
}

// TestRestoreErrors: invalid input returns an error wrapping the right
// sentinel, and the Restorer stays failed.
func TestRestoreErrors(t *testing.T) {
	good := rec(0, 5, 1, 10, 3)
	badSum := rawSnapshot(1, 1, good)
	badSum[len(badSum)-1] ^= 1
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrSnapshot},
		{"magic", []byte("TWSX\x01\x00\x00"), ErrSnapshot},
		{"short magic", []byte("TX"), ErrSnapshot},
		{"version", []byte("TWSN\x07\x00\x00"), ErrSnapshotVersion},
		{"version 0", []byte("TWSN\x00\x00\x00"), ErrSnapshotVersion},
		{"due order missing", rawSnapshot(0, 1, rec(0, 5, 1, 0, 3)), ErrSnapshot},
		{"due order out of range", rawSnapshot(0, 2, rec(0, 5, 1, 0, 3), rec(recSameRecv, 2, 0, 3), []byte{0, 2}), ErrSnapshot},
		{"due order repeated", rawSnapshot(0, 2, rec(0, 5, 1, 0, 3), rec(recSameRecv, 2, 0, 3), []byte{1, 1}), ErrSnapshot},
		{"due order too long", rawSnapshot(0, 1, rec(0, 5, 1, 0, 3), []byte{0, 0}), ErrSnapshot},
		{"due order lateness missing", rawSnapshotV(4, 0, 1, rec(recFirst, 5, 1, zz(0), 0, 3), []byte{0}), ErrSnapshot},
		{"due before tick 0", rawSnapshotV(4, 3, 1, rec(recFirst, 5, 1, zz(0), 0, 3), []byte{0, 4}), ErrSnapshot},
		{"count", rawSnapshot(0, maxNodes), ErrFull},
		{"records missing", rawSnapshot(0, 2, good), ErrSnapshot},
		{"flags", rawSnapshot(0, 1, rec(0x40, 5, 1, 10, 3)), ErrSnapshot},
		{"varint not shortest", rawSnapshot(0, 1, []byte{0, 5, 0x81, 0x00, 10, 3}), ErrSnapshot},
		{"varint overflow", rawSnapshot(0, 1, append([]byte{0, 5}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 10, 3)), ErrSnapshot},
		{"receiver same as previous", rawSnapshot(0, 1, rec(0, 0, 1, 10, 3)), ErrSnapshot},
		{"receiver repeated", rawSnapshot(0, 2, good, rec(0, 5, 2, 10, 3)), ErrSnapshot},
		{"every written equal to delay", rawSnapshot(0, 1, rec(0, 5, 1, 10, 10)), ErrSnapshot},
		{"every 0", rawSnapshot(0, 1, rec(0, 5, 1, 10, 0)), ErrSnapshot},
		{"every 0 by delay", rawSnapshot(0, 1, rec(recEveryDelay, 5, 1, 0)), ErrSnapshot},
		{"repeat 0", rawSnapshot(0, 1, rec(recRepeat, 5, 1, 10, 3, 0)), ErrSnapshot},
		{"repeat too big", rawSnapshot(0, 1, rec(recRepeat, 5, 1, 10, 3, 1<<32)), ErrSnapshot},
		{"fired 0", rawSnapshot(0, 1, rec(recFired, 5, 1, 10, 3, 0)), ErrSnapshot},
		{"fired at repeat", rawSnapshot(0, 1, rec(recRepeat|recFired, 5, 1, 10, 3, 4, 4)), ErrSnapshot},
		{"data empty", rawSnapshot(0, 1, rec(recData, 5, 1, 10, 3, 0)), ErrSnapshot},
		{"data too long", rawSnapshot(0, 1, rec(recData, 5, 1, 10, 3, 1<<40)), ErrSnapshot},
		{"data cut", rawSnapshot(0, 1, append(rec(recData, 5, 1, 10, 3, 3), 'a')), ErrSnapshot},
		{"due past 2^64", rawSnapshot(math.MaxUint64-5, 1, rec(0, 5, 1, 6, 3)), ErrSnapshot},
		{"duplicate key", rawSnapshot(0, 2, good, rec(recSameRecv, 1, 20, 3)), ErrSnapshot},
		{"checksum", badSum, ErrSnapshot},
		{"no checksum", rawSnapshot(0, 1, good)[:11], ErrSnapshot},
		{"trailing data", append(rawSnapshot(0, 1, good), 0), ErrSnapshot},
	} {
		w, err := Restore(Config{}, c.in)
		assert.Nil(t, w, c.name)
		assert.ErrorIs(t, err, c.want, c.name)
	}
	// A paused timer may have more ticks left than there are before 2^64.
	_, err := Restore(Config{}, rawSnapshot(math.MaxUint64-5, 1, rec(recPaused, 5, 1, 6, 3)))
	assert.NoError(t, err)

	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write([]byte("TWSX"))
	require.ErrorIs(t, err, ErrSnapshot)
	_, err2 := r.Write(rawSnapshot(0, 0))
	assert.Equal(t, err, err2, "a failed Restorer stays failed")
	_, err2 = r.Wheel()
	assert.Equal(t, err, err2)
	_, err = NewRestorer(Config{Levels: 17})
	assert.Error(t, err)
}

// TestRestoreTruncated: every proper prefix of a snapshot fails, in one
// Write or byte by byte, and every cut of it into two Writes restores.
func TestRestoreTruncated(t *testing.T) {
	snap := snapshotOf(t, richWheel(t, Config{}), 0)
	for n := range len(snap) {
		_, err := Restore(Config{}, snap[:n])
		require.ErrorIs(t, err, ErrSnapshot, "prefix %d", n)
		r, _ := NewRestorer(Config{})
		for i := range n {
			_, err = r.Write(snap[i : i+1])
			require.NoError(t, err, "prefix %d byte %d", n, i)
		}
		_, err = r.Wheel()
		require.ErrorIs(t, err, ErrSnapshot)

		r, _ = NewRestorer(Config{})
		_, err = r.Write(snap[:n])
		require.NoError(t, err)
		_, err = r.Write(snap[n:])
		require.NoError(t, err)
		w, err := r.Wheel()
		require.NoError(t, err, "cut at %d", n)
		require.Equal(t, snap, snapshotOf(t, w, 0))
		w2, err := r.Wheel()
		require.NoError(t, err)
		require.Same(t, w, w2)
	}
}

// TestRestoreCorrupt: flipping any bit of a snapshot makes it fail (the
// checksum, if nothing else, catches it), never panic.
func TestRestoreCorrupt(t *testing.T) {
	snap := snapshotOf(t, richWheel(t, Config{}), 0)
	for i := range len(snap) * 8 {
		in := append([]byte(nil), snap...)
		in[i/8] ^= 1 << (i % 8)
		_, err := Restore(Config{Levels: 2, Slots: 4}, in)
		require.Error(t, err, "bit %d", i)
	}
}

// FuzzRestore: any input either fails with a snapshot error or restores a
// wheel whose snapshot is the input itself (the format is canonical), the
// same in one Write or two. The seeds run in go test.
func FuzzRestore(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i, cfg := range []Config{{}, {Levels: 2, Slots: 4}} {
		snap := snapshotOf(f, richWheel(f, cfg), 0)
		f.Add(snap, uint16(len(snap)/2), uint8(i))
		cut := append([]byte(nil), snap...)
		cut[10+rng.IntN(len(snap)-10)] ^= 0x10
		f.Add(cut, uint16(3), uint8(i))
	}
	f.Add(rawSnapshot(0, 0), uint16(0), uint8(0))
	f.Add(rawSnapshot(math.MaxUint64, 2, rec(recEveryDelay|recPaused, 1, 1, 5), append(rec(recData|recSameRecv, 2, 0, 7, 1), 'x')), uint16(9), uint8(1))
	f.Add(rawSnapshot(7, 2, rec(recRepeat|recFired, 1, 1, 5, 2, 9, 8), rec(recSameRecv, 1, 0, 1)), uint16(14), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, geom uint8) {
		cfg := modelGeometries[int(geom)%len(modelGeometries)]
		w, err := Restore(cfg, data)
		r, _ := NewRestorer(cfg)
		k := int(cut) % (len(data) + 1)
		_, err2 := r.Write(data[:k])
		if err2 == nil {
			_, err2 = r.Write(data[k:])
		}
		w2, err3 := r.Wheel()
		if err2 == nil {
			err2 = err3
		}
		w3, err4 := restoreBuilding(cfg, data, nil) // the index built on another goroutine
		if (err == nil) != (err4 == nil) {
			t.Fatalf("one Write: %v; index built aside: %v", err, err4)
		}
		if err != nil {
			if !errors.Is(err, ErrSnapshot) && !errors.Is(err, ErrSnapshotVersion) && !errors.Is(err, ErrFull) {
				t.Fatalf("unexpected error %v", err)
			}
			if err2 == nil {
				t.Fatalf("one Write: %v; cut at %d: no error", err, k)
			}
			return
		}
		if err2 != nil {
			t.Fatalf("one Write: ok; cut at %d: %v", k, err2)
		}
		if got := dumpState(restoreOf(t, cfg, snapshotOf(t, w, 0), nil)); got != dumpState(w) {
			t.Fatalf("re-snapshot differs:\n got %s\nwant %s", got, dumpState(w))
		}
		requireSameWheels(t, w, w2, receiversOf(w))
		requireSameWheels(t, w, w3, receiversOf(w))
		if dumpState(w3) != dumpState(w) || !reflect.DeepEqual(w3.index.table, w.index.table) {
			t.Fatalf("index built aside: another wheel")
		}
		w.Advance(w.Now()+1000, 500, nil)
	})
}

// receiversOf returns the receivers of w's timers, from its receiver table.
func receiversOf(w *Wheel) []uint64 {
	var rs []uint64
	for _, e := range w.recv.table {
		if e.count != 0 {
			rs = append(rs, e.key)
		}
	}
	return rs
}

// TestRestoreDueOrder: the due order section decides the order in which
// the timers due now fire after a restore; a version 1 snapshot, which has
// none, fires them in add order.
func TestRestoreDueOrder(t *testing.T) {
	recs := [][]byte{rec(0, 5, 1, 0, 3), rec(recSameRecv, 2, 0, 3), rec(0, 6, 1, 0, 3)}
	keys := func(w *Wheel) (ks []Key) {
		for _, f := range collect(w, w.Now()) {
			ks = append(ks, f.Key)
		}
		return ks
	}
	snap := rawSnapshot(50, 3, recs[0], recs[1], recs[2], []byte{2, 0, 1})
	w, err := Restore(Config{}, snap)
	require.NoError(t, err)
	requireSameState(t, snap, snapshotOf(t, w, 0))
	assert.Equal(t, []Key{{6, 1}, {5, 1}, {5, 2}}, keys(w))

	// Version 4: each due timer fires with the tick it was due at, in the
	// order given ({6 1} due 49, then receiver 5's: {5 2} due 40, {5 1}
	// due 48), and is re-armed from it: {5 2} every 3 is due again at 43,
	// before Now, so it joins its receiver's queue before {5 1}, and at 46
	// too, then at 49 after it; the rest are due after 50. The records are
	// version 3's (seq 0, 1, 2: add order as above).
	snap = rawSnapshotV(4, 50, 3, rec(recFirst, 5, 1, zz(0), 0, 3), rec(recSameRecv, 2, zz(1), 0, 3),
		rec(0, 6, 1, zz(1), 0, 3), []byte{2, 1, 1, 10, 0, 2})
	w, err = Restore(Config{}, snap)
	require.NoError(t, err)
	requireSameState(t, snap, snapshotOf(t, w, 0))
	in, err := w.Get(Key{5, 2})
	require.NoError(t, err)
	assert.Equal(t, Info{Key: Key{5, 2}, Due: 40, Every: 3}, in)
	var ks []Key
	var ticks []uint64
	w.Advance(50, 0, func(f *Fire) { ks, ticks = append(ks, f.Key), append(ticks, f.Tick) })
	assert.Equal(t, []Key{{6, 1}, {5, 2}, {5, 2}, {5, 2}, {5, 1}, {5, 2}}, ks)
	assert.Equal(t, []uint64{49, 40, 43, 46, 48, 49}, ticks)

	w, err = Restore(Config{}, rawSnapshotV(1, 50, 3, recs...))
	require.NoError(t, err)
	assert.Equal(t, []Key{{5, 1}, {5, 2}, {6, 1}}, keys(w))
}

// zz is a seq delta as version 3 writes it.
func zz(d int64) uint64 { return zigzag(d) }

// TestRestoreV3Raw: a version 3 snapshot's records come in any order, in
// runs; the restored wheel orders receivers' lists, same-tick firings and
// the due timers by seq, and adds after the highest seq.
func TestRestoreV3Raw(t *testing.T) {
	snap := rawSnapshotV(3, 100, 4,
		rec(recFirst|recEveryDelay, 5, 2, zz(7), 10),  // receiver 5, tid 2, seq 7, due 110
		rec(recSameRecv|recEveryDelay, 1, zz(-4), 10), // receiver 5, tid 1, seq 3, due 110
		rec(recFirst|recRepeat, 6, 1, zz(5), 0, 1, 1), // receiver 6, tid 1, seq 5, due now
		rec(recRepeat, 7, 1, zz(-5), 0, 1, 1),         // receiver 7, tid 1, seq 0, due now
		[]byte{1, 0},                                  // the due order: seq 5 (second by seq) first
	)
	w, err := Restore(Config{}, snap)
	require.NoError(t, err)
	assert.Equal(t, uint32(8), w.seq, "the next add comes after seq 7")
	var tids []uint64
	for _, in := range w.List(5, nil) {
		tids = append(tids, in.Tid)
	}
	assert.Equal(t, []uint64{1, 2}, tids, "oldest (lowest seq) first")
	require.NoError(t, w.Add(Key{5, 3}, Spec{At: 110}))
	var got []Key
	for _, f := range collect(w, 110) {
		got = append(got, f.Key)
	}
	assert.Equal(t, []Key{{6, 1}, {7, 1}, {5, 1}, {5, 2}, {5, 3}}, got)

	// Runs reset the previous receiver and seq; receiver 0 is then implied.
	w, err = Restore(Config{}, rawSnapshotV(3, 0, 2,
		rec(recFirst|recSameRecv|recEveryDelay, 1, zz(4), 10),
		rec(recFirst|recSameRecv|recEveryDelay, 2, zz(3), 10)))
	require.NoError(t, err)
	assert.Equal(t, []Info{{Key: Key{0, 2}, Due: 10, Remaining: 10, Every: 10}, {Key: Key{0, 1}, Due: 10, Remaining: 10, Every: 10}}, w.List(0, nil))

	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"seq repeated in a receiver", rawSnapshotV(3, 0, 2, rec(recFirst|recEveryDelay, 5, 1, zz(3), 10), rec(recSameRecv|recEveryDelay, 2, zz(0), 10))},
		{"seq past 2^31-1", rawSnapshotV(3, 0, 1, rec(recFirst|recEveryDelay, 5, 1, zz(1<<31), 10))},
		{"seq below 0", rawSnapshotV(3, 0, 2, rec(recFirst|recEveryDelay, 5, 1, zz(1), 10), rec(recEveryDelay, 6, 1, zz(-2), 10))},
		{"seq missing", rawSnapshotV(3, 0, 1, rec(recFirst|recEveryDelay, 5, 1))},
		{"receiver same as the previous", rawSnapshotV(3, 0, 2, rec(recFirst|recEveryDelay, 5, 1, zz(1), 10), rec(recEveryDelay, 5, 2, zz(1), 10))},
		{"due seq repeated", rawSnapshotV(3, 0, 2, rec(recFirst, 5, 1, zz(1), 0, 3), rec(recFirst, 6, 1, zz(1), 0, 3), []byte{0, 1})},
	} {
		w, err := Restore(Config{}, c.in)
		assert.Nil(t, w, c.name)
		assert.ErrorIs(t, err, ErrSnapshot, c.name)
	}
}

// TestRestoreV5SeqNext: version 5 leaves out a seq that is the previous
// record's plus 1 (recSeqNext); the same timers written as version 4,
// every seq delta written, restore to the same wheel, which is how a
// server reads a snapshot the previous release wrote. A written delta of
// +1 is not canonical in version 5.
func TestRestoreV5SeqNext(t *testing.T) {
	v4 := rawSnapshotV(4, 100, 4,
		rec(recFirst|recEveryDelay, 5, 1, zz(3), 10),  // receiver 5, tid 1, seq 3
		rec(recSameRecv|recEveryDelay, 2, zz(1), 10),  // tid 2, seq 4
		rec(recEveryDelay, 6, 1, zz(1), 10),           // receiver 6, tid 1, seq 5
		rec(recSameRecv|recEveryDelay, 2, zz(-5), 10), // tid 2, seq 0
		[]byte{})
	v5 := rawSnapshotV(5, 100, 4,
		rec(recFirst|recEveryDelay, 5, 1, zz(3), 10),
		rec(recSameRecv|recEveryDelay|recSeqNext, 2, 10),
		rec(recEveryDelay|recSeqNext, 6, 1, 10),
		rec(recSameRecv|recEveryDelay, 2, zz(-5), 10),
		[]byte{})
	w4, err := Restore(Config{}, v4)
	require.NoError(t, err)
	w5, err := Restore(Config{}, v5)
	require.NoError(t, err)
	requireSameWheels(t, w4, w5, []uint64{5, 6})
	assert.Equal(t, dumpState(w4), dumpState(w5))
	assert.Equal(t, uint32(6), w5.seq, "the next add comes after seq 5")
	var tids []uint64
	for _, in := range w5.List(6, nil) {
		tids = append(tids, in.Tid)
	}
	assert.Equal(t, []uint64{2, 1}, tids, "oldest (lowest seq) first")
	// A wheel re-snapshotted writes version 5, the seq left out where it
	// follows on.
	snap := snapshotOf(t, w5, 0)
	assert.Equal(t, byte(SnapshotVersion), snap[len(snapMagic)])
	requireSameState(t, v4, snap)
	assert.Equal(t, collect(w4, 130), collect(w5, 130))

	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"seq +1 written", rawSnapshotV(5, 0, 2, rec(recFirst|recEveryDelay, 5, 1, zz(3), 10), rec(recSameRecv|recEveryDelay, 2, zz(1), 10))},
		{"recSeqNext in version 4", rawSnapshotV(4, 0, 2, rec(recFirst|recEveryDelay, 5, 1, zz(3), 10), rec(recSameRecv|recEveryDelay|recSeqNext, 2, 10))},
		{"recSeqNext past 2^31-1", rawSnapshotV(5, 0, 2, rec(recFirst|recEveryDelay, 5, 1, zz(1<<31-1), 10), rec(recSameRecv|recEveryDelay|recSeqNext, 2, 10))},
	} {
		w, err := Restore(Config{}, c.in)
		assert.Nil(t, w, c.name)
		assert.ErrorIs(t, err, ErrSnapshot, c.name)
	}
}

// TestSnapshotSeqNextBytes: timers added one after another cost no seq
// byte in their records (version 5): a snapshot of 1000 timers of 1000
// receivers, each record flags, receiver (new: 0 and the receiver, of one
// byte or two; version 6), tid and delay, is 1000 bytes smaller than with
// the seq written.
func TestSnapshotSeqNextBytes(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for i := range 1000 {
		require.NoError(t, w.Add(Key{uint64(i), 1}, Spec{At: 100}))
	}
	snap := snapshotOf(t, w, 0)
	// header 4+1+1+2, records 1000 × (flags 1 + receiver 1+(1–2) + tid 1 + delay 1), due 1, crc 4
	want := 8 + 1000*5 + (1000 - 128) + 1 + 4
	assert.Equal(t, want, len(snap))
}
