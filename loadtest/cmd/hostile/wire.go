package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tickwheel/tickwheel/loadtest"
	"github.com/tickwheel/tickwheel/protocol"
)

// wire is one raw protocol connection: frames out, messages in.
type wire struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
	id  uint64
	// onPush sees each fire or takeover read while waiting for a reply.
	onPush func(m *protocol.Message)
}

// maxReply bounds a frame this tool reads (list pages are up to 1 MiB).
const maxReply = 64 << 20

func dial(addr string) (*wire, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &wire{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// read reads one server message; its Result and Fire.Data alias a buffer the
// next read reuses.
func (w *wire) read(deadline time.Time) (protocol.Message, error) {
	var m protocol.Message
	_ = w.c.SetReadDeadline(deadline)
	var h [4]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		return m, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || n > maxReply {
		return m, fmt.Errorf("server frame of %d bytes", n)
	}
	if cap(w.buf) < int(n) {
		w.buf = make([]byte, n)
	}
	w.buf = w.buf[:n]
	if _, err := io.ReadFull(w.r, w.buf); err != nil {
		return m, err
	}
	err := protocol.DecodeMessage(w.buf, &m)
	return m, err
}

// frame encodes r with the next id (r.ID is set).
func (w *wire) frame(b []byte, r *protocol.Request) []byte {
	w.id++
	r.ID = w.id
	return protocol.AppendRequest(b, r)
}

func (w *wire) write(b []byte) error {
	_ = w.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := w.c.Write(b)
	return err
}

// call sends r and returns its reply; pushes read meanwhile go to onPush.
func (w *wire) call(r *protocol.Request, timeout time.Duration) (protocol.Message, error) {
	if err := w.write(w.frame(nil, r)); err != nil {
		return protocol.Message{}, err
	}
	return w.reply(r.ID, time.Now().Add(timeout))
}

// reply reads until the reply to id.
func (w *wire) reply(id uint64, deadline time.Time) (protocol.Message, error) {
	for {
		m, err := w.read(deadline)
		if err != nil {
			return m, err
		}
		switch m.Kind {
		case protocol.KindOK, protocol.KindError:
			if m.ID == id || m.ID == 0 {
				return m, nil
			}
		default:
			if w.onPush != nil {
				w.onPush(&m)
			}
		}
	}
}

func (w *wire) hello(name, token string) error {
	m, err := w.call(&protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: name, Token: token}, 10*time.Second)
	if err != nil {
		return err
	}
	if m.Kind != protocol.KindOK {
		return fmt.Errorf("hello: %v %s", m.Code, m.Text)
	}
	return nil
}

func session(addr, name, token string) (*wire, error) {
	w, err := dial(addr)
	if err != nil {
		return nil, err
	}
	if err := w.hello(name, token); err != nil {
		w.c.Close()
		return nil, err
	}
	return w, nil
}

// pipeline sends reqs in batches of batch and reads every reply; it returns
// how many were OK and the first error reply.
func (w *wire) pipeline(reqs []protocol.Request, batch int, timeout time.Duration) (ok int, firstErr string, err error) {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(reqs); i += batch {
		j := min(i+batch, len(reqs))
		var b []byte
		for k := i; k < j; k++ {
			b = w.frame(b, &reqs[k])
		}
		if err := w.write(b); err != nil {
			return ok, firstErr, err
		}
		for k := i; k < j; k++ {
			m, err := w.reply(reqs[k].ID, deadline)
			if err != nil {
				return ok, firstErr, err
			}
			if m.Kind == protocol.KindOK {
				ok++
			} else if firstErr == "" {
				firstErr = fmt.Sprintf("%v: %s", m.Code, m.Text)
			}
		}
	}
	return ok, firstErr, nil
}

func (w *wire) stats() (protocol.Stats, error) {
	var s protocol.Stats
	m, err := w.call(&protocol.Request{Op: protocol.OpStats}, 10*time.Second)
	if err != nil {
		return s, err
	}
	if m.Kind != protocol.KindOK {
		return s, fmt.Errorf("stats: %v %s", m.Code, m.Text)
	}
	err = protocol.DecodeStats(m.Result, &s)
	return s, err
}

// --- the server process ---

func rssMiB(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	p, err := loadtest.ReadProc(pid)
	if err != nil {
		return -1
	}
	return float64(p.RSSKiB) / 1024
}

func hwmMiB(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	p, _ := loadtest.ReadProc(pid)
	return float64(p.HWMKiB) / 1024
}

func cpuSec(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	p, _ := loadtest.ReadProc(pid)
	return p.CPUSeconds
}

func fdCount(pid int) int {
	if pid <= 0 {
		return 0
	}
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

func alive(pid int) bool {
	if pid <= 0 {
		return true
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// sampler follows the server's RSS every 100 ms and keeps its peak.
type sampler struct {
	pid  int
	mu   sync.Mutex
	peak float64
	stop chan struct{}
	done chan struct{}
}

func startSampler(pid int) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			r := rssMiB(pid)
			s.mu.Lock()
			s.peak = max(s.peak, r)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) Peak() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

func (s *sampler) Stop() float64 {
	close(s.stop)
	<-s.done
	return s.Peak()
}

// --- the monitor: another session's ping round trips ---

type monitor struct {
	mu    sync.Mutex
	rtts  []time.Duration
	slow  []string // round trips over 100 ms: when (since the start) and how long
	fails []string
	stop  chan struct{}
	done  chan struct{}
}

// startMonitor pings from its own session every `every` until Stop.
func startMonitor(addr, token string, every time.Duration) (*monitor, error) {
	w, err := session(addr, "monitor", token)
	if err != nil {
		return nil, err
	}
	m := &monitor{stop: make(chan struct{}), done: make(chan struct{})}
	t0 := time.Now()
	go func() {
		defer close(m.done)
		defer w.c.Close()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
			start := time.Now()
			r, err := w.call(&protocol.Request{Op: protocol.OpPing}, 30*time.Second)
			d := time.Since(start)
			m.mu.Lock()
			switch {
			case err != nil:
				m.fails = append(m.fails, err.Error())
			case r.Kind != protocol.KindOK:
				m.fails = append(m.fails, r.Text)
			default:
				m.rtts = append(m.rtts, d)
				if d > 100*time.Millisecond {
					m.slow = append(m.slow, fmt.Sprintf("%.1fs:%v", start.Sub(t0).Seconds(), d.Round(time.Millisecond)))
				}
			}
			m.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return m, nil
}

func (m *monitor) Stop() string {
	if m == nil {
		return "monitor: none"
	}
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	slow := ""
	if len(m.slow) > 0 {
		slow = fmt.Sprintf(" over 100 ms: %d (%s)", len(m.slow), strings.Join(first(m.slow, 12), " "))
	}
	return "monitor pings: " + durStats(m.rtts) + fmt.Sprintf(" failed=%d %s", len(m.fails), strings.Join(first(m.fails, 2), "; ")) + slow
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func durStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(f float64) time.Duration { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
}

func readToken(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile: token:", err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// classify names the end of a connection's read side.
func classify(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "open"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case strings.Contains(err.Error(), "reset by peer"):
		return "reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error"
}

func lingerZero(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}
