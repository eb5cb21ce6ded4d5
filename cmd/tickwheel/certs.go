package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/servertest/certs"
)

// certsUsage is the certs command's usage line.
const certsUsage = "usage: tickwheel certs [-dir DIR] [-hosts H,H,...] [-client NAME] [-days N]"

// certsFiles are the files `tickwheel certs` writes, in the order it lists them.
var certsFiles = []string{"ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key"}

// certsCmd is `tickwheel certs`: it makes a private CA, a server
// certificate for -hosts and a client certificate, in -dir, for a first
// TLS and mTLS setup (docs/OPERATIONS.md "TLS and mTLS"). It refuses to
// overwrite any of its files. Keys are written 0600 in a 0700 directory.
func certsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tickwheel certs", flag.ContinueOnError)
	dir := fs.String("dir", "tickwheel-certs", "directory to write the files to (made 0700 if missing)")
	hosts := fs.String("hosts", "localhost,127.0.0.1", "comma-separated DNS names and IP addresses the server certificate is valid for")
	clientName := fs.String("client", "tickwheel-client", "common name of the client certificate")
	days := fs.Int("days", 365, "validity of the server and client certificates, in days (the CA's: 10 years)")
	var perr bytes.Buffer
	fs.SetOutput(&perr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nmake a CA, a server certificate and a client certificate for TLS and mTLS:\n"+
			"%s\n\nflags:\n", certsUsage, strings.Join(certsFiles, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	} else if err != nil {
		stderr.Write(perr.Bytes())
		return 2
	}
	if fs.NArg() != 0 || *days < 1 {
		fmt.Fprintf(stderr, "tickwheel certs: %s\n", certsUsage)
		return 2
	}
	if err := writeCerts(*dir, splitList(*hosts), *clientName, time.Duration(*days)*24*time.Hour, stdout); err != nil {
		fmt.Fprintf(stderr, "tickwheel certs: %v\n", err)
		return 1
	}
	return 0
}

// writeCerts makes the CA and certificates and writes them to dir.
func writeCerts(dir string, hosts []string, clientName string, validity time.Duration, stdout io.Writer) error {
	if len(hosts) == 0 {
		return errors.New("-hosts: give at least one name or address")
	}
	for _, name := range certsFiles {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s exists: not overwriting it (remove it, or give another -dir)", filepath.Join(dir, name))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := certs.NewCA("tickwheel CA")
	if err != nil {
		return err
	}
	srv, err := ca.Issue(certs.Options{Hosts: hosts, Validity: validity})
	if err != nil {
		return err
	}
	cli, err := ca.Issue(certs.Options{CommonName: clientName, Client: true, Validity: validity})
	if err != nil {
		return err
	}
	if _, err := certs.WriteFiles(dir, map[string][]byte{"ca.pem": ca.CertPEM, "ca.key": ca.KeyPEM,
		"server.pem": srv.CertPEM, "server.key": srv.KeyPEM, "client.pem": cli.CertPEM, "client.key": cli.KeyPEM}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s in %s: a CA, a server certificate for %s and a client certificate %q, valid until %s\n",
		strings.Join(certsFiles, ", "), dir, strings.Join(hosts, ", "), clientName, srv.Cert.NotAfter.UTC().Format("2006-01-02"))
	fmt.Fprintf(stdout, "server: tickwheel -tls-cert %[1]s/server.pem -tls-key %[1]s/server.key -tls-client-ca %[1]s/ca.pem\n"+
		"client: tickwheel ping -tls-ca %[1]s/ca.pem -tls-cert %[1]s/client.pem -tls-key %[1]s/client.key\n", dir)
	return nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
