package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdNotify sends its state as one datagram to $NOTIFY_SOCKET, a path or an
// abstract socket, and does nothing without it.
func TestSdNotify(t *testing.T) {
	names := []string{filepath.Join(t.TempDir(), "notify.sock")}
	if runtime.GOOS == "linux" {
		names = append(names, "@tickwheel-test-"+strings.ReplaceAll(t.Name(), "/", "-")+time.Now().Format("150405.000000000"))
	}
	for _, name := range names {
		ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
		require.NoError(t, err)
		env := func(k string) string {
			if k == "NOTIFY_SOCKET" {
				return name
			}
			return ""
		}
		require.NoError(t, sdNotify(env, "READY=1\nSTATUS=listening"))
		buf := make([]byte, 256)
		require.NoError(t, ln.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, err := ln.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, "READY=1\nSTATUS=listening", string(buf[:n]))
		ln.Close()
	}
	require.NoError(t, sdNotify(func(string) string { return "" }, "READY=1"))
	require.ErrorContains(t, sdNotify(func(string) string { return "relative.sock" }, "READY=1"), "NOTIFY_SOCKET")
	require.Error(t, sdNotify(func(string) string { return filepath.Join(t.TempDir(), "none.sock") }, "READY=1"))
}

// -config-check says OK for a valid config and exits 0; for an invalid one
// it exits 1 with an error naming the file, the line and the key.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	check := func(yaml string, args ...string) (int, string, string) {
		t.Helper()
		path := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
		var out, errOut syncBuffer
		code := run(append([]string{"-config-check", "-config", path, "-data-dir", dir}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, _ := check("addr: 127.0.0.1:7420\nlimits:\n  max_timers: 5\n")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "c.yaml: OK")
	_, err := os.Stat(filepath.Join(dir, "admin.token"))
	assert.True(t, os.IsNotExist(err), "-config-check made the admin token")

	// The sample config is valid.
	var out2, errOut2 syncBuffer
	assert.Equal(t, 0, run([]string{"-config-check", "-config", filepath.Join(packageDir, "../../configs/tickwheel.yaml")}, &out2, &errOut2), errOut2.String())

	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"range", "tick: 10ms\nlimits:\n  max_timers: 5\n  max_frame: 10\n", []string{"line 4", "key limits.max_frame", "out of range"}},
		{"negative", "limits:\n  max_backlog: -1\n", []string{"line 2", "key limits.max_backlog", "negative"}},
		{"relation", "limits:\n  max_frame: 65536\n  max_outbound: 100000\n", []string{"line 3", "key limits.max_outbound", "twice max_frame"}},
		{"enum", "\nfsync: sometimes\n", []string{"line 2", "key fsync", "sometimes"}},
		{"unknown key", "limits:\n  max_timerz: 5\n", []string{"line 2", "key limits.max_timerz", "unknown key"}},
		{"type", "tick: 10ms\ntimeouts:\n  idle: soon\n", []string{"line 3", "key timeouts.idle", "soon"}},
		{"speed", "speed: -2\n", []string{"line 1", "key speed", "out of range"}},
		{"log level", "log_level: loud\n", []string{"line 1", "key log_level", "loud"}},
		{"protected", "addr: 0.0.0.0:7420\n", []string{"line 1", "key addr", "protected mode"}},
		{"port", "addr: 127.0.0.1:70000\n", []string{"line 1", "key addr", "0..65535"}},
		{"http port", "\nhttp_addr: 127.0.0.1:99999\n", []string{"line 2", "key http_addr", "0..65535"}},
		{"syntax", "limits:\n  max_frame: [1\n", []string{"c.yaml", "line"}},
	} {
		code, _, errOut := check(tc.yaml)
		assert.Equal(t, 1, code, tc.name)
		for _, w := range tc.want {
			assert.Contains(t, errOut, w, tc.name)
		}
	}

	// A flag beats the file: its error names no line of the file.
	code, _, errOut := check("fsync: always\n", "-fsync", "sometimes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "fsync")
	assert.NotContains(t, errOut, "line 1")

	// An empty config file (or one of comments only) is the defaults.
	code, out, errOut = check("# nothing set\n")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "c.yaml: OK")

	// Flags' addresses are checked too (they failed only at start).
	code, out, errOut = check("", "-http-addr", "127.0.0.1:99999")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "http_addr")
	assert.Contains(t, errOut, "99999")
	code, _, errOut = check("", "-addr", "127.0.0.1:65536")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "config: addr:")
}

// -log-format json (log_format: json) makes every log line a JSON object,
// for log shippers; text stays the default; another value is refused,
// naming the key.
func TestLogFormat(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0") // the server's start fails on it, after logging
	require.NoError(t, err)
	defer busy.Close()
	serveLogs := func(args ...string) string {
		t.Helper()
		var out, errOut syncBuffer
		code := run(append([]string{"-addr", busy.Addr().String(), "-data-dir", t.TempDir(), "-http-addr", "off"}, args...), &out, &errOut)
		require.Equal(t, 1, code, "the start should fail on the busy port")
		return errOut.String()
	}
	logs := serveLogs("-log-format", "json")
	var lines int
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if strings.HasPrefix(line, "tickwheel: ") { // the error that ends the start, not a log line
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "not JSON: %q", line)
		assert.Contains(t, rec, "time")
		assert.Contains(t, rec, "level")
		assert.Contains(t, rec, "msg")
		lines++
	}
	assert.Positive(t, lines, logs)
	assert.Contains(t, logs, `"msg":"admin token"`)

	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("log_format: json\n"), 0o600))
	assert.Contains(t, serveLogs("-config", path), `"msg":"admin token"`)
	assert.Contains(t, serveLogs(), `level=INFO msg="admin token"`) // text by default
	assert.Contains(t, serveLogs("-config", path, "-log-format", "text"), `level=INFO msg="admin token"`)

	require.NoError(t, os.WriteFile(path, []byte("\nlog_format: xml\n"), 0o600))
	var out, errOut syncBuffer
	assert.Equal(t, 1, run([]string{"-config-check", "-config", path}, &out, &errOut))
	assert.Contains(t, errOut.String(), "line 2, key log_format")
}
