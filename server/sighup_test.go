package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// SIGHUP makes the real server read its config file again: a lowered limit
// refuses the next add, the log level changes, a key that needs a restart
// is logged as such, and an invalid file is refused with its line and key,
// keeping the running config. Through it all the process tells systemd's
// notification socket (a unixgram listener here) READY=1 once it listens,
// RELOADING=1 then READY=1 around each reload, and STOPPING=1 at SIGTERM.
func TestSIGHUPReload(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tickwheel.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(conf, []byte(s), 0o600)) }
	write("limits:\n  max_timers_per_receiver: 3\nlog_level: info\n")
	sock := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	defer ln.Close()
	notified := func() string {
		t.Helper()
		buf := make([]byte, 512)
		require.NoError(t, ln.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, err := ln.Read(buf)
		require.NoError(t, err)
		return string(buf[:n])
	}

	p, err := tryStartProcEnv(t, []string{"NOTIFY_SOCKET=" + sock}, "-config", conf, "-data-dir", filepath.Join(dir, "data"), "-frozen")
	require.NoError(t, err)
	require.Equal(t, "READY=1\nSTATUS=listening on "+p.addr, notified())
	w, err := dialWire(p.addr, "reload", procToken)
	require.NoError(t, err)
	defer w.close()
	add := func(tid uint64) (protocol.Message, error) {
		return w.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 100})
	}
	for tid := range uint64(2) {
		m, err := add(tid + 1)
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind)
	}
	require.NotContains(t, p.stderr.String(), "level=DEBUG")

	hup := func() {
		t.Helper()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
		require.Regexp(t, `^RELOADING=1\nMONOTONIC_USEC=\d+$`, notified())
		require.Equal(t, "READY=1", notified()) // sent after the reload was applied
	}
	write("limits:\n  max_timers_per_receiver: 2\nlog_level: debug\ntick: 20ms\n")
	hup()
	logged := func(line string) { // stderr comes through a pipe: it may lag behind the socket
		t.Helper()
		waitFor(t, line, func() bool { return strings.Contains(p.stderr.String(), line) })
	}
	logged(`msg="config reloaded: changed" key=limits.max_timers_per_receiver old=3 new=2`)
	logged(`msg="config reloaded: changed" key=log_level old=info new=debug`)
	logged(`msg="config reloaded: this change needs a restart" key=tick running=10ms new=20ms`)
	m, err := add(3)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLimitExceeded, m.Code, "%s", m.Text)
	w2, err := dialWire(p.addr, "after-reload", procToken)
	require.NoError(t, err)
	w2.close()
	logged("level=DEBUG msg=hello")

	write("limits:\n  max_timers_per_receiver: 5\n  max_frame: 10\n")
	hup()
	logged("config reload failed: the running configuration is kept")
	logged("line 3, key limits.max_frame: 10 is out of range")
	m, err = add(3)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLimitExceeded, m.Code, "the limit is still 2")
	require.True(t, p.alive())

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, "STOPPING=1", notified())
	<-p.exited
	require.NoError(t, p.err)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
