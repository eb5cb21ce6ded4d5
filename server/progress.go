package server

import (
	"fmt"
	"log/slog"
	"time"
)

// progressEvery is how often a long piece of work (recovery at start-up, a
// large fast-forward) logs its progress at most. A variable for tests.
var progressEvery = time.Second

// progress logs how far a long piece of work has come: done of total, the
// percentage, the rate since it began, and an estimate of the time left
// (ETA, at that rate). It logs at most once per every, the first time
// every after it began, so work shorter than that logs nothing. Not safe
// for concurrent use: one goroutine (the event loop, or start-up) owns it.
type progress struct {
	log   *slog.Logger
	msg   string        // the log message, e.g. "recovery: replaying the log"
	unit  string        // what done and total count, e.g. "records"
	total uint64        // 0 when unknown: no percentage or ETA then
	every time.Duration // least time between two lines
	clock func() time.Duration
	began time.Duration // clock() when it began
	next  time.Duration // clock() before which nothing is logged
}

// newProgress starts reporting on work of total units; clock returns a
// monotonic time (the elapsed time since any fixed instant).
func newProgress(log *slog.Logger, msg, unit string, total uint64, every time.Duration, clock func() time.Duration) *progress {
	now := clock()
	return &progress{log: log, msg: msg, unit: unit, total: total, every: every, clock: clock, began: now, next: now + every}
}

// update reports that done units are done; it logs a line (with extra
// key-value pairs appended) when every has passed since the last one. It
// reports whether it logged.
func (p *progress) update(done uint64, extra ...any) bool {
	now := p.clock()
	if now < p.next {
		return false
	}
	p.next = now + p.every
	p.log.Info(p.msg, append(p.fields(done, now), extra...)...)
	return true
}

// fields are the log attributes for done units at clock time now: done,
// total, unit, percent (one decimal), rate (units per second, rounded),
// elapsed and eta. The
// percentage and the ETA are left out when the total is unknown, and the
// ETA when nothing is done yet (no rate to go by).
func (p *progress) fields(done uint64, now time.Duration) []any {
	elapsed := now - p.began
	f := []any{"done", done}
	if p.total > 0 {
		f = append(f, "total", p.total)
	}
	f = append(f, "unit", p.unit)
	if p.total > 0 {
		f = append(f, "percent", float64(int(1000*float64(min(done, p.total))/float64(p.total)))/10)
	}
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done) / elapsed.Seconds()
	}
	f = append(f, "rate_per_s", int64(rate+0.5), "elapsed", elapsed.Round(time.Millisecond)) // an integer: slog writes large floats as 1.2e+06
	if p.total > 0 && rate > 0 {
		f = append(f, "eta", eta(float64(p.total-min(done, p.total))/rate))
	}
	return f
}

// maxETA is the longest ETA logged as a duration; longer ones are logged
// in years (a time.Duration holds at most 292 years: a fast-forward toward
// 2^64 logged an ETA of -2562047h).
const maxETA = 100 * 365 * 24 * time.Hour

// eta is the log value of an estimate of seconds left: a duration rounded
// to the second, or beyond maxETA, a text in years ("117000 years").
func eta(seconds float64) any {
	if seconds < maxETA.Seconds() {
		return time.Duration(seconds * float64(time.Second)).Round(time.Second)
	}
	return fmt.Sprintf("%.0f years", seconds/(365.25*24*3600))
}

// replayMeter reports a log replay's progress in replay cost: a record
// counts one, and each firing it redoes (session.RecordFirings) one more.
// A firing is what costs in a replay that fast-forwarded or caught up (a
// week's fast-forward of 50 timers firing every tick redoes 3 billion in
// a few thousand records), so an ETA from records or bytes is far off
// (it said 12 s of 3 min 28 s, issue 26). Owned by start-up.
type replayMeter struct {
	prog             *progress
	records, firings uint64
}

// newReplayMeter starts reporting on a replay of total cost (records plus
// the firings they redo).
func newReplayMeter(log *slog.Logger, total uint64, every time.Duration, clock func() time.Duration) *replayMeter {
	return &replayMeter{prog: newProgress(log, "recovery: replaying the log", "records+firings", total, every, clock)}
}

// replayed notes a record replayed that redid firings.
func (m *replayMeter) replayed(firings uint64) {
	m.records++
	m.firings += firings
	m.prog.update(m.records+m.firings, "records", m.records, "firings", m.firings)
}
