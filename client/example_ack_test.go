package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tickwheel/tickwheel/client"
)

// Acknowledged mode, acked by the Client: each event is acknowledged once
// the consumer has received it from Events (or the handler returned). The
// server keeps what is not acknowledged and delivers it again at the next
// bind — after a reconnect (the Client drops the events it already
// delivered), or to the next process binding the receiver.
func ExampleBindOptions() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.WithToken(adminToken))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r, err := c.Bind(ctx, 42, &client.BindOptions{Ack: client.AckAuto})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("bound: %d pending, next seq %d\n", r.Pending, r.FirstSeq)
	if _, err := c.Add(ctx, 42, 1, 1, &client.AddOptions{Repeat: 2}); err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.FastForward(ctx, 2); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev := <-c.Events() // taken: acked shortly, with other traffic or on its own
		fmt.Println("seq", ev.Seq, "fired", ev.Fired)
	}
	// Output:
	// bound: 0 pending, next seq 1
	// seq 1 fired 1
	// seq 2 fired 2
}

// Acknowledged mode, acked by the user after its work, and a restart: the
// first process handles events 1..3 but stops before acknowledging 3, so
// the next one gets 3 again. Its own durable record of the last event it
// handled tells the duplicate.
func ExampleClient_Ack() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()

	// The game server's state, kept with the results of its work (in one
	// transaction): the seq of the last event handled, per receiver.
	lastHandled := map[uint64]uint64{}
	handle := func(ev client.Event) {
		if ev.Seq <= lastHandled[ev.Receiver] {
			fmt.Println("duplicate", ev.Seq) // handled before the restart
			return
		}
		fmt.Println("handled", ev.Seq)
		lastHandled[ev.Receiver] = ev.Seq
	}

	first, err := client.Dial(ctx, addr, client.WithToken(adminToken))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := first.Bind(ctx, 7, &client.BindOptions{Ack: client.AckManual}); err != nil {
		log.Fatal(err)
	}
	if _, err := first.Add(ctx, 7, 1, 1, &client.AddOptions{Repeat: 3}); err != nil {
		log.Fatal(err)
	}
	if _, _, err := first.FastForward(ctx, 3); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		ev := <-first.Events()
		handle(ev)
		if ev.Seq == 3 {
			break // the process dies before acknowledging 3
		}
		if err := first.Ack(ctx, ev.Receiver, ev.Seq); err != nil {
			log.Fatal(err)
		}
	}
	first.Close()

	next, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Close()
	r, err := next.Bind(ctx, 7, &client.BindOptions{Ack: client.AckManual})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("bound: %d pending from seq %d\n", r.Pending, r.FirstSeq)
	ev := <-next.Events()
	handle(ev)
	if err := next.Ack(ctx, ev.Receiver, ev.Seq); err != nil { // a duplicate is acked too
		log.Fatal(err)
	}
	// Output:
	// handled 1
	// handled 2
	// handled 3
	// bound: 1 pending from seq 3
	// duplicate 3
}
