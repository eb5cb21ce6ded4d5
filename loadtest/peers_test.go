package loadtest

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// peerAddr returns the peer's address (env, else the peers.sh default), or
// skips the test when nothing answers there: CI has no Redis or beanstalkd.
func peerAddr(t *testing.T, env, def, name string) string {
	t.Helper()
	addr := os.Getenv(env)
	if addr == "" {
		addr = def
	}
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		t.Skipf("%s not reachable at %s (%v): start it with loadtest/peers.sh start, or set %s=host:port", name, addr, err, env)
	}
	c.Close()
	return addr
}

// runPeerScenarios runs the smoke scenarios that apply to a peer (those it
// does not support must say ErrUnsupported) and checks the invariants.
func runPeerScenarios(t *testing.T, mk func() Target, p Params) {
	var all []*Result
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tg := mk()
			res, err := sc.Run(ctx, tg, p)
			if errors.Is(err, ErrUnsupported) {
				if sc.Name != "idle" && sc.Name != "ff" {
					t.Fatalf("%s must support %s", tg.Name(), sc.Name)
				}
				t.Skipf("%s: %v", tg.Name(), err)
			}
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, res)
			if res.Failed {
				t.Errorf("FAILED: %v", res.Problems)
			}
			if res.Rate <= 0 {
				t.Errorf("no throughput measured: %+v", res)
			}
			if res.Server == nil && tg.(Process).PID() > 0 {
				t.Errorf("no server stats")
			}
			switch sc.Name {
			case "add", "hold":
				if res.Scheduled != int64(p.N) || res.Delivered != 0 {
					t.Errorf("%s: scheduled %d delivered %d", sc.Name, res.Scheduled, res.Delivered)
				}
			case "cancel":
				if res.Cancelled != int64(p.N/2) {
					t.Errorf("cancel: %d cancelled, want %d", res.Cancelled, p.N/2)
				}
			case "repeat":
				if res.Delivered != int64(p.K*p.R) {
					t.Errorf("repeat: delivered %d, want %d", res.Delivered, p.K*p.R)
				}
			case "lateness":
				if res.Lateness == nil || res.Lateness.Count != res.Delivered {
					t.Errorf("lateness: histogram %+v for %d deliveries", res.Lateness, res.Delivered)
				}
			}
		})
	}
	var b strings.Builder
	WriteTable(&b, all)
	t.Log("\n" + b.String())
}

func peerPIDOrZero(t *testing.T, addr, name string) int {
	pid, how, err := PeerPID(addr, name)
	if err != nil {
		t.Logf("%s: no pid (%v): no CPU/RSS", name, err)
		return 0
	}
	t.Logf("%s pid %d (%s)", name, pid, how)
	return pid
}

// TestRedis runs the scenarios against a Redis server (TICKWHEEL_REDIS, or
// 127.0.0.1:6390 as peers.sh starts it); skipped when none is reachable.
func TestRedis(t *testing.T) {
	addr := peerAddr(t, "TICKWHEEL_REDIS", DefaultRedisAddr, "redis")
	pid := peerPIDOrZero(t, addr, "redis")
	runPeerScenarios(t, func() Target { return &RedisTarget{Addr: addr, Pid: pid} }, tinyParams())
}

// TestBeanstalkd runs the scenarios against beanstalkd (TICKWHEEL_BEANSTALKD,
// or 127.0.0.1:11390); skipped when none is reachable. Its periods are whole
// seconds (Tick = 1 s), so the repeat scenario takes a few seconds.
func TestBeanstalkd(t *testing.T) {
	addr := peerAddr(t, "TICKWHEEL_BEANSTALKD", DefaultBeanstalkdAddr, "beanstalkd")
	pid := peerPIDOrZero(t, addr, "beanstalkd")
	p := tinyParams()
	p.P, p.R = 1, 2 // every 1 s, twice
	runPeerScenarios(t, func() Target { return &BeanstalkdTarget{Addr: addr, Pid: pid} }, p)
}

// TestRedisCodec: a member round-trips, and the firing number follows the
// score (the poller's Lua script re-adds repeating members at score+every).
func TestRedisCodec(t *testing.T) {
	r := &RedisTarget{}
	data := []byte("a:b\x00c")
	tm := Timer{Receiver: 7, Tid: 42, Every: 100 * time.Millisecond, Repeat: 3, Data: data}
	m := r.member(5, &tm, -1234)
	if !strings.HasPrefix(m, "100000:3:-1234:5:7:42:") || r.worker(m) != 5 {
		t.Fatalf("member %q", m)
	}
	var d Delivery
	for k, score := range []string{"-1234", "98766", "198766"} {
		if !r.decode(m, score, &d) {
			t.Fatal("decode failed")
		}
		if d.Receiver != 7 || d.Tid != 42 || string(d.Data) != string(data) || d.Fired != uint32(k+1) || d.Last != (k == 2) {
			t.Fatalf("firing %d: %+v", k+1, d)
		}
	}
	// Rounding: scores are µs rounded up, so nothing is due early.
	r.epoch = 1000
	if r.us(1000+1) != 1 || r.us(1000+1000) != 1 || r.us(1000-1500) != -1 {
		t.Fatalf("us rounding: %d %d %d", r.us(1001), r.us(2000), r.us(-500))
	}
}

// TestBeanstalkdCodec: a job body round-trips and delays round up to whole
// seconds.
func TestBeanstalkdCodec(t *testing.T) {
	j := bsJob{w: 3, receiver: 9, tid: 11, first: -5, every: int64(time.Second), repeat: 4, fired: 2, ready: 77, data: []byte{1, 2, 3}}
	var k bsJob
	if !k.decode(j.encode()) || k.w != 3 || k.receiver != 9 || k.tid != 11 || k.first != -5 || k.every != j.every || k.repeat != 4 || k.fired != 2 || k.ready != 77 || string(k.data) != "\x01\x02\x03" {
		t.Fatalf("round trip: %+v", k)
	}
	if k.due() != -5+2*int64(time.Second) {
		t.Fatalf("due %d", k.due())
	}
	before := Now()
	d, ready := delayFor(before + int64(1500*time.Millisecond))
	if d != 2*time.Second || ready < before+int64(2*time.Second) || ready > Now()+int64(2*time.Second) {
		t.Fatalf("delay %v ready %d (put at %d), want 2s and put + 2s", d, ready, before)
	}
	if d, ready := delayFor(Now() - 1); d != 0 || ready > Now() {
		t.Fatalf("delay %v, ready %d for a past due, want 0 and now", d, ready)
	}
}

// TestPeerPID finds the pid of a listener in this process.
func TestPeerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, how, err := PeerPID(ln.Addr().String(), "nothing")
	if err != nil {
		t.Skipf("cannot read /proc here: %v", err)
	}
	if pid != os.Getpid() {
		t.Fatalf("pid %d (%s), want %d", pid, how, os.Getpid())
	}
}
