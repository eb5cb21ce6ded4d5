package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/operator"
	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// certsDir runs `tickwheel certs` into a new directory and returns it.
func certsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errOut syncBuffer
	require.Equal(t, 0, run([]string{"certs", "-dir", dir, "-hosts", "localhost,127.0.0.1"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "wrote ca.pem, ca.key, server.pem, server.key, client.pem, client.key")
	return dir
}

// A new user's path: `tickwheel certs`, a server with mTLS on those files,
// and the CLI connecting with -tls-ca, -tls-cert and -tls-key (or the
// environment); without its certificate, or without TLS, it is told why.
func TestCLIOverMutualTLS(t *testing.T) {
	dir := certsDir(t)
	f := func(name string) string { return filepath.Join(dir, name) }
	fi, err := os.Stat(f("server.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "keys are private")
	var out, errOut syncBuffer
	assert.Equal(t, 1, run([]string{"certs", "-dir", dir}, &out, &errOut), "does not overwrite")
	assert.Contains(t, errOut.String(), "exists: not overwriting it")

	srv := servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) {
		c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile = f("server.pem"), f("server.key"), f("ca.pem")
	}))
	addr := srv.Addr()
	tlsArgs := []string{"-tls-ca", f("ca.pem"), "-tls-cert", f("client.pem"), "-tls-key", f("client.key")}

	code, stdout, stderr := cli(t, addr, append([]string{"ping"}, tlsArgs...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "tick")

	code, _, stderr = cli(t, addr, "ping", "-tls-ca", f("ca.pem"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "requires a TLS client certificate (mTLS)")

	code, _, stderr = cli(t, addr, "ping")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "this port speaks TLS")

	code, _, stderr = cli(t, addr, "ping", "-tls") // the system's CAs do not know this one
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "certificate signed by unknown authority")

	t.Setenv(envTLSCA, f("ca.pem"))
	t.Setenv(envTLSCert, f("client.pem"))
	t.Setenv(envTLSKey, f("client.key"))
	t.Setenv(envTLSServerName, "localhost")
	code, _, stderr = cli(t, addr, "add", "5", "1", "10", "-token", srv.AdminToken())
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = cli(t, addr, "get", "5", "1", "-token", srv.AdminToken())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "5/1")
}

// -config-check loads the TLS files and names the key and the problem.
func TestConfigCheckTLS(t *testing.T) {
	dir := certsDir(t)
	f := func(name string) string { return filepath.Join(dir, name) }
	check := func(args ...string) (int, string, string) {
		var out, errOut syncBuffer
		code := run(append([]string{"-config-check", "-data-dir", t.TempDir()}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := check("-tls-cert", f("server.pem"), "-tls-key", f("server.key"), "-tls-client-ca", f("ca.pem"))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "OK")

	code, _, errOut = check("-tls-cert", f("server.pem"), "-tls-key", f("client.key"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "tls.key_file")
	assert.Contains(t, errOut, "private key does not match public key")

	code, _, errOut = check("-tls-cert", f("server.pem"), "-tls-key", f("missing.key"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "tls.key_file")
	assert.Contains(t, errOut, "no such file")

	ca, err := certs.NewCA("expired test CA")
	require.NoError(t, err)
	old, err := ca.Issue(certs.Options{Hosts: []string{"localhost"}, NotBefore: time.Now().Add(-72 * time.Hour),
		NotAfter: time.Now().Add(-48 * time.Hour)})
	require.NoError(t, err)
	p, err := certs.WriteFiles(t.TempDir(), map[string][]byte{"old.pem": old.CertPEM, "old.key": old.KeyPEM})
	require.NoError(t, err)
	code, _, errOut = check("-http-tls-cert", p["old.pem"], "-http-tls-key", p["old.key"])
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "http.tls.cert_file")
	assert.Contains(t, errOut, "expired at")

	// In a config file, the error names its line.
	conf := filepath.Join(t.TempDir(), "tw.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("tls:\n  cert_file: "+p["old.pem"]+"\n  key_file: "+p["old.key"]+"\n"), 0o600))
	code, _, errOut = check("-config", conf)
	assert.Equal(t, 1, code)
	assert.True(t, strings.Contains(errOut, "line 2"), errOut)
}

// health reaches an operator listener with http.tls (and mTLS) through
// the same -tls-* flags.
func TestHealthOverHTTPS(t *testing.T) {
	dir := certsDir(t)
	f := func(name string) string { return filepath.Join(dir, name) }
	lim := server.HTTPLimits{}
	lim.TLS.CertFile, lim.TLS.KeyFile, lim.TLS.ClientCAFile = f("server.pem"), f("server.key"), f("ca.pem")
	op, err := operator.New(operator.Options{Addr: "127.0.0.1:0", Limits: lim.WithDefaults()})
	require.NoError(t, err)
	require.NoError(t, op.Serve())
	defer op.Close()
	var out, errOut syncBuffer
	code := run([]string{"health", "-http-addr", op.Addr(), "-tls-ca", f("ca.pem"), "-tls-cert", f("client.pem"),
		"-tls-key", f("client.key")}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	assert.Contains(t, out.String(), "https://"+op.Addr()+"/healthz: 200 OK")

	// Without a client certificate it is told so, as ping is on the
	// client port, not given net/http's raw `Get "https://...": remote
	// error: tls: certificate required`.
	var out2, errOut2 syncBuffer
	code = run([]string{"health", "-http-addr", op.Addr(), "-tls-ca", f("ca.pem")}, &out2, &errOut2)
	assert.Equal(t, 1, code)
	assert.Equal(t, "tickwheel health: https://"+op.Addr()+"/healthz requires a TLS client certificate (mTLS) and none was given "+
		"(a certificate and key signed by its http.tls.client_ca_file; -tls-cert and -tls-key): remote error: tls: certificate required\n",
		errOut2.String())
}

// The alert reads the same whether net/http reports it from the
// handshake or from its read loop (which prefixes its own words; CI saw
// both for the same request).
func TestHealthTLSRefusalWrapped(t *testing.T) {
	alert := &net.OpError{Op: "remote error", Err: tls.AlertError(116)}
	want := "https://h/healthz requires a TLS client certificate (mTLS) and none was given " +
		"(a certificate and key signed by its http.tls.client_ca_file; -tls-cert and -tls-key): remote error: tls: certificate required"
	for _, err := range []error{
		&neturl.Error{Op: "Get", URL: "https://h/healthz", Err: alert},
		&neturl.Error{Op: "Get", URL: "https://h/healthz", Err: fmt.Errorf("readLoopPeekFailLocked: %w", alert)},
	} {
		assert.Equal(t, want, healthTLSRefusal("https://h/healthz", err).Error())
	}
	other := errors.New("connection refused")
	assert.Equal(t, other, healthTLSRefusal("https://h/healthz", other))
}
