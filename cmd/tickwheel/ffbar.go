package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tickwheel/tickwheel/client"
)

// The progress bar of ff: a fast-forward that takes longer than ffBarAfter
// shows, on a terminal, how far tw-time has come. The ff request's own
// connection is not read by the server until the fast-forward is over, so
// the bar asks another connection for stats every ffBarEvery: done is the
// ticks asked for less stats' lag (the ticks the wheel is still behind the
// clock's target, which the fast-forward moved on at once).
var (
	ffBarAfter = time.Second // a variable for tests
	ffBarEvery = 250 * time.Millisecond
)

// ffBarWidth is the bar's width in characters, the brackets excluded.
const ffBarWidth = 30

// terminal returns w when it is a terminal (a character device), else nil:
// the bar is drawn only there, never into a file or a pipe.
func terminal(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return w
}

// ffBar draws the bar of one fast-forward of total ticks on term.
type ffBar struct {
	term  io.Writer
	dial  func(context.Context) (*client.Client, error)
	total uint64
	clk   clock // prints the ticks as tw-time durations
	began time.Time
	stop  chan struct{}
	done  chan struct{}

	mu    sync.Mutex
	shown bool // a line has been drawn: stop clears it
}

// startFFBar starts drawing after ffBarAfter, unless finish is called first.
func startFFBar(term io.Writer, dial func(context.Context) (*client.Client, error), total uint64, clk clock) *ffBar {
	b := &ffBar{term: term, dial: dial, total: total, clk: clk, began: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if ffBarAfter <= 0 {
		b.draw(0) // at once (tests)
	}
	go b.run()
	return b
}

// run draws the bar once ffBarAfter has passed, then polls stats every
// ffBarEvery and draws it again, until finish.
func (b *ffBar) run() {
	defer close(b.done)
	if ffBarAfter > 0 {
		select {
		case <-time.After(ffBarAfter):
		case <-b.stop:
			return
		}
		b.draw(0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := b.dial(ctx)
	if err != nil {
		return // the bar stays at 0%; the fast-forward goes on
	}
	defer c.Close()
	tick := time.NewTicker(ffBarEvery)
	defer tick.Stop()
	for {
		if s, err := c.Stats(ctx); err == nil {
			b.draw(b.total - min(s.Lag, b.total))
		}
		select {
		case <-tick.C:
		case <-b.stop:
			return
		}
	}
}

// draw draws the bar for done ticks of total, with the rate and ETA.
func (b *ffBar) draw(done uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprint(b.term, "\r"+barLine(done, b.total, time.Since(b.began), b.clk)+"\x1b[K")
	b.shown = true
}

// finish stops the bar and clears its line, if one was drawn.
func (b *ffBar) finish() {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shown {
		fmt.Fprint(b.term, "\r\x1b[K")
	}
}

// barLine is the bar's text for done of total ticks after elapsed, the
// ticks as tw-time durations (k.dur) and the rate as tw-time per second:
//
//	[=========>                    ]  33%  2d8h of 7d  3h3m/s  ETA 6s
func barLine(done, total uint64, elapsed time.Duration, k clock) string {
	frac := 1.0
	if total > 0 {
		frac = float64(min(done, total)) / float64(total)
	}
	n := int(frac * ffBarWidth)
	bar := strings.Repeat("=", n)
	if n < ffBarWidth {
		bar += ">" + strings.Repeat(" ", ffBarWidth-n-1)
	}
	line := fmt.Sprintf("[%s] %3d%%  %s of %s", bar, int(frac*100), k.dur(done), k.dur(total))
	if s := elapsed.Seconds(); s > 0 && done > 0 {
		rate := float64(done) / s
		line += "  " + k.dur(uint64(rate)) + "/s"
		line += "  ETA " + (time.Duration(float64(total-min(done, total)) / rate * float64(time.Second))).Round(time.Second).String()
	}
	return line
}
