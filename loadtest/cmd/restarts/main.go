// Command restarts times crash restarts of one data directory: each
// binary in turn, -rounds times, is started on -dir, timed from exec to
// accepting connections (with its CPU, user and sys, and peak RSS until
// then), killed with SIGKILL, and the next started at once, as a
// supervisor restarts a crashed server. It prints every start and each
// binary's median and range (docs/BENCHMARKS.md, "Recovery at 100M on a
// slower host").
//
//	restarts -from /data/d100m -dir /tmp/dr -rounds 4 /tmp/tw-old /tmp/tw-new
//
// With -from, -dir is first replaced by a copy of it, so that the chain
// leaves the source as it was (each start appends to the log it recovers).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/tickwheel/tickwheel/loadtest"
)

func main() {
	var p loadtest.RestartsParams
	from := flag.String("from", "", "copy this data directory to -dir first (-dir is removed before)")
	flag.StringVar(&p.Dir, "dir", "", "the data directory the servers start on (required)")
	flag.IntVar(&p.Rounds, "rounds", 3, "how many times to go through the binaries")
	flag.DurationVar(&p.Hold, "hold", 0, "how long each server runs once accepting before it is killed (0: at once); a server that ran a while gave back its restore's extra memory, which the next start backs again")
	args := flag.String("args", "", "more flags for each server, space-separated")
	serverLog := flag.String("server-log", "", "append every server's log to this file")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: restarts [flags] BIN...")
		flag.PrintDefaults()
	}
	flag.Parse()
	p.Bins = flag.Args()
	if p.Dir == "" || len(p.Bins) == 0 || p.Rounds <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *args != "" {
		p.Args = strings.Fields(*args)
	}
	if *from != "" {
		if err := os.RemoveAll(p.Dir); err != nil {
			log.Fatal(err)
		}
		if err := loadtest.CopyDir(*from, p.Dir); err != nil {
			log.Fatalf("copying %s: %v", *from, err)
		}
	}
	if *serverLog != "" {
		f, err := os.OpenFile(*serverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		p.Log = f
	}
	p.Logf = log.Printf
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := loadtest.Restarts(ctx, p)
	rep.Print(os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
}
