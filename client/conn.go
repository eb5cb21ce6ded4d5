package client

import (
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// Buffer sizes.
const (
	// maxServerFrame is the largest server→client frame accepted: list
	// replies grow with the timers listed.
	maxServerFrame = 64 << 20
	readBufSize    = 64 << 10
	// keepBuf is the largest buffer kept for reuse once it has drained.
	keepBuf = 1 << 20
	// minBatch is the size below which the writer yields once before a
	// write (see writeLoop).
	minBatch = 4 << 10
)

// conn is one TCP connection with its reader and writer goroutines.
type conn struct {
	nc   net.Conn
	addr string         // the address dialled
	bell chan struct{}  // doorbell: frames were queued in wbuf, or pingEvery set (capacity 1)
	quit chan struct{}  // closed by the reader when it exits: stops the writer
	ids  *atomic.Uint64 // the Client's request ids, for the writer's pings and acks
	acks *acker         // the Client's acknowledged-mode state: the writer sends the acks

	mu      sync.Mutex
	wbuf    []byte           // frames queued for the writer
	pending map[uint64]*call // calls sent (or queued) and not answered
	// batches are the Pipes' requests sent (or queued) and not all
	// answered, in the order they were queued; lastBatch is the index of
	// the one the last reply went to; scratch decodes their results.
	batches   []*batch
	lastBatch int
	scratch   [2]uint64
	dead      bool // the reader exited: nothing more is sent or answered
	maxFrame  int  // largest request payload the server accepts
	// requestIDs: the server remembers request ids (its hello's
	// request_id_ticks is not 0), so a change may be sent again. Set
	// once after hello.
	requestIDs bool
	// pingEvery is how long the writer may send nothing before it sends a
	// ping: a third of the server's idle timeout, 0 (no pings) when the
	// server has none. Set once after hello, with a ring of the bell.
	pingEvery time.Duration

	// parting is the server's error message with id 0, sent as it closes
	// the connection (a timeout, max_connections reached, a malformed
	// frame): the cause of the loss. Set by the reader.
	parting error
	// lost is why the connection died (the error its pending calls got),
	// set with dead. Guarded by mu.
	lost error

	// published is set once the connection is the Client's current one.
	// Guarded by Client.mu.
	published bool
}

// call is a request waiting for its reply.
type call struct {
	op   protocol.Op
	ch   chan reply // capacity 1: the reader never blocks on it
	onOK okHook     // run by the reader on an ok reply, before ch is sent to
	// done, when set, takes the reply instead of ch, on the reader (or on
	// the goroutine failing the connection's calls): for requests no
	// caller waits for (acks). It must not block.
	done func(result []byte, err error)
}

// fail hands the call an error.
func (cl *call) fail(err error) {
	if cl.done != nil {
		cl.done(nil, err)
		return
	}
	cl.ch <- reply{err: err}
}

// okHook runs on the reader goroutine when a call's ok reply arrives, with
// its result, before the result is handed to the caller and before any
// later message is handled. An event it returns (Kind != 0) is delivered
// right after the reply is handed over: so it precedes the events that
// follow the reply on the wire, and the caller gets its reply even while
// the event buffer is full.
//
// cn is the connection the reply came on.
type okHook func(cn *conn, result []byte) Event

type reply struct {
	result []byte // ok result, a private copy
	err    error
}

// errConnDead is returned by send when the connection is gone: the request
// was not sent, so it may be retried on the next connection.
var errConnDead = errors.New("connection dead")

func newConn(nc net.Conn, addr string, ids *atomic.Uint64, acks *acker) *conn {
	return &conn{
		nc:       nc,
		addr:     addr,
		bell:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		ids:      ids,
		acks:     acks,
		pending:  make(map[uint64]*call),
		maxFrame: protocol.DefaultMaxFrame,
	}
}

// setIdleTimeout has the writer ping whenever it has sent nothing for a
// third of the server's idle timeout (hello's idle_timeout_ms; 0 = none),
// so that a quiet connection is never closed as idle. Safe from any
// goroutine; called once, after hello.
func (cn *conn) setIdleTimeout(ms uint64) {
	if ms == 0 {
		return
	}
	every := time.Duration(min(ms, math.MaxInt64/uint64(time.Millisecond))) * time.Millisecond / 3
	cn.mu.Lock()
	cn.pingEvery = max(every, minPingEvery)
	cn.mu.Unlock()
	cn.ring()
}

// ring wakes the writer.
func (cn *conn) ring() {
	select {
	case cn.bell <- struct{}{}:
	default:
	}
}

// send queues req for the writer and registers cl for its reply.
// Safe from any goroutine.
func (cn *conn) send(req *protocol.Request, cl *call) error {
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		return errConnDead
	}
	start := len(cn.wbuf)
	cn.wbuf = protocol.AppendRequest(cn.wbuf, req)
	if n := len(cn.wbuf) - start - protocol.HeaderSize; n > cn.maxFrame {
		cn.wbuf = cn.wbuf[:start]
		limit := cn.maxFrame
		cn.mu.Unlock()
		// The server would close the connection on such a frame.
		return &Error{Op: req.Op, Code: protocol.CodeLimitExceeded,
			Message: fmt.Sprintf("request of %d bytes exceeds the server's max_frame (%d bytes)", n, limit)}
	}
	cn.pending[req.ID] = cl
	cn.mu.Unlock()
	cn.ring()
	return nil
}

// forget drops the waiter of id (its caller gave up); a later reply is
// discarded.
func (cn *conn) forget(id uint64) {
	cn.mu.Lock()
	delete(cn.pending, id)
	cn.mu.Unlock()
}

// writeLoop writes whatever is queued with one Write per wake-up, so
// requests issued together go out together. Once pingEvery is set it also
// queues a ping whenever nothing was written for that long (one timer, no
// goroutine; the ping's reply, answering no call, is dropped by the
// reader). It exits when quit is closed, or after a write error, which it
// turns into a connection loss by closing the socket (the reader then sees
// the error). It also sends the acks of acknowledged-mode receivers (see
// acker.writerPass): with whatever else it writes, else ackDelay after
// they are due.
func (cn *conn) writeLoop() {
	var spare []byte
	var idle idleTimer
	var ackT ackTimer
	defer idle.stop()
	defer ackT.stop()
	for {
		ackDue := false
		select {
		case <-cn.bell:
		case <-idle.c:
			if !idle.due() {
				continue
			}
			cn.queuePing()
		case <-ackT.c:
			ackT.running, ackDue = false, true
		case <-cn.quit:
			return
		}
		// A small batch waits for one yield of the processor first, so
		// that callers already woken (by a batch of replies) queue their
		// requests too and one write carries them all: a write costs
		// microseconds, and many goroutines calling at once would otherwise
		// get one each (measured: 128 callers, 3.9 -> 1.0 µs per Add).
		// gRPC-go's loopyWriter does the same. With nothing else runnable
		// the yield returns at once.
		cn.mu.Lock()
		queued := len(cn.wbuf)
		cn.mu.Unlock()
		if queued < minBatch {
			runtime.Gosched()
		}
		if (ackDue || cn.acks.n.Load() > 0) && cn.acks.writerPass(cn, ackDue, queued > 0) {
			ackT.start(ackDelay)
		}
		cn.mu.Lock()
		out := cn.wbuf
		cn.wbuf = spare[:0]
		idle.start(cn.pingEvery)
		cn.mu.Unlock()
		if len(out) == 0 {
			spare = out
			continue
		}
		if _, err := cn.nc.Write(out); err != nil {
			cn.nc.Close()
			return
		}
		idle.wrote()
		if cap(out) > keepBuf {
			out = nil
		}
		spare = out
	}
}

// queuePing queues a ping for the writer, with an id no call waits for.
func (cn *conn) queuePing() {
	req := protocol.Request{Op: protocol.OpPing, ID: cn.ids.Add(1)}
	cn.mu.Lock()
	if !cn.dead {
		cn.wbuf = protocol.AppendRequest(cn.wbuf, &req)
	}
	cn.mu.Unlock()
}

// minPingEvery bounds how often a connection pings, whatever idle timeout
// the server reports.
const minPingEvery = time.Millisecond

// idleTimer tells the writer when it has written nothing for a while. It
// keeps one time.Timer, not reset on every write: when the timer fires
// early (something was written meanwhile) it is set again for the rest.
// Owned by the writer goroutine.
type idleTimer struct {
	t     *time.Timer
	c     <-chan time.Time // t.C; nil (never ready) until start
	every time.Duration
	last  time.Time // the last write
}

// start arms the timer the first time every is non-zero.
func (it *idleTimer) start(every time.Duration) {
	if it.t != nil || every <= 0 {
		return
	}
	it.every, it.last = every, time.Now()
	it.t = time.NewTimer(every)
	it.c = it.t.C
}

// wrote notes a write.
func (it *idleTimer) wrote() {
	if it.t != nil {
		it.last = time.Now()
	}
}

// due is called when the timer fired. It reports whether nothing was
// written for every, and sets the timer for the next check: every from
// now when due (the ping is about to be written), else every from the last
// write.
func (it *idleTimer) due() bool {
	quiet := time.Since(it.last)
	if quiet >= it.every {
		it.t.Reset(it.every)
		return true
	}
	it.t.Reset(it.every - quiet)
	return false
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}

// ackTimer wakes the writer to send acks. Owned by the writer goroutine.
type ackTimer struct {
	t       *time.Timer
	c       <-chan time.Time // t.C; nil until the first start
	running bool
}

// start sets the timer to fire in d, unless it is already running.
func (at *ackTimer) start(d time.Duration) {
	switch {
	case at.running:
		return
	case at.t == nil:
		at.t = time.NewTimer(d)
		at.c = at.t.C
	default:
		at.t.Reset(d)
	}
	at.running = true
}

func (at *ackTimer) stop() {
	if at.t != nil {
		at.t.Stop()
	}
}

// readLoop reads frames until the connection fails, dispatching replies to
// their calls and events to the Client, then hands the loss to the Client.
func (c *Client) readLoop(cn *conn) {
	err := c.readFrames(cn)
	if cn.parting != nil {
		err = cn.parting // why the server closed it, rather than EOF
	}
	c.lose(cn, err)
}

// httpPrefix begins an HTTP response: the first bytes from a server that
// is not tickwheel's client port (its frames begin with a length whose
// first byte is 0 below 16 MiB).
const httpPrefix = "HTTP/"

func (c *Client) readFrames(cn *conn) error {
	buf := make([]byte, 0, readBufSize)
	var m protocol.Message
	first := true // nothing decoded yet on this connection
	for {
		off := 0
		for {
			if first && len(buf) >= len(httpPrefix) && string(buf[:len(httpPrefix)]) == httpPrefix {
				return fmt.Errorf("tickwheel: %s answered in HTTP, not the tickwheel protocol: is it the operator HTTP port? (the client port is 7420 by default)", cn.addr)
			}
			payload, n, err := protocol.SplitFrame(buf[off:], maxServerFrame)
			if errors.Is(err, protocol.ErrIncomplete) {
				break
			}
			if err != nil {
				return fmt.Errorf("tickwheel: reading from the server: %w", err)
			}
			if err := protocol.DecodeMessage(payload, &m); err != nil {
				return fmt.Errorf("tickwheel: reading from the server: %w", err)
			}
			if !c.dispatch(cn, &m) {
				return ErrClosed
			}
			if m.Kind == protocol.KindError && m.Code == protocol.CodeNotLeader {
				// The node is not (or no longer) the leader and closes
				// the connection: its calls in flight end now, and the
				// reconnection starts at the leader it names.
				return &Error{Code: m.Code, Message: m.Text, Leader: m.Leader}
			}
			first = false
			off += n
		}
		// Keep the incomplete tail at the front of buf, and make room for it.
		rest := len(buf) - off
		switch {
		case rest == 0 && cap(buf) > keepBuf:
			buf = make([]byte, 0, readBufSize)
		case off > 0:
			buf = buf[:copy(buf, buf[off:])]
		}
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), 2*cap(buf))
			copy(grown, buf)
			buf = grown
		}
		n, err := cn.nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && n == 0 {
			return err
		}
	}
}

// dispatch hands one server message to its call or to the event consumer.
// It returns false when the Client was closed while it waited for the
// consumer.
func (c *Client) dispatch(cn *conn, m *protocol.Message) bool {
	switch m.Kind {
	case protocol.KindOK, protocol.KindError:
		cn.mu.Lock()
		cl := cn.pending[m.ID]
		delete(cn.pending, m.ID)
		if cl == nil && len(cn.batches) > 0 && cn.batchReply(m) {
			cn.mu.Unlock()
			return true
		}
		cn.mu.Unlock()
		if cl == nil {
			if m.Kind == protocol.KindError && m.ID == 0 {
				cn.parting = &Error{Code: m.Code, Message: m.Text, Leader: m.Leader}
			}
			if m.Kind == protocol.KindError {
				c.o.log.Warn("tickwheel: error reply to no pending call", "id", m.ID, "code", m.Code, "message", m.Text)
			}
			return true // its caller gave up
		}
		if m.Kind == protocol.KindError {
			cl.fail(&Error{Op: cl.op, Code: m.Code, Message: m.Text, Leader: m.Leader})
			return true
		}
		if cl.done != nil {
			cl.done(m.Result, nil)
			return true
		}
		var ev Event
		if cl.onOK != nil {
			ev = cl.onOK(cn, m.Result)
		}
		cl.ch <- reply{result: append([]byte(nil), m.Result...)}
		return ev.Kind == 0 || c.deliver(ev)
	case protocol.KindFire:
		return c.dispatchFire(cn, &m.Fire)
	case protocol.KindTakeover:
		c.mu.Lock()
		delete(c.bound, m.Receiver)
		c.mu.Unlock()
		c.forgetSeq(m.Receiver)
		c.acks.forget(m.Receiver)
		return c.deliver(Event{Kind: Takeover, Receiver: m.Receiver, NewSession: m.Session})
	case protocol.KindDropped:
		if m.Last < m.First {
			c.o.log.Warn("tickwheel: dropped notice with an empty range", "receiver", m.Receiver, "first", m.First, "last", m.Last)
			return true
		}
		c.seqPast(m.Receiver, m.Last)
		return c.reportDropped(m.Receiver, satAdd(m.Last-m.First, 1))
	}
	return true // a kind this version does not know: ignored
}

// dispatchFire delivers a fire event: after a Dropped event for a gap in
// its receiver's seqs, and not at all when it is the redelivery of an
// event already delivered (acknowledged mode).
func (c *Client) dispatchFire(cn *conn, f *protocol.Fire) bool {
	acked := false
	if c.acks.n.Load() > 0 {
		// This reader is the queue's only sender, and an acknowledged-mode
		// event has no gap to report first: it will be the next one pushed.
		var dup bool
		if dup, acked = c.acks.fire(cn, f, c.pushed.Load()+1); dup {
			return true
		}
	}
	if !acked {
		if gap := c.seqGap(f.Receiver, f.Seq); gap > 0 && !c.reportDropped(f.Receiver, gap) {
			return false
		}
	}
	ev := Event{Kind: Fire, Receiver: f.Receiver, Tid: f.Tid, Tick: f.Tick, Fired: f.Fired,
		Repeat: userRepeat(f.Repeat), Last: f.Last, Seq: f.Seq, Late: f.Late}
	if len(f.Data) > 0 {
		ev.Data = append([]byte(nil), f.Data...)
	}
	if c.acks.n.Load() == 0 {
		return c.push(ev)
	}
	return c.deliverAcked(ev)
}

// deliver queues ev for the consumer, waiting while the queue is full: this
// is the backpressure that stops reading the socket. It returns false when
// the Client is closed meanwhile.
func (c *Client) deliver(ev Event) bool {
	if c.acks.n.Load() == 0 {
		return c.push(ev)
	}
	return c.deliverAcked(ev)
}

// push is deliver for a Client with no acknowledged-mode receiver: nothing
// reads pushed between the send and the count. Small enough to be inlined
// into dispatchFire, which calls it directly (deliver, as a call with its
// Event copied, cost 34 instructions an event).
func (c *Client) push(ev Event) bool {
	select {
	case c.evq <- ev:
		c.pushed.Add(1)
		return true
	case <-c.done:
		return false
	}
}

// deliverAcked is deliver for a Client with acknowledged-mode receivers:
// it marks the send in progress for takenCount.
func (c *Client) deliverAcked(ev Event) bool {
	c.pushing.Store(true)
	defer c.pushing.Store(false)
	select {
	case c.evq <- ev:
		if c.afterSend != nil {
			c.afterSend()
		}
		c.pushed.Add(1)
		return true
	case <-c.done:
		return false
	}
}
