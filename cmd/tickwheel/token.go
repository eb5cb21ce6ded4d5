package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
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
// token file <data dir>/admin.token. The data directory is -data-dir, which
// must then hold the file; or the server's default one, whose file is used
// only when it exists and addr is a loopback address, so a local admin token
// is never sent to another host. No source gives "" (no token). from names
// the file the token came from by default, for error messages ("" otherwise).
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
	return tok, path, err
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
	return "no admin token: none at " + path + " (the default data directory, in the working directory); " + how
}
