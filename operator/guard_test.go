package operator

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestLoopbackHostCheck: on loopback, a request whose Host is not a
// loopback name (a web page re-pointed at 127.0.0.1 by DNS rebinding sends
// its own) is refused, every path; loopback names pass.
func TestLoopbackHostCheck(t *testing.T) {
	_, hs := newTestOperator(t)
	port := hs.URL[strings.LastIndex(hs.URL, ":"):]
	get := func(host, path string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.URL+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, host := range []string{"evil.example" + port, "evil.example", "10.0.0.5" + port, "localhost.evil.example" + port} {
		for _, path := range []string{"/metrics", "/status.json", "/debug/pprof/cmdline", "/healthz"} {
			if got := get(host, path); got != http.StatusForbidden {
				t.Errorf("Host %s %s: %d, want 403", host, path, got)
			}
		}
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST." + port, "[::1]" + port, "127.0.0.2", "localhost"} {
		if got := get(host, "/status.json"); got != 200 {
			t.Errorf("Host %s: %d, want 200", host, got)
		}
	}
}

// TestBadTokensThrottled: beyond loopback, an address that sent
// max_bad_tokens wrong bearer tokens is answered 429 without its token
// being looked at (the right one included), until its budget refills;
// another address is not affected; the refusals are logged and counted.
func TestBadTokensThrottled(t *testing.T) {
	ts := servertest.RunT(t)
	var logs bytes.Buffer
	op, err := New(Options{Addr: "0.0.0.0:0", Limits: server.HTTPLimits{MaxBadTokens: 5},
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	op.bad.now = func() time.Time { return now }
	op.Attach(ts.Server())
	get := func(remote, token string) int {
		t.Helper()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr = remote
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		op.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	const attacker, other = "192.0.2.1:5000", "192.0.2.2:6000"
	for i := range 5 {
		if got := get(attacker, "guess"); got != http.StatusUnauthorized {
			t.Fatalf("bad token %d: %d, want 401", i, got)
		}
	}
	for _, tok := range []string{"guess", ts.AdminToken()} {
		if got := get(attacker, tok); got != http.StatusTooManyRequests {
			t.Errorf("after 5 bad tokens, token %q: %d, want 429", tok, got)
		}
	}
	if got := get(other, ts.AdminToken()); got != 200 {
		t.Errorf("another address with the admin token: %d, want 200", got)
	}
	now = now.Add(12 * time.Second) // 5 a minute: one more try
	if got := get(attacker, ts.AdminToken()); got != 200 {
		t.Errorf("after the budget refilled, the admin token: %d, want 200", got)
	}
	if got := op.badTokens.Load(); got != 7 {
		t.Errorf("bad tokens counted %d, want 7", got)
	}
	for _, want := range []string{"missing or bad bearer token", "too many bad bearer tokens", "remote=192.0.2.1:5000"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestPprofCmdlineRedacted: /debug/pprof/cmdline never shows a token
// given on the command line.
func TestPprofCmdlineRedacted(t *testing.T) {
	args := []string{"tickwheel", "-admin-token", "s3cret-one", "--admin-token=s3cret-two", "-token", "s3cret-three",
		"-token-file", "/etc/tok", "-addr", "127.0.0.1:1", "-Admin-Token=s3cret-four"}
	want := []string{"tickwheel", "-admin-token", "REDACTED", "--admin-token=REDACTED", "-token", "REDACTED",
		"-token-file", "/etc/tok", "-addr", "127.0.0.1:1", "-Admin-Token=REDACTED"}
	if got := redactArgs(args); !slices.Equal(got, want) {
		t.Errorf("redactArgs:\n got %q\nwant %q", got, want)
	}
	saved := os.Args
	os.Args = args
	defer func() { os.Args = saved }()
	_, hs := newTestOperator(t)
	resp, err := http.Get(hs.URL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "-addr\x00127.0.0.1:1") {
		t.Errorf("/debug/pprof/cmdline: %d %q", resp.StatusCode, b)
	}
}
