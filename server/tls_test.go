package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// tlsFixture is a CA and, in a temporary directory, a server certificate
// for 127.0.0.1 and localhost signed by it, and a client certificate.
type tlsFixture struct {
	ca                *certs.CA
	dir               string
	cert, key, caFile string
	client            tls.Certificate
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	ca, err := certs.NewCA("tickwheel test CA")
	require.NoError(t, err)
	srv, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	require.NoError(t, err)
	cli, err := ca.Issue(certs.Options{CommonName: "game-1", Client: true})
	require.NoError(t, err)
	dir := t.TempDir()
	p, err := certs.WriteFiles(dir, map[string][]byte{"server.pem": srv.CertPEM, "server.key": srv.KeyPEM, "ca.pem": ca.CertPEM})
	require.NoError(t, err)
	return &tlsFixture{ca: ca, dir: dir, cert: p["server.pem"], key: p["server.key"], caFile: p["ca.pem"], client: cli.TLS()}
}

// clientConfig trusts f's CA and presents cert, if any.
func (f *tlsFixture) clientConfig(cert ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: f.ca.Pool(), ServerName: "127.0.0.1", Certificates: cert}
}

// startTLSServer runs a server with TLS on its client port; mtls adds
// client-certificate verification against f's CA.
func startTLSServer(t *testing.T, f *tlsFixture, mtls bool, mutate func(*Config)) *Server {
	t.Helper()
	return startServer(t, func(c *Config) {
		c.TLS.CertFile, c.TLS.KeyFile = f.cert, f.key
		if mtls {
			c.TLS.ClientCAFile = f.caFile
		}
		if mutate != nil {
			mutate(c)
		}
	})
}

func dialTLS(t *testing.T, srv *Server, cfg *tls.Config) *rawClient {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: ioTimeout}, "tcp", srv.Addr(), cfg)
	require.NoError(t, err)
	return wrapConn(t, c)
}

// A timer added over TLS fires to a receiver bound over TLS, and the
// session reports the client's own address, not the pair's.
func TestTLSAddFire(t *testing.T) {
	f := newTLSFixture(t)
	srv := startTLSServer(t, f, false, nil)
	c := dialTLS(t, srv, f.clientConfig())
	c.sayHello("tls", srv.AdminToken())
	c.bind(7, true)
	due := c.add(protocol.Request{Receiver: 7, Tid: 1, After: 5, Repeat: 2, Data: []byte("over tls")})
	c.ff(10)
	c.ping()
	fs := c.fires()
	require.Len(t, fs, 2)
	require.Equal(t, due, fs[0].Tick)
	require.Equal(t, []byte("over tls"), fs[0].Data)

	// A plaintext hello on the TLS port is no session: it is told why.
	p := dial(t, srv)
	p.write(protocol.AppendRequest(nil, &protocol.Request{ID: 1, Op: protocol.OpHello, Version: protocol.Version, Name: "plain"}))
	m := p.readUntilClosed()
	require.Len(t, m, 1)
	require.Equal(t, protocol.CodeMalformed, m[0].Code)
	require.Contains(t, m[0].Text, "this port speaks TLS")
	require.Equal(t, uint64(1), c.stats().Sessions)
}

// With client_ca_file, a client without a certificate, or with one from
// another CA, is refused at the handshake; one with a certificate of the
// CA is served.
func TestTLSMutual(t *testing.T) {
	f := newTLSFixture(t)
	srv := startTLSServer(t, f, true, nil)

	c := dialTLS(t, srv, f.clientConfig(f.client))
	c.sayHello("mtls", srv.AdminToken())
	c.ping()

	// TLS 1.3: the client learns of the refusal at its first read.
	noCert := dialTLS(t, srv, f.clientConfig())
	noCert.write(protocol.AppendRequest(nil, &protocol.Request{ID: 1, Op: protocol.OpHello, Version: protocol.Version, Name: "x"}))
	_, err := noCert.read()
	require.ErrorContains(t, err, "certificate required")

	other, err := certs.NewCA("another CA")
	require.NoError(t, err)
	stranger, err := other.Issue(certs.Options{Client: true})
	require.NoError(t, err)
	// (A Go client offers only a certificate of a CA the server names: it
	// must be made to offer this one.)
	strangerCfg := f.clientConfig()
	strangerCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c := stranger.TLS()
		return &c, nil
	}
	bad := dialTLS(t, srv, strangerCfg)
	bad.write(protocol.AppendRequest(nil, &protocol.Request{ID: 1, Op: protocol.OpHello, Version: protocol.Version, Name: "x"}))
	_, err = bad.read()
	require.ErrorContains(t, err, "unknown certificate authority")
	waitUntil(t, "refused handshakes are counted and their connections given back", func() bool {
		return srv.tlsFailed.Load() == 2 && srv.conns.Load() == 1
	})
	m, err := srv.ReadMetrics(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), m.TLSHandshakeFailures, "exported as tickwheel_tls_handshake_failures_total")
}

// A client that connects and never finishes its TLS handshake is cut at
// timeouts.handshake, and until then counts towards max_connections.
func TestTLSHandshakeTimeout(t *testing.T) {
	f := newTLSFixture(t)
	srv := startTLSServer(t, f, false, func(c *Config) {
		c.Timeouts.Handshake = 300 * time.Millisecond
		c.Limits.MaxConnections = 1
	})
	idle, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	defer idle.Close()
	start := time.Now()

	// The silent one holds the only place: the next is refused, inside
	// TLS, where a TLS client reads.
	refused := dialTLS(t, srv, f.clientConfig())
	m, err := refused.read()
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLimitExceeded, m.Code)
	require.Contains(t, m.Text, "limit max_connections (1) reached")

	require.NoError(t, idle.SetReadDeadline(time.Now().Add(ioTimeout)))
	_, err = idle.Read(make([]byte, 1))
	require.Error(t, err, "cut")
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server closed it, not our deadline")
	require.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
	waitUntil(t, "its place is given back", func() bool { return srv.conns.Load() == 0 })
	c := dialTLS(t, srv, f.clientConfig())
	c.sayHello("after", srv.AdminToken())
}

// Reload rereads the certificate files: new connections get the new
// certificate, the connection made before keeps working.
func TestTLSReloadSwapsCertificate(t *testing.T) {
	f := newTLSFixture(t)
	var cfg Config
	srv := startTLSServer(t, f, false, func(c *Config) { cfg = *c })
	old := dialTLS(t, srv, f.clientConfig())
	old.sayHello("old", srv.AdminToken())
	before := old.conn.(*tls.Conn).ConnectionState().PeerCertificates[0]

	next, err := f.ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, CommonName: "renewed"})
	require.NoError(t, err)
	_, err = certs.WriteFiles(f.dir, map[string][]byte{"server.pem": next.CertPEM, "server.key": next.KeyPEM})
	require.NoError(t, err)
	_, err = srv.Reload(context.Background(), cfg)
	require.NoError(t, err)

	fresh := dialTLS(t, srv, f.clientConfig())
	got := fresh.conn.(*tls.Conn).ConnectionState().PeerCertificates[0]
	require.Equal(t, "renewed", got.Subject.CommonName)
	require.NotEqual(t, before.SerialNumber, got.SerialNumber)
	fresh.sayHello("fresh", srv.AdminToken())
	old.ping() // still up

	// A broken file is refused and the renewed certificate stays.
	require.NoError(t, os.WriteFile(f.key, []byte("not a key"), 0o600))
	_, err = srv.Reload(context.Background(), cfg)
	require.ErrorContains(t, err, "tls.key_file")
	again := dialTLS(t, srv, f.clientConfig())
	require.Equal(t, "renewed", again.conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName)
}

// Check names the key and says what is wrong with each kind of bad file.
func TestTLSConfigCheck(t *testing.T) {
	f := newTLSFixture(t)
	expired, err := f.ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour),
		NotAfter: time.Now().Add(-24 * time.Hour)})
	require.NoError(t, err)
	other, err := f.ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	p, err := certs.WriteFiles(f.dir, map[string][]byte{"expired.pem": expired.CertPEM, "expired.key": expired.KeyPEM,
		"other.key": other.KeyPEM, "empty.pem": nil})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		tls  func(c *Config)
		want string
	}{
		{"missing", func(c *Config) { c.TLS.CertFile = filepath.Join(f.dir, "nope.pem") }, "tls.cert_file"},
		{"mismatch", func(c *Config) { c.TLS.KeyFile = p["other.key"] }, "does not match"},
		{"expired", func(c *Config) { c.TLS.CertFile, c.TLS.KeyFile = p["expired.pem"], p["expired.key"] }, "expired at"},
		{"no key", func(c *Config) { c.TLS.KeyFile = "" }, "tls.key_file: not set"},
		{"bad CA", func(c *Config) { c.TLS.ClientCAFile = p["empty.pem"] }, "tls.client_ca_file"},
		{"version", func(c *Config) { c.TLS.MinVersion = "1.1" }, "tls.min_version"},
		{"http", func(c *Config) {
			c.HTTP.TLS.CertFile, c.HTTP.TLS.KeyFile = p["expired.pem"], p["expired.key"]
		}, "http.tls.cert_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{AdminToken: testAdminToken, DataDir: t.TempDir(), Persistence: "off"}
			cfg.TLS.CertFile, cfg.TLS.KeyFile = f.cert, f.key
			tc.tls(&cfg)
			err := cfg.Check()
			require.ErrorContains(t, err, tc.want)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "a *ConfigError, so -config-check names the file's line")
		})
	}
	// Raft over TLS needs the client CA, which verifies the peers.
	node := Config{AdminToken: testAdminToken, DataDir: t.TempDir(),
		Cluster: ClusterConfig{ID: "c", NodeID: "n1", Peers: "n1=127.0.0.1:7520", TLS: true}}
	node.TLS.CertFile, node.TLS.KeyFile = f.cert, f.key
	require.ErrorContains(t, node.Check(), "cluster.tls: raft over TLS uses tls.cert_file, tls.key_file and tls.client_ca_file")
	node.TLS.ClientCAFile = f.caFile
	require.NoError(t, node.Check())

	good := Config{AdminToken: testAdminToken, DataDir: t.TempDir(), Persistence: "off"}
	good.TLS.CertFile, good.TLS.KeyFile = f.cert, f.key
	require.NoError(t, good.Check())
}

// Many requests and big events cross the pair both ways without loss: a
// pipelined burst of adds bigger than the pair's buffers, and their
// firings back.
func TestTLSPipelinedBurst(t *testing.T) {
	f := newTLSFixture(t)
	srv := startTLSServer(t, f, false, nil)
	c := dialTLS(t, srv, f.clientConfig())
	c.sayHello("burst", srv.AdminToken())
	c.bind(1, true)
	const n = 2000
	data := bytes.Repeat([]byte("x"), 200)
	var buf []byte
	for i := 1; i <= n; i++ {
		buf = protocol.AppendRequest(buf, &protocol.Request{ID: uint64(i), Op: protocol.OpAdd, Receiver: 1, Tid: uint64(i), After: 1, Data: data})
	}
	c.write(buf)
	c.id = n
	for i := 1; i <= n; i++ {
		m := c.reply(uint64(i))
		require.Equal(t, protocol.KindOK, m.Kind, "%s", m.Text)
	}
	c.ff(1)
	c.ping()
	require.Len(t, c.fires(), n)
}

// A client that stops reading over TLS is held like a plaintext one: the
// loop's outbound limit applies, and the server stays responsive to others.
func TestTLSSlowReaderDoesNotBlockOthers(t *testing.T) {
	f := newTLSFixture(t)
	srv := startTLSServer(t, f, false, nil)
	slow := dialTLS(t, srv, f.clientConfig())
	slow.sayHello("slow", srv.AdminToken())
	slow.bind(1, true)
	var buf []byte
	for i := 1; i <= 5000; i++ {
		buf = protocol.AppendRequest(buf, &protocol.Request{ID: uint64(i), Op: protocol.OpAdd, Receiver: 1, Tid: uint64(i), After: 1,
			Data: bytes.Repeat([]byte("y"), 500)})
	}
	slow.write(buf) // the replies and then the events are never read
	other := dialTLS(t, srv, f.clientConfig())
	other.sayHello("other", srv.AdminToken())
	other.ff(1)
	other.ping()
}
