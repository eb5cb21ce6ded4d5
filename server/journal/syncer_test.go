package journal

import (
	"testing"
	"time"
)

// TestIdleSyncerSleeps: SyncEverySec's syncer wakes for writes only. An idle
// journal's syncer does not wake (it woke every period before, 20 times in
// the 100 ms watched here: an idle server's wake-up a second); a record
// written after the idleness is fsynced within about a period; and under
// continuous writes it fsyncs at most once a period.
func TestIdleSyncerSleeps(t *testing.T) {
	const every = 5 * time.Millisecond
	j := mustOpen(t, Options{Dir: t.TempDir(), Sync: SyncEverySec, syncInterval: every})
	defer j.Close()
	waitFor(t, "the syncer's first pass (what recovery left)", func() bool { return j.passes.Load() >= 1 })

	appendRecs(t, j, 1, 1, 100)
	waitFor(t, "record 1 fsynced", func() bool { return j.Stats().DurableIndex >= 1 })
	before := j.passes.Load()
	time.Sleep(20 * every)
	if n := j.passes.Load() - before; n != 0 {
		t.Fatalf("the syncer woke %d times in %v with nothing written", n, 20*every)
	}

	appendRecs(t, j, 2, 2, 100)
	waitFor(t, "record 2 fsynced after the idleness", func() bool { return j.Stats().DurableIndex >= 2 })

	syncs := j.Stats().Syncs
	start := time.Now()
	for i := uint64(3); time.Since(start) < 20*every; i++ {
		appendRecs(t, j, i, i, 100)
		time.Sleep(every / 10)
	}
	took := time.Since(start)
	if n, most := j.Stats().Syncs-syncs, uint64(took/every)+2; n > most {
		t.Fatalf("%d fsyncs in %v of continuous writes: more than one a period (%d at most)", n, took, most)
	}
}
