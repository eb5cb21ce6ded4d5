package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// The crash and fault tests run the real server binary (cmd/tickwheel),
// built once per test run with the go command that runs the tests, so that
// a SIGKILL is a real process death (nothing of the process survives but
// what it handed to the kernel) and SIGTERM goes through main's own
// shutdown. Re-executing the test binary as the server would miss main's
// flags, environment and signal handling, which these tests are about too.

var (
	binOnce sync.Once
	binDir  string // holds the built binary; removed by TestMain
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// serverBinary returns the path of the tickwheel binary, building it at the
// first call. It skips the test when no go command can be found.
func serverBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		goCmd, err := exec.LookPath("go") // go test puts GOROOT/bin first in PATH
		if err != nil {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
			if _, serr := os.Stat(goCmd); serr != nil {
				binErr = fmt.Errorf("no go command: %w", err)
				return
			}
		}
		if binDir, binErr = os.MkdirTemp("", "tickwheel-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "tickwheel")
		cmd := exec.Command(goCmd, "build", "-o", binPath, "github.com/tickwheel/tickwheel/cmd/tickwheel")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil && strings.HasPrefix(binErr.Error(), "no go command") {
		t.Skipf("cannot build the server binary: %v", binErr)
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// procToken is the admin token the test processes get from the environment.
const procToken = "crash-test-admin-token"

// proc is a running tickwheel process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startProc runs the binary with args (serve flags; -addr 127.0.0.1:0 is
// added) and waits until it listens. The process is killed at the end of
// the test if it still runs.
func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	p, err := tryStartProc(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartProc is startProc returning the failure to start (the process's
// exit and its stderr) instead of failing the test.
func tryStartProc(t *testing.T, args ...string) (*proc, error) {
	t.Helper()
	return tryStartProcEnv(t, nil, args...)
}

// tryStartProcEnv is tryStartProc with env (KEY=value) added to the
// process's environment.
func tryStartProcEnv(t *testing.T, env []string, args ...string) (*proc, error) {
	t.Helper()
	bin := serverBinary(t)
	// -http-addr: processes that run at once must not share the default port.
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TICKWHEEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TICKWHEEL_ADMIN_TOKEN="+procToken)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{t: t, cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { p.kill() })
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "tickwheel listening on "); ok {
				addrs <- a
			}
		}
		p.err = cmd.Wait() // after stdout is read to its end, as Wait wants
		close(p.exited)
	}()
	select {
	case p.addr = <-addrs:
		return p, nil
	case <-p.exited:
		return p, fmt.Errorf("tickwheel exited before listening (%v):\n%s", p.err, p.stderr)
	case <-time.After(30 * time.Second):
		p.kill()
		return p, fmt.Errorf("tickwheel did not listen within 30s:\n%s", p.stderr)
	}
}

// kill sends SIGKILL (if the process still runs) and waits for its exit.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// pause stops the process with SIGSTOP and waits until every one of its
// threads has stopped, failing the test after 10 s. kill(2) returns once
// the signal is pending, not once the process is stopped: the kernel
// wakes one thread to take it, and the others are told to stop only when
// that thread runs; on a loaded machine it may wait for a CPU for tens of
// milliseconds while the process's other threads go on (a follower that
// keeps acknowledging raft entries). Where /proc/PID/task is not there
// (not Linux), it returns once the signal is sent.
func (p *proc) pause(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	require.Eventually(t, func() bool { return allStopped(dir) }, 10*time.Second, time.Millisecond,
		"pid %d not stopped within 10 s of SIGSTOP", p.cmd.Process.Pid)
}

// allStopped reports whether every thread under dir (/proc/PID/task) is
// stopped: state T (stopped by a signal) in its stat file.
func allStopped(dir string) bool {
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// term sends SIGTERM and waits for the process to exit, failing the test
// unless it exits with status 0 within 10 s.
func (p *proc) term() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.kill()
		p.t.Fatalf("tickwheel did not stop within 10s of SIGTERM:\n%s", p.stderr)
	}
	if p.err != nil {
		p.t.Fatalf("tickwheel exited with %v after SIGTERM:\n%s", p.err, p.stderr)
	}
}

// logged waits until the process's stderr holds s (its own goroutine
// copies stderr: a line written before "listening" on stdout may come in
// after it), and fails the test after 5 s.
func (p *proc) logged(t *testing.T, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), s) }, 5*time.Second, time.Millisecond,
		"stderr without %q:\n%s", s, p.stderr.String())
}

// alive reports whether the process still runs.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// logTail logs the end of the process's stderr, for a failing test.
func (p *proc) logTail() {
	s := p.stderr.String()
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	p.t.Logf("tickwheel stderr:\n%s", s)
}

// wire is a protocol client that returns errors instead of failing the test,
// for connections that a killed server drops, and for goroutines.
type wire struct {
	c       net.Conn
	r       *bufio.Reader
	id      uint64
	timeout time.Duration
	fires   []protocol.Fire // events received while waiting for replies
}

// errTimeout is a reply that did not come in time: the server hangs, it
// was not killed.
var errTimeout = errors.New("no reply in time")

// dialWire connects and says hello with token.
func dialWire(addr, name, token string) (*wire, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	w := &wire{c: c, r: bufio.NewReader(c), timeout: 10 * time.Second}
	m, err := w.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: name, Token: token})
	if err == nil && m.Kind != protocol.KindOK {
		err = fmt.Errorf("hello: %s %s", m.Code, m.Text)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return w, nil
}

func (w *wire) close() { w.c.Close() }

// send writes req with the next id and returns the id.
func (w *wire) send(req protocol.Request) (uint64, error) {
	w.id++
	req.ID = w.id
	w.c.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.c.Write(protocol.AppendRequest(nil, &req))
	return req.ID, err
}

// next reads the next server message.
func (w *wire) next() (protocol.Message, error) {
	w.c.SetReadDeadline(time.Now().Add(w.timeout))
	var hdr [4]byte
	if _, err := io.ReadFull(w.r, hdr[:]); err != nil {
		return protocol.Message{}, netErr(err)
	}
	payload := make([]byte, binary.BigEndian.Uint32(hdr[:])) // not reused: messages may alias it
	if _, err := io.ReadFull(w.r, payload); err != nil {
		return protocol.Message{}, netErr(err)
	}
	var m protocol.Message
	err := protocol.DecodeMessage(payload, &m)
	return m, err
}

func netErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errTimeout
	}
	return err
}

// reply reads until the reply to id, keeping fire events.
func (w *wire) reply(id uint64) (protocol.Message, error) {
	for {
		m, err := w.next()
		if err != nil {
			return m, err
		}
		switch m.Kind {
		case protocol.KindFire:
			w.fires = append(w.fires, m.Fire) // its Data aliases a payload of its own
		case protocol.KindOK, protocol.KindError:
			if m.ID != id {
				return m, fmt.Errorf("reply to %d, want %d", m.ID, id)
			}
			return m, nil
		}
	}
}

// call sends req and returns its reply.
func (w *wire) call(req protocol.Request) (protocol.Message, error) {
	id, err := w.send(req)
	if err != nil {
		return protocol.Message{}, netErr(err)
	}
	return w.reply(id)
}

// uints calls req and returns its OK result as uints.
func (w *wire) uints(req protocol.Request) ([]uint64, error) {
	m, err := w.call(req)
	if err != nil {
		return nil, err
	}
	if m.Kind != protocol.KindOK {
		return nil, fmt.Errorf("%s: %s %s", req.Op, m.Code, m.Text)
	}
	return protocol.DecodeUints(m.Result, nil)
}

// stats returns the server's stats.
func (w *wire) stats() (protocol.Stats, error) {
	var s protocol.Stats
	m, err := w.call(protocol.Request{Op: protocol.OpStats})
	if err == nil && m.Kind != protocol.KindOK {
		err = fmt.Errorf("stats: %s %s", m.Code, m.Text)
	}
	if err == nil {
		err = protocol.DecodeStats(m.Result, &s)
	}
	return s, err
}

// listAll returns every timer of receiver, following list's pages.
func (w *wire) listAll(receiver uint64) ([]protocol.Timer, error) {
	var all []protocol.Timer
	for from := uint64(0); ; {
		m, err := w.call(protocol.Request{Op: protocol.OpList, Receiver: receiver, FromTid: from})
		if err == nil && m.Kind != protocol.KindOK {
			err = fmt.Errorf("list: %s %s", m.Code, m.Text)
		}
		if err != nil {
			return nil, err
		}
		var next uint64
		all, next, err = protocol.DecodeListPage(m.Result, all)
		if err != nil || next == 0 {
			return all, err
		}
		from = next
	}
}

// waitFires reads pushes until n fire events have come, or fails.
func (w *wire) waitFires(n int) ([]protocol.Fire, error) {
	for len(w.fires) < n {
		m, err := w.next()
		if err != nil {
			return w.fires, fmt.Errorf("waiting for %d events, have %d: %w", n, len(w.fires), err)
		}
		if m.Kind == protocol.KindFire {
			w.fires = append(w.fires, m.Fire)
		}
	}
	got := w.fires
	w.fires = nil
	return got, nil
}

// waitCaughtUp polls stats until the server has fired up to tw-time and
// returns them.
func (w *wire) waitCaughtUp() (protocol.Stats, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := w.stats()
		if err != nil || s.Lag == 0 {
			return s, err
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("lag %d after 10s", s.Lag)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
