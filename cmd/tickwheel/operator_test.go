package main

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/tickwheel/tickwheel/server"
)

// TestHTTPAddrFlag: -http-addr sets the operator listener's address, ""
// turns it off, and without it the config file's http_addr (or the
// default) stands.
func TestHTTPAddrFlag(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"-http-addr", "127.0.0.1:9999"}, "127.0.0.1:9999"},
		{[]string{"-http-addr", ""}, "off"},
		{[]string{"-http-addr", "off"}, "off"},
	} {
		cfg, _, err := serveConfig(tc.args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HTTPAddr != tc.want {
			t.Errorf("%q: HTTPAddr %q, want %q", tc.args, cfg.HTTPAddr, tc.want)
		}
	}
}

// TestStartOperator: "off" starts nothing and leaves metrics off; an
// address starts the listener (serving /healthz) and turns metrics on; a
// bad address is an error naming the key.
func TestStartOperator(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cfg := server.Config{HTTPAddr: "off"}
	op, err := startOperator(&cfg, log)
	if err != nil || op != nil || cfg.Metrics {
		t.Fatalf("off: %v, %v, metrics %v", op, err, cfg.Metrics)
	}
	cfg = server.Config{HTTPAddr: "127.0.0.1:0"}
	op, err = startOperator(&cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if !cfg.Metrics {
		t.Error("metrics are off with the listener on")
	}
	resp, err := http.Get("http://" + op.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/healthz: %s", resp.Status)
	}
	cfg = server.Config{HTTPAddr: "nonsense"}
	if _, err := startOperator(&cfg, log); err == nil {
		t.Error("a bad http_addr started")
	}
}
