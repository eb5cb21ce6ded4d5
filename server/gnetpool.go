package server

import (
	"context"
	"sync"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/pool/goroutine"
)

// gnet's goroutine pool at rest.
//
// gnet registers a connection (Engine.Register: every client connection,
// the doorbell, a TLS connection's pair) on a worker of its package-wide
// goroutine pool (goroutine.DefaultWorkerPool, an ants pool; nothing else
// of gnet's uses it on Linux), and an ants pool wakes twice a second to
// read the clock, work or no work: on an idle server that was half of its
// CPU (docs/BENCHMARKS.md, "Idle CPU: the wake-ups that are left"). With
// Config.RestGnetPool, the pool is released while the server is idle (the
// memory returner's idleness, idle.go) and started again before the next
// Register of any server in the process. A Register hands its work to a
// worker before it returns, and a release lets a busy worker finish, so a
// release never fails one.
// cmd/tickwheel sets it, its process being the server's alone; a program
// that embeds the server leaves it unset: another user of gnet in the same
// process would find the pool closed.

// gnetPool serializes the pool's release and restart with the Register
// calls, those of every server in the process.
var gnetPool sync.Mutex

// gnetRegister is s.eng.Register, the pool started again first if it rests
// (released by this server or another one in the process).
func (s *Server) gnetRegister(ctx context.Context) (<-chan gnet.RegisteredResult, error) {
	gnetPool.Lock()
	defer gnetPool.Unlock()
	if p := goroutine.DefaultWorkerPool; p.IsClosed() {
		p.Reboot() // waits for the workers of before the release to end
	}
	return s.eng.Register(ctx)
}

// restGnetPool releases the pool, with Config.RestGnetPool. Called when
// the server is idle.
func (s *Server) restGnetPool() {
	if !s.cfg.RestGnetPool {
		return
	}
	gnetPool.Lock()
	defer gnetPool.Unlock()
	if p := goroutine.DefaultWorkerPool; !p.IsClosed() {
		p.Release()
	}
}
