package wheel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recvIDWheel returns a wheel of per timers for each of recvs receivers
// base+1.., added round-robin (as the scale scenario adds them), some of
// them repeating, paused or with data.
func recvIDWheel(t *testing.T, base uint64, recvs, per int) *Wheel {
	w := newWheel(t, 1000, Config{})
	for i := range recvs * per {
		s := Spec{After: 1 + uint64(i*7919%50_000), Repeat: uint32(i % 3)}
		if i%7 == 0 {
			s.Data = []byte("payload")
		}
		k := Key{base + 1 + uint64(i%recvs), uint64(i / recvs)}
		require.NoError(t, w.Add(k, s))
		if i%11 == 0 {
			require.NoError(t, w.Pause(k))
		}
	}
	return w
}

// TestSnapshotReceiverIDs: a version 6 snapshot writes a receiver whole
// once, and by its id after that. 1000 timers of 10 receivers from 2^40
// (6-byte varints) take 50 bytes more than the same timers of receivers
// 1 to 10 (1-byte varints): 5 bytes for each receiver's first record,
// where version 5 wrote the receiver in each of the 1000. Both restore to
// the wheels they were taken from.
func TestSnapshotReceiverIDs(t *testing.T) {
	small, big := recvIDWheel(t, 0, 10, 100), recvIDWheel(t, 1<<40, 10, 100)
	snapSmall, snapBig := snapshotOf(t, small, 0), snapshotOf(t, big, 0)
	assert.Equal(t, len(snapSmall)+10*5, len(snapBig))
	for _, c := range []struct {
		w    *Wheel
		snap []byte
	}{{small, snapSmall}, {big, snapBig}} {
		got, err := Restore(Config{}, c.snap)
		require.NoError(t, err)
		requireSameWheels(t, c.w, got, receiversOf(c.w))
	}
}

// TestSnapshotReceiverIDsCapped: past recvIDMax ids, a receiver met first
// is written whole in each of its records, the builder finding its list
// in the receiver table; the wheel restores the same, whether the index
// is built as the records are read or at the end.
func TestSnapshotReceiverIDsCapped(t *testing.T) {
	defer func(m int) { recvIDMax = m }(recvIDMax)
	recvIDMax = 4
	small, big := recvIDWheel(t, 0, 10, 30), recvIDWheel(t, 1<<40, 10, 30)
	snapSmall, snapBig := snapshotOf(t, small, 0), snapshotOf(t, big, 0)
	assert.Equal(t, len(snapSmall)+4*5+6*30*5, len(snapBig), "4 receivers by id, 6 whole each time")
	got, err := Restore(Config{}, snapBig)
	require.NoError(t, err)
	requireSameWheels(t, big, got, receiversOf(big))

	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	ib := (*IndexBuilder)(nil)
	for p := snapBig; len(p) > 0; p = p[min(len(p), 97):] {
		_, err := r.Write(p[:min(len(p), 97)])
		require.NoError(t, err)
		if ib == nil {
			ib = r.IndexBuilder()
		}
		if ib != nil {
			require.True(t, ib.Add(r.Ready()))
		}
	}
	got, err = r.Wheel()
	require.NoError(t, err)
	requireSameWheels(t, big, got, receiversOf(big))

	// A receiver with an id written whole again past the cap: its timers
	// would be in two lists.
	recvIDMax = 1
	bad := rawSnapshotV(6, 0, 3,
		rec(recFirst|recEveryDelay, 0, 5, 1, zz(0), 10), // receiver 5: id 0
		rec(recEveryDelay|recSeqNext, 0, 6, 1, 10),      // receiver 6: no id
		rec(recEveryDelay|recSeqNext, 0, 5, 2, 10))      // receiver 5 whole
	_, err = Restore(Config{}, bad)
	require.ErrorIs(t, err, ErrSnapshot)
	require.ErrorContains(t, err, "receiver 5 has two ids")
}

// TestRestoreV6Receivers: hand-built version 6 records: a receiver whole
// (0 first) and by id restore as documented, receiver 0 included; an id
// not given, the previous receiver by id, recSameRecv on a run's first
// record and a receiver given two ids are refused.
func TestRestoreV6Receivers(t *testing.T) {
	snap := rawSnapshotV(6, 100, 5,
		rec(recFirst|recEveryDelay, 0, 0, 1, zz(0), 10),  // receiver 0 whole: id 0
		rec(recEveryDelay|recSeqNext, 0, 1<<40, 1, 10),   // receiver 2^40 whole: id 1
		rec(recEveryDelay|recSeqNext, 1, 2, 20),          // id 0: receiver 0, tid 2
		rec(recSameRecv|recEveryDelay|recSeqNext, 3, 30), // receiver 0, tid 3
		rec(recEveryDelay|recSeqNext, 2, 2, 40),          // id 1: receiver 2^40, tid 2
		[]byte{})
	w, err := Restore(Config{}, snap)
	require.NoError(t, err)
	assert.Equal(t, 5, w.Len())
	tids := func(r uint64) (a []uint64) {
		for _, in := range w.List(r, nil) {
			a = append(a, in.Tid)
		}
		return a
	}
	assert.Equal(t, []uint64{1, 2, 3}, tids(0))
	assert.Equal(t, []uint64{1, 2}, tids(1<<40))
	in, err := w.Get(Key{1 << 40, 2})
	require.NoError(t, err)
	assert.Equal(t, uint64(140), in.Due)

	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"id not given", rawSnapshotV(6, 0, 1, rec(recFirst|recEveryDelay, 1, 1, zz(0), 10))},
		{"previous receiver by id", rawSnapshotV(6, 0, 2, rec(recFirst|recEveryDelay, 0, 5, 1, zz(0), 10), rec(recEveryDelay|recSeqNext, 1, 2, 10))},
		{"recSameRecv on a run's first record", rawSnapshotV(6, 0, 1, rec(recFirst|recSameRecv|recEveryDelay, 1, zz(0), 10))},
		{"two ids", rawSnapshotV(6, 0, 3, rec(recFirst|recEveryDelay, 0, 5, 1, zz(0), 10), rec(recEveryDelay|recSeqNext, 0, 6, 1, 10), rec(recEveryDelay|recSeqNext, 0, 5, 2, 10))},
		{"whole id cut", rawSnapshotV(6, 0, 1, rec(recFirst|recEveryDelay, 0))},
	} {
		w, err := Restore(Config{}, c.in)
		assert.Nil(t, w, c.name)
		assert.ErrorIs(t, err, ErrSnapshot, c.name)
	}
}
