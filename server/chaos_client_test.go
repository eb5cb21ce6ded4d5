package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// The chaos test's raw client and its checks of the process (goroutines,
// fds, heap), used by chaos_test.go.

// chaosConn is a raw client connection safe to use from any one goroutine:
// it returns errors and never touches testing.T.
type chaosConn struct {
	c   *net.TCPConn
	r   *bufio.Reader
	buf []byte
	id  uint64
	// sent lists the requests not yet answered, oldest first.
	sent []chaosSent
	next uint64 // id of the oldest unanswered request
}

// chaosSent is what a reply needs of its request.
type chaosSent struct {
	op       protocol.Op
	receiver uint64
}

// errChaosDecode marks a frame that arrived whole but does not decode: a
// server bug, unlike an I/O error.
var errChaosDecode = errors.New("chaos: server frame does not decode")

// chaosDial connects; a non-zero rcvbuf sets the socket's receive buffer
// before the connect, so that a client that does not read holds little.
func chaosDial(addr string, rcvbuf int) (*chaosConn, error) {
	d := net.Dialer{Timeout: ioTimeout}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &chaosConn{c: c.(*net.TCPConn), r: bufio.NewReaderSize(c, 64<<10), next: 1}, nil
}

// append appends req to b with the next id and notes it as awaiting a reply.
func (c *chaosConn) append(b []byte, req protocol.Request) []byte {
	c.id++
	req.ID = c.id
	c.sent = append(c.sent, chaosSent{req.Op, req.Receiver})
	return protocol.AppendRequest(b, &req)
}

func (c *chaosConn) write(b []byte) error {
	c.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := c.c.Write(b)
	return err
}

// read reads the next message; m's slices alias c's buffer until the next
// read. A frame is consumed only whole: a read deadline that passes in the
// middle of one leaves it to the next read.
func (c *chaosConn) read(m *protocol.Message) error {
	hdr, err := c.r.Peek(protocol.HeaderSize)
	if err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(hdr))
	if n == 0 || n > c.r.Size()-protocol.HeaderSize {
		return fmt.Errorf("%w: length %d", errChaosDecode, n)
	}
	frame, err := c.r.Peek(protocol.HeaderSize + n)
	if err != nil {
		return err
	}
	c.buf = append(c.buf[:0], frame[protocol.HeaderSize:]...)
	_, _ = c.r.Discard(len(frame))
	if err := protocol.DecodeMessage(c.buf, m); err != nil {
		return fmt.Errorf("%w: %v", errChaosDecode, err)
	}
	return nil
}

// reply checks that reply m answers the oldest request awaiting one, and
// returns that request. An error reply is an error, except not_found for an
// unbind (a takeover may have crossed it).
func (c *chaosConn) reply(m *protocol.Message) (chaosSent, error) {
	if len(c.sent) == 0 || m.ID != c.next {
		return chaosSent{}, fmt.Errorf("reply to id %d, want %d (%d awaiting a reply)", m.ID, c.next, len(c.sent))
	}
	req := c.sent[0]
	c.sent = c.sent[1:]
	c.next++
	if m.Kind != protocol.KindOK && !(req.op == protocol.OpUnbind && m.Code == protocol.CodeNotFound) {
		return req, fmt.Errorf("%s of receiver %d failed: %s %s", req.op, req.receiver, m.Code, m.Text)
	}
	return req, nil
}

// chaosGoroutines returns the stacks of the running goroutines, less the
// idle workers of gnet's goroutine pool (ants), which expire on their own
// after 10 s.
func chaosGoroutines() [][]byte {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) {
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	var gs [][]byte
	for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
		if !bytes.Contains(g, []byte("ants/v2.(*goWorker).run")) {
			gs = append(gs, g)
		}
	}
	return gs
}

// awaitReplies reads until every request sent has its reply, skipping
// pushes; every reply must be OK.
func (c *chaosConn) awaitReplies(deadline time.Time) error {
	c.c.SetReadDeadline(deadline)
	var m protocol.Message
	for len(c.sent) > 0 {
		if err := c.read(&m); err != nil {
			return err
		}
		if m.Kind == protocol.KindOK || m.Kind == protocol.KindError {
			if _, err := c.reply(&m); err != nil {
				return err
			}
		}
	}
	return nil
}

// chaosFDs counts the process's open file descriptors, or returns -1 where
// /proc/self/fd does not exist.
func chaosFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// chaosHeap returns the live heap after two collections: what sync.Pools
// (gnet's buffer pools) hold survives the first, in their victim caches.
func chaosHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// chaosEventually polls cond until it holds or within has passed, and
// reports whether it held.
func chaosEventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// chaosLog collects anomalies seen by client goroutines: things the server
// must never do, whatever its clients do.
type chaosLog struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (l *chaosLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.first) < 20 {
		l.first = append(l.first, fmt.Sprintf(format, args...))
	}
}

func (l *chaosLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		t.Errorf("%d anomalies, the first ones:\n%s", l.n, fmt.Sprintln(l.first))
	}
}
