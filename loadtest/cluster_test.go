package loadtest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestClusterNemesisShort is cmd/cluster's run in 20 seconds: three real
// server processes (built from ../cmd/tickwheel) in cluster mode, a fault
// every second or so (kill -9, SIGSTOP, link cut), clients adding,
// cancelling, getting and consuming acknowledged events. It fails on the
// zero-tolerance figures: an acknowledged add lost, an event lost, a
// history porcupine finds not linearizable. Failover times are logged,
// not asserted (timed figures are not tests).
func TestClusterNemesisShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: three real servers under faults for 20 s")
	}
	bin := buildServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := ClusterParams{Bin: bin, Dir: t.TempDir(), Duration: 20 * time.Second, Every: 1500 * time.Millisecond, Logf: t.Logf}
	if dir := os.Getenv("TICKWHEEL_NEMESIS_LOGS"); dir != "" {
		// Keep the run's logs for a post-mortem: the servers' at info
		// level, the clients' at debug level.
		cl, err := os.Create(filepath.Join(dir, "clients.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		p.LogDir, p.LogLevel = dir, "info"
		p.ClientLog = slog.New(slog.NewTextHandler(cl, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rep, err := ClusterNemesis(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Print(&b)
	t.Log("\n" + b.String())
	if f := rep.Faults; f.Kills+f.Pauses+f.Cuts < 3 {
		t.Errorf("only %d faults", f.Kills+f.Pauses+f.Cuts)
	}
	if rep.AddsAcked == 0 || rep.EventsAcked == 0 || rep.Outcomes[0] == 0 {
		t.Errorf("the clients did nothing: %d adds, %d event adds, %d ok operations", rep.AddsAcked, rep.EventsAcked, rep.Outcomes[0])
	}
	if rep.AddsLost != 0 {
		t.Errorf("%d acknowledged adds lost", rep.AddsLost)
	}
	if rep.EventsLost != 0 {
		t.Errorf("%d events of acknowledged adds lost", rep.EventsLost)
	}
	if rep.StateDiverged {
		t.Errorf("the nodes' states at the end: %s", rep.StateCheck)
	}
	if rep.Linearizable == porcupine.Illegal {
		t.Errorf("the history is not linearizable:\n%s", rep.Violation)
	}
}
