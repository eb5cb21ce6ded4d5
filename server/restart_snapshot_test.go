package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/journal"
	"github.com/tickwheel/tickwheel/session"
)

// TestRestartSnapshotIdentical: a graceful stop and a start on the same
// data directory give the same state, byte for byte: the core's snapshot
// taken before the stop (all clients gone) and the one taken right after
// the start encode the same state, but for the wall-clock instant the
// start records with tw-time (see sameState). The stop logs its last
// snapshot and the start replays no record.
func TestRestartSnapshotIdentical(t *testing.T) {
	dir := t.TempDir()
	var logs lockedBuffer
	srv := startLogged(t, &logs, durable(dir, "always"))
	variedWork(t, srv)
	waitNoSessions(t, srv)
	before := coreSnapshot(t, srv)
	c, err := session.Restore(session.Config{}, before, nil, nil)
	require.NoError(t, err)
	n := c.Counters()
	require.Equal(t, []uint64{5, 3, 18}, []uint64{uint64(n.Timers), n.BacklogEvents, n.Fired}, "timers, backlog events, firings")
	stopNow(t, srv)
	assert.Contains(t, logs.String(), `msg="snapshot written"`, "the stop writes a last snapshot")

	logs = lockedBuffer{}
	srv = startLogged(t, &logs, durable(dir, "always"))
	after := coreSnapshot(t, srv)
	stopNow(t, srv)
	assert.Contains(t, logs.String(), "records_replayed=0", "the stop's snapshot covered every record")
	sameState(t, before, after)
}

// TestRestartSIGTERM: the real binary, stopped by SIGTERM, logs its last
// snapshot; started again it replays nothing, and stopped again (no client
// in between) it writes a snapshot of the same state as the first.
func TestRestartSIGTERM(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-fsync", "always", "-frozen", "-start-tick", "1000"}
	p := startProc(t, args...)
	c, err := dialWire(p.addr, "work", procToken)
	require.NoError(t, err)
	for _, req := range []protocol.Request{
		{Op: protocol.OpBind, Receiver: 1},
		{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 5, Every: 3, Repeat: 4, Data: []byte("x")},
		{Op: protocol.OpAdd, Receiver: 2, Tid: 1, After: 2, Repeat: 2, Data: []byte("to the backlog")},
		{Op: protocol.OpAdd, Receiver: 2, Tid: 2, At: 1500},
		{Op: protocol.OpAdd, Receiver: 3, Tid: 9, After: 40, Every: 7},
		{Op: protocol.OpPause, Receiver: 3, Tid: 9},
		{Op: protocol.OpFastForward, Ticks: 9},
		{Op: protocol.OpSetSpeed, Speed: 3},
	} {
		_, err := c.uints(req)
		require.NoError(t, err)
	}
	c.close()
	p.term()
	first := lastSnapshot(t, dir)
	assert.Contains(t, p.stderr.String(), `msg="snapshot written"`)

	p = startProc(t, args...)
	p.logged(t, "records_replayed=")
	assert.Contains(t, p.stderr.String(), "records_replayed=0")
	assert.Contains(t, p.stderr.String(), "timers=3")
	p.term()
	sameState(t, first, lastSnapshot(t, dir))
}

// TestRestartSIGTERMRightAfterListening: a SIGTERM sent as soon as the
// server says it listens (what a supervisor may do) stops it gracefully,
// with its last snapshot, instead of killing it.
func TestRestartSIGTERMRightAfterListening(t *testing.T) {
	p := startProc(t, "-data-dir", t.TempDir(), "-frozen")
	p.term()
	assert.Contains(t, p.stderr.String(), `msg="snapshot written"`)
}

// startLogged starts a server whose log goes to logs.
func startLogged(t *testing.T, logs *lockedBuffer, mutate func(*Config)) *Server {
	t.Helper()
	srv, err := newUnstarted(t, slog.New(slog.NewTextHandler(logs, nil)), mutate)
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	return srv
}

// variedWork leaves timers of every kind (repeating, one-shot at a tick,
// forever, paused, with data), events delivered, in flight and in
// backlogs, an ephemeral receiver released, a cancel and a cancel_all, and
// a speed set; then closes its sessions.
func variedWork(t *testing.T, srv *Server) {
	a := helloClient(t, srv, "a")
	a.bind(1, false)
	a.bind(2, true)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 5, Every: 3, Repeat: 4, Data: []byte("x")})
	a.add(protocol.Request{Receiver: 1, Tid: 2, At: 1100})
	a.add(protocol.Request{Receiver: 1, Tid: 3, After: 7})
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 2, Every: 1})
	a.add(protocol.Request{Receiver: 3, Tid: 1, After: 2, Repeat: 3, Data: []byte("backlog")})
	a.add(protocol.Request{Receiver: 3, Tid: 2, After: 60, Every: 9})
	a.add(protocol.Request{Receiver: 4, Tid: 1, After: 3})
	a.add(protocol.Request{Receiver: 4, Tid: 2, After: 3})
	a.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 3})
	a.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 3, Tid: 2})
	a.uints(protocol.Request{Op: protocol.OpCancelAll, Receiver: 4})
	b := helloClient(t, srv, "b")
	b.bind(5, false)
	b.add(protocol.Request{Receiver: 5, Tid: 1, After: 1, Every: 2, Repeat: 10})
	assert.Equal(t, uint64(1009), a.ff(9)[0])
	b.uints(protocol.Request{Op: protocol.OpSetSpeed, Speed: 2})
	a.add(protocol.Request{Receiver: 3, Tid: 5, After: 4, Every: 4, Data: []byte("more")})
	a.conn.Close()
	b.conn.Close()
}

// waitNoSessions waits until the server has seen every client go.
func waitNoSessions(t *testing.T, srv *Server) {
	t.Helper()
	waitUntil(t, "the sessions to close", func() bool {
		var n int
		require.NoError(t, srv.onLoop(context.Background(), func() { n = srv.core.Counters().Sessions }))
		return n == 0
	})
}

// coreSnapshot returns the bytes of the core's snapshot, taken on the loop
// as the server takes its own.
func coreSnapshot(t *testing.T, srv *Server) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	var snap *session.Snapshot
	require.NoError(t, srv.onLoop(ctx, func() { snap = srv.core.Snapshot() }))
	b := encodeSnapshot(snap)
	require.NoError(t, srv.onLoop(ctx, snap.Release))
	return b
}

func encodeSnapshot(snap *session.Snapshot) []byte {
	var b []byte
	for done := false; !done; {
		b, done = snap.AppendNext(b, 1<<16)
	}
	return b
}

// lastSnapshot returns the payload of the newest snapshot in the data
// directory dir, read by the journal from a copy of its log directory.
func lastSnapshot(t *testing.T, dir string) []byte {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.CopyFS(cp, os.DirFS(filepath.Join(dir, logDir))))
	j, err := journal.Open(journal.Options{Dir: cp, Sync: journal.SyncNo})
	require.NoError(t, err)
	defer j.Close()
	r, _, ok := j.Snapshot()
	require.True(t, ok, "no snapshot in %s", dir)
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}

// sameState checks that two snapshots hold the same state but for the
// wall-clock instant paired with tw-time, which a start records anew: each
// decodes (session.Restore) and encodes again to its own bytes, so the
// encoding loses nothing; a's state with b's wall-clock pair encodes to
// b's bytes exactly.
func sameState(t *testing.T, a, b []byte) {
	t.Helper()
	ca, err := session.Restore(session.Config{}, a, nil, nil)
	require.NoError(t, err)
	cb, err := session.Restore(session.Config{}, b, nil, nil)
	require.NoError(t, err)
	requireSameBytes(t, "a decoded and encoded again", a, encodeCore(ca))
	requireSameBytes(t, "b decoded and encoded again", b, encodeCore(cb))
	nsA, _ := ca.Wall()
	nsB, tickB := cb.Wall()
	assert.Less(t, nsA, nsB, "the start records a later wall-clock instant")
	ca.SetWall(nsB, tickB)
	requireSameBytes(t, "the state before, with the start's wall-clock pair", b, encodeCore(ca))
	assert.Zero(t, ca.Counters().Sessions, "no session is left in the state")
}

func encodeCore(c *session.Core) []byte {
	snap := c.Snapshot()
	defer snap.Release()
	return encodeSnapshot(snap)
}

// requireSameBytes fails with the first differing offset unless want and
// got are equal.
func requireSameBytes(t *testing.T, what string, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < min(len(want), len(got)) && want[i] == got[i] {
		i++
	}
	t.Fatalf("%s: %d bytes, want %d; they differ from byte %d:\n got  %x\n want %x", what, len(got), len(want), i,
		got[i:min(len(got), i+32)], want[i:min(len(want), i+32)])
}
