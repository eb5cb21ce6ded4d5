package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2/pkg/pool/goroutine"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestRestGnetPool: with Config.RestGnetPool, an idle server's release of
// gnet's goroutine pool stops it (no worker, no clock goroutine), and the
// next connection is registered all the same, on the pool started again,
// whichever server it is made to; without it the pool is left alone. Not
// parallel: the pool is the process's.
func TestRestGnetPool(t *testing.T) {
	p := goroutine.DefaultWorkerPool
	defer p.Reboot() // for the tests that follow, if this one fails half way

	plain := startServer(t, nil)
	plain.restGnetPool()
	if p.IsClosed() {
		t.Fatal("the pool was released by a server without RestGnetPool")
	}

	srv := startServer(t, func(c *Config) { c.RestGnetPool = true })
	a := helloClient(t, srv, "a")
	registered(t)
	srv.restGnetPool()
	if !p.IsClosed() {
		t.Fatal("the pool is not released")
	}
	if n := a.stats().Connections; n != 1 {
		t.Fatalf("%d connections after the release, want 1", n)
	}
	for i := range 3 { // connections one after another, each on the pool started again
		b := helloClient(t, srv, "b")
		if p.IsClosed() {
			t.Fatalf("connection %d: the pool is still released", i)
		}
		b.add(protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: uint64(i + 1), After: 1000, Repeat: 1})
		registered(t)
		srv.restGnetPool()
	}
	if n := len(a.list(7)); n != 3 {
		t.Fatalf("receiver 7 holds %d timers, want 3", n)
	}
	// A server without RestGnetPool in the same process registers its
	// connections on the pool another one released.
	registered(t)
	srv.restGnetPool()
	if c := helloClient(t, plain, "c"); c.stats().Connections != 1 || p.IsClosed() {
		t.Fatal("the server without RestGnetPool did not start the released pool again")
	}
}

// registered waits until no registration's result is still on its way
// (gnetPool.pending): a connection's hello can be answered before the
// goroutine that takes its registration's result has counted it, and a
// release is refused until then (under -race the test released too soon).
func registered(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		gnetPool.Lock()
		defer gnetPool.Unlock()
		return gnetPool.pending == 0
	}, 5*time.Second, time.Millisecond, "a registration's result never came")
}

// TestRestGnetPoolNotWhileARegistrationWaits: a connection to server A
// waits (its registration's worker) for A's busy loop; an idle B's release
// of the pool then does not happen, so a connection to B does not wait for
// A's loop in the Reboot (which waits for every worker of before the
// release). Before, the hello to B took 1.70 s: found by a red-team pass.
func TestRestGnetPoolNotWhileARegistrationWaits(t *testing.T) {
	defer goroutine.DefaultWorkerPool.Reboot()
	a := startServer(t, func(c *Config) { c.RestGnetPool = true })
	b := startServer(t, func(c *Config) { c.RestGnetPool = true })
	go a.onLoop(context.Background(), func() { time.Sleep(2 * time.Second) })
	time.Sleep(100 * time.Millisecond)
	c, err := net.Dial("tcp", a.Addr()) // its registration waits for A's loop
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(200 * time.Millisecond)
	b.restGnetPool()
	if goroutine.DefaultWorkerPool.IsClosed() {
		t.Fatal("the pool was released while a registration waited for its result")
	}
	start := time.Now()
	helloClient(t, b, "b")
	took := time.Since(start)
	t.Logf("hello to B took %v", took)
	if took > time.Second {
		t.Fatalf("a connection to B waited %v for A's busy loop (Reboot under the process-wide mutex)", took)
	}
}
