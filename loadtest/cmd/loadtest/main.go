// Command loadtest runs tickwheel's load scenarios against a tickwheel
// server (an address, or one it spawns) and against time.AfterFunc in
// process, and prints a table (or JSON). It exits 1 when a run FAILED.
//
//	loadtest -spawn /tmp/tickwheel -targets tickwheel,afterfunc -scenarios add,lateness
//	loadtest -addr 127.0.0.1:7420 -token "$(cat tickwheel-data/admin.token)" -scenarios fire -n 200000 -json
//	loadtest -spawn /tmp/tickwheel -redis 127.0.0.1:6390 -beanstalkd 127.0.0.1:11390 -targets tickwheel,redis,beanstalkd,afterfunc
//	loadtest -spawn /tmp/tickwheel -persist off,everysec -redis-aof everysec -targets tickwheel,redis -scenarios add
//	loadtest -spawn /tmp/tickwheel -scenarios recover -n 10000000 -tail 1000000
//	loadtest -spawn /tmp/tickwheel -tls -targets tickwheel -scenarios add,lateness
//
// A spawned server keeps its state where -persist says: "off" (the
// default) in memory only (-data-dir ""), otherwise in a temporary data
// directory under -data-root, removed at exit; never in the working
// directory.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/client"
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
	genCPUs := flag.String("gen-cpus", "1", "with -spawn: the CPU list the generator pins itself to (GOMAXPROCS = its size, unless $GOMAXPROCS is set)")
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
	persist := flag.String("persist", "off", "with -spawn: comma-separated persistence modes, one spawned server each (a target named tickwheel(fsync=MODE)): "+
		"off (-data-dir \"\"), no, everysec, always (-data-dir <temp dir> -fsync MODE); MODE:FILE also gives the server -config FILE")
	dataRoot := flag.String("data-root", os.TempDir(), "with -spawn: where the durable servers' temporary data directories go")
	keepData := flag.Bool("keep-data", false, "with -spawn: keep the durable servers' data directories at exit")
	serverLog := flag.String("server-log", "", "with -spawn: write each spawned server's log to FILE.<mode> instead of stderr")
	twDeliver := flag.Int("tw-deliver", 0, "tickwheel: bind the receivers on this many connections of their own, instead of on the workers that add their timers (1: one connection takes every event, as the Redis peer's one poller does)")
	twAt := flag.Bool("tw-at", false, "tickwheel: add by calibrated absolute ticks (at) instead of after_ns, the duration from the moment the request is written")
	window := flag.Int("window", 0, "requests in flight per connection: tickwheel (default 4096) and redis (commands per pipeline, default 1000); 1 = each connection is a caller waiting for every reply")
	redisAOF := flag.String("redis-aof", "", "comma-separated AOF modes for the redis target, one target each (redis(aof=MODE)): always, everysec, no (CONFIG SET appendonly yes + appendfsync MODE at run time, restored after); \"\" = Redis as started")
	serverConfig := flag.String("server-config", "", "with -spawn: give every spawned server -config FILE (a -persist MODE:FILE overrides it for that one)")
	preload := flag.Int("preload", 0, "add this many timers (due 1 hour to 1 week away, not ephemeral) to each tickwheel server before the scenarios; they stay")
	tail := flag.Int("tail", 1_000_000, "recover: timers added after the graceful restart, before the SIGKILL")
	recoverFsync := flag.String("recover-fsync", "everysec", "recover: the server's fsync policy")
	withTLS := flag.Bool("tls", false, "with -spawn: spawn each server twice, plaintext and with TLS on its client port (target tickwheel(...,tls)), with certificates made in a temporary directory, and measure both in the same run; with -addr: connect with TLS (trusting -tls-ca)")
	noStamp := flag.Bool("no-rxstamp", false, "tickwheel: read with plain reads, not recvmsg with kernel receive stamps (as TLS connections are read): compares plaintext and -tls targets with the same reader")
	tlsCA := flag.String("tls-ca", "", "with -addr -tls: PEM file of the CA the server's certificate chains to (default: the system's)")
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

	var tws []*loadtest.TickwheelTarget
	var dataDirs []string
	defer func() {
		if !*keepData {
			for _, d := range dataDirs {
				os.RemoveAll(d)
			}
		}
	}()
	if *addr != "" {
		tw := &loadtest.TickwheelTarget{Addr: *addr, Token: *token, Window: *window, At: *twAt, Deliver: *twDeliver}
		if *withTLS {
			tf := client.TLSFiles{CAFile: *tlsCA}
			var err error
			if tw.TLS, err = tf.Config(); err != nil {
				logf("-tls-ca: %v", err)
				return 2
			}
		}
		tw.NoStamp = *noStamp
		tws = append(tws, tw)
	}
	variants := []bool{false} // spawned servers: plaintext, and with -tls a TLS twin
	var tlsArgs []string
	var tlsClient *tls.Config
	if *withTLS && *spawn != "" {
		dir, err := os.MkdirTemp("", "tickwheel-loadtest-tls-")
		if err != nil {
			logf("-tls: %v", err)
			return 2
		}
		defer os.RemoveAll(dir)
		if tlsArgs, tlsClient, err = loadtest.TLSSetup(dir); err != nil {
			logf("-tls: %v", err)
			return 2
		}
		variants = []bool{false, true}
	}
	if *spawn != "" {
		// The spawned server takes its admin token from the environment
		// (not a flag, which ps shows), so it touches no data directory.
		if *token == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			*token = hex.EncodeToString(b[:])
		}
		os.Setenv("TICKWHEEL_ADMIN_TOKEN", *token)
		cpus := *serverCPUs
		if *noPin {
			cpus = ""
		}
		modes := strings.Split(*persist, ",")
		if strings.Contains(*scenarios, "recover") {
			modes = nil // recover spawns its own servers
		}
		for _, m := range modes {
			for _, tlsOn := range variants {
				mode, cfgFile, _ := strings.Cut(m, ":")
				if cfgFile == "" && *serverConfig != "" {
					cfgFile = *serverConfig
				}
				dir := ""
				if mode != "off" {
					var err error
					if dir, err = os.MkdirTemp(*dataRoot, "tickwheel-loadtest-"+mode+"-"); err != nil {
						logf("data dir: %v", err)
						return 2
					}
					dataDirs = append(dataDirs, dir)
				}
				args, err := loadtest.PersistArgs(mode, dir)
				if err != nil {
					logf("-persist: %v", err)
					return 2
				}
				args = append(args, "-tick", tick.String())
				label := "(fsync=" + mode + ")"
				if mode == "off" {
					label = "(in-memory)"
				}
				if cfgFile != "" {
					args = append(args, "-config", cfgFile)
					label = label[:len(label)-1] + "," + strings.TrimSuffix(filepath.Base(cfgFile), filepath.Ext(cfgFile)) + ")"
				}
				if len(modes) == 1 && mode == "off" {
					label = "" // the in-memory server alone: named as before
				}
				if tlsOn {
					args = append(args, tlsArgs...)
					if label == "" {
						label = "(tls)"
					} else {
						label = label[:len(label)-1] + ",tls)"
					}
				}
				var logw *os.File
				if *serverLog != "" {
					name := *serverLog + "." + strings.Trim(strings.NewReplacer("(", "", ")", "", "=", "-", ",", "-").Replace(label), ".")
					if label == "" {
						name = *serverLog
					}
					if logw, err = os.Create(name); err != nil {
						logf("-server-log: %v", err)
						return 2
					}
					defer logw.Close()
				}
				o := loadtest.SpawnOptions{Path: *spawn, CPUs: cpus, Args: args}
				if logw != nil {
					o.Log = logw
				}
				s, err := loadtest.SpawnWith(ctx, o)
				if err != nil {
					logf("spawn: %v", err)
					return 2
				}
				s.StopWait = time.Minute // a durable server writes a last snapshot
				defer s.Stop()
				tw := &loadtest.TickwheelTarget{Addr: s.Addr, Token: *token, Window: *window, Pid: s.PID(), Label: label, At: *twAt, Deliver: *twDeliver}
				if tlsOn {
					tw.TLS = tlsClient
				}
				tw.NoStamp = *noStamp
				tws = append(tws, tw)
				logf("spawned %s pid %d on %s (%s), %s", *spawn, s.PID(), s.Addr, s.Pinned, strings.Join(args, " "))
			}
		}
		if !*noPin {
			logf("generator: %s", loadtest.PinSelf(*genCPUs))
		}
	}
	for _, tw := range tws {
		if *preload > 0 {
			rate, err := loadtest.Preload(ctx, tw.Addr, tw.Token, *preload, p.Conns)
			if err != nil {
				logf("preload: %v", err)
				return 2
			}
			logf("preloaded %d timers into %s (%.2fM adds/s)", *preload, tw.Name(), rate/1e6)
		}
	}
	var tgs []loadtest.Target
	for _, name := range strings.Split(*targets, ",") {
		switch name {
		case "tickwheel":
			if len(tws) == 0 && !strings.Contains(*scenarios, "recover") {
				logf("tickwheel needs -addr or -spawn")
				return 2
			}
			for _, tw := range tws {
				tgs = append(tgs, tw)
			}
		case "afterfunc":
			tgs = append(tgs, &loadtest.AfterFuncTarget{TickDur: *tick})
		case "redis":
			pid := peerPID(logf, *redisAddr, "redis")
			for _, aof := range strings.Split(*redisAOF, ",") {
				tgs = append(tgs, &loadtest.RedisTarget{Addr: *redisAddr, Pid: pid, TickDur: *tick, Window: *window, AOF: aof})
			}
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
		if name == "recover" {
			if *spawn == "" {
				logf("recover needs -spawn")
				return 2
			}
			cpus := *serverCPUs
			if *noPin {
				cpus = ""
			}
			scs = append(scs, loadtest.Scenario{Name: "recover", Run: func(ctx context.Context, tg loadtest.Target, p loadtest.Params) (*loadtest.Result, error) {
				dir, err := os.MkdirTemp(*dataRoot, "tickwheel-loadtest-recover-")
				if err != nil {
					return nil, err
				}
				dataDirs = append(dataDirs, dir)
				args := []string{"-tick", tick.String()}
				if *serverConfig != "" {
					args = append(args, "-config", *serverConfig)
				}
				rp := loadtest.RecoveryParams{Bin: *spawn, CPUs: cpus, Token: *token, Args: args,
					Fsync: *recoverFsync, Dir: dir, N: p.N, Tail: *tail, Conns: p.Conns, Logf: logf}
				if *serverLog != "" {
					f, err := os.Create(*serverLog + ".recover")
					if err != nil {
						return nil, err
					}
					defer f.Close()
					rp.Log = f
				}
				return loadtest.Recovery(ctx, rp)
			}})
			continue
		}
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
		tgs := tgs
		if sc.Name == "recover" {
			tgs = []loadtest.Target{nil} // it spawns its own servers
		}
		for _, tg := range tgs {
			if ctx.Err() != nil {
				break
			}
			name := "tickwheel"
			if tg != nil {
				name = tg.Name()
			}
			logf("%s / %s ...", sc.Name, name)
			t0 := time.Now()
			res, err := sc.Run(ctx, tg, p)
			switch {
			case errors.Is(err, loadtest.ErrUnsupported):
				logf("%s / %s: skipped (%v)", sc.Name, name, err)
				continue
			case err != nil && res == nil:
				logf("%s / %s: %v", sc.Name, name, err)
				failed = true
				continue
			case err != nil:
				res.Problems = append(res.Problems, err.Error())
				res.Failed = true
			}
			logf("%s / %s: done in %v", sc.Name, name, time.Since(t0).Round(time.Millisecond))
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
