package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// A turn's record says how many timers it fired (RecordFirings), what its
// replay redoes: the server counts a log's replay cost by it without
// replaying (snapshot.every_firings, the recovery's ETA). A turn that
// fired nothing says 0, and the firings of a replay before recording was
// turned on are no record's. The record replays to the same state.
func TestRecordFirings(t *testing.T) {
	rc := newReplayCase(t, Limits{})
	s := rc.session(0) // receiver 1, tid 1 every tick
	for tid := uint64(2); tid <= 5; tid++ {
		rc.apply(s, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 1})
	}
	rc.c.Flush(discardOut, nil)
	adds := takeRecord(rc.c)
	require.Zero(t, RecordFirings(adds), "a turn of adds fires nothing")

	rc.c.Advance(start+100, 0) // 5 timers every tick, 100 ticks
	rc.c.Flush(discardOut, nil)
	fired := takeRecord(rc.c)
	require.Equal(t, uint64(500), RecordFirings(fired))

	// The same two records replayed: the same state, and the firings again.
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	c := New(rc.cfg, rc.limits, w, nil, nil)
	require.NoError(t, c.Replay(adds))
	before := c.FiredTotal()
	require.NoError(t, c.Replay(fired))
	require.Equal(t, uint64(500), c.FiredTotal()-before)
	require.Equal(t, "", diffLines(dumpState(rc.c, []uint64{1}, false), dumpState(c, []uint64{1}, false)))

	// Recording turned on after a replay: its firings are not the next record's.
	c.Record(true)
	c.Advance(start+101, 0)
	require.Equal(t, uint64(5), RecordFirings(takeRecord(c)))
	require.Zero(t, RecordFirings(nil))
}
