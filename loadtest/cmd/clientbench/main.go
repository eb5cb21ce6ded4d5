// Command clientbench measures how fast the public Go client schedules
// timers, side by side with go-redis scheduling the same number of
// sorted-set entries (pipelined ZADD), in one run, interleaved round by
// round: schedules per second, the generator's CPU per add (the client
// library's cost) and the server's CPU per add.
//
//	clientbench -spawn /tmp/tickwheel -redis 127.0.0.1:6390 -n 1000000 -rounds 5
//
// Modes: tw-call (Client.Add from c clients × g goroutines, each waiting
// for its reply), tw-pipe (each goroutine sends Pipes of -batch adds),
// redis-pipe (go-redis Pipelined of -batch ZADDs per goroutine, the same
// c × g goroutines over a pool of -redis-pool connections). No timer fires
// during a run: each is due an hour ahead; a round's timers (and sorted
// set) are removed before the next, outside the timing.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/loadtest"
)

type params struct {
	n, conns, goroutines, batch int
	redisPool                   int
}

type result struct {
	mode              string
	secs              float64
	clientCPU, server float64 // CPU seconds: this process, the server
}

func main() {
	spawn := flag.String("spawn", "", "tickwheel binary to start (in memory, pinned to CPU 0)")
	addr := flag.String("addr", "", "a running tickwheel server instead of -spawn")
	redisAddr := flag.String("redis", "127.0.0.1:6390", `Redis address ("" skips redis-pipe)`)
	modes := flag.String("modes", "tw-call,tw-pipe,redis-pipe", "modes, run in this order every round")
	rounds := flag.Int("rounds", 5, "rounds (the modes interleaved in each)")
	var p params
	flag.IntVar(&p.n, "n", 1_000_000, "adds per mode per round")
	flag.IntVar(&p.conns, "c", 8, "connections: tickwheel clients")
	flag.IntVar(&p.goroutines, "g", 16, "goroutines per connection")
	flag.IntVar(&p.batch, "batch", 1000, "adds per pipeline")
	flag.IntVar(&p.redisPool, "redis-pool", 0, "go-redis pool size (default c × g: a connection per goroutine)")
	genCPUs := flag.String("gen-cpus", "1", "CPUs this generator is pinned to")
	flag.Parse()
	if p.redisPool == 0 {
		p.redisPool = p.conns * p.goroutines
	}
	log.SetFlags(0)
	log.Printf("generator: %s", loadtest.PinSelf(*genCPUs))
	ctx := context.Background()

	twPid := 0
	if *spawn != "" {
		s, err := loadtest.Spawn(ctx, *spawn, "0", "-data-dir", "")
		if err != nil {
			log.Fatal(err)
		}
		defer s.Stop()
		*addr, twPid = s.Addr, s.PID()
		log.Printf("spawned %s pid %d on %s (%s)", *spawn, twPid, s.Addr, s.Pinned)
	}
	var rdb *redis.Client
	redisPid := 0
	if *redisAddr != "" {
		rdb = redis.NewClient(&redis.Options{Addr: *redisAddr, PoolSize: p.redisPool})
		defer rdb.Close()
		pid, how, err := loadtest.PeerPID(*redisAddr, "redis-server")
		if err != nil {
			log.Fatalf("redis: %v", err)
		}
		redisPid = pid
		log.Printf("redis at %s: pid %d (%s)", *redisAddr, pid, how)
	}

	var all []result
	for round := range *rounds {
		for _, mode := range strings.Split(*modes, ",") {
			var r result
			var err error
			switch mode {
			case "tw-call", "tw-pipe":
				r, err = runTickwheel(ctx, mode, *addr, twPid, p, round)
			case "redis-pipe":
				r, err = runRedis(ctx, rdb, redisPid, p, round)
			default:
				err = fmt.Errorf("unknown mode %q", mode)
			}
			if err != nil {
				log.Fatalf("%s: %v", mode, err)
			}
			log.Printf("round %d %-10s %9.0f adds/s  client %.2f µs/add  server %.2f µs/add", round+1, mode,
				float64(p.n)/r.secs, r.clientCPU/float64(p.n)*1e6, r.server/float64(p.n)*1e6)
			all = append(all, r)
		}
	}
	summarize(all, p.n)
}

// cpuSelf returns this process's CPU seconds (user + system).
func cpuSelf() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func cpuOf(pid int) float64 {
	if pid == 0 {
		return 0
	}
	s, err := loadtest.ReadProc(pid)
	if err != nil {
		return 0
	}
	return s.CPUSeconds
}

// measure runs work from c × g goroutines, each taking the next chunk of
// ids [lo, hi) until n are done, and times it with both CPU readings.
func measure(mode string, pid int, p params, chunk int, work func(g, lo, hi int) error) (result, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	c0, s0, t0 := cpuSelf(), cpuOf(pid), time.Now()
	for g := range p.conns * p.goroutines {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= p.n {
					return
				}
				if err := work(g, lo, min(lo+chunk, p.n)); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	r := result{mode: mode, secs: time.Since(t0).Seconds(), clientCPU: cpuSelf() - c0, server: cpuOf(pid) - s0}
	select {
	case err := <-errs:
		return r, err
	default:
		return r, nil
	}
}

// runTickwheel schedules p.n timers, due an hour ahead, on fresh receivers
// of this round, then removes them.
func runTickwheel(ctx context.Context, mode, addr string, pid int, p params, round int) (result, error) {
	cls := make([]*client.Client, p.conns)
	for i := range cls {
		c, err := client.Dial(ctx, addr, client.WithName("clientbench"))
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		cls[i] = c
	}
	const receivers = 1024
	base := uint64(round+1) << 32
	after := uint64(time.Hour / cls[0].TickDuration())
	var r result
	var err error
	if mode == "tw-call" {
		r, err = measure(mode, pid, p, 1, func(g, lo, _ int) error {
			_, err := cls[g%p.conns].Add(ctx, base+uint64(lo%receivers), uint64(lo), after, nil)
			return err
		})
	} else {
		pipes := make([]*client.Pipe, p.conns*p.goroutines)
		for g := range pipes {
			pipes[g] = cls[g%p.conns].Pipeline()
		}
		r, err = measure(mode, pid, p, p.batch, func(g, lo, hi int) error {
			pp := pipes[g]
			for i := lo; i < hi; i++ {
				pp.Add(base+uint64(i%receivers), uint64(i), after, nil)
			}
			return pp.Exec(ctx)
		})
	}
	for rc := range uint64(receivers) {
		if _, cerr := cls[0].CancelAll(ctx, base+rc); cerr != nil && err == nil {
			err = cerr
		}
	}
	return r, err
}

// runRedis adds p.n members to a sorted set with pipelined ZADD, scored an
// hour ahead, then deletes the set.
func runRedis(ctx context.Context, rdb *redis.Client, pid int, p params, round int) (result, error) {
	key := "clientbench:" + strconv.Itoa(round)
	due := float64(time.Now().Add(time.Hour).UnixMicro())
	r, err := measure("redis-pipe", pid, p, p.batch, func(_, lo, hi int) error {
		_, err := rdb.Pipelined(ctx, func(pp redis.Pipeliner) error {
			for i := lo; i < hi; i++ {
				pp.ZAdd(ctx, key, redis.Z{Score: due + float64(i%1000), Member: strconv.Itoa(i%1024) + ":" + strconv.Itoa(i)})
			}
			return nil
		})
		return err
	})
	if derr := rdb.Del(ctx, key).Err(); derr != nil && err == nil {
		err = derr
	}
	return r, err
}

// summarize prints each mode's median over the rounds, and the ratios of
// tickwheel's modes to redis-pipe's.
func summarize(all []result, n int) {
	by := map[string][]result{}
	var order []string
	for _, r := range all {
		if by[r.mode] == nil {
			order = append(order, r.mode)
		}
		by[r.mode] = append(by[r.mode], r)
	}
	med := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	type row struct{ rate, ccpu, scpu float64 }
	rows := map[string]row{}
	fmt.Printf("%-10s %12s %16s %16s   (median of %d rounds, %d adds each)\n", "mode", "adds/s", "client µs/add", "server µs/add", len(by[order[0]]), n)
	for _, m := range order {
		rw := row{
			rate: med(by[m], func(r result) float64 { return float64(n) / r.secs }),
			ccpu: med(by[m], func(r result) float64 { return r.clientCPU / float64(n) * 1e6 }),
			scpu: med(by[m], func(r result) float64 { return r.server / float64(n) * 1e6 }),
		}
		rows[m] = rw
		fmt.Printf("%-10s %12.0f %16.3f %16.3f\n", m, rw.rate, rw.ccpu, rw.scpu)
	}
	if rd, ok := rows["redis-pipe"]; ok {
		for _, m := range order {
			if m == "redis-pipe" {
				continue
			}
			fmt.Printf("%s / redis-pipe: %.2f× adds/s, %.2f× client CPU per add, %.2f× server CPU per add\n",
				m, rows[m].rate/rd.rate, rows[m].ccpu/rd.ccpu, rows[m].scpu/rd.scpu)
		}
	}
	os.Stdout.Sync()
}
