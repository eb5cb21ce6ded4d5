package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// With SetReadsWait, a reply that shows the state — a get, a list, stats,
// a change refused because of the state — is reported by TakeRecord like
// a change's, so that a cluster's leader holds it behind the records in
// flight: another session's add not yet committed must not be seen (the
// leader may lose it). Without it, such replies need no record.
func TestReadsWait(t *testing.T) {
	reads := []protocol.Request{
		{Op: protocol.OpGet, Receiver: 1, Tid: 1},
		{Op: protocol.OpList, Receiver: 1},
		{Op: protocol.OpStats},
		{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 100}, // exists
		{Op: protocol.OpCancel, Receiver: 1, Tid: 2},          // not_found
		{Op: protocol.OpPause, Receiver: 1, Tid: 2},           // not_found
	}
	for _, wait := range []bool{false, true} {
		w, err := wheel.New(start, wheel.Config{})
		require.NoError(t, err)
		c := New(Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 100, ServerVersion: "test"},
			Limits{}, w, testLogger(), nil)
		c.Record(true)
		c.SetReadsWait(wait)
		apply := func(s *Session, req protocol.Request) {
			c.Apply(s, protocol.AppendRequest(nil, &req)[4:])
		}
		a, b := c.Open(), c.Open()
		for _, s := range []*Session{a, b} {
			apply(s, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "t", Token: testAdminToken})
		}
		c.TakeRecord()
		apply(a, protocol.Request{ID: 1, Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 100})
		rec, replies := c.TakeRecord()
		require.NotNil(t, rec)
		require.True(t, replies)
		for i, req := range reads {
			req.ID = uint64(10 + i)
			apply(b, req)
			rec, replies := c.TakeRecord()
			require.Nil(t, rec, "%v recorded something", req.Op)
			require.Equal(t, wait, replies, "%v (reads wait: %v)", req.Op, wait)
		}
		apply(b, protocol.Request{ID: 99, Op: protocol.OpPing})
		_, replies = c.TakeRecord()
		require.False(t, replies, "ping shows no timer state")
	}
}
