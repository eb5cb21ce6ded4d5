package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"
)

// healthUsage is the health command's usage line.
const healthUsage = "usage: tickwheel health [-http-addr HOST:PORT] [-timeout D] [-json]"

// healthCmd is `tickwheel health`: it GETs /healthz from the operator HTTP
// listener (-http-addr, default 127.0.0.1:7421) and exits 0 when it
// answers 200 OK, 1 otherwise, saying why on stderr. It is the container's
// HEALTHCHECK: it needs no shell, curl or wget in the image, and no token
// (/healthz never asks for one), so it takes none of the other commands'
// -addr and -token flags. With -json it also prints
// {"url", "status" (0 if nothing answered), "ok", "error" when not ok} on
// stdout, whatever the result.
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tickwheel health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http-addr", "127.0.0.1:7421", "the server's operator HTTP address")
	timeout := fs.Duration("timeout", 5*time.Second, "time limit for the check")
	asJSON := fs.Bool("json", false, "print the result as a JSON object")
	tlsf := addTLSFlags(fs, os.Getenv) // HTTPS: the operator listener's http.tls
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nask the operator HTTP listener's /healthz: exit 0 if the server is up\n\nflags:\n", healthUsage)
		fs.PrintDefaults()
	}
	if len(args) > 0 && isHelp(args[0]) {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	var perr bytes.Buffer
	fs.SetOutput(&perr)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout) // asked for: the usage on stdout, wherever -h was
		fs.Usage()
		return 0
	} else if err != nil {
		stderr.Write(perr.Bytes())
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "tickwheel health: unexpected argument %q (%s)\n", fs.Arg(0), healthUsage)
		return 2
	}
	tc, err := tlsf.httpConfig()
	if err != nil {
		fmt.Fprintf(stderr, "tickwheel health: %v\n", err)
		return 2
	}
	scheme := "http"
	if tc != nil {
		scheme = "https"
	}
	url := scheme + "://" + *addr + "/healthz"
	status, err := checkHealth(url, *timeout, tc)
	if *asJSON {
		v := map[string]any{"url": url, "status": status, "ok": err == nil}
		if err != nil {
			v["error"] = err.Error()
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if err != nil && status != 0 {
		fmt.Fprintf(stderr, "tickwheel health: %s: %v\n", url, err)
		return 1
	} else if err != nil { // the error names the URL
		fmt.Fprintf(stderr, "tickwheel health: %v\n", err)
		return 1
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%s: %d %s\n", url, status, http.StatusText(status))
	}
	return 0
}

// checkHealth GETs url and returns its status code (0 if nothing
// answered) and, unless it is 200, an error saying what went wrong.
// tc, when not nil, is the TLS config of an https url.
func checkHealth(url string, timeout time.Duration, tc *tls.Config) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	hc := http.DefaultClient
	if tc != nil {
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	}
	resp, err := hc.Do(req)
	if err != nil && tc != nil {
		return 0, healthTLSRefusal(url, err)
	} else if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s %q", resp.Status, body)
	}
	return resp.StatusCode, nil
}

// healthTLSRefusal says what a TLS alert from the operator listener
// means, in the words ping uses for the client port (the client's
// tlsRefusal): the listener wants a client certificate (http.tls with
// client_ca_file) and none was given, or it refused the one given. The
// message names url and ends with TLS's own words, without net/http's
// `Get "url":`; any other error is returned as is.
func healthTLSRefusal(url string, err error) error {
	cause := err
	var ue *neturl.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	// net/http may also wrap the alert in its own read loop's words
	// ("readLoopPeekFailLocked: ..."), depending on whether the alert
	// arrives during the handshake or at the first read; TLS's own
	// "remote error" is what the message ends with either way.
	var oe *net.OpError
	if errors.As(cause, &oe) && oe.Op == "remote error" {
		cause = oe
	}
	msg := cause.Error()
	switch {
	case strings.Contains(msg, "certificate required"):
		return fmt.Errorf("%s requires a TLS client certificate (mTLS) and none was given "+
			"(a certificate and key signed by its http.tls.client_ca_file; -tls-cert and -tls-key): %w", url, cause)
	case strings.Contains(msg, "remote error: tls:"):
		return fmt.Errorf("%s refused the TLS client certificate: %w", url, cause)
	}
	return err
}
