package servertest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// DropConnections in a test of reconnect handling: with the receiver in
// acknowledged mode, every event is handled once although the connection
// drops while two of them wait, delivered but not taken, in the client.
//
// AdvanceTicks returns once the events are written towards the client, not
// once the client has them (they cross the relay and the client's reader
// first), so the test waits until both are in the Events channel before
// it cuts the connection; otherwise they may still be in flight, lost with
// the connection, and the server's redelivery is then their first
// delivery (Redelivered 0). In a test, servertest.RunT(t) replaces Run and
// Close.
func ExampleServer_DropConnections() {
	srv, err := servertest.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.WithReconnect(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Bind(ctx, 7, &client.BindOptions{Ack: client.AckAuto}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Add(ctx, 7, 1, 1, &client.AddOptions{Repeat: 4}); err != nil {
		log.Fatal(err)
	}
	srv.AdvanceTicks(2)       // events 1 and 2 are written towards the client
	for len(c.Events()) < 2 { // ... and now they are in its channel, not taken yet
		time.Sleep(time.Millisecond)
	}
	srv.DropConnections() // the client reconnects and re-binds; the server sends 1 and 2 again
	srv.AdvanceTicks(2)
	for range 4 {
		ev := <-c.Events()
		fmt.Println("event", ev.Seq, "fired", ev.Fired)
	}
	fmt.Println("redelivered (dropped by the client):", c.Redelivered())
	// Output:
	// event 1 fired 1
	// event 2 fired 2
	// event 3 fired 3
	// event 4 fired 4
	// redelivered (dropped by the client): 2
}
