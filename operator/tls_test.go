package operator

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// TestHTTPS: with http.tls the operator listener speaks HTTPS only; with
// client_ca_file a client without a certificate of that CA is refused;
// ReloadTLS makes new connections get the renewed certificate.
func TestHTTPS(t *testing.T) {
	ca, err := certs.NewCA("operator test CA")
	require.NoError(t, err)
	srvCert, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, CommonName: "first"})
	require.NoError(t, err)
	cli, err := ca.Issue(certs.Options{Client: true})
	require.NoError(t, err)
	dir := t.TempDir()
	p, err := certs.WriteFiles(dir, map[string][]byte{"s.pem": srvCert.CertPEM, "s.key": srvCert.KeyPEM, "ca.pem": ca.CertPEM})
	require.NoError(t, err)
	lim := server.HTTPLimits{}
	lim.TLS.CertFile, lim.TLS.KeyFile, lim.TLS.ClientCAFile = p["s.pem"], p["s.key"], p["ca.pem"]
	op, err := New(Options{Addr: "127.0.0.1:0", Limits: lim.WithDefaults()})
	require.NoError(t, err)
	require.NoError(t, op.Serve())
	defer op.Close()
	base := "https://" + op.Addr()

	get := func(cfg *tls.Config, url string) (*http.Response, error) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
		return hc.Get(url)
	}
	good := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cli.TLS()}}
	resp, err := get(good, base+"/healthz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(b))
	require.Equal(t, "first", resp.TLS.PeerCertificates[0].Subject.CommonName)

	_, err = get(&tls.Config{RootCAs: ca.Pool()}, base+"/healthz")
	require.ErrorContains(t, err, "certificate required")

	resp, err = http.Get("http://" + op.Addr() + "/healthz") // net/http says why
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 400, resp.StatusCode)
	require.Contains(t, string(b), "HTTP request to an HTTPS server")

	renewed, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, CommonName: "renewed"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p["s.pem"], renewed.CertPEM, 0o644))
	require.NoError(t, os.WriteFile(p["s.key"], renewed.KeyPEM, 0o600))
	require.NoError(t, op.ReloadTLS())
	resp, err = get(good, base+"/metrics")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "renewed", resp.TLS.PeerCertificates[0].Subject.CommonName)
	require.True(t, strings.Contains(string(b), "tickwheel_"), "metrics over HTTPS")

	require.NoError(t, os.WriteFile(p["s.key"], []byte("garbage"), 0o600))
	require.ErrorContains(t, op.ReloadTLS(), "http.tls.key_file")
}
