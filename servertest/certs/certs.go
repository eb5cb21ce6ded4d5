// Package certs makes X.509 certificates for tests and first setups: a CA,
// server certificates for host names and IP addresses, client
// certificates, each PEM-encoded and written to files on demand. Keys are
// ECDSA P-256 from crypto/rand; nothing is read from or kept on disk
// unless WriteFiles is called.
//
//	ca, _ := certs.NewCA("test CA")
//	srv, _ := ca.Issue(certs.Options{Hosts: []string{"localhost", "127.0.0.1"}})
//	cli, _ := ca.Issue(certs.Options{CommonName: "game-1", Client: true})
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that signs the certificates it issues.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the CA's certificate and key, PEM-encoded.
	CertPEM, KeyPEM []byte
}

// Pair is an issued certificate and its key.
type Pair struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// TLS returns the pair as a tls.Certificate.
func (p *Pair) TLS() tls.Certificate {
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		panic(err) // made by this package: cannot fail
	}
	return c
}

// Options say what certificate Issue makes.
type Options struct {
	// CommonName is the subject's CN; default the first of Hosts, or
	// "tickwheel client".
	CommonName string
	// Hosts are the DNS names and IP addresses a server certificate is
	// valid for (subject alternative names).
	Hosts []string
	// Client makes a client certificate (extended key usage clientAuth)
	// instead of a server one (serverAuth).
	Client bool
	// NotBefore and NotAfter bound the validity; default from an hour ago
	// to Validity (default 1 year) from now. A NotAfter in the past makes
	// an expired certificate.
	NotBefore, NotAfter time.Time
	Validity            time.Duration
}

// NewCA makes a self-signed CA named name, valid from an hour ago for ten
// years.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"tickwheel"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: keyPEM}, nil
}

// Issue makes a certificate signed by ca.
func (ca *CA) Issue(o Options) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		if o.Validity <= 0 {
			o.Validity = 365 * 24 * time.Hour
		}
		o.NotAfter = now.Add(o.Validity)
	}
	if o.CommonName == "" {
		o.CommonName = "tickwheel client"
		if len(o.Hosts) > 0 {
			o.CommonName = o.Hosts[0]
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: []string{"tickwheel"}},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Pair{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: keyPEM}, nil
}

// Pool returns a pool holding ca's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFiles writes each name → content to dir, keys (names ending in
// ".key") with mode 0600 and the rest 0644, and returns the paths by name.
func WriteFiles(dir string, files map[string][]byte) (map[string]string, error) {
	paths := make(map[string]string, len(files))
	for name, b := range files {
		mode := os.FileMode(0o644)
		if filepath.Ext(name) == ".key" {
			mode = 0o600
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
		paths[name] = p
	}
	return paths, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
