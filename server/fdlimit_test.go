package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// The fd-limit tests run the server in a child process (this test binary,
// re-run with TICKWHEEL_FD_CHILD set) whose RLIMIT_NOFILE is 64, soft and
// hard, so the server cannot raise it.

const childFdLimit = 64

// TestFdLimitChild is the child's body; it is skipped in a normal run.
// It serves until its stdin closes. In mode "exhaust" it uses up every free
// descriptor when it reads a line on stdin, and frees them at the next line.
func TestFdLimitChild(t *testing.T) {
	mode := os.Getenv("TICKWHEEL_FD_CHILD")
	if mode == "" {
		t.Skip("run by TestFdLimit* in a child process")
	}
	rl := syscall.Rlimit{Cur: childFdLimit, Max: childFdLimit}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl))
	cfg := Config{Addr: "127.0.0.1:0", Tick: time.Millisecond, AdminToken: testAdminToken, DataDir: t.TempDir(), HTTPAddr: "off"}
	if mode == "http" { // as if serving the operator listener, with room for 8 HTTP connections
		cfg.HTTPAddr, cfg.HTTP.MaxConnections = "", 8
	}
	srv, err := New(cfg, testLogger())
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	fmt.Printf("ADDR %s MAX %d\n", srv.Addr(), srv.maxConns)
	in := bufio.NewReader(os.Stdin)
	if mode == "exhaust" {
		_, _ = in.ReadString('\n')
		var held []*os.File
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				break
			}
			held = append(held, f)
		}
		fmt.Printf("EXHAUSTED %d\n", len(held))
		_, _ = in.ReadString('\n')
		for _, f := range held {
			f.Close()
		}
		fmt.Println("FREED")
	}
	_, _ = io.Copy(io.Discard, in)
}

// fdChild is the parent's handle on a child server.
type fdChild struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	addr  string
	max   int
}

func startFdChild(t *testing.T, mode string) *fdChild {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_NOFILE child test runs on Linux")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFdLimitChild$", "-test.v")
	cmd.Env = append(os.Environ(), "TICKWHEEL_FD_CHILD="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ch := &fdChild{t: t, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("the child server did not exit")
		}
	})
	line := ch.expect("ADDR ")
	_, err = fmt.Sscanf(line, "ADDR %s MAX %d", &ch.addr, &ch.max)
	require.NoError(t, err, line)
	return ch
}

// expect reads the child's output until a line starting with prefix.
func (ch *fdChild) expect(prefix string) string {
	for ch.out.Scan() {
		if line := ch.out.Text(); strings.HasPrefix(line, prefix) {
			return line
		}
	}
	ch.t.Fatalf("the child exited before printing %q (it died?)", prefix)
	return ""
}

// ticking is a session with a timer firing every tick, read in the
// background: the test checks it kept receiving, in order, while others
// were refused.
type ticking struct {
	events chan uint64 // seq of each fire event
}

func startTicking(t *testing.T, addr string) *ticking {
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	c := wrapConn(t, nc)
	c.sayHello("ticking", "")
	c.bind(1, false)
	c.add(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 1})
	tk := &ticking{events: make(chan uint64, 1<<16)}
	go func() { // pings, as a client does, so that an idle timeout spares it
		ping := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpPing})
		for {
			time.Sleep(50 * time.Millisecond)
			if _, err := nc.Write(ping); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(tk.events)
		for {
			m, err := c.read()
			if err != nil {
				return
			}
			if m.Kind == protocol.KindFire {
				tk.events <- m.Fire.Seq
			}
		}
	}()
	return tk
}

// drain returns how many events arrived since the last drain, checking
// their sequence numbers follow on with no gap.
func (tk *ticking) drain(t *testing.T, last *uint64) int {
	n := 0
	for {
		select {
		case seq, ok := <-tk.events:
			require.True(t, ok, "the ticking session was closed")
			require.Equal(t, *last+1, seq, "a gap in the ticking session's events")
			*last = seq
			n++
		default:
			return n
		}
	}
}

// tryHello connects and says hello: it returns the connection when served,
// or the error reply's code and message when refused.
func tryHello(t *testing.T, addr string) (net.Conn, protocol.Code, string) {
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	require.NoError(t, err)
	_ = nc.SetDeadline(time.Now().Add(ioTimeout))
	_, err = nc.Write(protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version}))
	require.NoError(t, err)
	r := bufio.NewReader(nc)
	var hdr [4]byte
	_, err = io.ReadFull(r, hdr[:])
	require.NoError(t, err, "no reply, neither served nor refused")
	body := make([]byte, int(hdr[0])<<24|int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3]))
	_, err = io.ReadFull(r, body)
	require.NoError(t, err)
	var m protocol.Message
	require.NoError(t, protocol.DecodeMessage(body, &m))
	_ = nc.SetDeadline(time.Time{})
	if m.Kind == protocol.KindError {
		nc.Close()
		return nil, m.Code, m.Text
	}
	return nc, 0, ""
}

func TestFdLimitMaxConnections(t *testing.T) {
	ch := startFdChild(t, "limit")
	assert.Equal(t, childFdLimit-fdReserve, ch.max, "max_connections follows the fd limit")
	tk := startTicking(t, ch.addr)
	var last uint64
	var served []net.Conn
	refused := 0
	for range 200 {
		nc, code, msg := tryHello(t, ch.addr)
		if nc != nil {
			served = append(served, nc)
			continue
		}
		refused++
		require.Equal(t, protocol.CodeLimitExceeded, code)
		require.Contains(t, msg, fmt.Sprintf("max_connections (%d)", ch.max))
	}
	assert.Equal(t, ch.max-1, len(served), "every connection up to the limit is served (the ticking one counts)")
	assert.Equal(t, 200-len(served), refused)
	time.Sleep(50 * time.Millisecond)
	require.Positive(t, tk.drain(t, &last), "the ticking session kept receiving")

	for _, nc := range served[:10] {
		nc.Close()
	}
	waitUntil(t, "closed connections to free their places", func() bool {
		nc, _, _ := tryHello(t, ch.addr)
		if nc != nil {
			nc.Close()
			return true
		}
		return false
	})
	time.Sleep(50 * time.Millisecond)
	require.Positive(t, tk.drain(t, &last))
}

// TestFdLimitLeavesRoomForHTTP: the operator HTTP listener's connections
// (http.max_connections, its listener and one being refused) are taken out
// of the descriptors max_connections is computed from, so HTTP clients
// cannot use up the descriptors game clients are promised.
func TestFdLimitLeavesRoomForHTTP(t *testing.T) {
	ch := startFdChild(t, "http")
	assert.Equal(t, childFdLimit-fdReserve-(8+2), ch.max)
}

func TestFdLimitExhausted(t *testing.T) {
	ch := startFdChild(t, "exhaust")
	tk := startTicking(t, ch.addr) // before the child uses up its fds
	_, err := io.WriteString(ch.stdin, "exhaust\n")
	require.NoError(t, err)
	ch.expect("EXHAUSTED ")
	var last uint64
	for range 20 {
		nc, code, msg := tryHello(t, ch.addr)
		require.Nil(t, nc, "served with no descriptor left?")
		require.Equal(t, protocol.CodeLimitExceeded, code)
		require.Contains(t, msg, "out of file descriptors")
	}
	time.Sleep(50 * time.Millisecond)
	require.Positive(t, tk.drain(t, &last), "the ticking session kept receiving")

	_, err = io.WriteString(ch.stdin, "free\n")
	require.NoError(t, err)
	ch.expect("FREED")
	nc, code, msg := tryHello(t, ch.addr)
	require.NotNil(t, nc, "still refused once descriptors are free: %v %s", code, msg)
	nc.Close()
	time.Sleep(50 * time.Millisecond)
	require.Positive(t, tk.drain(t, &last))
}
