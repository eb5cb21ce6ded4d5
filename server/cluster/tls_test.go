package cluster

import (
	"crypto/tls"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server/tlsconf"
	"github.com/tickwheel/tickwheel/servertest/certs"
)

// nodeTLS returns the raft TLS configs of a node whose certificate, for
// 127.0.0.1, is signed by ca; its peers are verified against trust.
func nodeTLS(t *testing.T, ca, trust *certs.CA) (server *tls.Config, client func(string) *tls.Config) {
	t.Helper()
	p, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	files, err := certs.WriteFiles(t.TempDir(), map[string][]byte{"n.pem": p.CertPEM, "n.key": p.KeyPEM, "ca.pem": trust.CertPEM})
	require.NoError(t, err)
	r, err := tlsconf.New(tlsconf.Files{CertFile: files["n.pem"], KeyFile: files["n.key"], ClientCAFile: files["ca.pem"]})
	require.NoError(t, err)
	server, client, err = r.PeerConfigs()
	require.NoError(t, err)
	return server, client
}

// Three nodes whose raft traffic is TLS replicate as without it.
func TestReplicateOverTLS(t *testing.T) {
	ca, err := certs.NewCA("raft CA")
	require.NoError(t, err)
	tc := newCluster(t, 3, func(_ int, c *Config) { c.TLSServer, c.TLSClient = nodeTLS(t, ca, ca) })
	l := tc.leader()
	recs := names("tls", 50)
	for _, r := range collect(t, tc.proposeAll(l, recs...), len(recs)) {
		require.NoError(t, r.err)
	}
	require.Equal(t, recs, strs(tc.converge(len(recs))))
}

// A raft listener with TLS refuses a peer without TLS, one whose
// certificate another CA signed, and one that does not trust its
// certificate; a peer with TLS and the right CA gets through.
func TestRaftTLSRefusals(t *testing.T) {
	ca, err := certs.NewCA("raft CA")
	require.NoError(t, err)
	other, err := certs.NewCA("another CA")
	require.NoError(t, err)
	layer := func(server *tls.Config, client func(string) *tls.Config) *authLayer {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		a := newAuthLayer(ln, nil, "c", []byte(testToken), slog.New(slog.DiscardHandler), server, client)
		t.Cleanup(func() { a.Close() })
		return a
	}
	s, c := nodeTLS(t, ca, ca)
	l := layer(s, c)
	addr := raft.ServerAddress(l.Addr().String())

	s2, c2 := nodeTLS(t, ca, ca)
	conn, err := layer(s2, c2).Dial(addr, 2*time.Second)
	require.NoError(t, err)
	conn.Close()
	got := <-l.conns
	got.Close()

	_, err = layer(nil, nil).Dial(addr, 2*time.Second)
	require.Error(t, err, "no TLS")
	s3, c3 := nodeTLS(t, other, ca) // its certificate is another CA's
	_, err = layer(s3, c3).Dial(addr, 2*time.Second)
	require.ErrorContains(t, err, "tls: bad certificate", "TLS 1.3: the refusal arrives at the first read")
	s4, c4 := nodeTLS(t, ca, other) // it trusts another CA
	_, err = layer(s4, c4).Dial(addr, 2*time.Second)
	require.ErrorIs(t, err, ErrAuth)
	require.ErrorContains(t, err, "certificate signed by unknown authority")
	require.Eventually(t, func() bool { return l.refusals.count() >= 2 }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-l.conns:
		t.Fatal("a refused connection reached raft")
	default:
	}
}
