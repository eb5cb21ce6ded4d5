package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// AdminTokenFileName is the admin token file in the data directory: the
// server creates it at first start when no admin token is configured, and
// the CLI on the same machine reads it.
const AdminTokenFileName = "admin.token"

// MinTokenBytes is the shortest admin or client token the server accepts:
// a short one could be guessed.
const MinTokenBytes = 16

// ClientTokenFileName is the client token file in the data directory, made
// at first start when Config.ClientTokenAuto asks for it and no client
// token is configured.
const ClientTokenFileName = "client.token"

// maxHelloFailures is the number of failed hellos (answered unauthorized)
// after which the server closes the connection, following the reply.
const maxHelloFailures = 3

// ReadTokenFile returns the token in the file at path: its content with
// surrounding white space (a trailing newline) removed. An empty token is an
// error. It does not check the file's permissions.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// AdminToken returns the admin token: the configured one, or the one read
// from (or created in) the data directory. For in-process users, such as
// servertest, that dial the server as admin. Safe from any goroutine.
func (s *Server) AdminToken() string { return s.cfg.AdminToken }

// secure completes c's security settings, after withDefaults: it reads the
// token files, enforces protected mode (before it makes any file), and takes
// the admin token from <DataDir>/admin.token when none is configured
// (creating it at first start). On
// success c.AdminToken is never empty. It logs where the admin token comes
// from (never the token), and warns when Insecure exposes the server.
func (c *Config) secure(log *slog.Logger) error {
	if err := c.TLS.Check(); err != nil {
		return tlsKeyErr("tls.", err)
	}
	if err := c.HTTP.TLS.Check(); err != nil && c.HTTPAddr != "off" {
		return tlsKeyErr("http.tls.", err)
	}
	switch {
	case c.AdminToken != "" && c.AdminTokenFile != "":
		return keyErr("admin_token_file", "set admin_token or admin_token_file, not both")
	case c.ClientToken != "" && c.ClientTokenFile != "":
		return keyErr("client_token_file", "set client_token or client_token_file, not both")
	}
	if c.ClientTokenFile != "" {
		tok, err := readGivenTokenFile(c.ClientTokenFile, log)
		if err != nil {
			return keyErr("client_token_file", "%v", err)
		}
		c.ClientToken = tok
	}
	if err := c.clusterToken(log); err != nil {
		return err
	}
	if c.ClientToken == "" && c.ClientTokenAuto {
		tok, path, created, err := dataDirToken(c.DataDir, ClientTokenFileName)
		if err != nil {
			return fmt.Errorf("config: client token (client_token_auto): %w", err)
		}
		c.ClientToken = tok
		log.Info("client token: every client must give the token in this file in its hello", "file", path, "created", created)
	}
	if err := c.protectedMode(log); err != nil { // before making any file (but client.token, asked for)
		return err
	}
	switch {
	case c.AdminTokenFile != "":
		tok, err := readGivenTokenFile(c.AdminTokenFile, log)
		if err != nil {
			return keyErr("admin_token_file", "%v", err)
		}
		c.AdminToken = tok
		log.Info("admin token", "file", c.AdminTokenFile)
	case c.AdminToken == "":
		tok, path, created, err := dataDirToken(c.DataDir, AdminTokenFileName)
		if err != nil {
			return fmt.Errorf("config: admin token: %w", err)
		}
		c.AdminToken = tok
		log.Info("admin token", "file", path, "created", created)
	default:
		log.Info("admin token", "from", "configuration")
	}
	if err := c.tokenLengths(); err != nil {
		return err
	}
	switch {
	case c.AdminToken == c.ClientToken:
		return keyErr("client_token", "the admin token and the client token must differ (else every client is admin)")
	case len(c.AdminToken) > c.Limits.MaxName || len(c.ClientToken) > c.Limits.MaxName:
		return keyErr("limits.max_name", "tokens must be at most limits.max_name (%d) bytes long", c.Limits.MaxName)
	}
	return nil
}

// tokenLengths refuses an admin or client token shorter than
// MinTokenBytes, naming the key it came from.
func (c *Config) tokenLengths() error {
	for _, t := range []struct{ tok, file, key string }{
		{c.AdminToken, c.AdminTokenFile, "admin_token"}, {c.ClientToken, c.ClientTokenFile, "client_token"}} {
		if t.tok == "" || len(t.tok) >= MinTokenBytes {
			continue
		}
		key := t.key
		if t.file != "" {
			key += "_file"
		}
		return keyErr(key, "the token is %d bytes long: tokens must be at least %d bytes (a short one could be guessed); "+
			"make one with: openssl rand -hex 32", len(t.tok), MinTokenBytes)
	}
	return nil
}

// protectedMode refuses to listen beyond loopback with no client token,
// unless Insecure, which it then warns about.
func (c *Config) protectedMode(log *slog.Logger) error {
	exp, err := exposed(c.Addr)
	if err != nil {
		return keyErr("addr", "%q: %v", c.Addr, err)
	}
	if !exp || c.ClientToken != "" {
		return nil
	}
	if !c.Insecure {
		return keyErr("addr", "protected mode: refusing to listen on %s with no client token: any host that can reach it could "+
			"take over receivers (their events would go to it) and list or cancel every timer. Set a client token "+
			"(client_token_file or client_token in the config, -client-token-file, or TICKWHEEL_CLIENT_TOKEN) and give it "+
			"to your clients, or have one made in the data dir (client_token_auto: true, -client-token-auto); or listen on 127.0.0.1; or, on a network you trust, start with -insecure (insecure: true)", c.Addr)
	}
	log.Warn("insecure: listening beyond loopback with no client token: any host that can connect may bind any receiver "+
		"and add, list or cancel any timer (admin ops still need the admin token)", "addr", c.Addr)
	return nil
}

// exposed reports whether a server listening on addr can be reached from
// other hosts: an empty host (every interface), an address that is not
// loopback, or a host name other than "localhost". Names are not resolved:
// what a name resolves to may change after start.
func exposed(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return false, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return true, nil // "" (every interface), or a host name
	}
	return !ip.IsLoopback(), nil
}

// readGivenTokenFile reads a token file named in the configuration. Unlike
// the data directory's file it may be readable by others (container
// secrets are often mounted 0444): that is logged, not refused.
func readGivenTokenFile(path string, log *slog.Logger) (string, error) {
	tok, err := ReadTokenFile(path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("token file is accessible by group or others", "file", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	return tok, nil
}

// dataDirToken returns the token in dir/name (admin.token, client.token),
// creating the directory (0700) and the file (0600, 32 random bytes in hex)
// when it does not exist. An existing file must be a regular file that only its owner may
// access; otherwise it is refused, since anyone who can read it is admin.
func dataDirToken(dir, name string) (tok, path string, created bool, err error) {
	path = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", path, false, fmt.Errorf("creating the data directory: %w", err)
	}
	tok, err = readPrivateToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, path, false, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", path, false, err
	}
	tok = hex.EncodeToString(b[:])
	switch err := createExclusive(path, tok+"\n"); {
	case errors.Is(err, fs.ErrExist): // another server made it first: use theirs
		tok, err = readPrivateToken(path)
		return tok, path, false, err
	case err != nil:
		return "", path, false, fmt.Errorf("creating %s: %w", path, err)
	}
	return tok, path, true, nil
}

// readPrivateToken reads the data directory's token file, refusing a file
// that is not regular (a symbolic link included) or that group or others may
// access.
func readPrivateToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	switch mode := fi.Mode(); {
	case !mode.IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s): remove it to have a new token made", path, mode.Type())
	case mode.Perm()&0o077 != 0:
		return "", fmt.Errorf("%s is accessible by group or others (mode %04o), so anyone who can read it is admin: "+
			"run chmod 600 %s, or remove it to have a new token made (clients using the old one then need the new one)",
			path, mode.Perm(), path)
	}
	return ReadTokenFile(path)
}

// createExclusive creates the file at path holding content, mode 0600, and
// fails with fs.ErrExist if it exists. Readers never see it half written: it
// is written under a temporary name and linked into place.
func createExclusive(path, content string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	err = os.Link(tmp, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// No hard links on this file system: create it in place.
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
