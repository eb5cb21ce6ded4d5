package main

import (
	"crypto/tls"
	"flag"

	"github.com/tickwheel/tickwheel/client"
)

// The environment variables that stand for the -tls-* flags (a flag beats
// its variable), so that a shell that talks to one TLS server says so once.
const (
	envTLS           = "TICKWHEEL_TLS"
	envTLSCA         = "TICKWHEEL_TLS_CA"
	envTLSCert       = "TICKWHEEL_TLS_CERT"
	envTLSKey        = "TICKWHEEL_TLS_KEY"
	envTLSServerName = "TICKWHEEL_TLS_SERVER_NAME"
)

// tlsFlags are the commands' TLS flags.
type tlsFlags struct {
	on                 *bool
	ca, cert, key, sni *string
}

// addTLSFlags adds -tls, -tls-ca, -tls-cert, -tls-key and -tls-server-name
// to fs, each defaulting to its environment variable.
func addTLSFlags(fs *flag.FlagSet, getenv func(string) string) *tlsFlags {
	on := getenv(envTLS) != "" && getenv(envTLS) != "0" && getenv(envTLS) != "false"
	return &tlsFlags{
		on:   fs.Bool("tls", on, "connect with TLS, trusting the system's CAs (implied by any other -tls-* flag); $"+envTLS+"=1"),
		ca:   fs.String("tls-ca", getenv(envTLSCA), "PEM file of the CA(s) the server's certificate must chain to (TLS); $"+envTLSCA),
		cert: fs.String("tls-cert", getenv(envTLSCert), "PEM client certificate, for a server with mTLS (tls.client_ca_file); $"+envTLSCert),
		key:  fs.String("tls-key", getenv(envTLSKey), "PEM key of -tls-cert; $"+envTLSKey),
		sni:  fs.String("tls-server-name", getenv(envTLSServerName), "name the server's certificate must be valid for (default: -addr's host); $"+envTLSServerName),
	}
}

// files returns the client's TLS files and whether TLS is on.
func (f *tlsFlags) files() (client.TLSFiles, bool) {
	tf := client.TLSFiles{CAFile: *f.ca, CertFile: *f.cert, KeyFile: *f.key, ServerName: *f.sni}
	return tf, *f.on || tf != (client.TLSFiles{})
}

// option returns the client option of the flags: TLS from their files, or
// nil (plaintext).
func (f *tlsFlags) option() client.Option {
	tf, on := f.files()
	if !on {
		return nil
	}
	return client.WithTLSFiles(tf)
}

// httpConfig returns the *tls.Config of the flags for an HTTPS client, or
// nil when TLS is off.
func (f *tlsFlags) httpConfig() (*tls.Config, error) {
	tf, on := f.files()
	if !on {
		return nil, nil
	}
	return tf.Config()
}
