package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server"
)

// A daily reset at 04:00 Paris time. tw-time is a calendar (tick t is t ×
// 10 ms after the Unix epoch), so fast-forwarding it by a day fires the
// reset once: a test of daily game logic that takes a second, not a day.
// This example's server starts frozen at 2026-03-28 12:00 UTC.
func ExampleClient_AddSchedule() {
	dir, err := os.MkdirTemp("", "tickwheel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	start := uint64(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC).UnixNano() / int64(10*time.Millisecond))
	srv, err := server.New(server.Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: start, AdminToken: adminToken, DataDir: dir},
		slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(context.Background())

	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.WithToken(adminToken))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Bind(ctx, 42, nil); err != nil {
		log.Fatal(err)
	}
	// Every day at 04:00 in Paris, until cancelled; after a downtime, one
	// late reset rather than one per day missed.
	opts := &client.AddOptions{Zone: "Europe/Paris", Missed: client.MissedOnce, Data: []byte("daily reset")}
	if _, err := c.AddSchedule(ctx, 42, 1, "0 4 * * *", opts); err != nil {
		log.Fatal(err)
	}
	tm, err := c.Get(ctx, 42, 1)
	if err != nil {
		log.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	at := func(tick uint64) string {
		return time.Unix(0, int64(tick)*int64(10*time.Millisecond)).In(paris).Format("Mon Jan 2 15:04 MST")
	}
	fmt.Printf("%q in %s, next at %s\n", tm.Schedule, tm.Zone, at(tm.Due))

	// Two days of tw-time in one call: two resets (the second on the night
	// Paris moves to summer time).
	day := uint64(24 * time.Hour / (10 * time.Millisecond))
	if _, _, err := c.FastForward(ctx, 2*day); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev := <-c.Events()
		fmt.Printf("%s: %s #%d\n", at(ev.Tick), ev.Data, ev.Fired)
	}
	// Output:
	// "0 4 * * *" in Europe/Paris, next at Sun Mar 29 04:00 CEST
	// Sun Mar 29 04:00 CEST: daily reset #1
	// Mon Mar 30 04:00 CEST: daily reset #2
}
