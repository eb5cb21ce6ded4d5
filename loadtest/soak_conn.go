package loadtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// errSoakTimeout is returned by soakConn.call when no reply came in time:
// the request may or may not have been applied.
var errSoakTimeout = errors.New("soak: no reply in time")

// soakConn is one protocol session of the soak: calls wait for their reply
// by id while a reader goroutine hands every push (fire, dropped,
// takeover) to onPush. Safe for use by several goroutines.
type soakConn struct {
	nc     net.Conn
	onPush func(*protocol.Message) // called on the reader goroutine; nil: pushes are ignored
	// onStrayError sees error replies to requests written with send (set
	// before the first send; called on the reader goroutine).
	onStrayError func(*protocol.Message)

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex
	id      uint64
	waiting map[uint64]chan protocol.Message
	err     error         // why the reader stopped
	done    chan struct{} // closed when the reader stops
}

// dialSoak connects to addr and says hello as name with token. onPush may
// be nil.
func dialSoak(addr, name, token string, onPush func(*protocol.Message)) (*soakConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	c := &soakConn{nc: nc, onPush: onPush, waiting: map[uint64]chan protocol.Message{}, done: make(chan struct{})}
	go c.readLoop()
	m, err := c.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: name, Token: token}, 5*time.Second)
	if err == nil && m.Kind != protocol.KindOK {
		err = fmt.Errorf("hello: %v %s", m.Code, m.Text)
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *soakConn) close() { c.nc.Close() }

// readLoop reads messages until the connection ends; each message has a
// payload of its own, so what it aliases stays valid.
func (c *soakConn) readLoop() {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var err error
	for {
		var hdr [4]byte
		if _, err = io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > 64<<20 {
			err = fmt.Errorf("server frame of %d bytes", n)
			break
		}
		payload := make([]byte, n)
		if _, err = io.ReadFull(r, payload); err != nil {
			break
		}
		var m protocol.Message
		if err = protocol.DecodeMessage(payload, &m); err != nil {
			break
		}
		if m.Kind == protocol.KindOK || m.Kind == protocol.KindError {
			c.mu.Lock()
			ch := c.waiting[m.ID]
			delete(c.waiting, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			} else if m.Kind == protocol.KindError && c.onStrayError != nil {
				c.onStrayError(&m) // the reply to a send
			}
			continue
		}
		if c.onPush != nil {
			c.onPush(&m)
		}
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
}

// call sends req and waits up to timeout for its reply. An error means the
// request's outcome is unknown (the connection died, or errSoakTimeout).
func (c *soakConn) call(req protocol.Request, timeout time.Duration) (protocol.Message, error) {
	ch := make(chan protocol.Message, 1)
	c.mu.Lock()
	c.id++
	req.ID = c.id
	c.waiting[req.ID] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(timeout))
	_, err := c.nc.Write(protocol.AppendRequest(nil, &req))
	c.wmu.Unlock()
	if err != nil {
		return protocol.Message{}, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-ch:
		return m, nil
	case <-c.done:
		select {
		case m := <-ch: // answered just before the end
			return m, nil
		default:
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return protocol.Message{}, fmt.Errorf("connection ended: %v", c.err)
	case <-t.C:
		c.mu.Lock()
		delete(c.waiting, req.ID)
		c.mu.Unlock()
		return protocol.Message{}, errSoakTimeout
	}
}

// send writes req without waiting for its reply (acks).
func (c *soakConn) send(req protocol.Request) error {
	c.mu.Lock()
	c.id++
	req.ID = c.id
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.nc.Write(protocol.AppendRequest(nil, &req))
	return err
}

// listAll returns the tids of every live timer of receiver, page by page.
func (c *soakConn) listAll(receiver uint64) (map[uint64]bool, error) {
	tids := map[uint64]bool{}
	from := uint64(0)
	for {
		m, err := c.call(protocol.Request{Op: protocol.OpList, Receiver: receiver, FromTid: from}, 30*time.Second)
		if err != nil {
			return nil, err
		}
		if m.Kind != protocol.KindOK {
			return nil, fmt.Errorf("list: %v %s", m.Code, m.Text)
		}
		ts, next, err := protocol.DecodeListPage(m.Result, nil)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			tids[t.Tid] = true
		}
		if next == 0 {
			return tids, nil
		}
		from = next
	}
}
