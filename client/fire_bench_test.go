package client

import (
	"context"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

// BenchmarkFire: events delivered through the public Client, from
// receivers bound without acknowledgement (ack=none) and in acknowledged
// mode with automatic acks (ack=auto). One op is one event taken from
// Events. Each run adds b.N timers over 64 receivers, due on one tick (not
// timed), then fast-forwards over it and reads every event: the server
// routes them, the Client decodes, delivers and (ack=auto) acknowledges
// them. The server keeps its state as by default (a log, fsync everysec)
// with the default limits, except that the backlogs of ack=none may hold
// the whole burst (by default they drop past 10,000 events per receiver,
// which would make the comparison unfair to ack=auto, which drops
// nothing). Compare the two with benchstat: the acknowledged figure is the
// cost of at-least-once delivery.
func BenchmarkFire(b *testing.B) {
	for _, mode := range []AckMode{AckNone, AckAuto} {
		b.Run("ack="+mode.String(), func(b *testing.B) { benchFire(b, mode) })
	}
}

func benchFire(b *testing.B, mode AckMode) {
	const receivers = 64
	srv := startServer(b, func(c *server.Config) {
		l := &c.Limits
		l.MaxTimersPerReceiver = 1 << 30
		l.MaxBacklog, l.MaxBacklogTotal, l.MaxBacklogBytes, l.MaxBacklogBytesTotal = 1<<30, 1<<30, 1<<40, 1<<40
	})
	ctx := context.Background()
	c, err := Dial(ctx, srv.Addr(), WithLogger(discardLogger()), WithToken(testAdminToken), WithEventBuffer(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for r := range uint64(receivers) {
		if _, err := c.Bind(ctx, r, &BindOptions{Ack: mode}); err != nil {
			b.Fatal(err)
		}
	}
	now, err := c.Ping(ctx)
	if err != nil {
		b.Fatal(err)
	}
	addAll(b, c, receivers, now+1, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime(b)
	ff := make(chan error, 1)
	go func() { // its reply follows the events, which wait for this reader
		_, _, err := c.FastForward(ctx, 1)
		ff <- err
	}()
	stuck := time.AfterFunc(time.Minute, func() { panic("BenchmarkFire: events stopped coming") })
	for range b.N {
		if ev := <-c.Events(); ev.Kind != Fire {
			b.Fatalf("event %v", ev.Kind)
		}
	}
	stuck.Stop()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if err := <-ff; err != nil {
		b.Fatal(err)
	}
}

// addAll adds n one-shot timers due at tick, round robin over the
// receivers, 64 calls at a time.
func addAll(b *testing.B, c *Client, receivers int, tick uint64, n int) {
	b.Helper()
	ctx := context.Background()
	errs := make(chan error, 1)
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		go func(tid uint64) {
			defer func() { <-sem }()
			if _, err := c.AddAt(ctx, tid%uint64(receivers), tid, tick, &AddOptions{Repeat: 1}); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}(uint64(i + 1))
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
