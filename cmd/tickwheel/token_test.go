package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestMain points the default data directory at a temporary one, so no test
// reads or writes the user's, and clears the token variables a developer's
// shell may have set.
// packageDir is the package's directory, the tests' working directory
// before TestMain moves to a temporary one.
var packageDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tickwheel-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The default data directory is ./tickwheel-data: run in a temporary
	// directory, never the working tree.
	if packageDir, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, v := range []string{envToken, envAdminToken, envClientToken, envAddr} {
		os.Unsetenv(v)
	}
	// The commands print times in the local zone: UTC here, whatever
	// the developer's (TestZone tests -zone).
	time.Local = time.UTC
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// localServer runs an in-process server as `tickwheel` would on this
// machine: its admin token in admin.token in the default data directory
// (a temporary one, see TestMain), where the commands find it, and its
// address in server.addr beside it.
func localServer(t *testing.T, opts ...servertest.Option) *direct {
	t.Helper()
	def := servertest.WithConfig(func(c *servertest.Config) { c.AdminToken, c.DataDir = "", "" })
	srv := servertest.RunT(t, append([]servertest.Option{def}, opts...)...)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(wd, os.TempDir()), "the test's data directory is in a temporary directory")
	return &direct{srv}
}

// direct is a servertest server dialled at its own address, not through
// servertest's relay: the CLI sends the data directory's admin token only
// to the address the server recorded there.
type direct struct{ *servertest.Server }

// Addr returns the server's own address.
func (d *direct) Addr() string { return d.Server.Server().Addr() }

// TestCLIReadsAdminTokenFile: on the server's machine, admin commands need
// no flag; an explicit empty -token means no token.
func TestCLIReadsAdminTokenFile(t *testing.T) {
	srv := localServer(t)
	code, out, errOut := cli(t, srv.Addr(), "ff", "100")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "fast-forwarded 1s to 1970-01-01 02:46:41 UTC: 0 timers fired\n", out)
	code, out, errOut = cli(t, srv.Addr(), "stats")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "tw-time     1970-01-01 02:46:41 UTC (tick 1000100 of 10ms")

	code, _, errOut = cli(t, srv.Addr(), "stats", "-token", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "unauthorized")
}

// TestCLIDataDir: a server with its own data directory; -data-dir points
// the commands at it, and must then hold the token file and belong to the
// server at -addr.
func TestCLIDataDir(t *testing.T) {
	dir := t.TempDir()
	srv := &direct{servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.AdminToken, c.DataDir = "", dir }))}
	other := localServer(t) // another server, whose token is in the default data directory
	code, _, errOut := cli(t, srv.Addr(), "stats")
	assert.Equal(t, 1, code, "the default data directory holds another server's token")
	assert.Contains(t, errOut, "no admin token sent: ")
	assert.Contains(t, errOut, "which listens on "+other.Addr()+", not "+srv.Addr())
	code, _, errOut = cli(t, srv.Addr(), "stats", "-data-dir", dir)
	assert.Equal(t, 0, code, errOut)
	code, _, errOut = cli(t, other.Addr(), "stats", "-data-dir", dir)
	assert.Equal(t, 1, code, "-data-dir's token goes to its own server only")
	assert.Contains(t, errOut, "the admin token of -data-dir "+dir+" is not sent: it belongs to the server of "+dir+
		", which listens on "+srv.Addr()+", not "+other.Addr())

	code, _, errOut = cli(t, srv.Addr(), "ping", "-data-dir", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "reading the admin token from -data-dir")
}

// TestCLITokenSources: -token-file and $TICKWHEEL_TOKEN, and -token over both.
func TestCLITokenSources(t *testing.T) {
	srv := servertest.RunT(t) // a random admin token, found in no data directory
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(srv.AdminToken()+"\n"), 0o600))

	code, _, errOut := cli(t, srv.Addr(), "stats", "-token-file", file)
	assert.Equal(t, 0, code, errOut)
	code, _, errOut = cli(t, srv.Addr(), "stats", "-token-file", file+".missing")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "token.missing")
	code, _, errOut = cli(t, srv.Addr(), "stats", "-token-file", file, "-token", "x")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "give one")

	t.Setenv(envToken, srv.AdminToken())
	code, _, errOut = cli(t, srv.Addr(), "stats")
	assert.Equal(t, 0, code, errOut)
	code, _, errOut = cli(t, srv.Addr(), "stats", "-token", "wrong")
	assert.Equal(t, 1, code, "-token beats the environment")
	assert.Contains(t, errOut, "unauthorized")
}

// TestCLITokenNotSentAway: the data directory's admin token goes only to
// the server that owns the directory, at the address it recorded there,
// while it runs: never to another host, nor to whatever else listens on a
// loopback port (another user's process on the port the CLI dials by
// default, once the server is gone).
func TestCLITokenNotSentAway(t *testing.T) {
	srv := localServer(t) // makes the default admin.token and server.addr
	_, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	for addr, want := range map[string]bool{
		srv.Addr(): true, "localhost:" + port: true,
		"127.0.0.1:7420": false, "127.0.0.2:" + port: false, "[::1]:" + port: false, // another process may listen there
		"10.1.2.3:" + port: false, "game-host:" + port: false, ":" + port: false,
	} {
		tok, _, err := cliToken(tokenSources{addr: addr}, os.Getenv)
		require.NoError(t, err, addr)
		assert.Equal(t, want, tok != "", addr)
	}
	// Given explicitly, the data directory must be the server's at -addr too.
	tok, _, err := cliToken(tokenSources{addr: srv.Addr(), dataDir: server.DefaultDataDir, dataDirSet: true}, os.Getenv)
	require.NoError(t, err)
	assert.Equal(t, srv.AdminToken(), tok)
	_, _, err = cliToken(tokenSources{addr: "10.1.2.3:7420", dataDir: server.DefaultDataDir, dataDirSet: true}, os.Getenv)
	require.ErrorContains(t, err, "listens on "+srv.Addr()+", not 10.1.2.3:7420")

	// The server gone (a stale file of a crashed one: its process is not
	// running), its token goes nowhere.
	addrFile := filepath.Join(server.DefaultDataDir, server.AddrFileName)
	require.FileExists(t, addrFile)
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	require.NoError(t, os.WriteFile(addrFile, fmt.Appendf(nil, "%s %d\n", srv.Addr(), dead.Process.Pid), 0o600))
	tok, _, err = cliToken(tokenSources{addr: srv.Addr()}, os.Getenv)
	require.NoError(t, err)
	assert.Empty(t, tok, "a stale address file")
	assert.Contains(t, noTokenHint(tokenSources{addr: srv.Addr()}, os.Getenv), "is not running")
	os.Remove(addrFile)
	tok, _, err = cliToken(tokenSources{addr: srv.Addr()}, os.Getenv)
	require.NoError(t, err)
	assert.Empty(t, tok, "no address file: no server of the directory runs")
}

// TestServerAddrFile: a server whose admin token is its data directory's
// records its address and pid there while it runs, and removes the file
// when it stops; one with a configured token records nothing.
func TestServerAddrFile(t *testing.T) {
	dir := t.TempDir()
	srv := servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.AdminToken, c.DataDir = "", dir }))
	addr, pid, err := server.ReadAddrFile(dir)
	require.NoError(t, err)
	assert.Equal(t, srv.Server().Addr(), addr)
	assert.Equal(t, os.Getpid(), pid)
	fi, err := os.Stat(filepath.Join(dir, server.AddrFileName))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	srv.Close()
	assert.NoFileExists(t, filepath.Join(dir, server.AddrFileName))

	dir = t.TempDir()
	servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.DataDir = dir }))
	assert.NoFileExists(t, filepath.Join(dir, server.AddrFileName))
}

// TestSameServerAddr: which dialled addresses reach a recorded listener.
func TestSameServerAddr(t *testing.T) {
	for _, tc := range []struct {
		recorded, addr string
		want           bool
	}{
		{"127.0.0.1:7420", "127.0.0.1:7420", true},
		{"127.0.0.1:7420", "localhost:7420", true},
		{"127.0.0.1:7420", "127.0.0.1:7421", false},
		{"127.0.0.1:7420", "127.0.0.2:7420", false},
		{"127.0.0.1:7420", "[::1]:7420", false},
		{"[::1]:7420", "localhost:7420", true},
		{"[::]:7420", "127.0.0.1:7420", true},
		{"0.0.0.0:7420", "[::1]:7420", true},
		{"0.0.0.0:7420", "192.0.2.77:7420", false}, // not this machine's
		{"0.0.0.0:7420", "game-host:7420", false},
		{"bogus", "127.0.0.1:7420", false},
	} {
		assert.Equal(t, tc.want, sameServerAddr(tc.recorded, tc.addr), "%s dialled as %s", tc.recorded, tc.addr)
	}
}

// TestServeConfigTokens: flag > environment > config file, each token
// taken from one source as a whole.
func TestServeConfigTokens(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tickwheel.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("admin_token_file: /from/config\nclient_token: conf-client\ndata_dir: /conf/dir\n"), 0o600))
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	config := func(args ...string) server.Config {
		t.Helper()
		cfg, _, err := serveConfig(append([]string{"-config", conf}, args...), getenv, new(strings.Builder))
		require.NoError(t, err)
		return cfg
	}

	cfg := config()
	assert.Equal(t, [4]string{"", "/from/config", "conf-client", ""}, [4]string{cfg.AdminToken, cfg.AdminTokenFile, cfg.ClientToken, cfg.ClientTokenFile})
	assert.Equal(t, "/conf/dir", cfg.DataDir)

	env[envAdminToken], env[envClientToken] = "env-admin", "env-client"
	cfg = config()
	assert.Equal(t, [4]string{"env-admin", "", "env-client", ""}, [4]string{cfg.AdminToken, cfg.AdminTokenFile, cfg.ClientToken, cfg.ClientTokenFile})

	cfg = config("-admin-token-file", "/flag/admin", "-client-token-file", "/flag/client", "-data-dir", "/flag/dir", "-insecure")
	assert.Equal(t, [4]string{"", "/flag/admin", "", "/flag/client"}, [4]string{cfg.AdminToken, cfg.AdminTokenFile, cfg.ClientToken, cfg.ClientTokenFile})
	assert.Equal(t, "/flag/dir", cfg.DataDir)
	assert.True(t, cfg.Insecure)

	// A token on the command line would show in ps and pprof's cmdline.
	for _, args := range [][]string{{"-admin-token", "flag-admin-token-123"}, {"-admin-token=flag-admin-token-123"},
		{"-admin-token", "a", "-admin-token-file", "b"}} {
		_, _, err := serveConfig(args, getenv, new(strings.Builder))
		assert.ErrorContains(t, err, "-admin-token-file FILE or $TICKWHEEL_ADMIN_TOKEN", args)
	}
}

// TestServeProtectedMode: serving on every interface with no client token
// is refused with a message that says how to fix it.
func TestServeProtectedMode(t *testing.T) {
	var out, errOut syncBuffer
	code := run([]string{"-addr", "0.0.0.0:0", "-data-dir", t.TempDir()}, &out, &errOut)
	assert.Equal(t, 1, code)
	for _, w := range []string{"protected mode", "0.0.0.0:0", "-client-token-file", "-insecure"} {
		assert.Contains(t, errOut.String(), w)
	}
}

// TestServeBadConfigBeforeListening: a bad config is reported as such even
// when the operator port is taken (a server started by go run ./cmd/tickwheel
// holds the default one), and nothing is left listening.
func TestServeBadConfigBeforeListening(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for _, args := range [][]string{
		{"-fsync", "bogus"},
		{"-addr", "0.0.0.0:0"},
	} {
		var out, errOut syncBuffer
		args = append(args, "-http-addr", busy.Addr().String(), "-data-dir", t.TempDir())
		code := run(args, &out, &errOut)
		assert.Equal(t, 1, code, args)
		assert.NotContains(t, errOut.String(), "address already in use", args)
		assert.Contains(t, errOut.String(), map[string]string{"-fsync": "bogus", "-addr": "protected mode"}[args[0]], args)
	}
}

// TestSampleConfig: configs/tickwheel.yaml, every key in it, makes a server.
func TestSampleConfig(t *testing.T) {
	cfg, _, err := serveConfig([]string{"-config", filepath.Join(packageDir, "../../configs/tickwheel.yaml")}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	_, err = server.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
}
