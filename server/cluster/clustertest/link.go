// Package clustertest has helpers for tests of replicated nodes: Link, a
// TCP forwarder a test puts on the path between two nodes to cut and heal
// it. It imports nothing of tickwheel's, so tests of real processes can use
// it as well as in-process ones.
package clustertest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
)

// Listen listens on a free 127.0.0.1 port below Linux's ephemeral range
// (32768-60999 by default) for a node that a test stops and restarts on
// the same address: a port from ":0" is an ephemeral one, and once the
// stopped node releases it any outgoing connection may take it ("address
// already in use" at the restart, seen under -race).
func Listen() (net.Listener, error) {
	var err error
	for try := 0; try < 200; try++ {
		var ln net.Listener
		if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))); err == nil {
			return ln, nil
		}
	}
	return nil, errors.Join(errors.New("clustertest: no free port below the ephemeral range"), err)
}

// Link forwards every connection made to its address to a target address,
// byte for byte, until it is cut. Put one on each direction between two
// nodes (node A dials B through the A→B link) and cutting both is a
// network partition between them.
//
// While cut, a Link closes every connection it carried (with a TCP reset)
// and holds new ones open without forwarding a byte (a black hole: the
// dialer sees a connection that never answers, as across a partition);
// Heal closes those and forwards new connections again.
type Link struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // both ends of forwarded connections, and held ones
	wg     sync.WaitGroup
}

// NewLink listens on 127.0.0.1 (a free port) and forwards to target.
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the address to dial instead of the target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[c] = struct{}{}
		cut := l.cut
		l.mu.Unlock()
		if cut {
			continue // held, silent, until Heal or Close
		}
		l.wg.Add(1)
		go l.forward(c)
	}
}

func (l *Link) forward(c net.Conn) {
	defer l.wg.Done()
	t, err := net.Dial("tcp", l.target)
	if err != nil {
		l.drop(c)
		return
	}
	l.mu.Lock()
	if l.cut || l.closed {
		l.mu.Unlock()
		t.Close()
		return // c was held or closed by Cut/Close
	}
	l.conns[t] = struct{}{}
	l.mu.Unlock()
	var once sync.Once
	end := func() { once.Do(func() { l.drop(c); l.drop(t) }) }
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		io.Copy(t, c)
		end()
	}()
	io.Copy(c, t)
	end()
}

func (l *Link) drop(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	reset(c)
}

// reset closes c with SO_LINGER 0, so that the peer gets a TCP reset.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// Cut breaks the link: connections it carries are reset, new ones are
// held without a byte forwarded.
func (l *Link) Cut() {
	l.mu.Lock()
	l.cut = true
	l.resetAll()
	l.mu.Unlock()
}

// Heal forwards new connections again; the held ones are reset (their
// dialer redials).
func (l *Link) Heal() {
	l.mu.Lock()
	l.cut = false
	l.resetAll()
	l.mu.Unlock()
}

func (l *Link) resetAll() {
	for c := range l.conns {
		reset(c)
		delete(l.conns, c)
	}
}

// Close stops the link and resets all its connections.
func (l *Link) Close() error {
	l.mu.Lock()
	l.closed = true
	l.resetAll()
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}
