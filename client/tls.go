package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// TLSFiles are the files a Client needs to reach a server with TLS on
// its client port (see WithTLSFiles).
type TLSFiles struct {
	// CAFile holds the PEM CA certificates the server's certificate must
	// chain to; "" means the system's roots.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and its key, for
	// a server that requires one (mTLS, tls.client_ca_file); both or none.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must be valid for;
	// "" means the host of the address dialled.
	ServerName string
}

// Config loads f's files into a client *tls.Config (TLS 1.2 at least),
// with an error that names the file at fault.
func (f TLSFiles) Config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tickwheel: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tickwheel: TLS CA file %s holds no PEM certificate", f.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tickwheel: TLS client certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.CertFile != "":
		return nil, errors.New("tickwheel: a TLS client certificate needs its key file too")
	case f.KeyFile != "":
		return nil, errors.New("tickwheel: a TLS client key needs its certificate file too")
	}
	return c, nil
}

// WithTLS connects with TLS, configured by cfg (cloned; its ServerName,
// when empty, becomes the host of each address dialled). nil means
// plaintext, the default.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		o.tls, o.tlsErr = nil, nil
		if cfg != nil {
			o.tls = cfg.Clone()
		}
	}
}

// WithTLSFiles connects with TLS, configured from files (see TLSFiles);
// Dial returns the error of a file that cannot be loaded.
func WithTLSFiles(f TLSFiles) Option {
	return func(o *options) { o.tls, o.tlsErr = f.Config() }
}

// dialConn dials addr, over TLS when the Client has a TLS config: the
// handshake is done before it returns, so a certificate the client does
// not trust (unknown CA, expired, another name) fails here with an error
// that names addr and says it is TLS's.
func (c *Client) dialConn(ctx context.Context, addr string) (net.Conn, error) {
	if c.o.tls == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	d := tls.Dialer{Config: c.o.tls}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return nil, err // no TCP connection: not TLS's fault
		}
		return nil, fmt.Errorf("tickwheel: TLS handshake with %s: %w", addr, err)
	}
	return nc, nil
}

// tlsRefusal says what a connection lost before the hello's reply means
// on TLS: the server refused the client's certificate, which TLS 1.3
// reports only after the client's handshake has ended (the alert arrives
// at the first read). err is returned as is otherwise.
func (c *Client) tlsRefusal(addr string, err error) error {
	if c.o.tls == nil || err == nil {
		return err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate required"):
		return fmt.Errorf("tickwheel: %s requires a TLS client certificate (mTLS) and none was given "+
			"(a certificate and key signed by its tls.client_ca_file; CLI -tls-cert and -tls-key): %w", addr, err)
	case strings.Contains(msg, "remote error: tls:"):
		return fmt.Errorf("tickwheel: %s refused the TLS client certificate: %w", addr, err)
	}
	return err
}
