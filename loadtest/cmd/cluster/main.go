// Command cluster runs the cluster scenario (issue 25): three tickwheel
// processes in cluster mode on loopback (spawned from -bin, fsync always),
// their raft traffic through forwarders this process cuts and heals,
// under random kill -9s (and restarts), SIGSTOP/SIGCONT pauses and link
// cuts every few seconds for -duration, while clients add, cancel, get
// and consume acknowledged events. It prints acknowledged adds lost,
// events lost, duplicates, failovers, the longest time without a leader,
// and porcupine's verdict on the add/cancel/get history.
//
//	go build -o /tmp/tickwheel ./cmd/tickwheel     # from the repository root
//	cd loadtest && go run ./cmd/cluster -bin /tmp/tickwheel -duration 1m
//
// It exits 1 when an acknowledged add or an event was lost or the history
// is not linearizable, 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/tickwheel/tickwheel/loadtest"
)

func main() {
	os.Exit(run())
}

func run() int {
	p := loadtest.ClusterParams{}
	flag.StringVar(&p.Bin, "bin", "", "the tickwheel binary (required)")
	flag.DurationVar(&p.Duration, "duration", time.Minute, "how long the traffic and the faults run (at most 30m)")
	flag.DurationVar(&p.Every, "every", 3*time.Second, "time between faults (jittered ±50%; each lasts 0.5-2.5 s)")
	flag.IntVar(&p.Clients, "clients", 4, "clients making the add/cancel/get history")
	flag.IntVar(&p.Keys, "keys", 16, "timers the history's clients share")
	flag.Uint64Var(&p.Seed, "seed", 0, "the nemesis's and clients' random seed (0: random, printed)")
	dir := flag.String("dir", "", "where the nodes' data goes (default: a temporary directory, removed after unless the run failed)")
	serverLog := flag.String("server-log", "", "write the servers' logs (level warn) to this file")
	flag.Parse()
	if p.Bin == "" || p.Duration <= 0 || p.Duration > 30*time.Minute {
		fmt.Fprintln(os.Stderr, "cluster: -bin is required; -duration in (0, 30m]")
		return 2
	}
	p.Logf = log.Printf
	return loadtest.RunTool("tickwheel-cluster-", *dir, *serverLog, p.Duration,
		func(ctx context.Context, dir string, serverLog io.Writer) (loadtest.ToolReport, error) {
			p.Dir, p.Log = dir, serverLog
			return loadtest.ClusterNemesis(ctx, p)
		})
}
