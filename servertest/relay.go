package servertest

import (
	"io"
	"net"
	"sync"
)

// relay forwards every connection made to it to the server, byte for byte,
// so that DropConnections can cut them as a network failure would. Each
// connection has two goroutines, one per direction; when one direction
// ends (EOF or error), both sockets are closed, after what it read was
// written on: a server's parting error frame and its close reach the
// client as they would directly.
type relay struct {
	ln     net.Listener
	target string // the server's address

	mu     sync.Mutex
	pairs  map[*pair]struct{}
	closed bool // stop was called: no new pairs
	wg     sync.WaitGroup
}

// pair is one relayed connection: the client's end and the server's.
type pair struct {
	client, server net.Conn
	once           sync.Once
}

// close closes both ends; with reset, each with SO_LINGER 0, so that both
// peers get a TCP reset (RST) rather than an orderly close.
func (p *pair) close(reset bool) {
	p.once.Do(func() {
		for _, c := range []net.Conn{p.client, p.server} {
			if tc, ok := c.(*net.TCPConn); ok && reset {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
	})
}

func newRelay(target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, pairs: make(map[*pair]struct{})}
	r.wg.Go(r.accept)
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil { // the server is restarting: the client retries
			c.Close()
			continue
		}
		p := &pair{client: c, server: s}
		r.mu.Lock()
		closed := r.closed
		if !closed {
			r.pairs[p] = struct{}{}
		}
		r.mu.Unlock()
		if closed {
			p.close(false)
			return
		}
		r.wg.Go(func() { r.pipe(p, p.server, p.client) })
		r.wg.Go(func() { r.pipe(p, p.client, p.server) })
	}
}

// pipe copies from src to dst until either fails, then closes the pair.
func (r *relay) pipe(p *pair, dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	p.close(false)
	r.mu.Lock()
	delete(r.pairs, p)
	r.mu.Unlock()
}

// reset cuts every relayed connection with a TCP reset and returns how
// many there were.
func (r *relay) reset() int {
	r.mu.Lock()
	ps := make([]*pair, 0, len(r.pairs))
	for p := range r.pairs {
		ps = append(ps, p)
		delete(r.pairs, p)
	}
	r.mu.Unlock()
	for _, p := range ps {
		p.close(true)
	}
	return len(ps)
}

// stop closes the listener and every connection, and waits for the
// relay's goroutines.
func (r *relay) stop() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.ln.Close()
	r.reset()
	r.wg.Wait()
}
