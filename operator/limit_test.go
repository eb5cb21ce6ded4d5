package operator

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

// keepAlive opens a connection to addr, makes one keep-alive request on
// it and returns it, open and idle.
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(nc, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	_ = nc.SetDeadline(time.Time{})
	return nc
}

// TestHTTPConnectionCap: with http.max_connections open, a new connection
// is answered 503 and closed; idle keep-alive connections are closed after
// the idle timeout, which makes room again.
func TestHTTPConnectionCap(t *testing.T) {
	op, err := New(Options{Addr: "127.0.0.1:0", Limits: server.HTTPLimits{MaxConnections: 4, IdleTimeout: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	addr := op.Addr()
	var idle []net.Conn
	for range 4 {
		idle = append(idle, keepAlive(t, addr))
	}
	for i := range 3 { // over the cap: 503, then closed
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(nc) // the refusal comes unasked; the server closes
		nc.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 503 ") || !strings.Contains(string(b), "http.max_connections") {
			t.Fatalf("connection %d over the cap: %q, %v; want a 503 and the close", i, b, err)
		}
	}
	if got := op.ln.refused.Load(); got != 3 {
		t.Errorf("refused %d, want 3", got)
	}
	// The idle ones are closed by the server after the idle timeout.
	for i, nc := range idle {
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := nc.Read(make([]byte, 1))
		if n != 0 || err != io.EOF {
			t.Fatalf("idle connection %d: read %d, %v; want EOF (closed by the idle timeout)", i, n, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for op.ln.open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for range 4 { // room again
		keepAlive(t, addr)
	}
}

// TestHTTPReadTimeout: a connection that never finishes its request is
// closed after the read timeout (a slowloris cannot hold a place).
func TestHTTPReadTimeout(t *testing.T) {
	op, err := New(Options{Addr: "127.0.0.1:0", Limits: server.HTTPLimits{MaxConnections: 2, ReadTimeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	nc, err := net.Dial("tcp", op.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n") // headers never end
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(nc)
	if err != nil {
		t.Fatalf("a request that never ends: %v; want it closed by the read timeout", err)
	}
}
