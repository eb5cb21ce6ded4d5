package client_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// tlsSetup is a CA, certificate files for a server on 127.0.0.1 and for a
// client, all made by the test in a temporary directory.
type tlsSetup struct {
	ca    *certs.CA
	files map[string]string
}

func newTLSSetup(t *testing.T, serverCert certs.Options) *tlsSetup {
	t.Helper()
	ca, err := certs.NewCA("client test CA")
	require.NoError(t, err)
	srv, err := ca.Issue(serverCert)
	require.NoError(t, err)
	cli, err := ca.Issue(certs.Options{CommonName: "game-1", Client: true})
	require.NoError(t, err)
	files, err := certs.WriteFiles(t.TempDir(), map[string][]byte{"ca.pem": ca.CertPEM, "server.pem": srv.CertPEM,
		"server.key": srv.KeyPEM, "client.pem": cli.CertPEM, "client.key": cli.KeyPEM})
	require.NoError(t, err)
	return &tlsSetup{ca: ca, files: files}
}

// server runs a server with TLS on its client port, mTLS when mtls.
func (s *tlsSetup) server(t *testing.T, mtls bool) *servertest.Server {
	return servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) {
		c.TLS.CertFile, c.TLS.KeyFile = s.files["server.pem"], s.files["server.key"]
		if mtls {
			c.TLS.ClientCAFile = s.files["ca.pem"]
		}
	}))
}

func dialTLS(t *testing.T, srv *servertest.Server, opts ...client.Option) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opts = append(opts, client.WithToken(srv.AdminToken()), client.WithReconnect(0, 0))
	c, err := client.Dial(ctx, srv.Addr(), opts...)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// Over TLS with mTLS, a timer added fires to its bound receiver.
func TestTLSAddFire(t *testing.T) {
	s := newTLSSetup(t, certs.Options{Hosts: []string{"127.0.0.1"}})
	srv := s.server(t, true)
	c, err := dialTLS(t, srv, client.WithTLSFiles(client.TLSFiles{CAFile: s.files["ca.pem"],
		CertFile: s.files["client.pem"], KeyFile: s.files["client.key"]}))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Bind(ctx, 9, nil)
	require.NoError(t, err)
	due, err := c.Add(ctx, 9, 1, 3, &client.AddOptions{Repeat: 1, Data: []byte("tls")})
	require.NoError(t, err)
	srv.AdvanceTicks(3)
	select {
	case ev := <-c.Events():
		require.Equal(t, uint64(1), ev.Tid)
		require.Equal(t, due, ev.Tick)
		require.Equal(t, []byte("tls"), ev.Data)
	case <-time.After(5 * time.Second):
		t.Fatal("no event over TLS")
	}
}

// Each way a TLS connection can be refused is a Dial error that says so.
func TestTLSDialErrors(t *testing.T) {
	s := newTLSSetup(t, certs.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	srv := s.server(t, true)
	withClientCert := client.TLSFiles{CAFile: s.files["ca.pem"], CertFile: s.files["client.pem"], KeyFile: s.files["client.key"]}

	_, err := dialTLS(t, srv, client.WithTLSFiles(client.TLSFiles{CAFile: s.files["ca.pem"]}))
	require.ErrorContains(t, err, "requires a TLS client certificate (mTLS) and none was given")

	other, err := certs.NewCA("another CA")
	require.NoError(t, err)
	_, err = dialTLS(t, srv, client.WithTLS(&tls.Config{RootCAs: other.Pool(), MinVersion: tls.VersionTLS12}))
	require.ErrorContains(t, err, "TLS handshake with "+srv.Addr())
	require.ErrorContains(t, err, "certificate signed by unknown authority")

	f := withClientCert
	f.ServerName = "tickwheel.example"
	_, err = dialTLS(t, srv, client.WithTLSFiles(f))
	require.ErrorContains(t, err, "not tickwheel.example")

	_, err = dialTLS(t, srv) // plaintext to the TLS port
	require.ErrorContains(t, err, "this port speaks TLS")

	_, err = dialTLS(t, srv, client.WithTLSFiles(client.TLSFiles{CAFile: s.files["ca.pem"] + ".missing"}))
	require.ErrorContains(t, err, "TLS CA file")

	f.ServerName = "localhost"
	_, err = dialTLS(t, srv, client.WithTLSFiles(f))
	require.NoError(t, err)
}

// A server whose certificate has expired is refused by the client, which
// says so.
func TestTLSExpiredServerCertificate(t *testing.T) {
	s := newTLSSetup(t, certs.Options{Hosts: []string{"127.0.0.1"}})
	expired, err := s.ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour),
		NotAfter: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	// The server refuses to load an expired certificate (Check), so serve
	// one from a listener of the test's own.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{expired.TLS()}})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = client.Dial(ctx, ln.Addr().String(), client.WithReconnect(0, 0),
		client.WithTLSFiles(client.TLSFiles{CAFile: s.files["ca.pem"]}))
	require.ErrorContains(t, err, "TLS handshake with")
	require.ErrorContains(t, err, "certificate has expired")
}
