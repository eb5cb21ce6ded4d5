package operator

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server"
)

// budgetFdLimit is the child's RLIMIT_NOFILE, soft and hard.
const budgetFdLimit = 128

// TestFdBudgetChild is the body of TestFdBudget's child process (this test
// binary, re-run with TICKWHEEL_FD_BUDGET_CHILD set): a server with a data
// directory and the operator listener, as cmd/tickwheel runs them, under
// an fd limit of budgetFdLimit. It serves until its stdin closes.
func TestFdBudgetChild(t *testing.T) {
	if os.Getenv("TICKWHEEL_FD_BUDGET_CHILD") == "" {
		t.Skip("run by TestFdBudget in a child process")
	}
	rl := syscall.Rlimit{Cur: budgetFdLimit, Max: budgetFdLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Addr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", AdminToken: "fd-budget-admin-token",
		DataDir: t.TempDir(), HTTP: server.HTTPLimits{MaxConnections: 8}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	op, err := New(Options{Addr: cfg.HTTPAddr, Log: log, Limits: cfg.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	srv, err := server.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(srv)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	c, err := client.Dial(context.Background(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	maxConns := c.Limits().MaxConnections // as hello reports it
	c.Close()
	fmt.Printf("ADDR %s HTTP %s MAX %d\n", srv.Addr(), op.Addr(), maxConns)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestFdBudget: HTTP clients that open far more idle connections than
// http.max_connections cannot take the descriptors game clients are
// promised: the HTTP ones over the cap are refused, and then every game
// client up to max_connections is served. (Before the cap, 120 idle HTTP
// connections used up the child's 128 descriptors and game clients were
// refused.)
func TestFdBudget(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_NOFILE child test runs on Linux")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFdBudgetChild$")
	cmd.Env = append(os.Environ(), "TICKWHEEL_FD_BUDGET_CHILD=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("the child did not exit")
		}
	}()
	var addr, httpAddr string
	var maxConns int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "ADDR %s HTTP %s MAX %d", &addr, &httpAddr, &maxConns); err == nil {
			break
		}
	}
	if addr == "" {
		t.Fatal("the child did not start")
	}
	if want := budgetFdLimit - 32 - (8 + 2); maxConns != want {
		t.Errorf("max_connections %d, want %d (the fd limit less the reserve and the HTTP listener's share)", maxConns, want)
	}
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for range 120 { // idle: they never send a request
		nc, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	// Those over the cap are answered 503 and closed; the 8 held get
	// nothing (the read timeout is 10 s).
	answers := make(chan bool, len(conns))
	for _, nc := range conns {
		go func() {
			_ = nc.SetReadDeadline(time.Now().Add(3 * time.Second))
			b, _ := io.ReadAll(nc)
			answers <- strings.HasPrefix(string(b), "HTTP/1.1 503 ")
		}()
	}
	refused := 0
	for range conns {
		if <-answers {
			refused++
		}
	}
	if refused != 120-8 {
		t.Errorf("%d idle HTTP connections refused, want %d (all over http.max_connections)", refused, 120-8)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range maxConns {
		c, err := client.Dial(ctx, addr)
		for wait := time.Millisecond; err != nil && strings.Contains(err.Error(), "limit max_connections") && wait < time.Second; wait *= 2 {
			time.Sleep(wait) // the child's own client, closed, may not have left yet
			c, err = client.Dial(ctx, addr)
		}
		if err != nil {
			t.Fatalf("game client %d of max_connections %d refused while HTTP connections are held: %v", i+1, maxConns, err)
		}
		defer c.Close()
	}
}
