package session

import (
	"github.com/cespare/xxhash/v2"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// start is tw-time at the start of every test's Core.
const start = 1_000_000

const testAdminToken = "test-admin-token"

// harness drives a Core directly, with no event loop or sockets, so a test
// can stop between two advance turns. The Core records its inputs, which a
// replica replays as they come; when the test ends (and at replayCheck)
// the replica's state must be the Core's (see replica).
type harness struct {
	t testing.TB
	c *Core
	// rep replays c's records (nil for a benchmark); outs holds what the
	// flushes wrote to each session, not yet taken.
	rep  *replica
	outs map[*Session][]byte
	// receivers lists receiver ids whose timers the replay check compares
	// even when they have no record (see dumpState): those the test used.
	receivers map[uint64]bool
}

func testLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newHarness returns a harness over a fresh Core at tw-time start, with
// the admin token testAdminToken; mutate may change the config and limits.
func newHarness(t testing.TB, mutate func(*Config, *Limits)) *harness {
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000, ServerVersion: "test"}
	var l Limits
	if mutate != nil {
		mutate(&cfg, &l)
	}
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	h := &harness{t: t, c: New(cfg, l, w, testLogger(), nil), outs: make(map[*Session][]byte), receivers: make(map[uint64]bool)}
	if tt, ok := t.(*testing.T); ok {
		w2, err := wheel.New(start, wheel.Config{})
		require.NoError(t, err)
		h.rep = newReplica(t, h.c, cfg, l, w2)
		tt.Cleanup(func() {
			if !tt.Failed() {
				h.replayCheck()
			}
		})
	}
	h.c.SetClock(1, true) // tw-time moves only by fast-forwards and the test's advances
	return h
}

// replayCheck flushes, then checks that replaying the Core's records gives
// the same state, the same outputs byte for byte included.
func (h *harness) replayCheck() {
	h.t.Helper()
	if h.rep == nil {
		return
	}
	h.flush()
	ids := make([]uint64, 0, len(h.receivers))
	for id := range h.receivers {
		ids = append(ids, id)
	}
	h.rep.check(ids)
	// The whole state too, as a cluster's state check compares it (after
	// the flush: no session has output waiting).
	if a, b := stateDigest(h.c), stateDigest(h.rep.c); a != b {
		h.t.Fatalf("the replica's state digest %x differs from the live Core's %x", b, a)
	}
}

// stateDigest hashes c's state as a cluster's state check does (its
// snapshot in digest mode).
func stateDigest(c *Core) [2]uint64 {
	var sum uint64
	snap := c.DigestSnapshot(&sum)
	defer snap.Release()
	b, _ := snap.AppendNext(nil, 0)
	return [2]uint64{xxhash.Sum64(b), sum}
}

// session opens a session that has said hello with the admin token.
func (h *harness) session() *Session {
	s := h.c.Open()
	h.do(s, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "t", Token: testAdminToken})
	return s
}

// do applies one request from s and returns what s was sent meanwhile.
func (h *harness) do(s *Session, req protocol.Request) []protocol.Message {
	h.send(s, req)
	return h.take(s)
}

// send applies one request from s, leaving its reply unflushed.
func (h *harness) send(s *Session, req protocol.Request) {
	h.receivers[req.Receiver] = true
	h.apply(s, protocol.AppendRequest(nil, &req)[4:])
}

// apply applies a request frame's payload from s and replays its record.
func (h *harness) apply(s *Session, payload []byte) {
	h.c.Apply(s, payload)
	if h.rep != nil {
		h.rep.sync()
	}
}

// advance runs one advance turn to the current tw-time (as the ticker's
// turn does) and reports whether work is left.
func (h *harness) advance() bool {
	more := h.c.Advance(h.c.Now(), h.c.cfg.MaxFiresPerTurn)
	if h.rep != nil {
		h.rep.sync()
	}
	return h.c.More() || more
}

// catchUp runs advance turns until none is left.
func (h *harness) catchUp() {
	for h.advance() {
	}
}

// flush hands every dirty session's output to a writer whose connection
// takes it at once, keeping it for take.
func (h *harness) flush() {
	h.c.Flush(func(s *Session, out []byte) int {
		if h.rep != nil {
			h.rep.wrote(s, out)
		}
		h.outs[s] = append(h.outs[s], out...)
		return 0
	}, nil)
	if h.rep != nil {
		h.rep.sync()
	}
}

// take flushes, then decodes and forgets what s was sent.
func (h *harness) take(s *Session) []protocol.Message {
	h.flush()
	var ms []protocol.Message
	for b := h.outs[s]; len(b) > 0; {
		payload, n, err := protocol.SplitFrame(b, 1<<30)
		require.NoError(h.t, err)
		var m protocol.Message
		require.NoError(h.t, protocol.DecodeMessage(payload, &m))
		m.Result = append([]byte(nil), m.Result...)
		ms = append(ms, m)
		b = b[n:]
	}
	delete(h.outs, s)
	return ms
}

// discardOut is a Writer whose connection takes everything at once.
func discardOut(*Session, []byte) int { return 0 }

func okUints(t testing.TB, op protocol.Op, m protocol.Message) []uint64 {
	t.Helper()
	require.Equal(t, protocol.KindOK, m.Kind, "%s: %s %s", op, m.Code, m.Text)
	v, err := protocol.DecodeUints(m.Result, nil)
	require.NoError(t, err)
	return v
}
