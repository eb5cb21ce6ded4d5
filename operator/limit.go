package operator

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// capListener bounds the connections the HTTP server holds open at once:
// over max, a new connection is answered 503 and closed at once, on the
// accepting goroutine, so that at most one descriptor beyond max is ever in
// use (server.Config.HTTP: the server takes max+2 descriptors out of the
// budget max_connections comes from). Idle connections leave through the
// HTTP server's timeouts. Safe from any goroutine.
type capListener struct {
	net.Listener
	max      int64
	open     atomic.Int64  // connections accepted and not yet closed
	refused  atomic.Uint64 // connections answered 503 for want of room
	onRefuse func()        // called after each refusal (logging)
	// silent closes a connection over the cap without the 503: on an
	// HTTPS listener the client expects a TLS handshake, not plaintext.
	silent bool
}

// refusal is the whole answer to a connection over the cap.
var refusal = func() []byte {
	const body = "too many connections to the operator listener (limit http.max_connections reached)\n"
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// refuseWrite bounds the write of the refusal: the socket is new, so its
// buffer has room and the write does not block, unless the system is out
// of memory.
const refuseWrite = 50 * time.Millisecond

// Accept returns the next connection within the cap, refusing those over it.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &capConn{Conn: nc, l: l}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		if !l.silent {
			_ = nc.SetWriteDeadline(time.Now().Add(refuseWrite))
			_, _ = nc.Write(refusal)
		}
		nc.Close()
		if l.onRefuse != nil {
			l.onRefuse()
		}
	}
}

// capConn gives its place back when closed (once, however often Close is
// called).
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
