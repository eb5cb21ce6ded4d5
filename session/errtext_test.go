package session

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// TestErrorRepliesPlain: error replies carry no Go package prefixes
// (issue 28: "exists: wheel: timer already exists"), whatever the code:
// the wheel's errors, the decoder's (unknown op, malformed), the read-only
// refusal; a session restored from a snapshot keeps the wording.
func TestErrorRepliesPlain(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	texts := map[string]string{}
	fail := func(name string, req protocol.Request) {
		t.Helper()
		ms := h.do(s, req)
		require.Len(t, ms, 1, name)
		require.Equal(t, protocol.KindError, ms[0].Kind, name)
		texts[name] = ms[0].Text
	}
	h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 5})
	fail("exists", protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 5})
	fail("not found", protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 2})
	fail("overflow", protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 3, After: math.MaxUint64})
	h.do(s, protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})
	fail("paused", protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1})
	fail("not paused", protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 4})
	fail("unknown op", protocol.Request{Op: 99})
	h.c.SetReadOnly("the server cannot write its log (journal: write log/00000001.seg: no space left on device): retry later")
	fail("read-only", protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 5, After: 5})
	h.c.SetReadOnly("")
	assert.Equal(t, "timer already exists", texts["exists"])
	assert.Equal(t, "timer not found", texts["not found"])
	assert.Equal(t, "timer already paused", texts["paused"])
	assert.Equal(t, "unknown op: 99", texts["unknown op"])
	assert.Equal(t, "the server cannot write its log (write log/00000001.seg: no space left on device): retry later", texts["read-only"])
	for name, text := range texts {
		for _, p := range internalPrefixes {
			assert.NotContains(t, text, p, name)
		}
	}

	// A malformed frame, and the connection closes.
	m := h.c.Open()
	h.do(m, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "m", Token: testAdminToken})
	h.apply(m, []byte{0x92, 0x0b, 0xc0}) // [add, nil]: id of the wrong type
	ms := h.take(m)
	require.Len(t, ms, 1)
	assert.Equal(t, protocol.CodeMalformed, ms[0].Code)
	assert.True(t, strings.HasPrefix(ms[0].Text, "malformed message: "), ms[0].Text)

	// Restored from a snapshot, the session words its errors the same.
	c2 := restoreCopy(t, h.c)
	s2 := c2.sessions[s.id]
	require.NotNil(t, s2)
	c2.Apply(s2, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: 9, Receiver: 1, Tid: 1, After: 5})[4:])
	payload, _, err := protocol.SplitFrame(s2.out, 1<<20)
	require.NoError(t, err)
	var reply protocol.Message
	require.NoError(t, protocol.DecodeMessage(payload, &reply))
	assert.Equal(t, "timer already exists", reply.Text)
}

func TestPlainText(t *testing.T) {
	for in, want := range map[string]string{
		"wheel: timer already exists":                         "timer already exists",
		"protocol: malformed message: add: tid: wrong type":   "malformed message: add: tid: wrong type",
		"frame: protocol: frame too large (limit 10)":         "frame: frame too large (limit 10)",
		"log (journal: write x: no space left)":               "log (write x: no space left)",
		"receiver 5 is not bound by this session":             "receiver 5 is not bound by this session",
		"bad or missing token; session: closing; wheel: full": "bad or missing token; closing; full",
	} {
		assert.Equal(t, want, plainText(in))
	}
}

// recordBefore28 is a log record written by the server before issue 28
// (hellos recorded without helloPlain): a session says hello, adds 1/1,
// adds it again (exists, "wheel: timer already exists"), cancels 1/2 (not
// found, "wheel: timer not found") and pings, and the 114 bytes of replies
// are written out.
const recordBefore28 = "010104010102036f6c641503010b9a0402010105000000c0c203010b9a0403010105000000c0c203010594050401020c010d080172100172"

// TestReplayRecordBefore28: a log written before error replies lost their
// prefixes replays: its sessions' replies are laid out as long as they
// were written (else "session 1 wrote 114 bytes, the replay has 100").
func TestReplayRecordBefore28(t *testing.T) {
	rec, err := hex.DecodeString(recordBefore28)
	require.NoError(t, err)
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	c := New(Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000}, Limits{}, w, nil, nil)
	require.NoError(t, c.Replay(rec))
	s := c.sessions[1]
	require.NotNil(t, s)
	assert.False(t, s.plain)
	assert.Equal(t, uint64(114), s.written)
	assert.Empty(t, s.out)
}
