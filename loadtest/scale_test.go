package loadtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The scale scenario sorts the server's loop_pause= lines by the phase
// their work began in (the line's time less its took: a snapshot is
// logged once written, its pause was at its start), and reads the
// restart's "state recovered" line.
func TestScaleLogParsing(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rep := &ScaleReport{N: 3,
		AddBegan: at("2026-11-26T10:00:00Z"), AddEnded: at("2026-11-26T10:00:10Z"),
		FireBegan: at("2026-11-26T10:00:11Z"), FireEnded: at("2026-11-26T10:00:20Z")}
	lb := &logBuffer{}
	for _, l := range []string{
		`time=2026-11-26T10:00:05.000Z level=INFO msg="snapshot written" index=9 bytes=51 timers=2 took=1s loop_pause=4ms`,
		`time=2026-11-26T10:00:09.000Z level=INFO msg="snapshot written" index=12 bytes=54 timers=3 took=1s loop_pause=8ms`,
		// written while firing, begun while adding
		`time=2026-11-26T10:00:12.000Z level=INFO msg="snapshot written" index=20 bytes=54 timers=3 took=3s loop_pause=6ms`,
		`time=2026-11-26T10:00:15.000Z level=INFO msg="snapshot written" index=30 bytes=60 timers=3 took=2s loop_pause=1.5ms`,
		`time=2026-11-26T10:00:30.000Z level=INFO msg=paused loop_pause=20µs`,
		`time=2026-11-26T10:00:31.000Z level=INFO msg="persistence on: state recovered" dir=/x fsync=everysec timers=3 receivers=1 snapshot_index=30 records_replayed=7 firings_replayed=11 took=250ms`,
	} {
		lb.Write([]byte(l + "\n"))
	}
	ps := loopPauses(lb, rep)
	want := map[string]PauseSummary{
		"adding": {Count: 3, P50: 6 * time.Millisecond, Max: 8 * time.Millisecond},
		"firing": {Count: 1, P50: 1500 * time.Microsecond, Max: 1500 * time.Microsecond},
		"other":  {Count: 1, P50: 20 * time.Microsecond, Max: 20 * time.Microsecond},
	}
	for ph, w := range want {
		if ps[ph] != w {
			t.Errorf("%s: %+v, want %+v", ph, ps[ph], w)
		}
	}
	if err := waitFullSnapshot(t.Context(), lb, 3, rep); err != nil {
		t.Fatal(err)
	}
	if rep.SnapshotBytes != 60 { // the first of all 3 timers begun after the adds
		t.Errorf("snapshot bytes %d, want 60", rep.SnapshotBytes)
	}
	rep.readRecovered(lb)
	if rep.TimersRecovered != 3 || rep.RecordsReplayed != 7 || rep.FiringsReplayed != 11 || rep.RecoveredTook != 250*time.Millisecond {
		t.Errorf("recovered: %+v", rep)
	}
	var out strings.Builder
	rep.Pauses = ps
	rep.Print(&out)
	for _, s := range []string{"60 bytes of 3 timers: 20.0 bytes per timer", "3, median 6ms, max 8ms"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report without %q:\n%s", s, out.String())
		}
	}
}

// Scale with Alternate writes each plan's snapshot.priority into the
// server's config, counts the snapshots that overlapped a plan, and prints
// every pair and each priority's median difference.
func TestScaleAlternate(t *testing.T) {
	p := &ScaleParams{N: 1000, Receivers: 10, Rate: 100, Duration: time.Second}
	if c := p.config("10s", "idle"); !strings.Contains(c, "snapshot:\n  every_records: 10\n  every_replay: -1s\n  min_interval: 10s\n  priority: idle\n") {
		t.Errorf("config with priority idle:\n%s", c)
	}
	if c := p.config("10s", ""); strings.Contains(c, "priority") {
		t.Errorf("config without a priority sets one:\n%s", c)
	}

	lb := &logBuffer{}
	for _, l := range []string{
		`time=2026-11-26T10:00:05.000Z level=INFO msg="snapshot written" index=9 bytes=51 timers=2 took=1s loop_pause=4ms`,  // before
		`time=2026-11-26T10:00:11.000Z level=INFO msg="snapshot written" index=12 bytes=54 timers=3 took=3s loop_pause=8ms`, // begun before, written during
		`time=2026-11-26T10:00:15.000Z level=INFO msg="snapshot written" index=20 bytes=54 timers=3 took=2s loop_pause=6ms`, // during
		`time=2026-11-26T10:00:22.000Z level=INFO msg="snapshot written" index=30 bytes=60 timers=3 took=1s loop_pause=1ms`, // begun after
	} {
		lb.Write([]byte(l + "\n"))
	}
	from, _ := time.Parse(time.RFC3339, "2026-11-26T10:00:10Z")
	if n := snapshotsDuring(lb, from, from.Add(10*time.Second)); n != 2 {
		t.Errorf("snapshots during the plan: %d, want 2", n)
	}
	if l := longestSnapshot(lb); l != 3*time.Second {
		t.Errorf("longest snapshot %v, want 3s", l)
	}

	res := func(p99, tick int64) *Result {
		return &Result{Lateness: &Latency{P99: p99}, TickLateness: &Latency{P99: tick}}
	}
	alts := []AltPlan{
		{Round: 1, Priority: "normal", On: res(11_000, 2_000), Off: res(10_000, 1_500), Snapshots: 1},
		{Round: 1, Priority: "idle", On: res(10_200, 1_600), Off: res(10_000, 1_500), Snapshots: 1},
		{Round: 2, Priority: "normal", On: res(12_000, 2_000), Off: res(10_000, 1_500), Snapshots: 1},
		{Round: 2, Priority: "idle", On: res(10_100, 1_600), Off: res(10_200, 1_500), Snapshots: 1},
		{Round: 3, Priority: "normal", On: res(10_500, 2_000), Off: res(10_000, 1_500), Snapshots: 1},
		{Round: 3, Priority: "idle", On: res(10_600, 1_600), Off: res(10_000, 1_500), Snapshots: 1},
		{Round: 4, Priority: "idle", On: &Result{}, Off: res(10_000, 1_500)},
	}
	var out strings.Builder
	printAlternates(&out, alts)
	for _, s := range []string{"11.000 / 10.000", "+1.000", "no lateness"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table without %q:\n%s", s, out.String())
		}
	}
	medians := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "median" {
			medians[f[1]] = f[2] + " " + f[3] + " " + f[4]
		}
	}
	if medians["normal"] != "+1.000 (of 3)" || medians["idle"] != "+0.200 (of 3)" {
		t.Errorf("medians %v, want normal +1.000 (of 3), idle +0.200 (of 3):\n%s", medians, out.String())
	}
}

// otherCPU counts another process's CPU, and says it cannot read a
// process that is not there (-1) rather than report 0.
func TestScaleOtherCPU(t *testing.T) {
	if machineBusy() < 0 {
		t.Skip("no /proc/stat")
	}
	idle := exec.Command("sleep", "30")
	if err := idle.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = idle.Process.Kill(); _ = idle.Wait() }()
	other := otherCPU(idle.Process.Pid)
	busy := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := busy.Run(); err != nil {
		t.Skip(err)
	}
	if got := other(); got <= 0 {
		t.Errorf("other CPU while another process counted to 200,000: %.3f cores, want > 0", got)
	}
	if got := otherCPU(1 << 30)(); got != -1 {
		t.Errorf("other CPU beside a process that is not there: %.3f, want -1", got)
	}
}

// waitQuiet does not wait without QuietBelow, and with it runs the plan
// as soon as a 2 s sample is under it, not marked.
func TestScaleWaitQuiet(t *testing.T) {
	if machineBusy() < 0 {
		t.Skip("no /proc/stat")
	}
	var a AltPlan
	(&ScaleParams{}).waitQuiet(t.Context(), os.Getpid(), &a)
	if a.Waited != 0 || a.NotQuiet {
		t.Errorf("without QuietBelow: waited %v, not quiet %v", a.Waited, a.NotQuiet)
	}
	(&ScaleParams{QuietBelow: 1000, QuietWait: time.Minute}).waitQuiet(t.Context(), os.Getpid(), &a)
	if a.Waited < 2*time.Second || a.Waited > time.Minute || a.NotQuiet {
		t.Errorf("under 1000 cores: waited %v (want one 2 s sample), not quiet %v", a.Waited, a.NotQuiet)
	}
}

// The plans with snapshots are split by whether each fire's due fell
// while a snapshot was being written, and pooled by priority.
func TestScaleSplitBySnapshot(t *testing.T) {
	wins := []snapWindow{{WallOf(1e9), WallOf(2e9)}, {WallOf(5e9), WallOf(6e9)}}
	samples := []Sample{
		{Due: 1.5e9, Late: 5e6, OnTick: 4e6}, {Due: 5.2e9, Late: 5e6, OnTick: 4e6}, // in
		{Due: 0.5e9, Late: 1e6, OnTick: 2e5}, {Due: 3e9, Late: 1e6, OnTick: 2e5}, {Due: 7e9, Late: 1e6, OnTick: 2e5}, // out
	}
	in, out := splitBySnapshot(samples, wins)
	if in[0].TotalCount() != 2 || out[0].TotalCount() != 3 {
		t.Fatalf("in %d, out %d: want 2 and 3", in[0].TotalCount(), out[0].TotalCount())
	}
	res := &Result{Lateness: &Latency{P99: 5000}, TickLateness: &Latency{P99: 4000}}
	var b strings.Builder
	printAlternates(&b, []AltPlan{{Round: 1, Priority: "idle", On: res, Off: res, In: in, Out: out}})
	for _, s := range []string{"5.003 / 1.000", "idle, the plans with snapshots pooled: p99 with a snapshot being written 5.003 ms (2 fires), without 1.000 ms (3): +4.003 ms"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("without %q:\n%s", s, b.String())
		}
	}
}
