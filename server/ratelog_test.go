package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func jsonLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level}))
}

// logLines decodes the JSON lines in buf and empties it.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		lines = append(lines, m)
	}
	buf.Reset()
	return lines
}

func TestRateLog(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	r := newRateLog(jsonLogger(&buf, slog.LevelInfo), 2, clock.now)

	for i := range 5 {
		r.Warn("hello failed", "session", i)
	}
	r.Info("other", "n", 1) // another msg has its own budget
	lines := logLines(t, &buf)
	require.Len(t, lines, 3)
	assert.Equal(t, "hello failed", lines[0]["msg"])
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.Equal(t, float64(0), lines[0]["session"])
	assert.Equal(t, float64(1), lines[1]["session"])
	assert.NotContains(t, lines[1], "suppressed")
	assert.Equal(t, "other", lines[2]["msg"])
	assert.Equal(t, "INFO", lines[2]["level"])

	// Still within the second: suppressed.
	clock.add(999 * time.Millisecond)
	r.Warn("hello failed", "session", 5)
	assert.Empty(t, logLines(t, &buf))

	// The next second: the first line carries the count of the 4 dropped.
	clock.add(time.Millisecond)
	r.Warn("hello failed", "session", 6)
	r.Warn("hello failed", "session", 7)
	r.Warn("hello failed", "session", 8)
	lines = logLines(t, &buf)
	require.Len(t, lines, 2)
	assert.Equal(t, float64(4), lines[0]["suppressed"])
	assert.Equal(t, float64(6), lines[0]["session"])
	assert.NotContains(t, lines[1], "suppressed")

	// After a quiet spell the count of the last burst (1) comes with the next line.
	clock.add(time.Hour)
	r.Warn("hello failed", "session", 9)
	lines = logLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, float64(1), lines[0]["suppressed"])
}

// TestRateLogDisabledLevel: lines below the logger's level cost nothing and
// count for nothing.
func TestRateLogDisabledLevel(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	r := newRateLog(jsonLogger(&buf, slog.LevelWarn), 1, clock.now)
	for range 10 {
		r.Info("noise")
	}
	r.Warn("noise")
	lines := logLines(t, &buf)
	require.Len(t, lines, 1)
	assert.NotContains(t, lines[0], "suppressed")
}

// TestRateLogClockBack: a clock that steps back starts a new window instead
// of suppressing until it catches up.
func TestRateLogClockBack(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	r := newRateLog(jsonLogger(&buf, slog.LevelInfo), 0, clock.now) // 0 means 1
	r.Info("m")
	r.Info("m")
	clock.add(-time.Minute)
	r.Info("m")
	lines := logLines(t, &buf)
	require.Len(t, lines, 2)
	assert.Equal(t, float64(1), lines[1]["suppressed"])
}

func TestRateLogArgsNotModified(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	r := newRateLog(jsonLogger(&buf, slog.LevelInfo), 1, clock.now)
	args := make([]any, 2, 8)
	args[0], args[1] = "k", "v"
	r.Info("m", args...)
	r.Info("m", args...)
	clock.add(time.Second)
	r.Info("m", args...)
	assert.Equal(t, []any{"k", "v"}, args[:cap(args)][:2])
	assert.Nil(t, args[:cap(args)][2], "the caller's spare capacity is untouched")
}
