package loadtest

import (
	"crypto/tls"
	"fmt"

	"github.com/tickwheel/tickwheel/servertest/certs"
)

// TLSSetup makes a CA and a server certificate for 127.0.0.1 and localhost
// in dir, and returns the server flags that turn TLS on with them and a
// client config that trusts the CA (TLS 1.3, as the server's default).
func TLSSetup(dir string) (serverArgs []string, client *tls.Config, err error) {
	ca, err := certs.NewCA("loadtest CA")
	if err != nil {
		return nil, nil, err
	}
	srv, err := ca.Issue(certs.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, nil, err
	}
	p, err := certs.WriteFiles(dir, map[string][]byte{"server.pem": srv.CertPEM, "server.key": srv.KeyPEM})
	if err != nil {
		return nil, nil, fmt.Errorf("loadtest: TLS: %w", err)
	}
	return []string{"-tls-cert", p["server.pem"], "-tls-key", p["server.key"]},
		&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13}, nil
}
