package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/tickwheel/tickwheel/server"
)

// envToken is the environment variable the commands take their hello
// token from, so it does not show in ps.
const envToken = "TICKWHEEL_TOKEN"

// tokenSources are where a command may find its hello token.
type tokenSources struct {
	token      string // -token
	tokenSet   bool   // -token was given (even empty: no token)
	tokenFile  string // -token-file
	dataDir    string // -data-dir
	dataDirSet bool   // -data-dir was given
	addr       string // -addr
}

// cliToken returns the hello token of a command, from the first source that
// has one: -token, -token-file, $TICKWHEEL_TOKEN, then the server's admin
// token file <data dir>/admin.token. That file belongs to the server that
// owns the data directory, so it is sent only to that server: the address
// the server records beside it (server.AddrFileName) must be addr, and the
// process that recorded it must still run (ownServer). The data directory
// is -data-dir, which must then hold the file and belong to the server at
// addr (else an error says whose it is); or the server's default one, whose
// file is used only when it exists, addr is a loopback address and its
// server's (else no token: noTokenHint then says why). No source gives ""
// (no token). from names the file the token came from by default, for
// error messages ("" otherwise).
func cliToken(src tokenSources, getenv func(string) string) (tok, from string, err error) {
	switch {
	case src.tokenSet && src.tokenFile != "":
		return "", "", usageError{errors.New("-token and -token-file: give one")}
	case src.tokenSet:
		return src.token, "", nil
	case src.tokenFile != "":
		tok, err := server.ReadTokenFile(src.tokenFile)
		return tok, "", err
	case getenv(envToken) != "":
		return getenv(envToken), "", nil
	case src.dataDirSet:
		tok, err := server.ReadTokenFile(filepath.Join(src.dataDir, server.AdminTokenFileName))
		if err != nil {
			return "", "", fmt.Errorf("reading the admin token from -data-dir: %w", err)
		}
		if err := ownServer(src.dataDir, src.addr); err != nil {
			return "", "", fmt.Errorf("the admin token of -data-dir %s is not sent: %w", src.dataDir, err)
		}
		return tok, "", nil
	}
	if !loopback(src.addr) {
		return "", "", nil
	}
	path := filepath.Join(server.DefaultDataDir, server.AdminTokenFileName)
	tok, err = server.ReadTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil // no local server with a token file: try without
	}
	if err == nil && ownServer(server.DefaultDataDir, src.addr) != nil {
		return "", "", nil // another server's token: try without
	}
	return tok, path, err
}

// dataDirToken reports whether cliToken takes src's token from a data
// directory's admin.token (rather than from -token, -token-file or the
// environment): a token that must reach no server but the directory's own,
// so the command does not follow a follower's not_leader to the leader it
// names.
func dataDirToken(src tokenSources, getenv func(string) string) bool {
	return !src.tokenSet && src.tokenFile == "" && getenv(envToken) == ""
}

// ownServer returns nil when the server that owns data directory dir
// listens on addr and still runs, as the address file it wrote says; else
// an error saying why not (it is not running, or listens elsewhere).
func ownServer(dir, addr string) error {
	recorded, pid, err := server.ReadAddrFile(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no server of %s is running (it records its address in %s while it runs)",
			dir, filepath.Join(dir, server.AddrFileName))
	case err != nil:
		return err
	case !processRuns(pid):
		return fmt.Errorf("the server of %s (pid %d, at %s) is not running", dir, pid, recorded)
	case !sameServerAddr(recorded, addr):
		return fmt.Errorf("it belongs to the server of %s, which listens on %s, not %s: give -addr %s", dir, recorded, addr, recorded)
	}
	return nil
}

// sameServerAddr reports whether dialing addr reaches a server listening on
// recorded: the same port, and the same IP (localhost is 127.0.0.1 or ::1);
// a server on every interface (0.0.0.0, ::) is reached by a loopback
// address or one of this machine's. Names other than localhost are not
// resolved, so they never match.
func sameServerAddr(recorded, addr string) bool {
	rh, rp, err1 := net.SplitHostPort(recorded)
	ah, ap, err2 := net.SplitHostPort(addr)
	if err1 != nil || err2 != nil || rp != ap {
		return false
	}
	rip, err1 := netip.ParseAddr(rh)
	if err1 != nil {
		return false
	}
	rip = rip.Unmap()
	if strings.EqualFold(strings.TrimSuffix(ah, "."), "localhost") {
		return rip.IsUnspecified() || rip == netip.MustParseAddr("127.0.0.1") || rip == netip.IPv6Loopback()
	}
	aip, err := netip.ParseAddr(ah)
	if err != nil {
		return false
	}
	aip = aip.Unmap()
	if aip == rip {
		return true
	}
	return rip.IsUnspecified() && (aip.IsLoopback() || localIP(aip))
}

// localIP reports whether ip is one of this machine's interface addresses.
func localIP(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if p, ok := netip.AddrFromSlice(n.IP); ok && p.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// loopback reports whether addr's host is a loopback address or
// "localhost"; names are not resolved.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// noTokenHint says, when a command sent no token and the server refused
// it (an admin op), where the command looked for the admin token and how
// to give one; "" when a token was given or found.
func noTokenHint(src tokenSources, getenv func(string) string) string {
	if src.tokenSet || src.tokenFile != "" || src.dataDirSet || getenv(envToken) != "" {
		return ""
	}
	how := "give -token-file FILE, $" + envToken + ", or -data-dir DIR (the server's data directory, which holds " +
		server.AdminTokenFileName + ")"
	if !loopback(src.addr) {
		return "no admin token: the default data directory's is sent only to a loopback -addr; " + how
	}
	path := filepath.Join(server.DefaultDataDir, server.AdminTokenFileName)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if _, err := os.Stat(path); err == nil {
		if err := ownServer(server.DefaultDataDir, src.addr); err != nil {
			return "no admin token sent: the one at " + path + " is sent only to its own server, and " + err.Error() + "; " + how
		}
	}
	return "no admin token: none at " + path + " (the default data directory, in the working directory); " + how
}
