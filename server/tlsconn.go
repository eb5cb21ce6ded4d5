package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/tlsconf"
)

// TLS on the client port (config key tls). gnet has no TLS, so TLS is
// terminated outside the event loop: the acceptor hands each accepted
// connection to a goroutine of its own (serveTLS), which runs the
// crypto/tls handshake, then makes a Unix socket pair, enrolls one end in
// the event loop exactly as the acceptor enrolls a plaintext connection
// (same OnOpen, OnTraffic, limits, timeouts, linger), and copies bytes
// between the TLS connection and its own end of the pair, one goroutine
// each way. The loop sees an ordinary stream; plaintext connections take
// the acceptor's path unchanged and pay nothing for TLS (when tls is set,
// every client connection is TLS).
//
// What a TLS connection costs: three file descriptors (the TCP socket and
// both ends of the pair; limits.max_connections' default divides the fd
// budget by three), two goroutines with a tlsCopyBuf buffer each, and the
// kernel buffers of the pair. The pair's buffers are where backpressure
// goes: a client that does not read stops the copy out of the pair, the
// pair fills, and the loop's outbound buffer grows up to max_outbound as
// for a plaintext client.
//
// Limits: the connection counts towards max_connections from its accept
// (a handshake in progress included), its handshake must end within
// timeouts.handshake of the accept, and the hello within the same
// timeouts.handshake, measured from the accept too (the link's opened
// instant is the accept's). max_inbound, idle and frame timeouts apply on
// the loop as for any connection.

// tlsCopyBuf is the size of each copy goroutine's buffer: a TLS record's
// largest plaintext (16 KiB) and some, so one read of the pair fills a
// record and one read of TLS takes a whole record.
const tlsCopyBuf = 32 << 10

// notTLS is the error sent, in plaintext, to a client that does not speak
// TLS on the TLS port.
const notTLS = "this port speaks TLS (the server has tls.cert_file): connect with TLS " +
	"(Go client WithTLS/WithTLSFiles, TypeScript tls option, CLI -tls-ca)"

// tlsFdsPerConn is how many file descriptors a TLS connection holds.
const tlsFdsPerConn = 3

// tlsCloseLinger is how long the copy out may still take to write what the
// loop had written into the pair once the loop closed its end: a client
// that does not read for that long is cut (see pump).
const tlsCloseLinger = 10 * time.Second

// tlsConns tracks the TLS connections whose handshake runs, so Stop can
// end them. Safe from any goroutine.
type tlsConns struct {
	mu     sync.Mutex
	m      map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// add tracks nc; false when Stop has begun (nc is then not served).
func (t *tlsConns) add(nc net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.m == nil {
		t.m = make(map[net.Conn]struct{})
	}
	t.m[nc] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *tlsConns) done(nc net.Conn) {
	t.mu.Lock()
	delete(t.m, nc)
	t.mu.Unlock()
	t.wg.Done()
}

// closeAll closes every tracked connection (their goroutines then end)
// and refuses new ones.
func (t *tlsConns) closeAll() {
	t.mu.Lock()
	t.closed = true
	for nc := range t.m {
		nc.Close()
	}
	t.mu.Unlock()
}

// startTLS loads the client port's certificates when tls is configured.
func (s *Server) startTLS() error {
	if !s.cfg.TLS.Enabled() {
		return nil
	}
	r, err := tlsconf.New(s.cfg.TLS)
	if err != nil {
		return tlsKeyErr("tls.", err)
	}
	s.tls = r
	s.tlsCfg = r.Config()
	return nil
}

// tlsKeyErr makes a tlsconf error a *ConfigError naming its key.
func tlsKeyErr(prefix string, err error) error {
	var e *tlsconf.Error
	if errors.As(err, &e) {
		return keyErr(prefix+e.Key, "%v", e.Err)
	}
	return err
}

// ReloadTLS reads the client port's certificate, key and client CA files
// again (on SIGHUP): new connections get the new certificate, open ones
// keep theirs. On an error the old ones stay in use. A no-op without TLS.
// Safe from any goroutine.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	if err := s.tls.Reload(); err != nil {
		s.log.Error("TLS: reloading the certificate failed; the old one stays in use", "err", err)
		return tlsKeyErr("tls.", err)
	}
	leaf := s.tls.Leaf()
	s.log.Info("TLS: certificate reloaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// serveTLS runs on a goroutine of its own for a connection accepted while
// TLS is on, which already counts in s.conns: it runs the handshake within
// timeouts.handshake, then enrolls a socket pair's end in the event loop
// and copies between the two until either side ends.
func (s *Server) serveTLS(nc net.Conn, accepted int64) {
	if !s.tlsLive.add(nc) {
		nc.Close()
		s.conns.Add(-1)
		return
	}
	tc := tls.Server(nc, s.tlsCfg)
	if d := time.Duration(s.tlsHandshake.Load()); d > 0 {
		_ = nc.SetDeadline(s.origin.Add(time.Duration(accepted) + d))
	}
	err := tc.Handshake()
	s.tlsLive.done(nc)
	if err != nil {
		s.tlsFailed.Add(1)
		if !s.stopping.Load() {
			s.rlog.Warn("TLS handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		}
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) && rh.Conn != nil {
			// Not TLS at all: most likely a client without TLS, which
			// reads this error frame where it expected the hello's reply.
			refuseCode(nc, protocol.CodeMalformed, notTLS)
		}
		nc.Close()
		s.conns.Add(-1)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	// When the loop closes its end, a copy out blocked on a client that
	// does not read must not hold the connection for ever.
	closed := func() { _ = nc.SetWriteDeadline(time.Now().Add(tlsCloseLinger)) }
	ours, err := s.enrollPair(clientMarker{remote: nc.RemoteAddr().String(), accepted: accepted, closed: closed})
	if err != nil {
		if !s.stopping.Load() {
			s.rlog.Warn("TLS connection dropped: cannot enroll it in the event loop", "err", err)
		}
		tc.Close()
		return
	}
	pump(tc, ours)
}

// tlsRefuseWithin bounds the handshake of a connection refused for
// max_connections, so that refusals (64 at most at once) cannot be held.
const tlsRefuseWithin = time.Second

// refuseTLS is refuse for a TLS port: the error frame goes inside TLS,
// where the client reads its hello's reply, after a handshake of at most
// tlsRefuseWithin (a client that fails it, or has no TLS, is just closed).
func (s *Server) refuseTLS(nc net.Conn, why string) {
	defer nc.Close()
	tc := tls.Server(nc, s.tlsCfg)
	_ = nc.SetDeadline(time.Now().Add(tlsRefuseWithin))
	if tc.Handshake() != nil {
		return
	}
	_ = nc.SetDeadline(time.Now().Add(refuseLinger))
	_, _ = tc.Write(protocol.AppendError(nil, 0, protocol.CodeLimitExceeded, why))
	_ = tc.CloseWrite() // close_notify
	var sink [512]byte
	for {
		if _, err := tc.Read(sink[:]); err != nil {
			break
		}
	}
}

// enrollPair makes a Unix socket pair, enrolls one end in the event loop
// as a client connection with marker as its context, and returns the
// other. On an error s.conns is given back.
func (s *Server) enrollPair(marker clientMarker) (*net.UnixConn, error) {
	ours, theirs, err := unixPair()
	if err != nil {
		s.conns.Add(-1)
		return nil, err
	}
	// One enrollment at a time, as the acceptor's (at most one descriptor
	// being duplicated).
	s.enrollMu.Lock()
	res, err := s.gnetRegister(gnet.NewNetConnContext(gnet.NewContext(context.Background(), marker), theirs))
	if err == nil {
		select {
		case r := <-res:
			err = r.Err
		case <-s.done:
			err = errors.New("server stopped")
		}
	}
	s.enrollMu.Unlock()
	theirs.Close() // gnet holds a duplicate
	if err != nil {
		ours.Close()
		s.conns.Add(-1) // OnClose never runs for it
		return nil, err
	}
	return ours, nil
}

// pump copies tc's plaintext into the pair and the pair's bytes into tc
// until both directions end, then closes both. When the client ends its
// stream (EOF, a TLS alert, a reset) the pair's write side is shut, so the
// loop reads EOF and closes its end; when the loop closes its end (a
// timeout, a limit, a stop), what it wrote is copied out first, then
// close_notify is sent and tc closed, which ends the other direction.
func pump(tc *tls.Conn, pair *net.UnixConn) {
	in := make(chan struct{})
	go func() {
		defer close(in)
		buf := make([]byte, tlsCopyBuf)
		_, _ = io.CopyBuffer(pairWriter{pair}, tlsReader{tc}, buf)
		_ = pair.CloseWrite()
	}()
	buf := make([]byte, tlsCopyBuf)
	_, _ = io.CopyBuffer(tlsWriter{tc}, pairReader{pair}, buf)
	_ = tc.SetWriteDeadline(time.Now().Add(time.Second)) // close_notify must not block on a client that does not read
	tc.Close()                                           // ends the copy in
	<-in
	pair.Close()
}

// The copy's ends, hiding ReadFrom/WriteTo so io.CopyBuffer uses its
// buffer (a UnixConn's ReadFrom would try splice and then allocate).
type (
	tlsReader  struct{ c *tls.Conn }
	tlsWriter  struct{ c *tls.Conn }
	pairReader struct{ c *net.UnixConn }
	pairWriter struct{ c *net.UnixConn }
)

func (r tlsReader) Read(b []byte) (int, error)   { return r.c.Read(b) }
func (w tlsWriter) Write(b []byte) (int, error)  { return w.c.Write(b) }
func (r pairReader) Read(b []byte) (int, error)  { return r.c.Read(b) }
func (w pairWriter) Write(b []byte) (int, error) { return w.c.Write(b) }
