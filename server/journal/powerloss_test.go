package journal

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// TestPowerLoss cuts the power (vfs.Faulty.Crash: the bytes not fsynced
// are dropped, kept or torn at random, a segment created since the last
// directory fsync may vanish) at a random point of a random run, thousands
// of times, with small segments (rotations) and with or without
// preallocation, sometimes with failed fsyncs before the cut, and with
// Checkpoints (TAIL) now and then as the server makes them. Then Open must
// succeed without Repair, and the log must be a prefix of what was
// appended, holding at least: with SyncAlways every record a Sync
// acknowledged, with SyncEverySec every record the background fsync had
// made durable (Stats.DurableIndex: records older than its last run, so at
// most about the last second is lost).
//
// Unsynced bytes reach the disk in offset order in three runs of four
// (Faulty.InOrder); in the others each sector is dropped, kept or torn on
// its own, so a torn record may be followed by valid unsynced ones, which
// Open cuts as a torn tail (tornTail), keeping a copy.
// -powerloss.seed reruns one seed of TestPowerLoss (as its failure names
// it); -powerloss.runs sets how many runs each policy makes.
var (
	powerLossSeed = flag.Int64("powerloss.seed", -1, "TestPowerLoss: run only this seed")
	powerLossRuns = flag.Int("powerloss.runs", 0, "TestPowerLoss: runs under fsync always (a quarter under everysec); 0: 1000, or 200 with -short")
)

func TestPowerLoss(t *testing.T) {
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	if *powerLossRuns > 0 {
		runs = *powerLossRuns
	}
	base := t.TempDir()
	for _, pol := range []SyncPolicy{SyncAlways, SyncEverySec} {
		t.Run(pol.String(), func(t *testing.T) {
			n := runs
			if pol == SyncEverySec {
				n /= 4 // each waits for a background fsync now and then
			}
			if *powerLossSeed >= 0 {
				powerLossRun(t, filepath.Join(base, pol.String()), pol, uint64(*powerLossSeed))
				return
			}
			tornCuts.Store(0)
			for run := range n {
				powerLossRun(t, filepath.Join(base, pol.String()), pol, uint64(run))
			}
			t.Logf("%d runs; %d Opens cut a torn record followed by valid unsynced ones", n, tornCuts.Load())
		})
	}
}

// tornCuts counts the runs whose Open cut a torn record followed by valid
// ones (out-of-order tearing).
var tornCuts atomic.Int64

func powerLossRun(t *testing.T, dir string, pol SyncPolicy, seed uint64) {
	t.Helper()
	defer os.RemoveAll(dir)
	rnd := rand.New(rand.NewPCG(seed, uint64(pol)))
	fs := vfs.NewFaulty()
	fs.InOrder = rnd.IntN(4) != 0
	var failing atomic.Bool // fsyncs fail while set
	fs.SetInject(func(op vfs.Op, _ string, _ int64, _ int) (int, error) {
		if op == vfs.OpSync && failing.Load() {
			return 0, vfs.EIO
		}
		return 0, nil
	})
	o := Options{Dir: dir, Sync: pol, SegmentSize: 4 << 10, FS: fs, syncInterval: time.Millisecond}
	if rnd.IntN(2) == 0 {
		o.Preallocate = 1 << 10
	}
	j := mustOpen(t, o)
	size := 1 + rnd.IntN(700)
	recs := 1 + rnd.IntN(40)
	var acked uint64
	for i := uint64(1); i <= uint64(recs); i++ {
		if rnd.IntN(5) == 0 {
			if err := j.Checkpoint(i); err != nil {
				t.Fatalf("seed %d: Checkpoint: %v", seed, err)
			}
		}
		if rnd.IntN(10) == 0 {
			failing.Store(rnd.IntN(2) == 0)
		}
		if idx, _ := j.Append(recBytes(i, size)); idx != i {
			t.Fatalf("seed %d: Append = %d, want %d", seed, idx, i)
		}
		switch {
		case pol == SyncAlways && rnd.IntN(3) == 0:
			if j.Sync() == nil {
				acked = i // the server's replies leave after a Sync that succeeded
			}
		case pol == SyncEverySec && rnd.IntN(8) == 0:
			time.Sleep(2 * time.Millisecond) // let the background fsync run
		}
	}
	if pol == SyncEverySec {
		acked = j.Stats().DurableIndex
	}
	if err := fs.Crash(rnd); err != nil {
		t.Fatal(err)
	}
	j.Close() // fails: the power is off
	var lb logBuf
	j2, err := Open(Options{Dir: dir, Sync: SyncNo, Log: lb.logger()})
	if err != nil {
		t.Fatalf("seed %d: Open after a power cut: %v", seed, err)
	}
	if strings.Contains(lb.String(), "cut a torn end of the log") {
		tornCuts.Add(1)
	}
	got := replayAll(t, j2)
	j2.Close()
	if uint64(len(got)) < acked || len(got) > recs {
		t.Fatalf("seed %d: %d records after the cut; %d were acknowledged, %d appended", seed, len(got), acked, recs)
	}
	for k, r := range got {
		if r.index != uint64(k+1) || !bytes.Equal(r.rec, recBytes(r.index, size)) {
			t.Fatalf("seed %d: record #%d is index %d with other bytes", seed, k+1, r.index)
		}
	}
}
