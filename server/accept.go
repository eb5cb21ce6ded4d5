package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
)

// The acceptor. The server accepts client connections itself, on a Go
// listener, and hands each to gnet's event loop with Engine.Register, rather
// than letting gnet listen: gnet's acceptor treats any accept error other
// than EAGAIN/EINTR/ECONNRESET/ECONNABORTED — EMFILE included — as fatal and
// shuts the whole engine down, so anyone who could open enough connections
// could stop the server. Here an accept error is logged (rate limited) and
// retried after a back-off, a connection over max_connections is refused
// with an error frame, and when the process is out of file descriptors the
// spare descriptor is given up for a moment to accept and refuse one
// connection, so clients are told rather than left hanging.
//
// gnet still needs a listener of its own to run: it gets a Unix socket in a
// private directory (mode 0700), and a connection that arrives there is
// closed at once (it has no clientMarker).

// fdReserve is how many file descriptors max_connections leaves for the rest
// of the process: the listeners, the event loop's poller, the doorbell, a
// descriptor being registered, the spare, log files.
const fdReserve = 32

// clientMarker is the gnet context of a connection the acceptor registered,
// until OnOpen replaces it with the session; it stays its SafeContext. The
// fields are set for a TLS connection's end of its pair (tlsconn.go):
// remote is the client's address, accepted when the TLS connection was
// accepted (ns since origin), and closed is called by OnClose.
type clientMarker struct {
	remote   string
	accepted int64
	closed   func()
}

// maxAcceptBackoff bounds the pause after a failed accept.
const maxAcceptBackoff = time.Second

// connectionLimit returns max_connections: the configured value, or by
// default the fd limit less fdReserve and the operator HTTP listener's
// share (httpFds; at most 100000); a configured value above what the fd
// limit allows is lowered to it, with a warning. So game clients, HTTP
// clients and the log's files together stay within the fd limit.
// maxConnectionsCap bounds the default max_connections, whatever the fd
// limit (docs/OPERATIONS.md; the hello example in docs/PROTOCOL.md shows it).
const maxConnectionsCap = 100_000

func (s *Server) connectionLimit() (int, error) {
	soft, hard, err := raiseFdLimit()
	if err != nil {
		return 0, fmt.Errorf("server: reading the fd limit: %w", err)
	}
	reserve := fdReserve + s.cfg.httpFds()
	allowed := int(min(soft, 1<<30)) - reserve
	if s.cfg.TLS.Enabled() {
		allowed /= tlsFdsPerConn // the socket and both ends of its pair (tlsconn.go)
	}
	if allowed < 1 {
		return 0, fmt.Errorf("server: the fd limit (%d) leaves no room for connections: raise it above %d (ulimit -n), "+
			"or lower http.max_connections (%d)", soft, reserve, s.cfg.HTTP.MaxConnections)
	}
	n := s.cfg.Limits.MaxConnections
	switch {
	case n == 0:
		n = min(allowed, maxConnectionsCap)
	case n > allowed:
		s.log.Warn("limits.max_connections lowered to fit the fd limit", "configured", n, "max_connections", allowed, "fd_limit", soft)
		n = allowed
	}
	s.log.Info("file descriptors", "fd_limit", soft, "fd_hard_limit", hard, "max_connections", n,
		"http_max_connections", s.cfg.HTTP.MaxConnections, "reserved", reserve)
	return n, nil
}

// privateListener returns the address of gnet's own Unix listener in a new
// private directory, which Stop removes.
func (s *Server) privateListener() (string, error) {
	dir, err := os.MkdirTemp("", "tickwheel-")
	if err != nil {
		return "", fmt.Errorf("server: private listener: %w", err)
	}
	s.privDir = dir
	return "unix://" + dir + "/loop.sock", nil
}

// acceptLoop accepts client connections until the listener is closed.
func (s *Server) acceptLoop() {
	defer close(s.acceptDone)
	spare, _ := os.Open(os.DevNull)
	defer func() {
		if spare != nil {
			spare.Close()
		}
	}()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if spare == nil { // lost to a failed reopen: try again
				spare, _ = os.Open(os.DevNull)
			}
			if (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && spare != nil {
				// Linux fails accept for want of a descriptor before it looks
				// for a pending connection: waiting for one is the back-off.
				spare = s.acceptWithSpare(spare)
				continue
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), maxAcceptBackoff)
			s.rlog.Warn("accept failed; retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return
			}
			continue
		}
		backoff = 0
		spare = s.admit(nc, spare)
	}
}

// admit serves nc, or refuses it when max_connections are open, and returns
// the spare descriptor.
func (s *Server) admit(nc net.Conn, spare *os.File) *os.File {
	if s.conns.Load() < int64(s.maxConns) {
		if s.tls != nil {
			s.conns.Add(1)
			s.count(&s.accepted)
			go s.serveTLS(nc, s.nowNs())
			return spare
		}
		return s.register(nc, spare)
	}
	s.count(&s.refused)
	s.rlog.Warn("connection refused: limit max_connections reached", "max_connections", s.maxConns, "remote", nc.RemoteAddr().String())
	why := fmt.Sprintf("limit max_connections (%d) reached", s.maxConns)
	select {
	case s.refusing <- struct{}{}: // refuse in the background, a few at a time
		go func() {
			if s.tls != nil {
				s.refuseTLS(nc, why) // tlsconn.go
			} else {
				refuse(nc, why)
			}
			<-s.refusing
		}()
	default:
		nc.Close()
	}
	return spare
}

// register hands nc to the event loop and waits until it is open there, so
// that at most one descriptor is being duplicated at a time. gnet works on a
// duplicate of the descriptor and closes nc: the spare is given up for the
// duplicate and taken back from nc's, so that a process with no descriptor
// to spare still serves the connection it accepted. It returns the spare.
func (s *Server) register(nc net.Conn, spare *os.File) *os.File {
	s.conns.Add(1)
	s.count(&s.accepted)
	if spare != nil {
		spare.Close()
	}
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), clientMarker{}), nc)
	res, err := s.gnetRegister(ctx)
	if err == nil {
		select {
		case r := <-res:
			err = r.Err
		case <-s.done:
			err = errors.New("server stopped")
		}
	}
	nc.Close() // in case registration failed before gnet closed it
	if err != nil {
		s.conns.Add(-1)
		if !s.stopping.Load() {
			s.rlog.Warn("connection dropped: cannot register it with the event loop", "err", err)
		}
	}
	spare, err = os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return spare
}

// acceptWithSpare runs while the process is out of descriptors: it gives up
// the spare descriptor to accept the connection that arrives within
// refuseLinger, if any, serves it when descriptors have come free meanwhile
// and refuses it otherwise, and takes the spare back (nil if it cannot: then
// accept errors back off instead).
func (s *Server) acceptWithSpare(spare *os.File) *os.File {
	spare.Close()
	tl, _ := s.ln.(*net.TCPListener)
	if tl != nil {
		_ = tl.SetDeadline(time.Now().Add(refuseLinger))
	}
	nc, err := s.ln.Accept()
	if tl != nil {
		_ = tl.SetDeadline(time.Time{})
	}
	spare, spareErr := os.Open(os.DevNull)
	if err != nil {
		if spareErr != nil {
			return nil
		}
		return spare
	}
	if spareErr == nil { // a descriptor beyond nc's is free again
		return s.admit(nc, spare)
	}
	s.count(&s.refused)
	s.rlog.Warn("connection refused: out of file descriptors")
	refuse(nc, "the server is out of file descriptors")
	spare, spareErr = os.Open(os.DevNull)
	if spareErr != nil {
		return nil
	}
	return spare
}

// refuseLinger is how long a refused connection is read and discarded after
// the error frame, so that a request the client sent meanwhile does not make
// the close a reset that destroys the frame before the client reads it.
const refuseLinger = 20 * time.Millisecond

// refuse tells a connection why it is not served, in an error frame with id
// 0, and closes it. The write cannot block for long: the socket is new.
func refuse(nc net.Conn, why string) { refuseCode(nc, protocol.CodeLimitExceeded, why) }

// refuseCode is refuse with an error code of the caller's.
func refuseCode(nc net.Conn, code protocol.Code, why string) {
	_ = nc.SetDeadline(time.Now().Add(refuseLinger))
	_, _ = nc.Write(protocol.AppendError(nil, 0, code, why))
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite() // the frame, then FIN
	}
	var sink [512]byte
	for {
		if _, err := nc.Read(sink[:]); err != nil {
			break
		}
	}
	nc.Close()
}
