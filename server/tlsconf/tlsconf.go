// Package tlsconf loads the TLS certificates of a tickwheel listener (the
// client port, the operator HTTP listener) from files, checks them, and
// serves them through a *tls.Config whose certificate and client CA can be
// swapped while the listener runs (Reloader.Reload, on SIGHUP): connections
// that are open keep the certificate they were made with, new ones get the
// new one.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// Files is a listener's TLS configuration (config keys tls.* and
// http.tls.*). The zero value means TLS off.
type Files struct {
	// CertFile is the PEM certificate chain the listener presents (the
	// leaf first); with KeyFile it turns TLS on.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile's leaf.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, turns on client-certificate verification
	// (mTLS): a client must present a certificate signed by one of the PEM
	// certificates in the file, or its handshake fails.
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is the lowest TLS version accepted: "1.3" (the default)
	// or "1.2".
	MinVersion string `yaml:"min_version"`
}

// Error is a problem with one of Files' keys.
type Error struct {
	Key string // the Files key at fault: cert_file, key_file, client_ca_file, min_version
	Err error
}

func (e *Error) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Enabled reports whether f turns TLS on (any file is set: Check then
// requires both the certificate and the key).
func (f Files) Enabled() bool {
	return f.CertFile != "" || f.KeyFile != "" || f.ClientCAFile != ""
}

// minVersion returns the tls.Version* of f.MinVersion.
func (f Files) minVersion() (uint16, error) {
	switch f.MinVersion {
	case "", "1.3":
		return tls.VersionTLS13, nil
	case "1.2":
		return tls.VersionTLS12, nil
	}
	return 0, &Error{"min_version", fmt.Errorf("%q: want 1.2 or 1.3", f.MinVersion)}
}

// material is what the files held at one load.
type material struct {
	cert     *tls.Certificate
	clientCA *x509.CertPool // nil: no client certificates asked for
}

// load reads and checks f's files at instant now: both certificate and key
// set, readable, PEM, matching each other, the leaf valid at now; the
// client CA file (when set) readable and holding at least one certificate.
// Its errors name the file and say what is wrong.
func (f Files) load(now time.Time) (*material, error) {
	if _, err := f.minVersion(); err != nil {
		return nil, err
	}
	switch {
	case f.CertFile == "":
		return nil, &Error{"cert_file", errors.New("not set (key_file or client_ca_file is): TLS needs a certificate and its key")}
	case f.KeyFile == "":
		return nil, &Error{"key_file", errors.New("not set (cert_file is): TLS needs a certificate and its key")}
	}
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, &Error{"cert_file", err}
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, &Error{"key_file", err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &Error{"key_file", fmt.Errorf("%s does not go with cert_file %s: %w", f.KeyFile, f.CertFile, err)}
	}
	leaf := cert.Leaf // parsed by X509KeyPair
	switch {
	case now.After(leaf.NotAfter):
		return nil, &Error{"cert_file", fmt.Errorf("%s: the certificate expired at %s", f.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))}
	case now.Before(leaf.NotBefore):
		return nil, &Error{"cert_file", fmt.Errorf("%s: the certificate is not valid before %s", f.CertFile, leaf.NotBefore.UTC().Format(time.RFC3339))}
	}
	m := &material{cert: &cert}
	if f.ClientCAFile != "" {
		caPEM, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, &Error{"client_ca_file", err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, &Error{"client_ca_file", fmt.Errorf("%s holds no PEM certificate", f.ClientCAFile)}
		}
		m.clientCA = pool
	}
	return m, nil
}

// Check loads f's files and returns the first problem (see Reloader), or
// nil; with TLS off it returns nil.
func (f Files) Check() error {
	if !f.Enabled() {
		return nil
	}
	_, err := f.load(time.Now())
	return err
}

// Reloader serves one listener's certificates and reloads them from their
// files. Safe from any goroutine.
type Reloader struct {
	files Files
	min   uint16
	cur   atomic.Pointer[material]
}

// New loads f's files (which must be Enabled) and returns their Reloader.
func New(f Files) (*Reloader, error) {
	min, err := f.minVersion()
	if err != nil {
		return nil, err
	}
	m, err := f.load(time.Now())
	if err != nil {
		return nil, err
	}
	r := &Reloader{files: f, min: min}
	r.cur.Store(m)
	return r, nil
}

// Reload reads the files again. On success new handshakes use their
// certificate and client CA; on an error (the files are unreadable, do not
// match, the certificate expired, ...) the ones loaded before stay in use
// and the error is returned. Connections already made are not touched.
func (r *Reloader) Reload() error {
	m, err := r.files.load(time.Now())
	if err != nil {
		return err
	}
	r.cur.Store(m)
	return nil
}

// Leaf returns the certificate being served.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// MutualTLS reports whether clients must present a certificate.
func (r *Reloader) MutualTLS() bool { return r.files.ClientCAFile != "" }

// Config returns a server *tls.Config that serves, to each new handshake,
// the certificate and client CA loaded last. nextProtos, if any, are the
// ALPN protocols offered (an HTTP server's "h2", "http/1.1").
func (r *Reloader) Config(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: r.min,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			c := &tls.Config{MinVersion: r.min, NextProtos: nextProtos, Certificates: []tls.Certificate{*m.cert}}
			if m.clientCA != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = m.clientCA
			}
			return c, nil
		},
	}
}

// PeerConfigs returns the TLS configs of a cluster node's raft traffic
// (cluster.tls): each node is both server and client, presenting the
// listener's certificate (reloaded with it) either way, and verifying its
// peer's against the client CA (client_ca_file, required: it must be the
// CA that signs the nodes' certificates). A server certificate without the
// clientAuth usage is accepted from a peer: the peers are nodes, not
// clients. The client side checks the peer's certificate against the host
// it dials: client returns the config for a connection to host.
func (r *Reloader) PeerConfigs() (server *tls.Config, client func(host string) *tls.Config, err error) {
	if r.files.ClientCAFile == "" {
		return nil, nil, &Error{"client_ca_file", errors.New("not set: raft over TLS verifies the nodes' certificates against it")}
	}
	verify := func(cs tls.ConnectionState, name string, usage x509.ExtKeyUsage) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the peer presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: r.cur.Load().clientCA, DNSName: name, Intermediates: x509.NewCertPool(),
			KeyUsages: []x509.ExtKeyUsage{usage}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
	cert := func() *tls.Certificate { return r.cur.Load().cert }
	server = &tls.Config{
		MinVersion:     r.min,
		ClientAuth:     tls.RequireAnyClientCert, // verified below, against the reloaded CA
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert(), nil },
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verify(cs, "", x509.ExtKeyUsageAny)
		},
	}
	client = func(host string) *tls.Config {
		return &tls.Config{
			MinVersion:           r.min,
			ServerName:           host,
			InsecureSkipVerify:   true, // verified below, against the reloaded CA and host
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert(), nil },
			VerifyConnection: func(cs tls.ConnectionState) error {
				return verify(cs, host, x509.ExtKeyUsageServerAuth)
			},
		}
	}
	return server, client, nil
}
