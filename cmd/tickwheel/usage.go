package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// commandOrder is the order of the commands in the usage.
var commandOrder = []string{"add", "cancel", "pause", "resume", "get", "list", "watch", "time ff", "time freeze", "time resume", "time speed", "stats", "ping", "cluster"}

// printUsage writes the usage of tickwheel: how to run it, the commands
// one line each, and the flags they share. The server's flags follow it in
// -h (serveConfig).
func printUsage(w io.Writer) {
	fmt.Fprint(w, `usage: tickwheel [serve] [server flags]        run the server (the default)
       tickwheel COMMAND [flags] ARGS...         talk to a running server
       tickwheel COMMAND -h                      a command's arguments and flags

commands:
`)
	for _, name := range commandOrder {
		cmd := commands[name]
		fmt.Fprintf(w, "  %-23s  %s\n", strings.TrimSpace(name+" "+cmd.args), cmd.summary)
	}
	fmt.Fprintf(w, "  %-23s  %s\n", "health", "ask the operator HTTP listener's /healthz: exit 0 if the server is up")
	fmt.Fprintf(w, "  %-23s  %s\n", "certs", "make a CA, a server and a client certificate for TLS and mTLS (-dir, -hosts)")
	fmt.Fprintf(w, "  %-23s  %s\n", "version", "print this build's version, VCS revision and Go version (-json: an object); also -version")
	fmt.Fprint(w, `
common flags: -addr HOST:PORT (default $TICKWHEEL_ADDR, else 127.0.0.1:7420; -addr beats
  $TICKWHEEL_ADDR; a cluster's nodes: HOST:PORT,HOST:PORT,..., and the command goes to the
  leader), -json, -timeout D (connecting, and each request but watch's and ff's),
  -zone ZONE: the IANA time zone times are printed in (default the local zone, $TZ's if set;
  tick t is Unix time t × the server's tick; -json keeps ticks),
  -token T or -token-file FILE (or $TICKWHEEL_TOKEN): the hello token. By default, when
  -addr is a loopback address, the server's admin token is read from <data dir>/admin.token
  (-data-dir DIR, default ./tickwheel-data, as the server's), so commands run where the
  server runs need no token. health takes -http-addr (default 127.0.0.1:7421) and -json.
  TLS (a server with tls.cert_file): -tls-ca FILE (the CA the server's certificate chains
  to), -tls-cert FILE -tls-key FILE (a client certificate, for mTLS), -tls-server-name NAME
  (default -addr's host), or -tls alone (the system's CAs); $TICKWHEEL_TLS_CA,
  $TICKWHEEL_TLS_CERT, $TICKWHEEL_TLS_KEY, $TICKWHEEL_TLS_SERVER_NAME, $TICKWHEEL_TLS=1.
  health takes them too, for an operator listener with http.tls.
`)
}

// isHelp reports whether arg asks for the usage.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// commandUsage writes command name's usage: its arguments, what it does,
// and its flags.
func commandUsage(w io.Writer, name string, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: tickwheel %s [flags] %s\n\n%s\n", name, cmd.args, cmd.summary)
	if cmd.help != "" {
		fmt.Fprintf(w, "\n%s", cmd.help)
	}
	fmt.Fprint(w, "\nflags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// parseArgs parses a command's flags, which may come before, between or
// after its positional arguments, and returns the positional ones. A
// negative number is a positional argument unless it is a flag's value
// (-repeat -1), and is refused there in one line naming the argument; so
// is an argument too many. The usage goes to stdout for -h (the error is
// then flag.ErrHelp), and with a flag error to stderr.
func parseArgs(fs *flag.FlagSet, name string, cmd command, args []string, stdout, stderr io.Writer) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || isNumber(a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		fname := strings.TrimLeft(a, "-")
		if strings.Contains(fname, "=") {
			continue
		}
		if f := fs.Lookup(fname); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i]) // the flag's value, whatever it looks like
		}
	}
	var buf bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&buf)
	err := fs.Parse(flags)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, name, cmd, fs)
		return nil, err
	}
	if err != nil {
		stderr.Write(buf.Bytes())
		return nil, err
	}
	names := strings.Fields(cmd.args)
	for i, p := range pos {
		if len(p) > 1 && p[0] == '-' && isNumber(p) && (i < len(names) || cmd.nargs < 0) {
			n := names[min(i, len(names)-1)]
			return nil, usageError{fmt.Errorf("%s %s, got %s", strings.TrimSuffix(n, "..."), argWants[strings.TrimSuffix(n, "...")], p)}
		}
	}
	switch {
	case cmd.nargs >= 0 && len(pos) > cmd.nargs:
		return nil, usageError{fmt.Errorf("unexpected argument %q (usage: tickwheel %s [flags] %s)", pos[cmd.nargs], name, cmd.args)}
	case cmd.nargs >= 0 && len(pos) < cmd.nargs-cmd.optional, cmd.nargs < 0 && len(pos) == 0:
		return nil, usageError{fmt.Errorf("usage: tickwheel %s [flags] %s", name, cmd.args)}
	}
	return pos, nil
}

// argWants says what each positional argument must be.
var argWants = map[string]string{
	"RECEIVER":       "must be a non-negative integer",
	"TID":            "must be a non-negative integer",
	"AFTER":          "must be a tick count or a duration (0: at the next tick)",
	"TICKS|DURATION": "must be a positive tick count or duration",
	"X":              "must be a positive number",
}

// isNumber reports whether s is a number or a duration ("-5", "-1.5s", "-7d"),
// never a flag.
func isNumber(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return true
	}
	_, err := parseDuration(s)
	return err == nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
