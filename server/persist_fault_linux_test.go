//go:build linux

package server

import (
	"errors"
	"log/slog"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/session"
)

// Regression tests from the red-team review of the durable server (each
// failed before its fix). They drive the server's loop-side functions
// directly on an unstarted server (no gnet), as the loop would call them.

func skipBug(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("TICKWHEEL_REDTEAM") != "1" {
		t.Skip(why)
	}
}

// unstartedDurable builds an unstarted durable server (fsync always) on dir
// and a session that has said hello.
func unstartedDurable(t *testing.T, dir string) (*Server, *session.Session) {
	t.Helper()
	srv, err := newUnstarted(t, slog.New(slog.DiscardHandler), durable(dir, "always"))
	require.NoError(t, err)
	sess := srv.core.Open()
	srv.core.Apply(sess, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "rt", Token: testAdminToken})[4:])
	srv.endTurn() // no loop: commit syncs at once
	return srv, sess
}

func addPayload(id, tid uint64, data []byte) []byte {
	return protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: id, Receiver: 1, Tid: tid, After: 100, Data: data})[4:]
}

// withFileSizeLimit runs fn with this process's RLIMIT_FSIZE at limit
// bytes: writes past it fail with EFBIG, as on a full disk (Go ignores
// SIGXFSZ).
func withFileSizeLimit(t *testing.T, limit uint64, fn func()) {
	t.Helper()
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old))
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: min(limit, old.Max), Max: old.Max}))
	defer func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)) }()
	fn()
}

// TestSyncPassHoldsAfterFailedSync: when the per-pass fsync of fsync
// always fails, the replies held for it stay held (and changes are
// refused): none leaves before its record is durable, or a crash would
// undo an OK.
//
// The pass: turn A's add is appended and held for the pass's fsync (the
// deferred path of commit); the disk fills; turn B's add cannot be
// written (held, read-only). The queued syncPass's Sync fails too.
func TestSyncPassHoldsAfterFailedSync(t *testing.T) {
	dir := t.TempDir()
	srv, sess := unstartedDurable(t, dir)
	t.Cleanup(srv.closeLog)
	p := srv.persist

	// Turn A, as commit's deferred path does it.
	srv.core.Apply(sess, addPayload(1, 1, nil))
	rec, replies := srv.core.TakeRecord()
	require.True(t, replies)
	_, err := p.j.Append(rec)
	require.NoError(t, err)
	srv.core.HoldReplied()
	p.syncQueued = true
	srv.flush()
	require.Equal(t, 1, srv.core.Held())

	// The limit is where the records end, not the file's size: the file
	// is preallocated past them (journal.Options.Preallocate).
	st := p.j.Stats()
	require.Equal(t, 1, st.Segments)
	withFileSizeLimit(t, uint64(st.LogBytes), func() {
		// Turn B: its record cannot be written.
		sess2 := srv.core.Open()
		srv.core.Apply(sess2, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "rt2", Token: testAdminToken})[4:])
		srv.core.Apply(sess2, addPayload(2, 2, make([]byte, 4000)))
		srv.endTurn()
		require.Error(t, p.failing, "turn B's record could not be written")
		require.Equal(t, 2, srv.core.Held())

		// The pass's queued fsync task; the log still cannot be written.
		p.syncQueued = false
		srv.syncPass()
		require.Error(t, p.failing)
		require.Equal(t, 2, srv.core.Held(), "no reply leaves while the fsync fails")
	})
}

// TestTooLargeRecordCoveredBySnapshot: a turn whose record is larger than
// half a log segment is refused by journal.Append (ErrTooLarge: the record
// is not kept). The log then misses that turn, so the server snapshots the
// whole state at once and only then lets the turn's OK replies go: after a
// crash every acknowledged timer is there.
func TestTooLargeRecordCoveredBySnapshot(t *testing.T) {
	dir := t.TempDir()
	srv, sess := unstartedDurable(t, dir)
	p := srv.persist

	data := make([]byte, 4000)
	const n = 9000 // ~36 MB of recorded payloads in one turn
	for tid := uint64(1); tid <= n; tid++ {
		srv.core.Apply(sess, addPayload(tid, tid, data))
	}
	srv.endTurn()
	require.False(t, p.gap, "a snapshot covers the turn the log missed")
	require.NoError(t, p.failing)
	require.Zero(t, srv.core.Held(), "the replies left once the snapshot was written")
	require.Equal(t, p.j.LastIndex(), p.j.Stats().SnapshotIndex, "the snapshot covers every record")
	// A crash now; the restart must have every acknowledged timer.
	require.NoError(t, srv.stopLogCrash())
	again, err := newUnstarted(t, slog.New(slog.DiscardHandler), durable(dir, "always"))
	require.NoError(t, err, "restart after the acknowledged adds")
	defer again.closeLog()
	require.Equal(t, n, again.core.Wheel().Len(), "timers acknowledged with OK after a restart")
}

// stopLogCrash closes the log as a crash leaves it: what was appended,
// without the last snapshot of a graceful stop.
func (s *Server) stopLogCrash() error {
	return s.persist.j.Close()
}

// TestGapSnapshotAfterCommit: when the log missed records (a gap) and is
// written again, the snapshot that covers the gap is taken at a commit,
// never between turns (afterSync runs from syncPass too), where the core
// holds inputs recorded since the last commit (an OnOpen's open, a flush's
// writes): a snapshot with their effects but not their records would make
// the next commit append them after it, and a restart would replay them
// twice. Until that snapshot the held replies wait.
func TestGapSnapshotAfterCommit(t *testing.T) {
	dir := t.TempDir()
	srv, _ := unstartedDurable(t, dir)
	p := srv.persist

	// Between turns: a connection opens (OnOpen records it, no commit).
	srv.core.Open()
	// syncPass's afterSync after the log was failing and missed records.
	p.failing, p.gap = errors.New("was failing"), true
	srv.afterSync(nil)
	require.Nil(t, p.snap, "no snapshot between turns")
	require.Error(t, p.failing, "still refusing changes until the snapshot")
	srv.endTurn() // the next commit takes the snapshot, the open included
	require.False(t, p.gap)
	require.NoError(t, p.failing)
	require.NoError(t, srv.stopLogCrash())

	_, err := newUnstarted(t, slog.New(slog.DiscardHandler), durable(dir, "always"))
	require.NoError(t, err, "restart")
}

// TestResumeTickAfterFastForward: the catch-up after a crash counts from
// the last wall-clock pairing (SetWall), which every clock op renews: an
// admin fast-forward just before a crash does not swallow the downtime
// (resume = max(tw-time, wallTick + downtime) would, with a pairing older
// than the jump).
func TestResumeTickAfterFastForward(t *testing.T) {
	dir := t.TempDir()
	srv, sess := unstartedDurable(t, dir)
	srv.cfg.Downtime = DowntimeCatchUp
	srv.core.SetClock(1, false)
	srv.core.SetWall(uint64(srv.origin.UnixNano()), 1000)
	// Half a second later, an admin fast-forwards by 10 minutes of ticks.
	srv.core.Apply(sess, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpFastForward, ID: 9, Ticks: 60_000})[4:])
	before := srv.core.Now() // 61_000 with a 10 ms tick
	// The crash, and a restart 5 minutes (30_000 ticks) after the pairing.
	down := srv.origin.Add(30_000 * srv.cfg.Tick)
	got := srv.resumeTick(down)
	require.GreaterOrEqual(t, got, before+30_000-100, "tw-time after 5 minutes down: the downtime was not caught up")
}
