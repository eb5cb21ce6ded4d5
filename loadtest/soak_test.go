package loadtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSoakShort is the soak of cmd/soak in 20 seconds: a real server
// binary (built from ../cmd/tickwheel) under every kind of hostile traffic,
// one disk-full episode and one kill -9 with a restart. It fails only on
// the zero-tolerance figures (an acknowledged change lost, an event lost
// without report) and on a server that does not come back; RSS and
// lateness are logged, not asserted (timed figures are not tests).
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak spawns and kills a real server for 20 s")
	}
	bin := buildServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Soak(ctx, SoakParams{Bin: bin, Dir: t.TempDir(), Duration: 20 * time.Second, Kills: 1, DiskFull: 1,
		FullFor: 2 * time.Second, SlowReaders: 5, Partial: 20, HTTPWorkers: 2, HTTPIdle: 50, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Print(&b)
	t.Log("\n" + b.String())
	if rep.Kills != 1 {
		t.Errorf("%d kills, want 1", rep.Kills)
	}
	if rep.AddsAcked == 0 || rep.CancelsAcked == 0 || rep.WellExpected == 0 {
		t.Errorf("the checked clients did nothing: %d adds, %d cancels, %d events expected", rep.AddsAcked, rep.CancelsAcked, rep.WellExpected)
	}
	if rep.Lost() != 0 {
		t.Errorf("%d acknowledged changes lost (%d missing, %d resurrected)", rep.Lost(), rep.Missing, rep.Resurrected)
	}
	if rep.Unreported() != 0 {
		t.Errorf("%d events lost without report", rep.Unreported())
	}
	for _, p := range rep.Problems {
		t.Errorf("problem: %s", p)
	}
}
