package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// lockedBuffer collects log output written from the event loop.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newUnstarted builds a server from the test defaults changed by mutate,
// logging to log, without starting it.
func newUnstarted(t *testing.T, log *slog.Logger, mutate func(*Config)) (*Server, error) {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: t.TempDir()}
	if mutate != nil {
		mutate(&cfg)
	}
	return New(cfg, log)
}

func hello(token string) protocol.Request {
	return protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "t", Token: token}
}

// TestLoopbackIsNotAdmin: admin rights come from the admin token only, never
// from the peer address (a forwarder on the same host would pass them on).
func TestLoopbackIsNotAdmin(t *testing.T) {
	srv := startServer(t, nil)
	user := helloToken(t, srv, "loopback", "")
	user.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpStats})
	user.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpFastForward, Ticks: 1})
	user.ping()
	admin := helloToken(t, srv, "admin", testAdminToken)
	assert.Equal(t, uint64(start), admin.stats().Now, "the fast-forward had no effect")
}

// TestAdminTokenFileCreated: with no admin token configured the server
// makes one in the data directory (0700) as a 0600 file of 64 hex digits,
// and a second server on the same directory uses the same token.
func TestAdminTokenFileCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "tickwheel")
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	noToken := func(c *Config) { c.AdminToken, c.DataDir = "", dir }
	s1, err := newUnstarted(t, log, noToken)
	require.NoError(t, err)

	tok := s1.AdminToken()
	b, err := hex.DecodeString(tok)
	require.NoError(t, err, "the token is hex")
	assert.Len(t, b, 32)
	path := filepath.Join(dir, AdminTokenFileName)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	content, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, tok+"\n", string(content))
	assert.Contains(t, logs.String(), "file="+path)
	assert.Contains(t, logs.String(), "created=true")
	assert.NotContains(t, logs.String(), tok, "the token is never logged")

	s2 := startServer(t, noToken)
	assert.Equal(t, tok, s2.AdminToken(), "the second server reuses the file")
	helloToken(t, s2, "admin", tok).stats()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{AdminTokenFileName, logDir, AddrFileName}, names,
		"no temporary file is left behind (server.addr is the running server's)")
}

// TestAdminTokenFileRefused: a token file that others may read, that is not
// a regular file, or that is empty is refused, with a message that says why
// and what to do.
func TestAdminTokenFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(path string)
		want  []string
	}{
		{"group readable", func(p string) { require.NoError(t, os.WriteFile(p, []byte("secret\n"), 0o640)) },
			[]string{"accessible by group or others", "mode 0640", "chmod 600"}},
		{"world readable", func(p string) { require.NoError(t, os.WriteFile(p, []byte("secret\n"), 0o604)) },
			[]string{"accessible by group or others", "mode 0604"}},
		{"symlink", func(p string) {
			target := filepath.Join(filepath.Dir(p), "elsewhere")
			require.NoError(t, os.WriteFile(target, []byte("secret\n"), 0o600))
			require.NoError(t, os.Symlink(target, p))
		}, []string{"not a regular file"}},
		{"empty", func(p string) { require.NoError(t, os.WriteFile(p, []byte(" \n"), 0o600)) }, []string{"is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, AdminTokenFileName)
			tc.setup(path)
			require.NoError(t, os.Chmod(path, mustMode(t, path))) // umask cannot have loosened it
			_, err := newUnstarted(t, testLogger(), func(c *Config) { c.AdminToken, c.DataDir = "", dir })
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), path)
		})
	}
}

// mustMode returns the permission bits the test meant for path (its own
// lstat for a symlink's target is not needed: chmod follows it harmlessly).
func mustMode(t *testing.T, path string) os.FileMode {
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// TestTokenFiles: admin_token_file and client_token_file are read, trimmed.
func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	adminFile, clientFile := filepath.Join(dir, "admin"), filepath.Join(dir, "client")
	require.NoError(t, os.WriteFile(adminFile, []byte("  adm-from-file-0123\n"), 0o600))
	require.NoError(t, os.WriteFile(clientFile, []byte("cli-from-file-0123\r\n"), 0o644)) // logged, not refused
	var logs lockedBuffer
	srv, err := newUnstarted(t, slog.New(slog.NewTextHandler(&logs, nil)), func(c *Config) {
		c.AdminToken, c.AdminTokenFile, c.ClientTokenFile = "", adminFile, clientFile
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	assert.Equal(t, "adm-from-file-0123", srv.AdminToken())
	assert.Contains(t, logs.String(), "token file is accessible by group or others")

	helloToken(t, srv, "admin", "adm-from-file-0123").stats()
	c := helloToken(t, srv, "client", "cli-from-file-0123")
	c.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpStats})
	anon := dial(t, srv)
	anon.failCode(protocol.CodeUnauthorized, hello(""))
}

// TestTokenConfigErrors: contradictory or unusable token settings.
func TestTokenConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.AdminTokenFile = file }, "admin_token or admin_token_file, not both"},
		{func(c *Config) { c.ClientToken, c.ClientTokenFile = "a", file }, "client_token or client_token_file, not both"},
		{func(c *Config) { c.ClientToken = testAdminToken }, "must differ"},
		{func(c *Config) { c.AdminToken, c.AdminTokenFile = "", file+".missing" }, "admin_token_file"},
		{func(c *Config) { c.ClientTokenFile = file + ".missing" }, "client_token_file"},
		{func(c *Config) { c.AdminToken = strings.Repeat("x", 300) }, "max_name"},
		// Tokens shorter than 16 bytes could be guessed.
		{func(c *Config) { c.AdminToken = "x" }, "config: admin_token: the token is 1 bytes long: tokens must be at least 16 bytes"},
		{func(c *Config) { c.AdminToken = strings.Repeat("x", 15) }, "config: admin_token: the token is 15 bytes"},
		{func(c *Config) { c.AdminToken, c.AdminTokenFile = "", file }, "config: admin_token_file: the token is 1 bytes"},
		{func(c *Config) { c.ClientToken = "let-me-in" }, "config: client_token: the token is 9 bytes"},
		{func(c *Config) { c.ClientTokenFile = file }, "config: client_token_file: the token is 1 bytes"},
	} {
		_, err := newUnstarted(t, testLogger(), tc.mutate)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestWrongToken: a token that matches neither configured token is
// unauthorized, even when the server requires no client token, and leaves
// the session without hello (and without admin rights).
func TestWrongToken(t *testing.T) {
	srv := startServer(t, nil) // an admin token only
	c := dial(t, srv)
	text := c.failCode(protocol.CodeUnauthorized, hello("not-the-token"))
	assert.Contains(t, text, "bad or missing token")
	c.failCode(protocol.CodeHelloRequired, protocol.Request{Op: protocol.OpPing})
	c.sayHello("anon", "") // no token: a plain session
	c.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpStats})

	// An admin session that says a bad hello loses its rights and its hello.
	a := helloClient(t, srv, "admin")
	a.bind(5, false)
	a.stats()
	a.failCode(protocol.CodeUnauthorized, hello("guess"))
	a.failCode(protocol.CodeHelloRequired, protocol.Request{Op: protocol.OpStats})
	a.sayHello("anon", "")
	a.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpStats})
	a.add(protocol.Request{Receiver: 5, Tid: 1, After: 1})
	helloClient(t, srv, "admin2").ff(1)
	a.ping()
	assert.Len(t, a.fires(), 1, "receivers bound before the failed hello stay bound")
}

// TestThirdFailedHelloCloses: the third failed hello on a connection is
// answered, then the connection is closed; successes in between do not
// reset the count. Failures are logged without the token.
func TestThirdFailedHelloCloses(t *testing.T) {
	var logs lockedBuffer
	srv, err := newUnstarted(t, slog.New(slog.NewTextHandler(&logs, nil)), func(c *Config) { c.ClientToken = "let-me-in-please-0123" })
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	c := dial(t, srv)
	c.failCode(protocol.CodeUnauthorized, hello(""))
	c.sayHello("ok", "let-me-in-please-0123")
	c.failCode(protocol.CodeUnauthorized, hello("guess-2"))
	c.sayHello("ok", "let-me-in-please-0123")
	// The third failure, pipelined with a ping: the ping is never answered.
	id := c.send(hello("guess-3"))
	c.send(protocol.Request{Op: protocol.OpPing})
	ms := c.readUntilClosed()
	require.Len(t, ms, 1, "the reply to the third failure, then the close")
	assert.Equal(t, id, ms[0].ID)
	assert.Equal(t, protocol.CodeUnauthorized, ms[0].Code)
	assert.Contains(t, ms[0].Text, "closing the connection")

	other := helloToken(t, srv, "other", "let-me-in-please-0123")
	other.ping()
	out := logs.String()
	assert.Contains(t, out, "hello with a bad token")
	assert.Contains(t, out, "closing a connection after repeated hellos with a bad token")
	assert.Contains(t, out, "remote=127.0.0.1:")
	assert.NotContains(t, out, "guess-", "tokens are never logged")
}

// TestProtectedMode: listening beyond loopback needs a client token, or
// Insecure, which is then logged as a warning.
func TestProtectedMode(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "tickwheel.example:0"} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := newUnstarted(t, testLogger(), func(c *Config) { c.Addr, c.AdminToken, c.DataDir = addr, "", dir })
		assert.NoDirExists(t, dir, "refused before making the admin token")
		require.Error(t, err, addr)
		for _, w := range []string{"protected mode", addr, "client token", "-insecure", "insecure: true"} {
			assert.Contains(t, err.Error(), w)
		}
	}
	var logs lockedBuffer
	srv := startWith(t, slog.New(slog.NewTextHandler(&logs, nil)), func(c *Config) { c.Addr, c.Insecure = "0.0.0.0:0", true })
	assert.Contains(t, logs.String(), "level=WARN msg=\"insecure: listening beyond loopback")
	helloToken(t, srv, "anyone", "").ping()

	srv = startWith(t, testLogger(), func(c *Config) { c.Addr, c.ClientToken = "0.0.0.0:0", "let-me-in-please-0123" })
	helloToken(t, srv, "client", "let-me-in-please-0123").ping()
}

// startWith starts a server built by newUnstarted and stops it at the end.
func startWith(t *testing.T, log *slog.Logger, mutate func(*Config)) *Server {
	t.Helper()
	srv, err := newUnstarted(t, log, mutate)
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	// Dial through loopback whatever the listening address.
	if strings.HasPrefix(srv.addr, "0.0.0.0:") || strings.HasPrefix(srv.addr, "[::]:") {
		srv.addr = "127.0.0.1:" + srv.addr[strings.LastIndex(srv.addr, ":")+1:]
	}
	return srv
}

func TestExposed(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7420": false, "127.3.4.5:1": false, "[::1]:1": false, "localhost:1": false, "LocalHost.:1": false,
		":7420": true, "0.0.0.0:1": true, "[::]:1": true, "10.0.0.1:1": true, "[fe80::1%eth0]:1": true,
		"example.com:1": true, "localhost.example.com:1": true,
	} {
		got, err := exposed(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	_, err := exposed("no-port")
	assert.Error(t, err)
}

// TestClientTokenAuto: client_token_auto satisfies protected mode with a
// client token made in the data dir at first start (0600, logged with its
// path) and kept after; Check passes without making it; a configured
// client token wins and no file is made.
func TestClientTokenAuto(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Addr: "0.0.0.0:7420", DataDir: dir, Persistence: "off", ClientTokenAuto: true}
	require.NoError(t, cfg.Check())
	_, err := os.Stat(filepath.Join(dir, ClientTokenFileName))
	require.True(t, os.IsNotExist(err), "Check made client.token")
	require.ErrorContains(t, Config{Addr: "0.0.0.0:7420", DataDir: dir}.Check(), "protected mode")

	var logs lockedBuffer
	c, err := cfg.withDefaults()
	require.NoError(t, err)
	require.NoError(t, c.secure(slog.New(slog.NewTextHandler(&logs, nil))))
	path := filepath.Join(dir, ClientTokenFileName)
	assert.Contains(t, logs.String(), "file="+path+" created=true")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	tok, err := ReadTokenFile(path)
	require.NoError(t, err)
	assert.Equal(t, tok, c.ClientToken)
	assert.NotEqual(t, c.AdminToken, c.ClientToken)

	c, err = cfg.withDefaults()
	require.NoError(t, err)
	require.NoError(t, c.secure(slog.New(slog.DiscardHandler)))
	assert.Equal(t, tok, c.ClientToken, "kept across starts")

	other := t.TempDir()
	c, err = Config{Addr: "0.0.0.0:7420", DataDir: other, ClientTokenAuto: true, ClientToken: "given-client-token"}.withDefaults()
	require.NoError(t, err)
	require.NoError(t, c.secure(slog.New(slog.DiscardHandler)))
	assert.Equal(t, "given-client-token", c.ClientToken)
	_, err = os.Stat(filepath.Join(other, ClientTokenFileName))
	assert.True(t, os.IsNotExist(err), "client.token made though a token was configured")
}
