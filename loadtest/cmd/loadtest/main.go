// Command loadtest runs tickwheel's load scenarios against a tickwheel
// server (an address, or one it spawns) and against time.AfterFunc in
// process, and prints a table (or JSON). It exits 1 when a run FAILED.
//
//	loadtest -spawn /tmp/tickwheel -targets tickwheel,afterfunc -scenarios add,lateness
//	loadtest -addr 127.0.0.1:7420 -token "$(cat ~/.local/state/tickwheel/admin.token)" -scenarios fire -n 200000 -json
//	loadtest -spawn /tmp/tickwheel -redis 127.0.0.1:6390 -beanstalkd 127.0.0.1:11390 -targets tickwheel,redis,beanstalkd,afterfunc
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/loadtest"
)

func main() {
	os.Exit(run())
}

func run() int {
	d := loadtest.DefaultParams()
	p := d
	addr := flag.String("addr", "", "address of a running tickwheel server (give its admin token with -token)")
	spawn := flag.String("spawn", "", "path of a tickwheel binary to start (pinned to -server-cpus with taskset; the generator pins itself to -gen-cpus)")
	serverCPUs := flag.String("server-cpus", "0", "with -spawn: the CPU list (taskset syntax) the server is pinned to")
	genCPUs := flag.String("gen-cpus", "1", "with -spawn: the CPU list the generator pins itself to (GOMAXPROCS = its size)")
	tick := flag.Duration("tick", 10*time.Millisecond, "tick of a spawned server (and of afterfunc's tick-based periods)")
	token := flag.String("token", "", "the server's admin token (on its machine: the content of its data dir's admin.token); with -spawn, default a random one")
	targets := flag.String("targets", "tickwheel,afterfunc", "comma-separated targets: tickwheel, afterfunc, redis, beanstalkd")
	redisAddr := flag.String("redis", loadtest.DefaultRedisAddr, "address of the Redis server for the redis target (loadtest/peers.sh start)")
	bsAddr := flag.String("beanstalkd", loadtest.DefaultBeanstalkdAddr, "address of the beanstalkd server for the beanstalkd target (loadtest/peers.sh start)")
	bsConsumers := flag.Int("beanstalkd-consumers", 16, "beanstalkd: reserve/delete connections")
	scenarios := flag.String("scenarios", "add,cancel,repeat,fire,lateness,idle,hold,ff", "comma-separated scenarios, in order")
	jsonOut := flag.Bool("json", false, "print the results as JSON instead of a table")
	noPin := flag.Bool("no-pin", false, "do not pin with taskset")
	cpuProfile := flag.String("cpuprofile", "", "write the generator's CPU profile to this file")
	flag.IntVar(&p.N, "n", d.N, "timers (add, cancel, fire, ff)")
	flag.IntVar(&p.Conns, "c", d.Conns, "connections (workers)")
	flag.DurationVar(&p.Lead, "lead", d.Lead, "add a timer this long before its due (lateness); first due this far ahead (cancel, repeat, fire)")
	flag.DurationVar(&p.Grace, "grace", d.Grace, "wait this long after the last due for missing deliveries")
	flag.DurationVar(&p.Tolerance, "tolerance", d.Tolerance, "a delivery earlier than due - tolerance counts as early")
	flag.IntVar(&p.K, "k", d.K, "repeat: timers")
	flag.IntVar(&p.P, "p", d.P, "repeat: period in ticks")
	flag.IntVar(&p.R, "r", d.R, "repeat: firings per timer (1..64)")
	flag.IntVar(&p.Rate, "rate", d.Rate, "lateness: fires per second")
	flag.DurationVar(&p.Duration, "duration", d.Duration, "lateness: length of the plan")
	flag.IntVar(&p.Idle, "idle", d.Idle, "idle: connections")
	flag.DurationVar(&p.Hold, "hold", d.Hold, "idle: how long to hold them while measuring")
	flag.Uint64Var(&p.Span, "span", d.Span, "ff: ticks the timers are spread over and fast-forwarded (8640000 = one day of 10 ms ticks)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...) }
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			logf("cpuprofile: %v", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	// Raise the open-files limit first: a spawned server inherits it.
	if soft, hard, err := loadtest.RaiseNoFile(uint64(p.Idle) + 4096); err != nil {
		logf("raising RLIMIT_NOFILE: %v (soft %d, hard %d)", err, soft, hard)
	}

	tw := &loadtest.TickwheelTarget{Addr: *addr, Token: *token}
	if *spawn != "" {
		// The spawned server takes its admin token from the environment
		// (not a flag, which ps shows), so it touches no data directory.
		if tw.Token == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			tw.Token = hex.EncodeToString(b[:])
		}
		os.Setenv("TICKWHEEL_ADMIN_TOKEN", tw.Token)
		cpus := *serverCPUs
		if *noPin {
			cpus = ""
		}
		s, err := loadtest.Spawn(ctx, *spawn, cpus, "-tick", tick.String())
		if err != nil {
			logf("spawn: %v", err)
			return 2
		}
		defer s.Stop()
		tw.Addr, tw.Pid = s.Addr, s.PID()
		logf("spawned %s pid %d on %s (%s)", *spawn, s.PID(), s.Addr, s.Pinned)
		if !*noPin {
			logf("generator: %s", loadtest.PinSelf(*genCPUs))
		}
	}
	var tgs []loadtest.Target
	for _, name := range strings.Split(*targets, ",") {
		switch name {
		case "tickwheel":
			if tw.Addr == "" {
				logf("tickwheel needs -addr or -spawn")
				return 2
			}
			tgs = append(tgs, tw)
		case "afterfunc":
			tgs = append(tgs, &loadtest.AfterFuncTarget{TickDur: *tick})
		case "redis":
			pid := peerPID(logf, *redisAddr, "redis")
			tgs = append(tgs, &loadtest.RedisTarget{Addr: *redisAddr, Pid: pid, TickDur: *tick})
		case "beanstalkd":
			pid := peerPID(logf, *bsAddr, "beanstalkd")
			tgs = append(tgs, &loadtest.BeanstalkdTarget{Addr: *bsAddr, Pid: pid, Consumers: *bsConsumers})
		default:
			logf("unknown target %q", name)
			return 2
		}
	}
	var scs []loadtest.Scenario
	for _, name := range strings.Split(*scenarios, ",") {
		sc, ok := loadtest.ScenarioByName(name)
		if !ok {
			logf("unknown scenario %q", name)
			return 2
		}
		scs = append(scs, sc)
	}

	var results []*loadtest.Result
	failed := false
	for _, sc := range scs {
		for _, tg := range tgs {
			if ctx.Err() != nil {
				break
			}
			logf("%s / %s ...", sc.Name, tg.Name())
			t0 := time.Now()
			res, err := sc.Run(ctx, tg, p)
			switch {
			case errors.Is(err, loadtest.ErrUnsupported):
				logf("%s / %s: skipped (%v)", sc.Name, tg.Name(), err)
				continue
			case err != nil && res == nil:
				logf("%s / %s: %v", sc.Name, tg.Name(), err)
				failed = true
				continue
			case err != nil:
				res.Problems = append(res.Problems, err.Error())
				res.Failed = true
			}
			logf("%s / %s: done in %v", sc.Name, tg.Name(), time.Since(t0).Round(time.Millisecond))
			failed = failed || res.Failed
			results = append(results, res)
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
	} else {
		loadtest.WriteTable(os.Stdout, results)
	}
	if failed {
		fmt.Fprintln(os.Stderr, "loadtest: FAILED")
		return 1
	}
	return 0
}

// peerPID finds an external peer's pid for the CPU/RSS report; 0 (no
// report) when it cannot.
func peerPID(logf func(string, ...any), addr, name string) int {
	pid, how, err := loadtest.PeerPID(addr, name)
	if err != nil {
		logf("%s at %s: no pid for the CPU/RSS report: %v", name, addr, err)
		return 0
	}
	pin := ""
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				pin = ", cpus " + strings.TrimSpace(v)
			}
		}
	}
	logf("%s at %s: pid %d (from the %s%s)", name, addr, pid, how, pin)
	return pid
}
