package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog limits log lines that a peer can cause at will (failed hellos,
// malformed frames, takeovers), so that a hostile or broken client cannot
// flood the log: each distinct msg may log perSecond lines per second; the
// lines over that are counted, and the next line logged for that msg carries
// suppressed=N. A count of lines suppressed at the end of a burst is reported
// only when that msg logs again.
//
// msg is the key, so it must be a constant, never text built from input:
// each distinct msg keeps a small entry for the life of the rateLog. The
// attributes vary freely.
//
// Safe from any goroutine.
type rateLog struct {
	log       *slog.Logger
	perSecond int
	now       func() time.Time

	mu   sync.Mutex
	msgs map[string]*rateWindow
}

// rateWindow is one msg's current second.
type rateWindow struct {
	start      time.Time // when the current one-second window began
	logged     int       // lines logged in it
	suppressed int       // lines dropped since the last logged one
}

// newRateLog returns a rateLog writing to log. perSecond < 1 means 1. now is
// the clock (time.Now; tests inject their own).
func newRateLog(log *slog.Logger, perSecond int, now func() time.Time) *rateLog {
	return &rateLog{log: log, perSecond: max(perSecond, 1), now: now, msgs: make(map[string]*rateWindow)}
}

// Info logs msg at info level, unless msg has used up this second's lines.
func (r *rateLog) Info(msg string, args ...any) { r.emit(slog.LevelInfo, msg, args) }

// Warn logs msg at warn level, unless msg has used up this second's lines.
func (r *rateLog) Warn(msg string, args ...any) { r.emit(slog.LevelWarn, msg, args) }

func (r *rateLog) emit(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if !r.log.Enabled(ctx, level) {
		return
	}
	suppressed, ok := r.allow(msg)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args[:len(args):len(args)], "suppressed", suppressed)
	}
	r.log.Log(ctx, level, msg, args...)
}

// allow counts one line of msg and reports whether it may be logged, with
// the number of lines of msg suppressed before it.
func (r *rateLog) allow(msg string) (suppressed int, ok bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.msgs[msg]
	if w == nil {
		w = &rateWindow{start: now}
		r.msgs[msg] = w
	}
	if now.Sub(w.start) >= time.Second || now.Before(w.start) {
		w.start, w.logged = now, 0
	}
	if w.logged >= r.perSecond {
		w.suppressed++
		return 0, false
	}
	w.logged++
	suppressed, w.suppressed = w.suppressed, 0
	return suppressed, true
}

// RateLog is a rateLog for other packages (the operator HTTP listener):
// each distinct msg, a constant, logs at most perSecond lines a second, and
// the next line logged carries suppressed=N. Safe from any goroutine.
type RateLog struct{ r *rateLog }

// NewRateLog returns a RateLog writing to log, on the real clock.
func NewRateLog(log *slog.Logger, perSecond int) *RateLog {
	return &RateLog{newRateLog(log, perSecond, time.Now)}
}

// Warn logs msg at warn level, unless msg has used up this second's lines.
func (r *RateLog) Warn(msg string, args ...any) { r.r.Warn(msg, args...) }
