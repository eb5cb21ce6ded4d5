package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// seqCheck follows one receiver's event sequence numbers across the
// connections that receive them.
type seqCheck struct {
	last     uint64
	events   int
	gaps     uint64 // events skipped by seq jumps
	dropped  uint64 // dropped counts reported by binds
	backward int    // a seq not above the last: a restart or a duplicate
	over     int    // a bind reported more dropped than the following jump showed
	pending  uint64 // the last bind's dropped, not yet matched with a jump
}

func (s *seqCheck) bound(dropped uint64) {
	s.dropped += dropped
	s.pending += dropped
}

func (s *seqCheck) fire(seq uint64) {
	s.events++
	switch {
	case seq <= s.last:
		s.backward++
	default:
		jump := seq - s.last - 1
		if s.pending > jump {
			s.over++
		}
		s.gaps += jump
	}
	s.pending = 0
	s.last = seq
}

// cmdRST runs clients that bind a receiver with timers firing every tick,
// read a while, and disconnect — many with a reset (SO_LINGER 0), some
// after a stall in reading — then come back and rebind.
func cmdRST(o *opts, fs *flag.FlagSet, args []string) error {
	clients := fs.Int("clients", 200, "clients")
	duration := fs.Duration("duration", 30*time.Second, "how long")
	timers := fs.Int("timers", 5, "timers per client's receiver, each firing every tick")
	size := fs.Int("data", 256, "bytes of data per timer")
	pRST := fs.Float64("rst", 0.5, "share of disconnects with SO_LINGER 0 (the others close with unread data)")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *clients > 2000 || *duration > 100*time.Second {
		return fmt.Errorf("bounds: -clients <= 2000, -duration <= 100s")
	}
	o.status("before:")
	rss0, fds0 := rssMiB(o.pid), fdCount(o.pid)
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	smp := startSampler(o.pid)
	checks := make([]seqCheck, *clients)
	var cycles, rsts, stalls, failures atomic.Int64
	end := time.Now().Add(*duration)
	data := make([]byte, *size)
	var wg sync.WaitGroup
	for i := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			chk := &checks[i]
			recv := uint64(10000 + i)
			added := false
			for time.Now().Before(end) && !o.over() {
				w, err := session(o.addr, "rst", "")
				if err != nil {
					failures.Add(1)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				w.onPush = func(m *protocol.Message) {
					if m.Kind == protocol.KindFire {
						chk.fire(m.Fire.Seq)
					}
				}
				m, err := w.call(&protocol.Request{Op: protocol.OpBind, Receiver: recv}, 10*time.Second)
				if err == nil && m.Kind == protocol.KindOK {
					v, _ := protocol.DecodeUints(m.Result, nil)
					if len(v) == 2 {
						chk.bound(v[1])
					}
				}
				if err == nil && !added {
					_, _, err = addTimers(w, recv, *timers, data, 1, 1, 0)
					added = err == nil
				}
				if err == nil {
					stop := time.Now().Add(time.Duration(20+rng.IntN(280)) * time.Millisecond)
					for {
						m, err := w.read(stop)
						if err != nil {
							break
						}
						if m.Kind == protocol.KindFire {
							chk.fire(m.Fire.Seq)
						}
					}
					if rng.IntN(4) == 0 { // stop reading while events pile up
						stalls.Add(1)
						time.Sleep(300 * time.Millisecond)
					}
				}
				if rng.Float64() < *pRST {
					lingerZero(w.c)
					rsts.Add(1)
				}
				w.c.Close()
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	peak := smp.Stop()
	fmt.Println(mon.Stop())
	// Cancel the timers, then rebind every receiver once more to collect
	// what the last disconnects left.
	fin, err := session(o.addr, "final", "")
	if err != nil {
		return fmt.Errorf("final session: %w (server alive: %v)", err, alive(o.pid))
	}
	for i := range *clients {
		_, _ = fin.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: uint64(10000 + i)}, 10*time.Second)
	}
	cur := -1
	fin.onPush = func(m *protocol.Message) {
		if m.Kind == protocol.KindFire {
			checks[m.Fire.Receiver-10000].fire(m.Fire.Seq)
		}
	}
	for i := range *clients {
		cur = i
		m, err := fin.call(&protocol.Request{Op: protocol.OpBind, Receiver: uint64(10000 + i)}, 10*time.Second)
		if err == nil && m.Kind == protocol.KindOK {
			v, _ := protocol.DecodeUints(m.Result, nil)
			if len(v) == 2 {
				checks[cur].bound(v[1])
			}
		}
	}
	_, _ = fin.call(&protocol.Request{Op: protocol.OpPing}, 10*time.Second)
	for {
		m, err := fin.read(time.Now().Add(500 * time.Millisecond))
		if err != nil {
			break
		}
		if m.Kind == protocol.KindFire {
			checks[m.Fire.Receiver-10000].fire(m.Fire.Seq)
		}
	}
	fin.c.Close()
	var tot seqCheck
	for _, c := range checks {
		tot.events += c.events
		tot.gaps += c.gaps
		tot.dropped += c.dropped
		tot.backward += c.backward
		tot.over += c.over
	}
	fmt.Printf("%d connect/bind/read/close cycles (%d reset with SO_LINGER 0, %d stalled 300 ms first), %d failed connects\n",
		cycles.Load(), rsts.Load(), stalls.Load(), failures.Load())
	fmt.Printf("events read %d; seq gaps %d; dropped reported by binds %d; gap not reported (lost in kernel buffers) %d; seq going backwards %d; binds over-reporting %d\n",
		tot.events, tot.gaps, tot.dropped, int64(tot.gaps)-int64(tot.dropped), tot.backward, tot.over)
	fmt.Printf("rss: before %.1f MiB, peak %.1f MiB\n", rss0, peak)
	time.Sleep(2 * time.Second)
	o.status(fmt.Sprintf("after (fds before %d):", fds0))
	return nil
}

// ---------------------------------------------------------------- garbage

var garbageModes = []string{
	"random bytes before hello",
	"hello, then random bytes",
	"hello, then frames of random msgpack-ish payload",
	"huge or zero declared length",
	"hello, then a frame of 10k nested arrays",
	"header one byte per 100 ms (2 s)",
	"hello, then half an add frame, then RST",
	"hello, then requests with random ops and random argument types",
	"hello with a 2^32-1 element array header",
}

// randValue appends a random msgpack value.
func randValue(b []byte, rng *rand.Rand, depth int) []byte {
	switch rng.IntN(14) {
	case 0:
		return append(b, 0xc0)
	case 1:
		return append(b, byte(rng.IntN(128)))
	case 2:
		return append(b, 0xe0|byte(rng.IntN(32))) // negative fixint
	case 3:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), rng.Uint64())
	case 4:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), rng.Uint64())
	case 5:
		return binary.BigEndian.AppendUint64(append(b, 0xcb), rng.Uint64()) // float64
	case 6:
		n := rng.IntN(40)
		b = append(b, 0xa0|byte(min(n, 31)))
		return append(b, make([]byte, min(n, 31))...)
	case 7:
		n := rng.IntN(300)
		b = append(b, 0xc4, byte(n))
		return append(b, make([]byte, n)...)
	case 8:
		if depth > 3 {
			return append(b, 0xc2)
		}
		n := rng.IntN(6)
		b = append(b, 0x90|byte(n))
		for range n {
			b = randValue(b, rng, depth+1)
		}
		return b
	case 9:
		if depth > 3 {
			return append(b, 0xc3)
		}
		n := rng.IntN(3)
		b = append(b, 0x80|byte(n))
		for range 2 * n {
			b = randValue(b, rng, depth+1)
		}
		return b
	case 10: // a length that lies
		return append(b, 0xdb, 0xff, 0xff, 0xff, 0xff)
	case 11:
		return append(b, 0xc1) // never used
	case 12:
		return append(b, 0xd4, 0x01, 0x02) // fixext1
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xce), rng.Uint32())
	}
}

func frameOf(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

func helloFrame(name, token string) []byte {
	return protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version, Name: name, Token: token})
}

// cmdGarbage sends malformed input of several kinds over many connections.
func cmdGarbage(o *opts, fs *flag.FlagSet, args []string) error {
	conns := fs.Int("conns", 2000, "connections")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *conns > 20000 {
		return fmt.Errorf("bounds: -conns <= 20000")
	}
	o.status("before:")
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	smp := startSampler(o.pid)
	type outcome struct{ mode, what string }
	var mu sync.Mutex
	results := map[outcome]int{}
	idx := make(chan int)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				mode := i % len(garbageModes)
				rng := rand.New(rand.NewPCG(*seed, uint64(i)))
				w, err := dial(o.addr)
				if err != nil {
					mu.Lock()
					results[outcome{garbageModes[mode], "dial: " + classify(err)}]++
					mu.Unlock()
					continue
				}
				var b []byte
				rstAtEnd := false
				hello := helloFrame("garbage", "")
				switch mode {
				case 0:
					b = make([]byte, 1+rng.IntN(4096))
					for j := range b {
						b[j] = byte(rng.Uint32())
					}
				case 1:
					r := make([]byte, 1+rng.IntN(4096))
					for j := range r {
						r[j] = byte(rng.Uint32())
					}
					b = append(hello, r...)
				case 2:
					b = hello
					for range 20 {
						p := []byte{0x90 | byte(rng.IntN(16))}
						for range rng.IntN(8) {
							p = randValue(p, rng, 0)
						}
						b = append(b, frameOf(p)...)
					}
				case 3:
					lens := []uint32{0xffffffff, 0x80000000, 65537, 0, 577, 1 << 24}
					l := lens[rng.IntN(len(lens))]
					if rng.IntN(2) == 0 {
						b = hello
					}
					b = binary.BigEndian.AppendUint32(b, l)
					b = append(b, 0x93, 0x01)
				case 4:
					p := make([]byte, 10000)
					for j := range p {
						p[j] = 0x91
					}
					p[len(p)-1] = 0xc0
					b = append(hello, frameOf(p)...)
				case 5:
					for j, x := range []byte{0, 0, 0, 20} {
						if j > 0 {
							time.Sleep(100 * time.Millisecond)
						}
						_ = w.write([]byte{x})
					}
					for range 16 {
						time.Sleep(100 * time.Millisecond)
						_ = w.write([]byte{0x95})
					}
				case 6:
					add := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: 1, Tid: 1, After: 100, Data: make([]byte, 1000)})
					b = append(hello, add[:len(add)/2]...)
					rstAtEnd = true
				case 7:
					b = hello
					for range 50 {
						p := []byte{0x90 | byte(2+rng.IntN(10)), byte(rng.IntN(30)), byte(rng.IntN(100))}
						if rng.IntN(4) == 0 {
							p[1] = 0xcc
							p = append(p[:2], byte(rng.IntN(256)), byte(rng.IntN(100)))
							p[0] = 0x90 | byte(2+rng.IntN(10))
						}
						for range int(p[0]&0x0f) - 2 {
							p = randValue(p, rng, 1)
						}
						b = append(b, frameOf(p)...)
					}
				case 8:
					b = append(binary.BigEndian.AppendUint32(nil, 8), 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01, 0x01)
				}
				if len(b) > 0 {
					_ = w.write(b)
				}
				// What comes back within a second.
				what := ""
				deadline := time.Now().Add(time.Second)
				var codes []int
				for {
					m, err := w.read(deadline)
					if err != nil {
						what = classify(err)
						break
					}
					if m.Kind == protocol.KindError {
						codes = append(codes, int(m.Code))
					}
				}
				sort.Ints(codes)
				codes = dedupe(codes)
				if rstAtEnd {
					lingerZero(w.c)
				}
				w.c.Close()
				mu.Lock()
				results[outcome{garbageModes[mode], fmt.Sprintf("error codes %v, then %s", codes, what)}]++
				mu.Unlock()
			}
		}()
	}
	for i := range *conns {
		if o.over() {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	peak := smp.Stop()
	fmt.Println(mon.Stop())
	keys := make([]outcome, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].mode != keys[j].mode {
			return keys[i].mode < keys[j].mode
		}
		return keys[i].what < keys[j].what
	})
	for _, k := range keys {
		fmt.Printf("  %-62s %-45s %d\n", k.mode, k.what, results[k])
	}
	fmt.Printf("peak rss %.1f MiB\n", peak)
	time.Sleep(time.Second)
	o.status("after:")
	return nil
}

func dedupe(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// ---------------------------------------------------------------- hellos

// cmdHellos floods hellos: many on one connection, bad tokens, oversize
// names, and connect-hello-close churn.
func cmdHellos(o *opts, fs *flag.FlagSet, args []string) error {
	conns := fs.Int("conns", 50, "connections")
	hellos := fs.Int("hellos", 2000, "hellos per connection (phase A)")
	churn := fs.Int("churn", 5000, "connect-hello-close cycles (phase C)")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *conns > 2000 || *hellos > 100000 || *churn > 100000 {
		return fmt.Errorf("bounds: -conns <= 2000, -hellos <= 100000, -churn <= 100000")
	}
	o.status("before:")
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	smp := startSampler(o.pid)
	// A: pipelined valid hellos.
	var okA, errA atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := dial(o.addr)
			if err != nil {
				return
			}
			defer w.c.Close()
			reqs := make([]protocol.Request, *hellos)
			for i := range reqs {
				reqs[i] = protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "flood"}
			}
			ok, _, err := w.pipeline(reqs, 500, 30*time.Second)
			okA.Add(int64(ok))
			if err != nil {
				errA.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("A: %d connections x %d pipelined hellos: %d ok, %d connections failed, %v\n", *conns, *hellos, okA.Load(), errA.Load(), time.Since(start).Round(time.Millisecond))
	// B: bad tokens, 5 per connection.
	outcomes := map[string]int{}
	var mu sync.Mutex
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := dial(o.addr)
			if err != nil {
				return
			}
			defer w.c.Close()
			var b []byte
			for range 5 {
				b = w.frame(b, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "guess", Token: "wrong-token"})
			}
			_ = w.write(b)
			replies := 0
			var end string
			for {
				m, err := w.read(time.Now().Add(2 * time.Second))
				if err != nil {
					end = classify(err)
					break
				}
				if m.Kind == protocol.KindError && m.Code == protocol.CodeUnauthorized {
					replies++
				}
			}
			mu.Lock()
			outcomes[fmt.Sprintf("%d unauthorized replies, then %s", replies, end)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("B: %d connections x 5 hellos with a bad token: %v\n", *conns, outcomes)
	// C: churn.
	start = time.Now()
	var okC, failC atomic.Int64
	idx := make(chan int)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range idx {
				w, err := session(o.addr, "churn", "")
				if err != nil {
					failC.Add(1)
					continue
				}
				okC.Add(1)
				w.c.Close()
			}
		}()
	}
	for i := range *churn {
		if o.over() {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("C: %d connect-hello-close: %d ok, %d failed, %v (%.0f/s)\n", *churn, okC.Load(), failC.Load(), el.Round(time.Millisecond), float64(okC.Load())/el.Seconds())
	// D: names and tokens at and past max_name (256).
	for _, c := range []struct{ name, token int }{{256, 0}, {257, 0}, {256, 256}, {0, 257}, {300, 300}, {4000, 0}} {
		w, err := dial(o.addr)
		if err != nil {
			return err
		}
		m, err := w.call(&protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: string(make([]byte, c.name)), Token: string(make([]byte, c.token))}, 5*time.Second)
		res := ""
		switch {
		case err != nil:
			res = classify(err)
		case m.Kind == protocol.KindOK:
			res = "ok"
		default:
			res = fmt.Sprintf("%v: %.90s", m.Code, m.Text)
		}
		fmt.Printf("D: hello name %d B, token %d B: %s\n", c.name, c.token, res)
		w.c.Close()
	}
	peak := smp.Stop()
	fmt.Println(mon.Stop())
	fmt.Printf("peak rss %.1f MiB\n", peak)
	time.Sleep(time.Second)
	o.status("after:")
	return nil
}

// ---------------------------------------------------------------- storm
