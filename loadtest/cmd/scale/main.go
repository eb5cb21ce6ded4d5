// Command scale drives a spawned tickwheel server (fsync everysec, on
// loopback) to -n live timers over -receivers receivers, with snapshots
// while adding and while firing, kills it with SIGKILL and restarts it,
// and prints: adds/s (the first million against the whole), RSS per
// timer, the loop pauses the server logged (loop_pause=) by phase,
// snapshot bytes per timer, recovery time (exec to accepting
// connections) and fire lateness percentiles of a -rate fires/s plan run
// over the held timers (see loadtest.Scale). With -redis it also adds the
// same timers to Redis as one sorted set and prints used_memory per member.
//
//	go build -o /tmp/tickwheel ./cmd/tickwheel     # from the repository root
//	cd loadtest && go run ./cmd/scale -bin /tmp/tickwheel -n 1000000
//
// The default -n, 100M, needs about 10 GiB for the server. It exits 1
// when something failed (the restart did not recover every timer, the
// firing plan lost or duplicated an event), 2 on bad flags.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/loadtest"
)

func main() {
	os.Exit(run())
}

func run() int {
	p := loadtest.ScaleParams{}
	flag.StringVar(&p.Bin, "bin", "", "the tickwheel binary (required)")
	flag.IntVar(&p.N, "n", 100_000_000, "live timers to drive the server to (the default needs ~10 GiB)")
	flag.IntVar(&p.Receivers, "receivers", 10_000, "receivers the timers are spread over (1000-100k)")
	flag.IntVar(&p.Conns, "c", 8, "connections adding timers")
	flag.IntVar(&p.Batch, "batch", 50_000, "timers per connection per round (the generator holds c × batch)")
	flag.DurationVar(&p.SnapshotInterval, "snapshot-interval", time.Second, "the server's snapshot.min_interval (every_records 10): snapshots while adding and firing; 0 = back to back")
	flag.IntVar(&p.SnapshotNice, "snapshot-nice", 0, "the server's snapshot.nice (1-19; 0: not set)")
	flag.StringVar(&p.SnapshotPriority, "snapshot-priority", "", "the server's snapshot.priority (normal or idle; empty: not set)")
	alternate := flag.String("alternate", "", "comma-separated snapshot.priority values: after the firing plan, for each in turn, the plan with snapshots at that priority and then without any, on the same server (SIGHUP between); e.g. normal,idle")
	flag.IntVar(&p.Rounds, "rounds", 3, "with -alternate: how many times to go through its priorities")
	flag.Float64Var(&p.QuietBelow, "quiet-below", 0, "with -alternate: hold each plan until other processes use under this many cores over 2 s (0: do not wait)")
	flag.DurationVar(&p.QuietWait, "quiet-wait", 2*time.Minute, "with -quiet-below: the longest a plan waits for it")
	flag.IntVar(&p.Rate, "rate", 50_000, "fires per second of the firing plan over the held timers")
	flag.DurationVar(&p.Duration, "duration", 10*time.Second, "length of the firing plan")
	flag.DurationVar(&p.Lead, "lead", 200*time.Millisecond, "the firing plan adds each timer this long before its due")
	flag.StringVar(&p.RedisAddr, "redis", "", "also add the timers to this Redis server as one sorted set (used_memory per member); e.g. 127.0.0.1:6390 (loadtest/peers.sh start)")
	flag.IntVar(&p.RedisN, "redis-n", 0, "members for Redis (default -n)")
	flag.BoolVar(&p.Quiet, "quiet", false, "after the firing plan: snapshots off (SIGHUP), the plan again without one, the loop's turns while stats, /metrics, the status page and a list page are asked for, and the idle CPU")
	flag.DurationVar(&p.IdleFor, "idle", time.Minute, "with -quiet: how long to measure the idle CPU (0: not)")
	serverCPUs := flag.String("server-cpus", "0", "the CPU list (taskset syntax) the server is pinned to")
	genCPUs := flag.String("gen-cpus", "1", "the CPU list the generator pins itself to")
	noPin := flag.Bool("no-pin", false, "do not pin with taskset")
	dir := flag.String("dir", "", "where the server's data goes (default: a temporary directory, removed after unless the run failed)")
	serverLog := flag.String("server-log", "", "write the server's log to this file")
	flag.Parse()
	if p.Bin == "" || p.N <= 0 || p.Receivers <= 0 || p.Conns <= 0 || p.Batch <= 0 || p.Rate <= 0 || p.Duration <= 0 {
		fmt.Fprintln(os.Stderr, "scale: -bin is required; -n, -receivers, -c, -batch, -rate and -duration must be positive")
		return 2
	}
	if *alternate != "" {
		p.Alternate = strings.Split(*alternate, ",")
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	p.Token = hex.EncodeToString(b[:])
	if !*noPin {
		p.ServerCPUs = *serverCPUs
		log.Printf("scale: generator %s; server pinned to %s", loadtest.PinSelf(*genCPUs), *serverCPUs)
	}
	p.Logf = log.Printf
	budget := p.Duration + time.Duration(p.N)*20*time.Microsecond + 10*time.Minute
	if p.Quiet {
		budget += p.Duration + p.IdleFor + time.Duration(p.N)*time.Microsecond + 5*time.Minute // the quiet phase, its wait for a snapshot
	}
	// Each alternate pair: two plans and a wait for a snapshot to end.
	budget += time.Duration(len(p.Alternate)*max(p.Rounds, 1)) * (2*p.Duration + 2*p.QuietWait + time.Duration(p.N)*time.Microsecond + time.Minute)
	return loadtest.RunTool("tickwheel-scale-", *dir, *serverLog, budget,
		func(ctx context.Context, dir string, serverLog io.Writer) (loadtest.ToolReport, error) {
			p.Dir, p.Log = dir, serverLog
			return loadtest.Scale(ctx, p)
		})
}
