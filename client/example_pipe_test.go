package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tickwheel/tickwheel/client"
)

// Scheduling many timers at once: a Pipe sends them in one write and
// collects every reply; each Cmd has its own outcome.
func ExamplePipe() {
	addr, stop := runServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Every player of a zone gets a regeneration tick every second, 5
	// times, and a buff that ends in 30 seconds.
	players := []uint64{101, 102, 103}
	p := c.Pipeline()
	var regen []*client.Cmd
	for _, player := range players {
		regen = append(regen, p.AddAfter(player, 1, time.Second, &client.AddOptions{Repeat: 5}))
		p.AddAfter(player, 2, 30*time.Second, nil)
	}
	p.Add(101, 2, 10, nil) // a duplicate: this one fails, the others do not
	err = p.Exec(ctx)
	fmt.Println("first error is exists:", errors.Is(err, client.ErrExists))
	for i, cmd := range regen {
		fmt.Printf("player %d: regen due at tick %d, err %v\n", players[i], cmd.Due(), cmd.Err())
	}
	// Output:
	// first error is exists: true
	// player 101: regen due at tick 1100, err <nil>
	// player 102: regen due at tick 1100, err <nil>
	// player 103: regen due at tick 1100, err <nil>
}
