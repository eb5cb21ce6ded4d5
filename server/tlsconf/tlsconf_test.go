package tlsconf_test

import (
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server/tlsconf"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// A reload that fails keeps the certificate loaded before; one that
// succeeds serves the new one to the next handshake.
func TestReloadKeepsTheOldOnError(t *testing.T) {
	ca, err := certs.NewCA("t")
	require.NoError(t, err)
	first, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, CommonName: "first"})
	require.NoError(t, err)
	p, err := certs.WriteFiles(t.TempDir(), map[string][]byte{"s.pem": first.CertPEM, "s.key": first.KeyPEM})
	require.NoError(t, err)
	r, err := tlsconf.New(tlsconf.Files{CertFile: p["s.pem"], KeyFile: p["s.key"]})
	require.NoError(t, err)
	served := func() string {
		c, err := r.Config().GetConfigForClient(&tls.ClientHelloInfo{})
		require.NoError(t, err)
		require.Equal(t, uint16(tls.VersionTLS13), c.MinVersion, "TLS 1.3 by default")
		return c.Certificates[0].Leaf.Subject.CommonName
	}
	require.Equal(t, "first", served())

	expired, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p["s.pem"], expired.CertPEM, 0o644))
	require.NoError(t, os.WriteFile(p["s.key"], expired.KeyPEM, 0o600))
	err = r.Reload()
	var e *tlsconf.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "cert_file", e.Key)
	require.ErrorContains(t, err, "expired at")
	require.Equal(t, "first", served(), "the old certificate stays")

	second, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, CommonName: "second"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p["s.pem"], second.CertPEM, 0o644))
	require.NoError(t, os.WriteFile(p["s.key"], second.KeyPEM, 0o600))
	require.NoError(t, r.Reload())
	require.Equal(t, "second", served())
}

// TLS is on when any file is set, and then needs the certificate and key.
func TestFilesCheck(t *testing.T) {
	require.False(t, tlsconf.Files{MinVersion: "1.2"}.Enabled())
	require.NoError(t, tlsconf.Files{}.Check())
	require.ErrorContains(t, tlsconf.Files{ClientCAFile: "ca.pem"}.Check(), "cert_file: not set")
	require.ErrorContains(t, tlsconf.Files{CertFile: "a", KeyFile: "b", MinVersion: "1.0"}.Check(), `min_version: "1.0": want 1.2 or 1.3`)
}
