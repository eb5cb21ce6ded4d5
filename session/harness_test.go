package session

import (
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
// can stop between two advance turns. The Core records its inputs, and
// each do/advance checks that replaying them into a second Core gives the
// same state (see replayCheck).
type harness struct {
	t testing.TB
	c *Core
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
	return &harness{t: t, c: New(cfg, l, w, testLogger(), nil)}
}

// session opens a session that has said hello with the admin token.
func (h *harness) session() *Session {
	s := h.c.Open()
	h.do(s, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "t", Token: testAdminToken})
	return s
}

// do applies one request from s and returns what s was sent meanwhile.
func (h *harness) do(s *Session, req protocol.Request) []protocol.Message {
	h.c.Apply(s, protocol.AppendRequest(nil, &req)[4:])
	return h.take(s)
}

// advance runs one advance turn to the current tw-time (as the ticker's
// turn does) and reports whether work is left.
func (h *harness) advance() bool {
	more := h.c.Advance(h.c.Now(), h.c.cfg.MaxFiresPerTurn)
	return h.c.More() || more
}

// take decodes and clears s's pending output.
func (h *harness) take(s *Session) []protocol.Message {
	var ms []protocol.Message
	for b := s.out; len(b) > 0; {
		payload, n, err := protocol.SplitFrame(b, 1<<30)
		require.NoError(h.t, err)
		var m protocol.Message
		require.NoError(h.t, protocol.DecodeMessage(payload, &m))
		m.Result = append([]byte(nil), m.Result...)
		ms = append(ms, m)
		b = b[n:]
	}
	s.out = s.out[:0]
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
