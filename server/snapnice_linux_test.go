package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tickwheel/tickwheel/protocol"
)

// niceOf returns the nice value of thread tid of this process (field 19
// of /proc/self/task/TID/stat), or -100 when it is gone.
func niceOf(t *testing.T, tid string) int {
	b, err := os.ReadFile(filepath.Join("/proc/self/task", tid, "stat"))
	if err != nil {
		return -100
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // (the name may hold spaces)
	n, err := strconv.Atoi(fields[16])                            // field 19 of the whole line
	require.NoError(t, err)
	return n
}

// threadNice is niceOf for a thread of this process that is running it
// (no *testing.T: it runs on the encoder's goroutine); -100 when unknown.
func threadNice(tid int) int {
	b, err := os.ReadFile(filepath.Join("/proc/self/task", strconv.Itoa(tid), "stat"))
	if err != nil {
		return -100
	}
	s := string(b)
	n, err := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[16])
	if err != nil {
		return -100
	}
	return n
}

// policyOf returns the scheduling policy of thread tid of this process
// (unix.SCHED_*), or -1 when it is gone.
func policyOf(tid int) int {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return -1
	}
	return int(a.Policy)
}

// threadsWhere returns this process's threads, the main one aside, for
// which is returns true, waiting up to 5 s for the list to be empty.
func threadsWhere(t *testing.T, is func(tid string) bool) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		tids, err := os.ReadDir("/proc/self/task")
		require.NoError(t, err)
		var found []string
		for _, d := range tids {
			if d.Name() != strconv.Itoa(os.Getpid()) && is(d.Name()) {
				found = append(found, d.Name())
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLowerPriorityIsTheGoroutinesThreadOnly: the snapshot encoder's
// goroutine runs at snapshot.nice (its thread's nice value), or at
// SCHED_IDLE, and once it returns no thread of the process is left at that
// priority, so no other goroutine (the event loop) ever runs at it. (Had
// it run on the main thread, the runtime parks that thread for good
// instead of ending it: nothing runs there either.)
func TestLowerPriorityIsTheGoroutinesThreadOnly(t *testing.T) {
	got := make(chan int)
	go func() {
		require.NoError(t, encoderSched{nice: 17}.apply())
		got <- niceOf(t, strconv.Itoa(unix.Gettid()))
	}()
	assert.Equal(t, 17, <-got, "the goroutine's thread")
	assert.Empty(t, threadsWhere(t, func(tid string) bool { return niceOf(t, tid) == 17 }), "threads still at nice 17")

	go func() {
		require.NoError(t, encoderSched{idle: true, nice: 17}.apply())
		got <- policyOf(unix.Gettid())
	}()
	assert.Equal(t, unix.SCHED_IDLE, <-got, "the goroutine's thread")
	assert.Empty(t, threadsWhere(t, func(tid string) bool {
		n, _ := strconv.Atoi(tid)
		return policyOf(n) == unix.SCHED_IDLE
	}), "threads still at SCHED_IDLE")
	require.NoError(t, encoderSched{}.apply(), "nothing to do")
}

// pieceStream is a snapshot of pieces that records the scheduling policy
// of the thread that writes each (a snapshotStream); each piece takes
// about every of CPU. fail, if set, is the error it finishes with.
type pieceStream struct {
	pieces   int
	every    time.Duration
	fail     error
	policies []int
	tids     []int
	nices    []int
	onPiece  func(n int) // if set, after piece n is written (n from 1)
}

func (p *pieceStream) write(keepOn func() bool) bool {
	for len(p.policies) < p.pieces {
		for end := time.Now().Add(p.every); time.Now().Before(end); {
		}
		p.policies = append(p.policies, policyOf(0))
		p.tids = append(p.tids, unix.Gettid())
		p.nices = append(p.nices, threadNice(unix.Gettid()))
		if p.onPiece != nil {
			p.onPiece(len(p.policies))
		}
		if len(p.policies) < p.pieces && keepOn != nil && !keepOn() {
			return false
		}
	}
	return true
}

func (p *pieceStream) result() (int64, error) {
	if len(p.policies) < p.pieces {
		return int64(len(p.policies)), nil
	}
	return int64(len(p.policies)), p.fail
}

// TestSnapshotEncoderIdle: with snapshot.priority idle the snapshot is
// encoded and written at SCHED_IDLE, every piece of it, so that the event
// loop waking for its tick takes the CPU from it at once (the fire
// lateness a snapshot added: docs/BENCHMARKS.md, "Fire lateness while a
// snapshot is written: the cause"), as by default; with normal, at the
// server's own priority.
func TestSnapshotEncoderIdle(t *testing.T) {
	cfg := Config{}
	require.NoError(t, cfg.persistenceDefaults())
	for _, tc := range []struct {
		priority string
		want     int
	}{{SnapshotIdle, unix.SCHED_IDLE}, {"", unix.SCHED_IDLE}, {SnapshotNormal, unix.SCHED_NORMAL}} {
		cfg.Snapshot.Priority = tc.priority
		require.NoError(t, cfg.persistenceDefaults())
		var buf bytes.Buffer
		s := &Server{log: jsonLogger(&buf, slog.LevelInfo)}
		run := &snapshotRun{done: make(chan struct{})}
		p := &pieceStream{pieces: 20, every: 100 * time.Microsecond}
		go s.encodeSnapshot(run, p, encoderSchedOf(cfg.Snapshot))
		<-run.done
		require.Len(t, p.policies, 20)
		for i, pol := range p.policies {
			require.Equal(t, tc.want, pol, "priority %q: piece %d", tc.priority, i)
		}
		assert.Equal(t, int64(20), run.bytes)
		assert.NoError(t, run.err)
		assert.Empty(t, buf.String(), "nothing logged")
	}
}

// TestSnapshotEncoderIdleMax: an encoder still writing at SCHED_IDLE after
// idle_max (a busy machine gives it almost no CPU) writes the rest at
// normal priority, on another thread (this one cannot be raised back
// without CAP_SYS_NICE), at snapshot.nice: every piece written once, in
// order, the result (and a failure) passed on, a warning logged, and no
// thread left at SCHED_IDLE once it is done.
func TestSnapshotEncoderIdleMax(t *testing.T) {
	for _, fail := range []error{nil, errors.New("disk full")} {
		var buf bytes.Buffer
		s := &Server{log: jsonLogger(&buf, slog.LevelInfo)}
		run := &snapshotRun{done: make(chan struct{})}
		p := &pieceStream{pieces: 30, every: time.Millisecond, fail: fail}
		go s.encodeSnapshot(run, p, encoderSched{idle: true, nice: 5, idleMax: 10 * time.Millisecond})
		<-run.done
		require.Len(t, p.policies, 30)
		k := 0
		for k < len(p.policies) && p.policies[k] == unix.SCHED_IDLE {
			k++
		}
		require.Positive(t, k, "the first piece at SCHED_IDLE")
		require.Less(t, k, 30, "idle_max passed: the rest at normal priority")
		for i := k; i < 30; i++ {
			require.Equal(t, unix.SCHED_NORMAL, p.policies[i], "piece %d", i)
			require.NotEqual(t, p.tids[0], p.tids[i], "piece %d: on another thread than the idle one", i)
			require.Equal(t, 5, p.nices[i], "piece %d: at snapshot.nice", i)
		}
		assert.Equal(t, int64(30), run.bytes)
		assert.Equal(t, fail, run.err)
		lines := logLines(t, &buf)
		require.Len(t, lines, 1)
		assert.Equal(t, "WARN", lines[0]["level"])
		assert.Contains(t, lines[0]["msg"], "written at normal priority")
		assert.Equal(t, float64(k), lines[0]["bytes_so_far"])
		assert.Empty(t, threadsWhere(t, func(tid string) bool {
			n, _ := strconv.Atoi(tid)
			return policyOf(n) == unix.SCHED_IDLE || niceOf(t, tid) == 5
		}), "threads still at SCHED_IDLE or nice 5")
	}
}

// TestSnapshotEncoderHurry: a snapshot at SCHED_IDLE that someone waits
// for (waitSnapshot sets hurry: a start's, a stop's or an asked-for
// snapshot) writes its rest at normal priority from its next piece, long
// before idle_max, without a warning: where other work kept the CPUs busy
// a graceful stop waited up to idle_max for its last snapshot (CI: a
// servertest Stop past its 10 s). Before hurry every piece was at SCHED_IDLE.
func TestSnapshotEncoderHurry(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{log: jsonLogger(&buf, slog.LevelInfo)}
	run := &snapshotRun{done: make(chan struct{})}
	p := &pieceStream{pieces: 20, every: 100 * time.Microsecond}
	p.onPiece = func(n int) {
		if n == 5 {
			run.hurry.Store(true)
		}
	}
	go s.encodeSnapshot(run, p, encoderSched{idle: true, idleMax: time.Hour})
	<-run.done
	require.Len(t, p.policies, 20)
	for i, pol := range p.policies {
		want := unix.SCHED_NORMAL
		if i < 5 {
			want = unix.SCHED_IDLE
		}
		require.Equal(t, want, pol, "piece %d", i)
	}
	assert.Equal(t, int64(20), run.bytes)
	assert.Empty(t, buf.String(), "nothing logged at info")
}

// TestSnapshotWaitedNotIdle: a snapshot its caller waits for at once
// (snapshotNow, a start's first) is written at normal priority from its
// first piece: the loop (and GOMAXPROCS) are left as they are.
func TestSnapshotWaitedNotIdle(t *testing.T) {
	srv := startServer(t, durable(t.TempDir(), "everysec"))
	require.Equal(t, SnapshotIdle, srv.cfg.Snapshot.Priority, "the default")
	assert.Equal(t, encoderSched{}, waitedSched(srv.cfg.Snapshot))
	before := runtime.GOMAXPROCS(0)
	var during int
	require.NoError(t, srv.onLoop(context.Background(), func() {
		require.NoError(t, srv.startSnapshotAt(waitedSched(srv.cfg.Snapshot)))
		during = runtime.GOMAXPROCS(0)
		require.NoError(t, srv.waitSnapshot())
	}))
	assert.Equal(t, before, during, "no P of its own: not an idle encoder")
}

// TestSnapshotEncoderOwnP: while an idle encoder writes a snapshot the
// server runs one P more (the encoder's: its thread, waiting whenever
// anything else wants the CPU, would otherwise hold one of the loop's and
// the ticker's), and the loop puts GOMAXPROCS back when it is done; at
// snapshot.priority normal it stays as it is.
func TestSnapshotEncoderOwnP(t *testing.T) {
	for _, tc := range []struct {
		priority string
		extra    int
	}{{SnapshotIdle, 1}, {SnapshotNormal, 0}} {
		srv := startServer(t, func(c *Config) {
			durable(t.TempDir(), "always")(c)
			c.Snapshot.Priority = tc.priority
		})
		before := runtime.GOMAXPROCS(0)
		var during, after int
		require.NoError(t, srv.onLoop(context.Background(), func() {
			require.NoError(t, srv.waitSnapshot())
			srv.persist.snapRetryAt = 0
			require.NoError(t, srv.startSnapshot())
			during = runtime.GOMAXPROCS(0)
			require.NoError(t, srv.waitSnapshot())
			after = runtime.GOMAXPROCS(0)
		}))
		assert.Equal(t, before+tc.extra, during, "priority %s: while the snapshot is written", tc.priority)
		assert.Equal(t, before, after, "priority %s: once it is done", tc.priority)
	}
}

// TestSnapshotPriorityConfig: snapshot.priority and snapshot.idle_max are
// checked, their defaults filled in, and a bad value named by its key.
func TestSnapshotPriorityConfig(t *testing.T) {
	cfg := Config{}
	require.NoError(t, cfg.persistenceDefaults())
	assert.Equal(t, SnapshotIdle, cfg.Snapshot.Priority, "the default")
	assert.Equal(t, 30*time.Second, cfg.Snapshot.IdleMax)
	for _, tc := range []struct {
		policy SnapshotPolicy
		err    string
	}{
		{SnapshotPolicy{Priority: "low"}, `config: snapshot.priority: "low": want idle or normal`},
		{SnapshotPolicy{IdleMax: 10 * time.Millisecond}, "config: snapshot.idle_max: 10ms: want 1s or more"},
		{SnapshotPolicy{IdleMax: -time.Second}, "config: snapshot.idle_max: -1s: want 1s or more"},
	} {
		cfg := Config{Snapshot: tc.policy}
		require.EqualError(t, cfg.persistenceDefaults(), tc.err)
	}
	cfg = Config{Snapshot: SnapshotPolicy{Priority: SnapshotNormal, IdleMax: time.Minute, Nice: 5}}
	require.NoError(t, cfg.persistenceDefaults())
	assert.Equal(t, encoderSched{nice: 5, idleMax: time.Minute}, encoderSchedOf(cfg.Snapshot))
}

// TestSnapshotIdleBusyCPUs: with the default snapshot.priority (idle) a
// snapshot still completes, and holds the state, while every CPU is kept
// busy by other processes at normal priority (which leave a SCHED_IDLE
// thread almost no CPU: snapshot.idle_max bounds the wait), and the
// encoder's extra P is given back.
func TestSnapshotIdleBusyCPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps every CPU busy for a few seconds")
	}
	srv := startServer(t, func(c *Config) {
		durable(t.TempDir(), "everysec")(c)
		c.Snapshot.IdleMax = time.Second
	})
	require.Equal(t, SnapshotIdle, srv.cfg.Snapshot.Priority, "the default")
	c := helloClient(t, srv, "busy")
	for i := range 300 {
		c.add(protocol.Request{Receiver: uint64(1 + i%7), Tid: uint64(i + 1), After: 1 << 40})
	}
	for range runtime.NumCPU() {
		spin := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, spin.Start())
		t.Cleanup(func() { _ = spin.Process.Kill(); _ = spin.Wait() })
	}
	before := runtime.GOMAXPROCS(0)
	var written uint64
	require.NoError(t, srv.onLoop(context.Background(), func() { written = srv.persist.snapshots }))
	// A snapshot in the background, at the default SCHED_IDLE (one waited
	// for is not: TestSnapshotWaitedNotIdle), done within idle_max and its
	// time at normal priority.
	require.NoError(t, srv.onLoop(context.Background(), func() {
		srv.persist.snapRetryAt = 0 // past snapshot.min_interval
		require.NoError(t, srv.startSnapshot())
	}))
	require.Eventually(t, func() bool {
		var n uint64
		_ = srv.onLoop(context.Background(), func() { srv.pollSnapshot(); n = srv.persist.snapshots })
		return n == written+1
	}, 60*time.Second, 50*time.Millisecond, "no snapshot in 60 s with every CPU busy (idle_max is 1 s)")
	assert.Equal(t, before, runtime.GOMAXPROCS(0), "GOMAXPROCS given back")
	require.NoError(t, srv.onLoop(context.Background(), func() {
		assert.Equal(t, written+1, srv.persist.snapshots, "one more snapshot written")
	}))
}
