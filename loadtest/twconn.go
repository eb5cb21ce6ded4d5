package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/tickwheel/tickwheel/protocol"
)

// twConn is one connection: a reader goroutine handles replies and fires;
// one caller at a time runs a bulk operation (begin … drain) on it, and
// single calls (call) may run alongside.
type twConn struct {
	nc       net.Conn
	w        int
	sink     Sink
	boundary func(tick uint64) int64 // the instant a firing's tick was due to be processed
	window   int
	wbuf     []byte
	bound    map[uint64]bool // receivers bound here; owned by the bulk caller
	noStamp  bool            // read with Read, not recvmsg with kernel receive stamps

	mu       sync.Mutex
	cond     *sync.Cond
	inflight int
	err      error // the reader's end

	// Bulk results, written by the reader, read by the bulk caller after
	// drain (synchronised through mu).
	okN       int
	errs      map[string]int
	cancelled []uint64

	wmu     sync.Mutex // serialises single calls' writes with each other
	seq     uint64
	waiters map[uint64]chan reply // under mu
}

type reply struct {
	m   protocol.Message
	err error
}

func (c *twConn) close() { c.nc.Close() }

func (c *twConn) begin() {
	c.okN, c.errs, c.cancelled = 0, map[string]int{}, c.cancelled[:0]
}

// acquire waits until n more requests fit in the window.
func (c *twConn) acquire(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.inflight > 0 && c.inflight+n > c.window && c.err == nil {
		c.cond.Wait()
	}
	if c.err != nil {
		return c.err
	}
	c.inflight += n
	return nil
}

// acquireUpTo waits until at least one request fits in the window and
// takes up to max of the free places; it returns 0 once the connection has
// failed. The places taken count as in flight until answered, or until
// giveBack returns those not used.
func (c *twConn) acquireUpTo(max int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.inflight >= c.window && c.err == nil {
		c.cond.Wait()
	}
	if c.err != nil {
		return 0
	}
	k := min(c.window-c.inflight, max)
	c.inflight += k
	return k
}

// giveBack returns n places acquireUpTo took that carry no request.
func (c *twConn) giveBack(n int) {
	if n > 0 {
		c.mu.Lock()
		c.inflight -= n
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// drain waits until every bulk request was answered.
func (c *twConn) drain() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.inflight > 0 && c.err == nil {
		c.cond.Wait()
	}
	if c.inflight > 0 {
		return c.err
	}
	return nil
}

// call sends one request and waits for its reply.
func (c *twConn) call(ctx context.Context, req *protocol.Request) (protocol.Message, error) {
	ch := make(chan reply, 1)
	c.wmu.Lock()
	c.seq++
	req.ID = idCall<<idShift | c.seq
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.wmu.Unlock()
		return protocol.Message{}, c.err
	}
	c.waiters[req.ID] = ch
	c.mu.Unlock()
	_, err := c.nc.Write(protocol.AppendRequest(nil, req))
	c.wmu.Unlock()
	if err != nil {
		return protocol.Message{}, err
	}
	select {
	case r := <-ch:
		if r.err == nil && r.m.Kind == protocol.KindError {
			r.err = fmt.Errorf("%s: %s: %s", req.Op, r.m.Code, r.m.Text)
		}
		return r.m, r.err
	case <-ctx.Done():
		return protocol.Message{}, ctx.Err()
	}
}

func (c *twConn) readLoop() {
	buf := make([]byte, 256<<10)
	have := 0
	var m protocol.Message
	var d Delivery
	var err error
	var sr *stampedReader
	if !c.noStamp {
		sr = newStampedReader(c.nc)
	}
	for {
		var n int
		var stamp int64
		if sr != nil {
			n, stamp, err = sr.Read(buf[have:])
		} else {
			n, err = c.nc.Read(buf[have:])
		}
		if n == 0 && err != nil {
			break
		}
		have += n
		recv := Now()
		done := 0
		p := buf[:have]
		for {
			payload, k, ferr := protocol.SplitFrame(p, 1<<30)
			if ferr != nil {
				if !errors.Is(ferr, protocol.ErrIncomplete) {
					err = ferr
				}
				break
			}
			p = p[k:]
			if derr := protocol.DecodeMessage(payload, &m); derr != nil {
				err = derr
				break
			}
			switch m.Kind {
			case protocol.KindFire:
				f := &m.Fire
				d = Delivery{Receiver: f.Receiver, Tid: f.Tid, Fired: uint32(f.Fired), Last: f.Last, Recv: recv, Socket: stamp, Sched: c.boundary(f.Tick), Data: f.Data}
				c.sink(c.w, &d)
			case protocol.KindOK, protocol.KindError:
				if c.reply(&m) {
					done++
				}
			}
		}
		if err != nil {
			break
		}
		// Keep the partial frame at the front; grow for a large one.
		rest := len(p)
		copy(buf, p)
		have = rest
		if have == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		if done > 0 {
			c.mu.Lock()
			c.inflight -= done
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	c.nc.Close()
	c.mu.Lock()
	c.err = fmt.Errorf("connection %d: %w", c.w, err)
	for id, ch := range c.waiters {
		ch <- reply{err: c.err}
		delete(c.waiters, id)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// reply takes a reply: a single call's goes to its waiter; a bulk
// operation's is counted (ok adds, cancelled tids, errors by code), and
// reply reports true, one fewer request in flight.
func (c *twConn) reply(m *protocol.Message) bool {
	switch m.ID >> idShift {
	case idCall:
		m.Result = append([]byte(nil), m.Result...)
		c.mu.Lock()
		ch := c.waiters[m.ID]
		delete(c.waiters, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- reply{m: *m}
		}
		return false
	case idCancel:
		if m.Kind == protocol.KindOK {
			c.cancelled = append(c.cancelled, m.ID&idMask)
		}
	case idAdd:
		if m.Kind == protocol.KindOK {
			c.okN++
		}
	}
	if m.Kind == protocol.KindError {
		c.errs[m.Code.String()]++
	}
	return true
}
