package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Every raft connection starts with a mutual challenge-response over the
// cluster token before raft's own bytes flow (the token itself never
// crosses the wire):
//
//	dialer → listener: "TWRAFT1\n", len(cluster id) (1 byte), cluster id, nonce D (32 bytes)
//	listener → dialer: status (1 byte: 0 ok, 1 wrong cluster id), nonce L (32 bytes),
//	                   HMAC-SHA256(token, "L" | cluster id | D | L)
//	dialer → listener: HMAC-SHA256(token, "D" | cluster id | D | L)
//	listener → dialer: status (1 byte: 0 ok, 2 wrong token)
//
// A listener refuses a peer with another cluster id or a wrong MAC, closes
// the connection and logs it (at most one line per authLogEvery, with the
// count of refusals since the last); a dialer refuses a listener whose MAC
// is wrong. The whole exchange has handshakeTimeout. It authenticates the
// peer; it does not encrypt the traffic (that is for TLS).

const (
	authMagic        = "TWRAFT1\n"
	nonceLen         = 32
	handshakeTimeout = 5 * time.Second
	authLogEvery     = 10 * time.Second
	// acceptBacklog is how many authenticated connections may wait for
	// raft's accept loop.
	acceptBacklog = 16
)

const (
	authOK byte = iota
	authWrongCluster
	authWrongToken
)

// ErrAuth is the error of a raft connection whose peer failed the cluster
// token handshake (wrong token or cluster id).
var ErrAuth = errors.New("cluster: peer failed authentication")

func mac(token []byte, role byte, cluster string, d, l []byte) []byte {
	h := hmac.New(sha256.New, token)
	h.Write([]byte{role})
	h.Write([]byte(cluster))
	h.Write(d)
	h.Write(l)
	return h.Sum(nil)
}

// authLayer is raft's StreamLayer: a TCP listener whose accepted
// connections are handed to raft only once authenticated (each handshake
// on its own goroutine, so a slow or hostile peer cannot hold up others),
// and a dialer that authenticates before returning.
type authLayer struct {
	ln        net.Listener
	advertise net.Addr
	cluster   string
	token     []byte
	log       *slog.Logger
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	refusals  refusalLog
	// tlsServer and tlsClient put raft connections under TLS (Config's
	// TLSServer and TLSClient); nil: plaintext.
	tlsServer *tls.Config
	tlsClient func(host string) *tls.Config
}

// newAuthLayer starts accepting on ln; tlsServer and tlsClient, when not
// nil, put the connections under TLS.
func newAuthLayer(ln net.Listener, advertise net.Addr, cluster string, token []byte, log *slog.Logger,
	tlsServer *tls.Config, tlsClient func(host string) *tls.Config) *authLayer {
	a := &authLayer{ln: ln, advertise: advertise, cluster: cluster, token: token, log: log,
		conns: make(chan net.Conn, acceptBacklog), done: make(chan struct{}), tlsServer: tlsServer, tlsClient: tlsClient}
	a.refusals.log = log
	go a.acceptLoop()
	return a
}

func (a *authLayer) acceptLoop() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			select {
			case <-a.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			a.log.Warn("cluster: accepting a raft connection", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go a.admit(c)
	}
}

// admit authenticates c (TLS first, when on) and queues it for raft, or
// closes it.
func (a *authLayer) admit(c net.Conn) {
	if a.tlsServer != nil {
		tc := tls.Server(c, a.tlsServer)
		if err := tlsHandshake(tc, handshakeTimeout); err != nil {
			c.Close()
			a.refusals.note(c.RemoteAddr(), fmt.Errorf("%w: TLS: %w", ErrAuth, err))
			return
		}
		c = tc
	}
	if err := a.serverHandshake(c); err != nil {
		c.Close()
		a.refusals.note(c.RemoteAddr(), err)
		return
	}
	a.queue(c)
}

// queue hands c to raft's Accept, or closes it when the layer is closed:
// a connection left in the queue would stay open with nobody reading it,
// and the peer that dialed it would wait out its whole RPC timeout on
// every request (raft's Shutdown on that peer waits for it too).
func (a *authLayer) queue(c net.Conn) {
	select {
	case <-a.done:
		c.Close()
		return
	default:
	}
	select {
	case a.conns <- c:
	case <-a.done:
		c.Close()
		return
	}
	select { // Close may have drained the queue before c went in
	case <-a.done:
		a.drain()
	default:
	}
}

// drain closes the connections queued and not accepted.
func (a *authLayer) drain() {
	for {
		select {
		case c := <-a.conns:
			c.Close()
		default:
			return
		}
	}
}

func (a *authLayer) serverHandshake(c net.Conn) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	head := make([]byte, len(authMagic)+1)
	if _, err := io.ReadFull(c, head); err != nil {
		return fmt.Errorf("reading the handshake: %w", err)
	}
	if string(head[:len(authMagic)]) != authMagic {
		return fmt.Errorf("%w: not a tickwheel raft peer", ErrAuth)
	}
	rest := make([]byte, int(head[len(authMagic)])+nonceLen)
	if _, err := io.ReadFull(c, rest); err != nil {
		return fmt.Errorf("reading the handshake: %w", err)
	}
	cluster, d := string(rest[:len(rest)-nonceLen]), rest[len(rest)-nonceLen:]
	if cluster != a.cluster {
		c.Write([]byte{authWrongCluster})
		return fmt.Errorf("%w: cluster id %q, not %q", ErrAuth, cluster, a.cluster)
	}
	l := make([]byte, nonceLen)
	rand.Read(l)
	out := append(append([]byte{authOK}, l...), mac(a.token, 'L', a.cluster, d, l)...)
	if _, err := c.Write(out); err != nil {
		return err
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("reading the handshake: %w", err)
	}
	if !hmac.Equal(got, mac(a.token, 'D', a.cluster, d, l)) {
		c.Write([]byte{authWrongToken})
		return fmt.Errorf("%w: wrong cluster token", ErrAuth)
	}
	_, err := c.Write([]byte{authOK})
	return err
}

func (a *authLayer) clientHandshake(c net.Conn, timeout time.Duration) error {
	if timeout <= 0 || timeout > handshakeTimeout {
		timeout = handshakeTimeout
	}
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	d := make([]byte, nonceLen)
	rand.Read(d)
	hello := append(append(append([]byte(authMagic), byte(len(a.cluster))), a.cluster...), d...)
	if _, err := c.Write(hello); err != nil {
		return err
	}
	resp := make([]byte, 1+nonceLen+sha256.Size)
	if _, err := io.ReadFull(c, resp[:1]); err != nil {
		return fmt.Errorf("reading the handshake: %w", err)
	}
	if resp[0] == authWrongCluster {
		return fmt.Errorf("%w: the peer is not in cluster %q", ErrAuth, a.cluster)
	}
	if _, err := io.ReadFull(c, resp[1:]); err != nil {
		return fmt.Errorf("reading the handshake: %w", err)
	}
	l, theirs := resp[1:1+nonceLen], resp[1+nonceLen:]
	if !hmac.Equal(theirs, mac(a.token, 'L', a.cluster, d, l)) {
		return fmt.Errorf("%w: the peer does not hold the cluster token", ErrAuth)
	}
	if _, err := c.Write(mac(a.token, 'D', a.cluster, d, l)); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, resp[:1]); err != nil {
		return fmt.Errorf("reading the handshake: %w", err)
	}
	if resp[0] != authOK {
		return fmt.Errorf("%w: the peer refused our cluster token", ErrAuth)
	}
	return nil
}

// tlsHandshake runs tc's handshake within timeout (at most
// handshakeTimeout).
func tlsHandshake(tc *tls.Conn, timeout time.Duration) error {
	if timeout <= 0 || timeout > handshakeTimeout {
		timeout = handshakeTimeout
	}
	tc.SetDeadline(time.Now().Add(timeout))
	defer tc.SetDeadline(time.Time{})
	return tc.Handshake()
}

// Dial is raft's outgoing connection: TCP, TLS when on, then the handshake.
func (a *authLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if a.tlsClient != nil {
		host, _, _ := net.SplitHostPort(string(address))
		tc := tls.Client(c, a.tlsClient(host))
		if err := tlsHandshake(tc, timeout); err != nil {
			c.Close()
			err = fmt.Errorf("%w: TLS with %s: %w", ErrAuth, address, err)
			a.refusals.note(c.RemoteAddr(), err)
			return nil, err
		}
		c = tc
	}
	if err := a.clientHandshake(c, timeout); err != nil {
		c.Close()
		a.refusals.note(c.RemoteAddr(), err)
		return nil, err
	}
	return c, nil
}

// Accept returns the next authenticated connection; after Close, none.
func (a *authLayer) Accept() (net.Conn, error) {
	select {
	case <-a.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-a.conns:
		return c, nil
	case <-a.done:
		return nil, net.ErrClosed
	}
}

func (a *authLayer) Close() error {
	var err error
	a.closeOnce.Do(func() {
		close(a.done)
		err = a.ln.Close()
		a.drain()
	})
	return err
}

func (a *authLayer) Addr() net.Addr {
	if a.advertise != nil {
		return a.advertise
	}
	return a.ln.Addr()
}

// refusalLog logs refused raft connections at most once per authLogEvery,
// counting the ones it did not log.
type refusalLog struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
	total      uint64
}

func (r *refusalLog) note(peer net.Addr, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if !errors.Is(err, ErrAuth) {
		return // a peer gone mid-handshake is not an intruder; raft logs its own dial errors
	}
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < authLogEvery {
		r.suppressed++
		return
	}
	r.log.Warn("cluster: raft connection refused", "peer", peer.String(), "err", err,
		"refused_since_last_line", r.suppressed)
	r.last, r.suppressed = now, 0
}

// count is the number of connections refused so far (any handshake error).
func (r *refusalLog) count() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}
