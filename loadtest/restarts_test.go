package loadtest

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRestartsChain: the real binary with 3,000 timers, killed; a chain of
// four crash restarts (two "binaries", twice) each recovers all 3,000 and
// is timed; a chain on a data directory that holds no state is refused
// (its first start is not a restart).
func TestRestartsChain(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and starts the server five times")
	}
	bin := buildServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Restarts(ctx, RestartsParams{Bins: []string{bin}, Dir: t.TempDir(), Rounds: 1}); err == nil ||
		!strings.Contains(err.Error(), "state recovered") {
		t.Fatalf("a chain on an empty data directory: %v", err)
	}

	dir := t.TempDir()
	p := &ScaleParams{N: 3000, Receivers: 10, Conns: 2, Batch: 500, Token: "restarts-test-token-0123456789", Logf: t.Logf}
	s, err := SpawnWith(ctx, SpawnOptions{Path: bin, Args: []string{"-data-dir", dir}, Env: []string{"TICKWHEEL_ADMIN_TOKEN=" + p.Token}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.addTimers(ctx, s.Addr, &ScaleReport{}); err != nil {
		s.Kill()
		t.Fatal(err)
	}
	s.Kill()
	copied := filepath.Join(t.TempDir(), "copy")
	if err := CopyDir(dir, copied); err != nil {
		t.Fatal(err)
	}
	rep, err := Restarts(ctx, RestartsParams{Bins: []string{bin, bin}, Dir: copied, Rounds: 2, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if r.Timers != 3000 || r.Wall <= 0 || r.HWMKiB <= 0 { // CPU: clock ticks of 10 ms, often 0 here
			t.Errorf("run %+v", r)
		}
		if runtime.GOOS == "linux" && r.Steal < 0 {
			t.Errorf("run %+v: no host steal time from /proc/stat", r)
		}
	}
	var out strings.Builder
	rep.Print(&out)
	if n := strings.Count(out.String(), "median tickwheel"); n != 1 {
		t.Errorf("%d median lines for one binary path:\n%s", n, out.String())
	}
}
