package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// Client is a connection to a tickwheel server that reconnects by itself.
// All its methods are safe for concurrent use; calls are pipelined on one
// connection and answered by id.
type Client struct {
	o     options
	addr  string   // Dial's addr, for messages
	addrs []string // the servers' addresses (a cluster's nodes), in order; fixed at Dial

	ctx    context.Context // cancelled by Close: ends dials and reconnects
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
	nextID atomic.Uint64
	// clientID names this Client in the request ids of its changes
	// (protocol.Request.Client): random, non-zero, fixed at Dial. With
	// nextID, which never repeats, it identifies each change across
	// reconnections, so that a server that remembers request ids answers
	// a retry with the first reply (see do).
	clientID uint64

	// evq carries events to the consumer: it is the Events channel, or the
	// handler's queue. Readers send to it; it is closed once no reader can.
	evq       chan Event
	closeEvq  sync.Once
	closeOnce sync.Once

	// pushed counts the events queued to evq; handledN those the handler
	// returned for: what the user has taken (takenCount), for auto acks.
	pushed, handledN atomic.Uint64
	// pushing is set while deliver sends an event of an acknowledged-mode
	// Client to evq and counts it in pushed: between the two the user may
	// already hold the event, which pushed does not count yet
	// (takenCount waits that out).
	pushing atomic.Bool
	// afterSend, for tests, runs between an event's send to evq and its
	// count in pushed.
	afterSend func()
	acks      acker

	// dropped counts the events the server gave up on or that went
	// missing (see Dropped).
	dropped atomic.Uint64
	// seqs holds the last event seq seen of each bound receiver (see
	// seqGap); a receiver without an entry has none known yet.
	seqMu sync.Mutex
	seqs  map[uint64]uint64

	// dispatched is closed when the handler's goroutine has exited.
	dispatched chan struct{}

	mu     sync.Mutex
	cn     *conn                  // current connection; nil while reconnecting
	ready  chan struct{}          // closed when cn is set (or lost is set)
	closed bool                   // Close was called
	lost   error                  // the connection dropped and reconnection is off
	hello  protocol.Hello         // the current connection's hello result
	bound  map[uint64]BindOptions // receivers to re-bind after a reconnect, with their options
	// cursor is the index in addrs of the address the current (or last)
	// connection began at; a reconnection's pass starts after it.
	cursor int
	// hint is the leader address named by the not_leader reply that ended
	// the last connection, tried first by the next pass ("" for none).
	hint string
	// curAddr is the address of the current (or last) connection.
	curAddr string
}

// Dial connects to the server at addr (host:port) and says hello. It
// returns once the hello succeeded; ctx bounds the dial and the hello, not
// the Client's life. A hello refused by the server returns its *Error
// (ErrUnauthorized for a bad token, ErrUnsupportedVersion); a server that
// answers in HTTP (the operator port, by mistake) returns an error that
// names addr and says so. When ctx has no deadline, each address's dial
// and hello are bounded by WithDialTimeout's duration (10 s by default), as
// each reconnection attempt is, and Dial as a whole by that duration times
// the number of addresses: a server that accepts but never answers fails
// the Dial instead of hanging it. Reconnection (WithReconnect) starts only
// after a first success.
//
// addr may list the nodes of a cluster, separated by commas
// ("a:7420,b:7420,c:7420"; WithAddrs adds more): Dial then connects to
// the leader, following the not_leader replies of followers, and every
// reconnection does the same, so that after a failover the Client re-binds
// its receivers on the new leader (see DefaultLeaderHops for the order and
// the bounds). With several addresses, an error of Dial lists each
// address's failure; errors.Is and errors.As see each of them.
// Dial retries, with backoff and until ctx ends, only while the nodes
// answer that they know no leader.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	c := &Client{
		clientID: newClientID(),
		o:        defaultOptions(),
		addr:     addr,
		done:     make(chan struct{}),
		ready:    make(chan struct{}),
		bound:    make(map[uint64]BindOptions),
		seqs:     make(map[uint64]uint64),

		dispatched: make(chan struct{}),
	}
	for _, opt := range opts {
		opt(&c.o)
	}
	if c.o.tlsErr != nil {
		return nil, c.o.tlsErr
	}
	c.addrs = splitAddrs(addr, c.o.addrs)
	if len(c.addrs) == 0 {
		return nil, fmt.Errorf("tickwheel: no server address (addr %q)", addr)
	}
	if c.addr == "" {
		c.addr = strings.Join(c.addrs, ",")
	}
	c.acks.init(c.o.log, c.takenCount)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.evq = make(chan Event, c.o.eventBuffer)
	if c.o.handler != nil {
		c.wg.Go(c.dispatchLoop)
	} else {
		close(c.dispatched)
	}
	dctx := ctx
	_, hasDeadline := ctx.Deadline()
	if !hasDeadline && c.o.dialTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, c.o.dialTimeout*time.Duration(len(c.addrs)))
		defer cancel()
	}
	if err := c.dialPasses(dctx); err != nil {
		c.Close()
		if !hasDeadline && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, new(*dialTimeoutError)) {
			err = fmt.Errorf("tickwheel: %s: no hello reply within %v (WithDialTimeout): %w", c.addr, c.o.dialTimeout, err)
		}
		return nil, err
	}
	return c, nil
}

// dispatchLoop calls the handler for each event, in order, until Close
// (events still queued then are dropped) or until the queue is closed after
// a final connection loss (they are delivered first).
func (c *Client) dispatchLoop() {
	defer close(c.dispatched)
	for {
		select {
		case <-c.done:
			return
		default:
		}
		select {
		case ev, ok := <-c.evq:
			if !ok {
				return
			}
			c.o.handler(ev)
			c.handledN.Add(1)
		case <-c.done:
			return
		}
	}
}

// connect dials addr, says hello, queues the re-binds, makes the connection
// the current one, and waits for the re-bind replies.
func (c *Client) connect(ctx context.Context, addr string) error {
	nc, err := c.dialConn(ctx, addr) // tls.go
	if err != nil {
		return err
	}
	cn := newConn(nc, addr, &c.nextID, &c.acks)
	c.wg.Go(func() { c.readLoop(cn) })
	c.wg.Go(cn.writeLoop)
	stop := context.AfterFunc(ctx, func() { nc.Close() }) // a cancelled dial+hello drops the connection
	defer stop()

	res, err := c.roundTrip(ctx, cn, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: c.o.name, Token: c.o.token}, nil)
	if errors.Is(err, errConnDead) {
		// The server closed the connection before the hello went out
		// (e.g. max_connections reached): say why, as a call in flight
		// would have been told.
		cn.mu.Lock()
		if cn.lost != nil {
			err = cn.lost
		}
		cn.mu.Unlock()
	}
	if err != nil {
		nc.Close()
		if ctx.Err() != nil && !errors.As(err, new(*Error)) {
			return ctx.Err()
		}
		return c.tlsRefusal(addr, err)
	}
	var h protocol.Hello
	if err := protocol.DecodeHello(res, &h); err != nil {
		nc.Close()
		return badReply(protocol.OpHello, err)
	}

	// Re-bind before publishing, so that the binds precede every call made
	// on the new connection.
	rebinds := c.queueRebinds(cn, &h)

	c.mu.Lock()
	cn.mu.Lock()
	dead := cn.dead
	cn.mu.Unlock()
	switch {
	case c.closed:
		c.mu.Unlock()
		nc.Close()
		return ErrClosed
	case dead:
		c.mu.Unlock()
		return disconnected(errors.New("connection lost during hello"))
	}
	cn.published = true
	c.cn = cn
	c.curAddr = addr
	close(c.ready)
	c.mu.Unlock()
	c.acks.setConn(cn)
	stop()
	c.o.log.Info("tickwheel: connected", "addr", addr, "session", h.Session, "rebinds", len(rebinds))

	c.awaitRebinds(ctx, rebinds)
	return nil
}

// rebind is a re-bind after a reconnect, and its call.
type rebind struct {
	receiver uint64
	opts     BindOptions
	cl       *call
}

// queueRebinds makes h's session the current one and queues on cn a bind of
// every receiver bound before, with its options.
func (c *Client) queueRebinds(cn *conn, h *protocol.Hello) []rebind {
	c.mu.Lock()
	// The new session is current from here: a re-bind delivers its
	// backlog at once, and whoever reads those events must see it.
	c.hello = *h
	rebinds := make([]rebind, 0, len(c.bound))
	for r, o := range c.bound {
		rebinds = append(rebinds, rebind{receiver: r, opts: o})
	}
	c.mu.Unlock()
	cn.mu.Lock()
	if h.Limits.MaxFrame > 0 && h.Limits.MaxFrame < uint64(maxServerFrame) {
		cn.maxFrame = int(h.Limits.MaxFrame)
	}
	cn.requestIDs = h.Limits.RequestIDTicks > 0
	cn.mu.Unlock()
	cn.setIdleTimeout(h.Limits.IdleTimeoutMs)
	for i := range rebinds {
		rb := &rebinds[i]
		rb.cl = &call{op: protocol.OpBind, ch: make(chan reply, 1), onOK: c.bindReplied(rb.receiver, rb.opts)}
		req := protocol.Request{Op: protocol.OpBind, ID: c.nextID.Add(1), Receiver: rb.receiver,
			Ephemeral: rb.opts.Ephemeral, Ack: rb.opts.Ack != AckNone}
		if err := cn.send(&req, rb.cl); err != nil {
			rb.cl.ch <- reply{err: err}
		}
	}
	return rebinds
}

// awaitRebinds waits for the re-binds' replies (or ctx) and forgets the
// receivers the server refused to bind again.
func (c *Client) awaitRebinds(ctx context.Context, rebinds []rebind) {
	for _, rb := range rebinds {
		var r reply
		select {
		case r = <-rb.cl.ch:
		case <-ctx.Done():
			return // the connection is up; a later loss will retry
		}
		if r.err == nil {
			continue
		}
		c.o.log.Warn("tickwheel: re-bind failed", "receiver", rb.receiver, "err", r.err)
		if errors.As(r.err, new(*Error)) {
			c.mu.Lock()
			delete(c.bound, rb.receiver)
			c.mu.Unlock()
			c.forgetSeq(rb.receiver)
			c.acks.forget(rb.receiver)
		}
	}
}

// lose handles the end of cn, reported by its reader with the cause: fails
// its pending calls and, for the current connection, starts reconnecting.
func (c *Client) lose(cn *conn, cause error) {
	cn.nc.Close()
	close(cn.quit)
	c.mu.Lock()
	closing := c.closed
	err := ErrClosed
	if !closing {
		err = disconnected(cause)
	}
	cn.mu.Lock()
	cn.dead, cn.lost = true, err
	pending := cn.pending
	cn.pending = nil
	cn.failBatches(err)
	cn.mu.Unlock()
	if cn.published && c.cn == cn {
		c.cn = nil
		c.ready = make(chan struct{})
		c.hint = leaderHint(cause)
		switch {
		case closing:
		case c.o.reconnectMin > 0:
			c.o.log.Warn("tickwheel: connection lost; reconnecting", "addr", cn.addr, "err", cause)
			c.wg.Go(func() { c.reconnect(cause) })
		default:
			c.o.log.Warn("tickwheel: connection lost", "addr", cn.addr, "err", cause)
			c.lost = cause
			close(c.ready)
			// This reader was the last sender: no event can follow.
			c.closeEvq.Do(func() { close(c.evq) })
		}
	}
	c.mu.Unlock()
	c.acks.lost(cn)
	for _, cl := range pending {
		cl.fail(err)
	}
}

// reconnect makes passes over the addresses (each attempt bounded by
// WithDialTimeout's duration), with exponential backoff and jitter between
// them, until one connects or the Client is closed; it calls the
// connection hooks (WithConnectionHooks) with the cause of the loss, and on
// success.
func (c *Client) reconnect(cause error) {
	if c.o.onLost != nil {
		c.o.onLost(cause)
	}
	d := c.o.reconnectMin
	for {
		if !sleepJitter(c.ctx, d) {
			return
		}
		err, _ := c.pass(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		if err == nil {
			if c.o.onReconnect != nil {
				c.o.onReconnect()
			}
			return
		}
		c.o.log.Warn("tickwheel: reconnect failed", "addr", c.addr, "err", err, "retry_in", min(2*d, c.o.reconnectMax))
		d = min(2*d, c.o.reconnectMax)
	}
}

// Close closes the connection and stops the Client. Calls in flight or
// waiting for a connection return ErrClosed, and so do later calls. Close
// returns once every goroutine of the Client has exited, the handler's
// included (so it must not be called from the handler); the Events channel
// is then closed, after the events still buffered in it. Close is
// idempotent and always returns nil.
//
// Before closing the connection, Close writes the acks due (AckAuto events
// already taken, deferred Ack calls), without waiting for their replies;
// events still queued to the handler are not handled, and are delivered
// again to the receiver's next binder.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		cn := c.cn
		c.mu.Unlock()
		close(c.done)
		c.cancel()
		if cn != nil {
			c.flushAcks(cn)
			cn.nc.Close()
		}
		c.wg.Wait()
		c.closeEvq.Do(func() { close(c.evq) })
	})
	return nil
}

// flushAcks writes the acks due on cn right away, for Close.
func (c *Client) flushAcks(cn *conn) {
	if c.acks.n.Load() == 0 {
		return
	}
	// Let the handler return for its last event, so that it is acked; a
	// handler stuck in a call ends with the connection, after this wait.
	t := time.NewTimer(closeFlushTimeout)
	select {
	case <-c.dispatched:
	case <-t.C:
	}
	t.Stop()
	items := c.acks.flush(cn, nil)
	if len(items) == 0 {
		return
	}
	var b []byte
	for _, it := range items {
		b = protocol.AppendRequest(b, &protocol.Request{Op: protocol.OpAck, ID: c.nextID.Add(1), Receiver: it.receiver, Seq: it.seq})
	}
	// One Write is not interleaved with the writer's: frames stay whole.
	_ = cn.nc.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	if _, err := cn.nc.Write(b); err != nil {
		c.o.log.Debug("tickwheel: writing the last acks", "err", err)
	}
}

// Events returns the channel of events (fires, takeovers and reports of
// dropped events), in order.
// It is closed when the Client is closed (or its connection lost for good
// with reconnection disabled). It returns nil when a handler was set with
// WithHandler. See the package doc on backpressure: a consumer that falls
// behind stalls the whole Client.
func (c *Client) Events() <-chan Event {
	if c.o.handler != nil {
		return nil
	}
	return c.evq
}

// Session returns the server's id for the current session, as named in
// other clients' Takeover events. Each reconnect gets a new session (a
// restarted server may hand out the same ids again).
func (c *Client) Session() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello.Session
}

// TickDuration returns the nominal length of a server tick.
func (c *Client) TickDuration() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.hello.TickNs)
}

// Limits returns the limits the server reported in its hello.
func (c *Client) Limits() protocol.Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello.Limits
}

// waitConn returns the current connection, waiting while reconnecting.
func (c *Client) waitConn(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		cn, ready, closed, lost := c.cn, c.ready, c.closed, c.lost
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cn != nil:
			return cn, nil
		case lost != nil:
			return nil, disconnected(lost)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			return nil, ErrClosed
		}
	}
}

// do sends req on the current connection (waiting for one if need be) and
// returns the ok result, a private copy. onOK, if set, runs on the reader
// goroutine when the ok reply arrives, before any later message is handled.
//
// Reads are sent again on the next connection when a node answers
// not_leader. So is a change (add, cancel, pause, resume, and the bulk
// cancel_all, pause_all, resume_all, cancel_group) when the server remembers request ids (its hello's request_id_ticks):
// it carries the Client's id and one request id on every attempt, and is
// sent again, with the same ids, after not_leader or after its connection
// was lost before the reply, as long as the next connection's server
// remembers request ids too; the server applies it at most once and
// answers a retry of one it applied with the first reply. Otherwise the
// change's ErrNotLeader or ErrDisconnected goes to the caller, who cannot
// know whether it was applied.
func (c *Client) do(ctx context.Context, req *protocol.Request, onOK okHook) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req.ID = c.nextID.Add(1) // one id for every attempt
	for {
		cn, err := c.waitConn(ctx)
		if err != nil {
			return nil, err
		}
		retry, err := c.prepareAttempt(cn, req)
		if err != nil {
			return nil, err
		}
		res, err := c.roundTrip(ctx, cn, req, onOK)
		switch {
		case errors.Is(err, errConnDead):
			continue // not sent: try the next connection
		case retryAfter(req.Op, retry, err):
			// The node stepped down or the connection died: ask the next
			// leader.
			if err := c.awaitConnEnd(ctx, cn); err != nil {
				return nil, err
			}
			continue
		}
		return res, err
	}
}

// roundTrip sends req on cn and waits for its reply or ctx.
func (c *Client) roundTrip(ctx context.Context, cn *conn, req *protocol.Request, onOK okHook) ([]byte, error) {
	if req.ID == 0 {
		req.ID = c.nextID.Add(1)
	}
	cl := &call{op: req.Op, ch: make(chan reply, 1), onOK: onOK}
	if err := cn.send(req, cl); err != nil {
		return nil, err
	}
	select {
	case r := <-cl.ch:
		return r.result, r.err
	case <-ctx.Done():
		cn.forget(req.ID)
		return nil, ctx.Err()
	}
}

// uints does req and decodes its result as at least n uints.
func (c *Client) uints(ctx context.Context, req *protocol.Request, n int, onOK okHook) ([]uint64, error) {
	res, err := c.do(ctx, req, onOK)
	if err != nil {
		return nil, err
	}
	v, err := protocol.DecodeUints(res, make([]uint64, 0, 2))
	if err == nil && len(v) < n {
		err = fmt.Errorf("%w: want %d values, got %d", protocol.ErrMalformed, n, len(v))
	}
	if err != nil {
		return nil, badReply(req.Op, err)
	}
	return v, nil
}
