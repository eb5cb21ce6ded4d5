package server

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// SIGHUP to the real server rereads both listeners' certificate files: a
// connection made after it gets the renewed certificate on the client port
// and on the operator's HTTPS, and the TLS connection made before it is
// still served.
func TestSIGHUPReloadsTLSCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	f := newTLSFixture(t)
	p := startProc(t, "-data-dir", "", "-frozen", "-tls-cert", f.cert, "-tls-key", f.key,
		"-http-tls-cert", f.cert, "-http-tls-key", f.key)
	dialTLSWire := func() (w *wire, serverCN string) {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", p.addr, f.clientConfig())
		require.NoError(t, err)
		w = &wire{c: c, r: bufio.NewReader(c), timeout: 10 * time.Second}
		m, err := w.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "tls", Token: procToken})
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind, "%s", m.Text)
		return w, c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	old, cn := dialTLSWire()
	defer old.close()
	require.Equal(t, "127.0.0.1", cn)
	waitFor(t, "operator listening", func() bool { return httpAddrRe.MatchString(p.stderr.String()) })
	httpAddr := httpAddrRe.FindStringSubmatch(p.stderr.String())[1]
	httpsCN := func() string {
		t.Helper()
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: f.clientConfig(), DisableKeepAlives: true}}
		resp, err := hc.Get("https://" + httpAddr + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	require.Equal(t, "127.0.0.1", httpsCN())

	renewed, err := f.ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}, CommonName: "renewed"})
	require.NoError(t, err)
	_, err = certs.WriteFiles(f.dir, map[string][]byte{"server.pem": renewed.CertPEM, "server.key": renewed.KeyPEM})
	require.NoError(t, err)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, "both reloaded", func() bool {
		s := p.stderr.String()
		return regexp.MustCompile(`msg="TLS: certificate reloaded" subject="CN=renewed`).MatchString(s) &&
			regexp.MustCompile(`msg="operator HTTP: TLS certificate reloaded" subject="CN=renewed`).MatchString(s)
	})
	fresh, cn := dialTLSWire()
	defer fresh.close()
	require.Equal(t, "renewed", cn)
	require.Equal(t, "renewed", httpsCN())
	m, err := old.call(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err, "the connection made before the reload is still served")
	require.Equal(t, protocol.KindOK, m.Kind)
}

var httpAddrRe = regexp.MustCompile(`msg="operator HTTP listening" addr=(\S+)`)
