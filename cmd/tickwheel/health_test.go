package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// health exits 0 when /healthz answers 200, 1 when it answers otherwise or
// nothing listens, and 2 for bad usage.
func TestHealth(t *testing.T) {
	status := http.StatusOK
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte("ok\n"))
	}))
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	health := func(args ...string) (int, string, string) {
		var out, errOut syncBuffer
		code := run(append([]string{"health"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, _ := health("-http-addr", addr)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "/healthz: 200 OK")

	code, out, _ = health("-http-addr", addr, "-json")
	assert.Equal(t, 0, code)
	assert.JSONEq(t, `{"url":"http://`+addr+`/healthz","status":200,"ok":true}`, out)

	status = http.StatusServiceUnavailable
	code, _, errOut := health("-http-addr", addr)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "503")
	code, out, _ = health("-http-addr", addr, "-json")
	assert.Equal(t, 1, code)
	assert.JSONEq(t, `{"url":"http://`+addr+`/healthz","status":503,"ok":false,"error":"503 Service Unavailable \"ok\\n\""}`, out)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	ln.Close()
	code, _, errOut = health("-http-addr", closed, "-timeout", "2s")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "tickwheel health:")

	code, _, _ = health("extra")
	assert.Equal(t, 2, code)
}
