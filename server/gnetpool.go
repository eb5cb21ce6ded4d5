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
// calls, those of every server in the process, and counts the
// registrations whose result has not come yet: the pool is released only
// when there are none. A worker that registers a connection waits for the
// server's event loop, and a Reboot after a release waits for every worker
// of before it; so a release while one waited would hold every server's
// next registration (under this lock) for one busy loop, or for ever for a
// loop that stopped.
var gnetPool struct {
	sync.Mutex
	pending int
}

// gnetRegister is s.eng.Register, the pool started again first if it rests
// (released by this server or another one in the process).
func (s *Server) gnetRegister(ctx context.Context) (<-chan gnet.RegisteredResult, error) {
	gnetPool.Lock()
	defer gnetPool.Unlock()
	if p := goroutine.DefaultWorkerPool; p.IsClosed() {
		p.Reboot() // waits for the workers of before the release (none busy) to end
	}
	res, err := s.eng.Register(ctx)
	if err != nil {
		return nil, err
	}
	gnetPool.pending++
	out := make(chan gnet.RegisteredResult, 1)
	go func() {
		r, ok := <-res
		gnetPool.Lock()
		gnetPool.pending--
		gnetPool.Unlock()
		if ok {
			out <- r
		}
		close(out)
	}()
	return out, nil
}

// restGnetPool releases the pool, with Config.RestGnetPool, unless a
// registration waits for its result. Called when the server is idle.
func (s *Server) restGnetPool() {
	if !s.cfg.RestGnetPool {
		return
	}
	gnetPool.Lock()
	defer gnetPool.Unlock()
	if p := goroutine.DefaultWorkerPool; gnetPool.pending == 0 && !p.IsClosed() {
		p.Release()
	}
}
