package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthUsage is the health command's usage line.
const healthUsage = "usage: tickwheel health [-http-addr HOST:PORT] [-timeout D]"

// healthCmd is `tickwheel health`: it GETs /healthz from the operator HTTP
// listener (-http-addr, default 127.0.0.1:7421) and exits 0 when it
// answers 200 OK, 1 otherwise, saying why on stderr. It is the container's
// HEALTHCHECK: it needs no shell, curl or wget in the image, and no token
// (/healthz never asks for one).
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tickwheel health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http-addr", "127.0.0.1:7421", "the server's operator HTTP address")
	timeout := fs.Duration("timeout", 5*time.Second, "time limit for the check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, healthUsage)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	url := "http://" + *addr + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "tickwheel health: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "tickwheel health: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "tickwheel health: %s: %s %q\n", url, resp.Status, body)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, resp.Status)
	return 0
}
