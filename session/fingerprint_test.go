package session

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestPayloadSumKnownAnswers: the fingerprint of a request's bytes is in
// every snapshot and compared with a retry's in another process, maybe on
// another platform (a replica, a restart after an upgrade), so it must be
// a fixed function: XXH64 with seed 0 (the reference implementation's
// test vectors), the same on 32-bit builds (GOARCH=386 go test -run
// TestPayloadSumKnownAnswers ./session). FNV-1a is kept for entries
// restored from format 12 and older.
func TestPayloadSumKnownAnswers(t *testing.T) {
	assert.Equal(t, uint64(0xef46db3751d8e999), payloadSum(nil), "XXH64 of nothing")
	assert.Equal(t, uint64(0x44bc2cf5ad770999), payloadSum([]byte("abc")))
	// 39 bytes: a 32-byte stripe, then 4 bytes, then 3 one at a time.
	assert.Equal(t, uint64(0xfbcea83c8a378bf1), payloadSum([]byte("Nobody inspects the spammish repetition")))
	add := frame(protocol.Request{Op: protocol.OpAdd, ID: 7, Receiver: 1, Tid: 2, After: 50, Client: 0x0123456789abcdef})
	assert.Equal(t, uint64(0xcbf29ce484222325), payloadSumFNV(nil), "FNV-1a's offset basis")
	assert.Equal(t, uint64(0xaf63dc4c8601ec8c), payloadSumFNV([]byte("a")))
	last := len(add) - 1
	assert.NotEqual(t, payloadSum(add), payloadSum(append(add[:last:last], add[last]+1)), "the last byte counts")
}

// TestRequestIDsFormat12Fingerprints: a format 12 snapshot's remembered
// changes carry FNV-1a fingerprints. After an upgrade, a retry of one of
// them — the same bytes — still gets its first reply (not
// request_id_reused, which comparing it with the new fingerprint would
// give), and other bytes under its id are still request_id_reused; the
// entry keeps its kind through a format 13 snapshot, and a change
// remembered after the upgrade is fingerprinted with XXH64.
func TestRequestIDsFormat12Fingerprints(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	add := frame(protocol.Request{Op: protocol.OpAdd, ID: 5, Receiver: 1, Tid: 1, After: 50, Client: testClient})
	reply := h.rawReplies(s, add)
	v12 := format12(t, h.c, add)

	r, err := Restore(h.c.cfg, v12, nil, nil)
	require.NoError(t, err)
	rs := helloed(r)
	assert.Equal(t, reply, replyTo(r, rs, add), "the retry after the upgrade gets the first reply")
	other := frame(protocol.Request{Op: protocol.OpAdd, ID: 5, Receiver: 1, Tid: 2, After: 50, Client: testClient})
	assert.Equal(t, protocol.CodeRequestIDReused, decodeReply(t, replyTo(r, rs, other)).Code)
	next := frame(protocol.Request{Op: protocol.OpAdd, ID: 6, Receiver: 1, Tid: 3, After: 50, Client: testClient})
	nextReply := replyTo(r, rs, next)
	require.Equal(t, protocol.KindOK, decodeReply(t, nextReply).Kind)
	pos, ok := r.reqIDs.lookup(reqKey{testClient, 6})
	require.True(t, ok)
	assert.Equal(t, payloadSum(next), r.reqIDs.at(pos).sum, "a change remembered after the upgrade: XXH64")
	assert.False(t, r.reqIDs.at(pos).fnv)

	snap := r.Snapshot()
	v13, _ := snap.AppendNext(nil, 0)
	snap.Release()
	require.Equal(t, byte(13), v13[len(snapMagic)])
	again, err := Restore(h.c.cfg, v13, nil, nil)
	require.NoError(t, err)
	as := helloed(again)
	assert.Equal(t, reply, replyTo(again, as, add), "format 13 keeps the entry's FNV-1a")
	assert.Equal(t, nextReply, replyTo(again, as, next))
	assert.Equal(t, protocol.CodeRequestIDReused, decodeReply(t, replyTo(again, as, other)).Code)
	assert.Equal(t, 2, again.Wheel().Len(), "no retry applied")
}

// format12 returns c's snapshot as a format 12 server wrote it: c
// remembers one change, payload, whose entry is written with the FNV-1a
// fingerprint and without format 13's kind byte.
func format12(t *testing.T, c *Core, payload []byte) []byte {
	t.Helper()
	snap := c.Snapshot()
	v13, _ := snap.AppendNext(nil, 0)
	snap.Release()
	var core, tail encoder
	c.appendCore(&core)
	require.Equal(t, core.b, v13[:len(core.b)])
	q := c.reqIDs.copyLive()
	q.append(&tail)
	require.Equal(t, tail.b, core.b[len(core.b)-len(tail.b):], "the memory ends the core section")
	require.Equal(t, 1, q.live)
	en := q.entries[len(q.entries)-1]
	require.Equal(t, payloadSum(payload), en.sum)
	var old encoder // format 12: count, client, id, tick, FNV-1a, reply
	old.int(1)
	old.uv(en.key.client)
	old.uv(en.key.id)
	old.uv(en.tick)
	old.b = binary.LittleEndian.AppendUint64(old.b, payloadSumFNV(payload))
	old.bytes(en.small[:en.n])
	v12 := append([]byte(snapMagic), 12)
	v12 = append(v12, core.b[len(snapMagic)+1:len(core.b)-len(tail.b)]...)
	v12 = append(v12, old.b...)
	return append(v12, v13[len(core.b):]...)
}

// helloed opens a session of c that said hello as admin.
func helloed(c *Core) *Session {
	s := c.Open()
	c.Apply(s, frame(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "b", Token: testAdminToken}))
	s.out = s.out[:0]
	return s
}

// replyTo applies payload from s and returns what it appended to s's
// output.
func replyTo(c *Core, s *Session, payload []byte) []byte {
	at := len(s.out)
	c.Apply(s, payload)
	return append([]byte(nil), s.out[at:]...)
}

// decodeReply decodes the one reply frame in out.
func decodeReply(t *testing.T, out []byte) protocol.Message {
	t.Helper()
	payload, n, err := protocol.SplitFrame(out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, len(out), n, "one frame")
	var m protocol.Message
	require.NoError(t, protocol.DecodeMessage(payload, &m))
	return m
}
