package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// progress logs at most once per interval, never before the first interval
// has passed, with done, total, percent, rate and ETA.
func TestProgressRateLimitAndFields(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var now time.Duration
	p := newProgress(log, "work", "records", 1000, time.Second, func() time.Duration { return now })

	now = 500 * time.Millisecond
	require.False(t, p.update(100), "logged before the first second")
	now = time.Second
	require.True(t, p.update(250, "extra", 7))
	line := buf.String()
	for _, want := range []string{`msg=work`, `done=250`, `total=1000`, `unit=records`, `percent=25`, `rate_per_s=250`,
		`elapsed=1s`, `eta=3s`, `extra=7`} {
		require.Contains(t, line, want)
	}
	now = 1500 * time.Millisecond
	require.False(t, p.update(400), "logged twice within a second")
	now = 2 * time.Second
	require.True(t, p.update(1000))
	require.Contains(t, buf.String(), "eta=0s")
	require.Equal(t, 2, strings.Count(buf.String(), "msg=work"))
}

// An ETA too long for a time.Duration is logged in years, never negative
// (a fast-forward toward 2^64 logged eta=-2562047h0m0s).
func TestProgressHugeETA(t *testing.T) {
	var buf bytes.Buffer
	var now time.Duration
	p := newProgress(slog.New(slog.NewTextHandler(&buf, nil)), "ff", "ticks", 1<<63, time.Second, func() time.Duration { return now })
	now = time.Second
	require.True(t, p.update(2_500_000)) // 2.5M ticks a second: 2^63 of them take 117,000 years
	require.Contains(t, buf.String(), `eta="116908 years"`)
	require.NotContains(t, buf.String(), "eta=-")
	buf.Reset()
	now = 2 * time.Second
	require.True(t, p.update(1<<63-1000))
	require.Contains(t, buf.String(), "eta=0s")
}

// An unknown total (0) gives no percentage and no ETA, and nothing done no
// ETA either.
func TestProgressUnknownTotal(t *testing.T) {
	var buf bytes.Buffer
	var now time.Duration
	p := newProgress(slog.New(slog.NewTextHandler(&buf, nil)), "work", "bytes", 0, time.Second, func() time.Duration { return now })
	now = 2 * time.Second
	require.True(t, p.update(10))
	require.NotContains(t, buf.String(), "percent=")
	require.NotContains(t, buf.String(), "eta=")
	require.Contains(t, buf.String(), "rate_per_s=5")

	buf.Reset()
	p = newProgress(slog.New(slog.NewTextHandler(&buf, nil)), "work", "bytes", 100, time.Second, func() time.Duration { return now })
	now += time.Second
	require.True(t, p.update(0))
	require.Contains(t, buf.String(), "percent=0")
	require.NotContains(t, buf.String(), "eta=")
}
