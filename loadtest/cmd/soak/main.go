// Command soak runs a tickwheel server (spawned from -bin, fsync always,
// on loopback) under mixed hostile traffic for -duration, with kill -9s
// and disk-full episodes, and prints: acknowledged changes lost, events
// lost without report, the max RSS against the configured budgets, and
// the worst lateness of a well-behaved receiver (see loadtest.Soak).
//
//	go build -o /tmp/tickwheel ./cmd/tickwheel     # from the repository root
//	cd loadtest && go run ./cmd/soak -bin /tmp/tickwheel -duration 5m
//
// It exits 1 when an acknowledged change or an event was lost without
// report, or the server did not come back; 2 on bad flags.
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
	p := loadtest.SoakParams{}
	flag.StringVar(&p.Bin, "bin", "", "the tickwheel binary (required)")
	flag.DurationVar(&p.Duration, "duration", 5*time.Minute, "how long the traffic runs (at most 30m)")
	flag.IntVar(&p.Kills, "kills", 4, "kill -9s, each followed by a restart and a check")
	flag.IntVar(&p.DiskFull, "disk-full", 4, "disk-full episodes (Linux: RLIMIT_FSIZE on the server)")
	flag.DurationVar(&p.FullFor, "full-for", 3*time.Second, "how long each disk-full episode lasts")
	flag.IntVar(&p.SlowReaders, "slow", 20, "sessions that never read")
	flag.IntVar(&p.Partial, "partial", 100, "connections holding a partial frame at once")
	flag.IntVar(&p.HTTPWorkers, "http-workers", 4, "goroutines flooding the operator port")
	flag.IntVar(&p.HTTPIdle, "http-idle", 200, "idle keep-alive operator connections held")
	dir := flag.String("dir", "", "where the server's data goes (default: a temporary directory, removed after unless the soak failed)")
	serverLog := flag.String("server-log", "", "write the server's log to this file")
	lateLog := flag.String("late-log", "", "write each well-behaved event's due instant (UTC) and lateness in ms to this file, at the end")
	flag.Parse()
	if p.Bin == "" || p.Duration <= 0 || p.Duration > 30*time.Minute || p.Kills < 0 || p.DiskFull < 0 {
		fmt.Fprintln(os.Stderr, "soak: -bin is required; -duration in (0, 30m]; -kills and -disk-full >= 0")
		return 2
	}
	p.Logf = log.Printf
	if *lateLog != "" {
		f, err := os.Create(*lateLog)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 2
		}
		defer f.Close()
		p.LateLog = f
	}
	return loadtest.RunTool("tickwheel-soak-", *dir, *serverLog, p.Duration,
		func(ctx context.Context, dir string, serverLog io.Writer) (loadtest.ToolReport, error) {
			p.Dir, p.Log = dir, serverLog
			return loadtest.Soak(ctx, p)
		})
}
