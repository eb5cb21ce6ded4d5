//go:build linux && (amd64 || arm64)

package server

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// setFileSizeLimit sets the soft RLIMIT_FSIZE of process pid (prlimit(2),
// which works on a running process of the same user) and returns the
// previous limit.
func setFileSizeLimit(pid int, cur uint64) (syscall.Rlimit, error) {
	var old syscall.Rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0,
		uintptr(unsafe.Pointer(&old)), 0, 0); e != 0 {
		return old, e
	}
	lim := syscall.Rlimit{Cur: min(cur, old.Max), Max: old.Max}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		return old, e
	}
	return old, nil
}

// TestFaultDiskFull: the real binary (real-time clock, fsync always) gets a
// file size limit just past its log's end, so its log writes fail with
// EFBIG, as on a full disk (the kernel's SIGXFSZ must not kill it: Go
// ignores it). Then the add whose record cannot be written waits for it
// (no reply); other adds are refused with code unavailable; reads, pings,
// stats and firings go on; the server does not crash. Once the limit is
// lifted (space returns), the waiting reply arrives and adds are accepted;
// after a restart every acknowledged add is there and no refused one.
func TestFaultDiskFull(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-fsync", "always", "-tick", "10ms", "-downtime", "pause"}
	p := startProc(t, args...)
	events, err := dialWire(p.addr, "events", "")
	require.NoError(t, err)
	_, err = events.uints(protocol.Request{Op: protocol.OpBind, Receiver: 1})
	require.NoError(t, err)
	adder, err := dialWire(p.addr, "adder", "")
	require.NoError(t, err)
	// Fires every 50 ms from 500 ms on: after the log has failed on an add
	// below, so that (most likely) an add's record is the first not written.
	_, err = adder.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 50, Every: 5})
	require.NoError(t, err)
	probe, err := dialWire(p.addr, "probe", procToken)
	require.NoError(t, err)

	seg, _ := lastSegment(t, dir)
	old, err := setFileSizeLimit(p.cmd.Process.Pid, uint64(fileSize(t, seg))+2048)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSYS) {
		t.Skipf("cannot set the server's file size limit: %v", err)
	}
	require.NoError(t, err)
	acked, held, heldID := addUntilLogFails(t, p, adder)

	checkReadOnly(t, p, probe, events)

	_, err = setFileSizeLimit(p.cmd.Process.Pid, old.Cur) // space returns
	require.NoError(t, err)
	if held != 0 {
		adder.timeout = 10 * time.Second
		m, err := adder.reply(heldID)
		require.NoError(t, err, "the held reply arrives once the log is written")
		require.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
		acked = append(acked, held)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, err := probe.call(protocol.Request{Op: protocol.OpAdd, Receiver: 3, Tid: 1, After: 5})
		require.NoError(t, err)
		if m.Kind == protocol.KindOK {
			break
		}
		require.Equal(t, protocol.CodeUnavailable, m.Code, m.Text)
		require.True(t, time.Now().Before(deadline), "adds still refused 5 s after the limit was lifted")
	}
	assert.Contains(t, p.stderr.String(), "the log is written again")
	p.term()

	p = startProc(t, args...)
	c, err := dialWire(p.addr, "check", procToken)
	require.NoError(t, err)
	got, err := c.listAll(2)
	require.NoError(t, err)
	var tids []uint64
	for _, tm := range got {
		tids = append(tids, tm.Tid)
	}
	assert.Equal(t, acked, tids, "every acknowledged add, and nothing else")
	got, err = c.listAll(3)
	require.NoError(t, err)
	assert.Len(t, got, 1, "the add accepted after the limit was lifted; none of those refused")
	p.term()
}

// checkReadOnly checks a server that cannot write its log: an add is
// refused with unavailable; get, list, ping and stats are answered; the
// bound receiver's timer goes on firing; the process is alive and has
// logged why.
func checkReadOnly(t *testing.T, p *proc, probe, events *wire) {
	t.Helper()
	m, err := probe.call(protocol.Request{Op: protocol.OpAdd, Receiver: 3, Tid: 1, After: 5})
	require.NoError(t, err)
	require.Equal(t, protocol.KindError, m.Kind)
	assert.Equal(t, protocol.CodeUnavailable, m.Code)
	assert.Contains(t, m.Text, "cannot write its log")
	for _, req := range []protocol.Request{
		{Op: protocol.OpGet, Receiver: 1, Tid: 1},
		{Op: protocol.OpList, Receiver: 2},
		{Op: protocol.OpPing},
		{Op: protocol.OpStats},
	} {
		m, err := probe.call(req)
		require.NoError(t, err)
		assert.Equal(t, protocol.KindOK, m.Kind, "%s while the log cannot be written: %s %s", req.Op, m.Code, m.Text)
	}
	// A game server reconnecting: its hello and its bind are answered at
	// once (issue 24 item 4: before, neither was until space returned).
	began := time.Now()
	late, err := dialWire(p.addr, "late", "")
	require.NoError(t, err, "a hello while the log cannot be written")
	late.timeout = 2 * time.Second
	_, err = late.uints(protocol.Request{Op: protocol.OpBind, Receiver: 4})
	require.NoError(t, err, "a bind while the log cannot be written")
	assert.Less(t, time.Since(began), 2*time.Second)
	late.close()
	events.fires = nil
	fires, err := events.waitFires(3)
	require.NoError(t, err, "firings go on while the log cannot be written")
	for i := 1; i < len(fires); i++ {
		assert.Equal(t, fires[i-1].Seq+1, fires[i].Seq)
	}
	require.True(t, p.alive(), "the server survived SIGXFSZ")
	assert.Contains(t, p.stderr.String(), "cannot write the log")
	assert.Contains(t, p.stderr.String(), "file too large")
}

// addUntilLogFails adds timers to receiver 2 from tid 100 on until an add
// is not answered within a second: its record could not be written, and
// its reply waits for it. It returns the tids acknowledged before, and the
// held add's tid and request id. If the log failed on a turn without an
// add (a firing's), the add is refused with unavailable instead: held is 0.
func addUntilLogFails(t *testing.T, p *proc, adder *wire) (acked []uint64, held, heldID uint64) {
	t.Helper()
	adder.timeout = time.Second
	for tid := uint64(100); ; tid++ {
		require.Less(t, tid, uint64(10_000), "the log never failed")
		id, err := adder.send(protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: tid, After: 100_000})
		require.NoError(t, err)
		m, err := adder.reply(id)
		switch {
		case errors.Is(err, errTimeout):
			t.Logf("%d adds acknowledged, the add of tid %d waits for the log", len(acked), tid)
			return acked, tid, id
		case err != nil:
			p.logTail()
			t.Fatalf("add %d: %v", tid, err)
		case m.Kind == protocol.KindError && m.Code == protocol.CodeUnavailable:
			t.Logf("%d adds acknowledged, then the log failed on a turn without an add: no reply is held", len(acked))
			return acked, 0, 0
		default:
			require.Equal(t, protocol.KindOK, m.Kind, "add %d before the log failed: %s %s", tid, m.Code, m.Text)
			acked = append(acked, tid)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}
