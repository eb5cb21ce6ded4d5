package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server"
)

// adminToken is the examples' admin token. A real server reads or makes
// its own in its data directory (admin.token); admin ops such as
// FastForward need it in client.WithToken.
const adminToken = "example-admin-token"

// runServer starts an in-process server whose tw-time is frozen at tick
// 1000: it moves only when an admin fast-forwards it, so the examples are
// deterministic. (Against a real server you would just Dial its address.)
func runServer() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "tickwheel-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: adminToken, DataDir: dir}
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	return srv.Addr(), func() { _ = srv.Stop(context.Background()); os.RemoveAll(dir) }
}

// The common tasks: dial, bind a receiver, add timers, receive their events.
func Example() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()

	// The admin token is needed only for FastForward, below.
	c, err := client.Dial(ctx, addr, client.WithName("example"), client.WithToken(adminToken))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Events of receiver 42 (a player, a zone, ...) now come to this client.
	if _, err := c.Bind(ctx, 42, nil); err != nil {
		log.Fatal(err)
	}
	// A one-shot timer in 25ms: 3 ticks of 10ms, rounded up.
	due, err := c.AddAfter(ctx, 42, 1, 25*time.Millisecond, &client.AddOptions{Repeat: 1, Data: []byte("respawn")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("respawn due at tick", due)
	// A timer every 2 ticks, 3 times.
	if _, err := c.Add(ctx, 42, 2, 2, &client.AddOptions{Repeat: 3, Data: []byte("regen")}); err != nil {
		log.Fatal(err)
	}
	// Adding it again fails; errors.Is tells why.
	if _, err := c.Add(ctx, 42, 2, 2, nil); errors.Is(err, client.ErrExists) {
		fmt.Println("timer 2 exists")
	}

	// The frozen test server needs a push; a real one fires on its own.
	if _, _, err := c.FastForward(ctx, 6); err != nil {
		log.Fatal(err)
	}
	for range 4 {
		ev := <-c.Events()
		fmt.Printf("tick %d: receiver %d timer %d fired %d/%d %s\n", ev.Tick, ev.Receiver, ev.Tid, ev.Fired, ev.Repeat, ev.Data)
	}
	// Output:
	// respawn due at tick 1003
	// timer 2 exists
	// tick 1002: receiver 42 timer 2 fired 1/3 regen
	// tick 1003: receiver 42 timer 1 fired 1/1 respawn
	// tick 1004: receiver 42 timer 2 fired 2/3 regen
	// tick 1006: receiver 42 timer 2 fired 3/3 regen
}

// The seed example: receiver 1 has timer 11 (after 3 ticks, 4 times) and
// timer 12 (after 1 tick, 5 times); receiver 2 has timer 20 (after 3 ticks,
// forever). Tw-time is moved on 12 ticks, one at a time; FastForward
// returns after the events it caused, so each step's events are already
// waiting on the channel.
func Example_seed() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.WithToken(adminToken))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	must := func(_ uint64, err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	for _, r := range []uint64{1, 2} {
		if _, err := c.Bind(ctx, r, nil); err != nil {
			log.Fatal(err)
		}
	}
	must(c.Add(ctx, 1, 11, 3, &client.AddOptions{Repeat: 4}))
	must(c.Add(ctx, 1, 12, 1, &client.AddOptions{Repeat: 5}))
	must(c.Add(ctx, 2, 20, 3, &client.AddOptions{Repeat: client.Forever}))

	for range 12 {
		if _, _, err := c.FastForward(ctx, 1); err != nil {
			log.Fatal(err)
		}
		for len(c.Events()) > 0 {
			ev := <-c.Events()
			fmt.Printf("T+%d receiver=%d tid=%d fired=%d last=%v seq=%d\n", ev.Tick-1000, ev.Receiver, ev.Tid, ev.Fired, ev.Last, ev.Seq)
		}
	}
	// Output:
	// T+1 receiver=1 tid=12 fired=1 last=false seq=1
	// T+2 receiver=1 tid=12 fired=2 last=false seq=2
	// T+3 receiver=1 tid=11 fired=1 last=false seq=3
	// T+3 receiver=2 tid=20 fired=1 last=false seq=1
	// T+3 receiver=1 tid=12 fired=3 last=false seq=4
	// T+4 receiver=1 tid=12 fired=4 last=false seq=5
	// T+5 receiver=1 tid=12 fired=5 last=true seq=6
	// T+6 receiver=1 tid=11 fired=2 last=false seq=7
	// T+6 receiver=2 tid=20 fired=2 last=false seq=2
	// T+9 receiver=1 tid=11 fired=3 last=false seq=8
	// T+9 receiver=2 tid=20 fired=3 last=false seq=3
	// T+12 receiver=1 tid=11 fired=4 last=true seq=9
	// T+12 receiver=2 tid=20 fired=4 last=false seq=4
}

// A handler instead of the Events channel: called in order from one
// goroutine. It must return quickly; see the package doc on backpressure.
func ExampleWithHandler() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()

	fired := make(chan client.Event, 16)
	c, err := client.Dial(ctx, addr, client.WithToken(adminToken), client.WithHandler(func(ev client.Event) {
		fired <- ev // hand off; do the real work elsewhere
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Bind(ctx, 7, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Add(ctx, 7, 1, 1, &client.AddOptions{Repeat: 2}); err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.FastForward(ctx, 2); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev := <-fired
		fmt.Println(ev.Kind, ev.Receiver, ev.Tid, ev.Tick, ev.Last)
	}
	// Output:
	// fire 7 1 1001 false
	// fire 7 1 1002 true
}

// Errors from the server wrap a sentinel per error code.
func ExampleError() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.Cancel(ctx, 1, 99)
	fmt.Println(errors.Is(err, client.ErrNotFound))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Code)
	}
	// Output:
	// true
	// cancel not_found
}

// ListPage fetches a receiver's timers a page at a time, in tid order,
// starting each page at the previous one's next; List does the paging for
// you and returns them all.
func ExampleClient_ListPage() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for _, tid := range []uint64{30, 10, 50, 20, 40} {
		if _, err := c.Add(ctx, 9, tid, 100, nil); err != nil {
			log.Fatal(err)
		}
	}
	for from := uint64(0); ; {
		ts, next, err := c.ListPage(ctx, 9, from, 2) // 0 would mean the server's max_list_page
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print("page:")
		for _, t := range ts {
			fmt.Print(" ", t.Tid)
		}
		fmt.Println(" | next:", next)
		if next == 0 {
			break
		}
		from = next
	}
	all, err := c.List(ctx, 9)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("List:", len(all), "timers")
	// Output:
	// page: 10 20 | next: 30
	// page: 30 40 | next: 50
	// page: 50 | next: 0
	// List: 5 timers
}

// Ticks converts a duration to ticks, rounding up so timers never fire early.
func ExampleTicks() {
	fmt.Println(client.Ticks(25*time.Millisecond, 10*time.Millisecond))
	fmt.Println(client.Ticks(20*time.Millisecond, 10*time.Millisecond))
	fmt.Println(client.Ticks(time.Nanosecond, 10*time.Millisecond))
	// Output:
	// 3
	// 2
	// 1
}

// Reconnection is on by default (100ms..5s). Tune it, or turn it off with
// WithReconnect(0, 0): the first connection loss then ends the Client.
func ExampleWithReconnect() {
	addr, stop := runServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr,
		client.WithReconnect(50*time.Millisecond, time.Second),
		client.WithLogger(slog.New(slog.DiscardHandler)), // where connection losses are logged
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("tick:", c.TickDuration())
	// Output: tick: 10ms
}
