package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
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

// cmdStorm binds, unbinds and takes over receivers from several sessions
// at random while their timers fire every tick, then checks that every
// event arrived exactly once somewhere, or was counted as dropped.
func cmdStorm(o *opts, fs *flag.FlagSet, args []string) error {
	sessions := fs.Int("sessions", 8, "sessions")
	receivers := fs.Int("receivers", 200, "receivers")
	timersPer := fs.Int("timers", 2, "timers per receiver, each firing every tick")
	duration := fs.Duration("duration", 20*time.Second, "how long the storm lasts")
	tick := fs.Duration("tick", 10*time.Millisecond, "the server's tick")
	batch := fs.Int("batch", 50, "requests per batch")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *sessions > 200 || *receivers > 10000 || *duration > 90*time.Second || *timersPer > 100 {
		return fmt.Errorf("bounds: -sessions <= 200, -receivers <= 10000, -timers <= 100, -duration <= 90s")
	}
	o.status("before:")
	adm, err := session(o.addr, "admin", o.token)
	if err != nil {
		return err
	}
	defer adm.c.Close()
	s0, _ := adm.stats()
	repeat := uint64((*duration + time.Second) / *tick)
	total := uint64(*timersPer) * repeat
	var mu sync.Mutex
	seen := make([][]uint8, *receivers)
	for i := range seen {
		seen[i] = make([]uint8, total+2)
	}
	var beyond, foreign atomic.Int64
	var droppedReported, takeovers, binds, unbinds, notFound atomic.Int64
	record := func(m *protocol.Message) {
		switch m.Kind {
		case protocol.KindFire:
			r := m.Fire.Receiver - 20000
			if r >= uint64(*receivers) {
				foreign.Add(1)
				return
			}
			if m.Fire.Seq > total {
				beyond.Add(1)
				return
			}
			mu.Lock()
			if seen[r][m.Fire.Seq] < 255 {
				seen[r][m.Fire.Seq]++
			}
			mu.Unlock()
		case protocol.KindTakeover:
			takeovers.Add(1)
		case protocol.KindOK:
			if v, err := protocol.DecodeUints(m.Result, nil); err == nil && len(v) == 2 {
				droppedReported.Add(int64(v[1]))
			}
		case protocol.KindError:
			if m.Code == protocol.CodeNotFound {
				notFound.Add(1)
			}
		}
	}
	var ws []*wire
	replies := make([]chan struct{}, *sessions)
	for i := range *sessions {
		w, err := session(o.addr, fmt.Sprintf("storm-%d", i), "")
		if err != nil {
			return err
		}
		defer w.c.Close()
		ws = append(ws, w)
		replies[i] = make(chan struct{}, 1<<16)
		go func() {
			for {
				m, err := w.read(time.Time{})
				if err != nil {
					return
				}
				record(&m)
				if m.Kind == protocol.KindOK || m.Kind == protocol.KindError {
					replies[i] <- struct{}{}
				}
			}
		}()
	}
	// The timers, on unbound receivers to begin with.
	for r := range *receivers {
		if _, fe, err := addTimers(adm, uint64(20000+r), *timersPer, []byte("x"), 1, 1, repeat); err != nil || fe != "" {
			return fmt.Errorf("add: %v %s", err, fe)
		}
	}
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	end := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for time.Now().Before(end) && !o.over() {
				var b []byte
				for range *batch {
					r := uint64(20000 + rng.IntN(*receivers))
					if rng.IntN(10) < 6 {
						b = w.frame(b, &protocol.Request{Op: protocol.OpBind, Receiver: r, Ephemeral: rng.IntN(10) == 0})
						binds.Add(1)
					} else {
						b = w.frame(b, &protocol.Request{Op: protocol.OpUnbind, Receiver: r})
						unbinds.Add(1)
					}
				}
				if err := w.write(b); err != nil {
					return
				}
				for range *batch {
					select {
					case <-replies[i]:
					case <-time.After(30 * time.Second):
						fmt.Println("storm: a session waited 30 s for replies")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("storm over: %d binds, %d unbinds (%d not bound), %d takeover notices\n", binds.Load(), unbinds.Load(), notFound.Load(), takeovers.Load())
	// Wait for the timers to end, then collect every backlog.
	for !o.over() {
		s, err := adm.stats()
		if err != nil || s.Timers == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Println(mon.Stop())
	drain, err := session(o.addr, "drain", "")
	if err != nil {
		return err
	}
	defer drain.c.Close()
	drain.onPush = record
	for r := range *receivers {
		m, err := drain.call(&protocol.Request{Op: protocol.OpBind, Receiver: uint64(20000 + r)}, 10*time.Second)
		if err != nil {
			return err
		}
		record(&m)
	}
	for {
		m, err := drain.read(time.Now().Add(time.Second))
		if err != nil {
			break
		}
		record(&m)
	}
	s1, _ := adm.stats()
	var missing, dup uint64
	for r := range seen {
		for q := uint64(1); q <= total; q++ {
			switch c := seen[r][q]; {
			case c == 0:
				missing++
			case c > 1:
				dup += uint64(c - 1)
			}
		}
	}
	fmt.Printf("events expected %d (%d receivers x %d timers x %d firings): missing %d, duplicated %d, seq past the end %d, other receivers %d\n",
		uint64(*receivers)*total, *receivers, *timersPer, repeat, missing, dup, beyond.Load(), foreign.Load())
	fmt.Printf("dropped reported by binds %d; the server's dropped_total rose by %d; fired_total rose by %d\n",
		droppedReported.Load(), s1.DroppedTotal-s0.DroppedTotal, s1.FiredTotal-s0.FiredTotal)
	o.status("after:")
	return nil
}

// ---------------------------------------------------------------- ff

// cmdFF fast-forwards by -ticks with busy timers, and follows another
// session's round trips meanwhile.
func cmdFF(o *opts, fs *flag.FlagSet, args []string) error {
	timers := fs.Int("timers", 2000, "timers firing every tick")
	ticks := fs.Uint64("ticks", 1<<40, "fast-forward by this many ticks")
	duration := fs.Duration("duration", 20*time.Second, "how long to watch before cancelling the timers")
	bound := fs.Bool("bound", true, "the busy receiver is bound by a reading session (else its events go to the backlog)")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *timers > 100000 || *duration > 90*time.Second {
		return fmt.Errorf("bounds: -timers <= 100000, -duration <= 90s")
	}
	o.status("before:")
	adm, err := session(o.addr, "admin", o.token)
	if err != nil {
		return err
	}
	defer adm.c.Close()
	const busyRecv = 30000
	var busyEvents atomic.Int64
	var busyBackward atomic.Int64
	if *bound {
		busy, err := session(o.addr, "busy", "")
		if err != nil {
			return err
		}
		defer busy.c.Close()
		if _, err := busy.call(&protocol.Request{Op: protocol.OpBind, Receiver: busyRecv}, 10*time.Second); err != nil {
			return err
		}
		go func() {
			var last uint64
			for {
				m, err := busy.read(time.Time{})
				if err != nil {
					return
				}
				if m.Kind == protocol.KindFire {
					busyEvents.Add(1)
					if m.Fire.Seq <= last {
						busyBackward.Add(1)
					}
					last = m.Fire.Seq
				}
			}
		}()
	}
	if _, fe, err := addTimers(adm, busyRecv, *timers, nil, 1, 1, 0); err != nil || fe != "" {
		return fmt.Errorf("add: %v %s", err, fe)
	}
	ffw, err := session(o.addr, "ff", o.token)
	if err != nil {
		return err
	}
	defer ffw.c.Close()
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	// A victim session works meanwhile: add, get, cancel round trips.
	victim, err := session(o.addr, "victim", "")
	if err != nil {
		return err
	}
	defer victim.c.Close()
	var vrtt []time.Duration
	var verr []string
	vstop := make(chan struct{})
	vdone := make(chan struct{})
	go func() {
		defer close(vdone)
		for i := uint64(1); ; i++ {
			select {
			case <-vstop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, r := range []protocol.Request{
				{Op: protocol.OpAdd, Receiver: 31000, Tid: i, After: 100},
				{Op: protocol.OpGet, Receiver: 31000, Tid: i},
				{Op: protocol.OpCancel, Receiver: 31000, Tid: i},
			} {
				t := time.Now()
				m, err := victim.call(&r, 30*time.Second)
				if err != nil {
					verr = append(verr, err.Error())
					return
				}
				if m.Kind != protocol.KindOK {
					verr = append(verr, fmt.Sprintf("%v %s", r.Op, m.Text))
				}
				vrtt = append(vrtt, time.Since(t))
			}
		}
	}()
	cpu0 := cpuSec(o.pid)
	ffStart := time.Now()
	if err := ffw.write(ffw.frame(nil, &protocol.Request{Op: protocol.OpFastForward, Ticks: *ticks})); err != nil {
		return err
	}
	ffReply := make(chan string, 1)
	go func() {
		m, err := ffw.reply(ffw.id, time.Now().Add(*duration+40*time.Second))
		switch {
		case err != nil:
			ffReply <- "no reply: " + err.Error()
		case m.Kind == protocol.KindOK:
			v, _ := protocol.DecodeUints(m.Result, nil)
			ffReply <- fmt.Sprintf("ok %v after %v", v, time.Since(ffStart).Round(time.Millisecond))
		default:
			ffReply <- fmt.Sprintf("error %v %s", m.Code, m.Text)
		}
	}()
	smp := startSampler(o.pid)
	var got string
	for i := 0; i < int(*duration/time.Second) && got == ""; i++ {
		select {
		case got = <-ffReply:
		case <-time.After(time.Second):
		}
		s, _ := adm.stats()
		fmt.Printf("t=%ds rss=%.1f MiB cpu=%.1fs lag=%d fired_total=%d dropped_total=%d backlog=%d busy_events=%d\n",
			i+1, rssMiB(o.pid), cpuSec(o.pid)-cpu0, s.Lag, s.FiredTotal, s.DroppedTotal, s.BacklogEvents, busyEvents.Load())
	}
	close(vstop)
	<-vdone
	fmt.Println(mon.Stop())
	fmt.Printf("victim add/get/cancel round trips: %s errors=%d %v\n", durStats(vrtt), len(verr), first(verr, 2))
	if got == "" {
		t := time.Now()
		m, err := adm.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: busyRecv}, 30*time.Second)
		fmt.Printf("cancel_all of the busy timers: %v %v in %v\n", m.Kind, err, time.Since(t).Round(time.Millisecond))
		select {
		case got = <-ffReply:
		case <-time.After(30 * time.Second):
			got = "no reply 30 s after the cancel"
		}
		fmt.Printf("the fast-forward's reply, %v after cancelling: %s\n", time.Since(t).Round(time.Millisecond), got)
	} else {
		fmt.Println("fast-forward reply:", got)
		_, _ = adm.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: busyRecv}, 30*time.Second)
	}
	s, _ := adm.stats()
	fmt.Printf("after: lag=%d timers=%d backlog=%d busy seq going backwards %d peak rss %.1f MiB\n", s.Lag, s.Timers, s.BacklogEvents, busyBackward.Load(), smp.Stop())
	o.status("after:")
	return nil
}

// ---------------------------------------------------------------- churn

// cmdChurn opens and closes connections in many ways, then checks that the
// server is back to its baseline.
func cmdChurn(o *opts, fs *flag.FlagSet, args []string) error {
	total := fs.Int("total", 20000, "connections in all")
	conc := fs.Int("conc", 200, "at once")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *total > 200000 || *conc > 2000 {
		return fmt.Errorf("bounds: -total <= 200000, -conc <= 2000")
	}
	adm, err := session(o.addr, "admin", o.token)
	if err != nil {
		return err
	}
	defer adm.c.Close()
	s0, _ := adm.stats()
	o.status(fmt.Sprintf("before (sessions %d):", s0.Sessions))
	rss0 := rssMiB(o.pid)
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	smp := startSampler(o.pid)
	kinds := []string{"close at once", "RST at once", "hello, close", "hello, bind, add, read 10 ms, RST", "half a hello, close", "hello, 100 pings unread, close"}
	var counts [6]atomic.Int64
	var fails atomic.Int64
	idx := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				k := i % len(kinds)
				c, err := net.DialTimeout("tcp", o.addr, 5*time.Second)
				if err != nil {
					fails.Add(1)
					continue
				}
				w := &wire{c: c, r: bufio.NewReaderSize(c, 4096)}
				switch k {
				case 1:
					lingerZero(c)
				case 2:
					if w.hello("churn", "") != nil {
						fails.Add(1)
					}
				case 3:
					if w.hello("churn", "") == nil {
						r := uint64(40000 + i%500)
						var b []byte
						b = w.frame(b, &protocol.Request{Op: protocol.OpBind, Receiver: r})
						b = w.frame(b, &protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: uint64(i), After: 1, Every: 1, Repeat: 50, Replace: true})
						_ = w.write(b)
						_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
						var sink [4096]byte
						for {
							if _, err := c.Read(sink[:]); err != nil {
								break
							}
						}
					}
					lingerZero(c)
				case 4:
					_ = w.write(helloFrame("churn", "")[:7])
				case 5:
					if w.hello("churn", "") == nil {
						var b []byte
						for range 100 {
							b = w.frame(b, &protocol.Request{Op: protocol.OpPing})
						}
						_ = w.write(b)
					}
				}
				c.Close()
				counts[k].Add(1)
			}
		}()
	}
	for i := range *total {
		if o.over() {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	el := time.Since(start)
	peak := smp.Stop()
	fmt.Println(mon.Stop())
	for k, name := range kinds {
		fmt.Printf("  %-40s %d\n", name, counts[k].Load())
	}
	fmt.Printf("%d connections in %v (%.0f/s), %d failed; peak rss %.1f MiB (before %.1f)\n", *total, el.Round(time.Millisecond), float64(*total)/el.Seconds(), fails.Load(), peak, rss0)
	time.Sleep(2 * time.Second)
	s1, err := adm.stats()
	fmt.Printf("after 2 s: sessions %d (before %d), stats err %v\n", s1.Sessions, s0.Sessions, err)
	for r := range 500 {
		_, _ = adm.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: uint64(40000 + r)}, 10*time.Second)
	}
	o.status("after:")
	return nil
}

// ---------------------------------------------------------------- liststall

// cmdListStall has one reading client page through a large receiver as
// fast as it can with a small page size, and measures another session's
// round trips meanwhile.
func cmdListStall(o *opts, fs *flag.FlagSet, args []string) error {
	timers := fs.Int("timers", 100000, "timers on the receiver")
	limit := fs.Uint64("limit", 1, "list page size asked for")
	duration := fs.Duration("duration", 10*time.Second, "how long to list")
	batch := fs.Int("batch", 2000, "list requests per write")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *timers > 100000 || *duration > 90*time.Second || *batch > 100000 {
		return fmt.Errorf("bounds: -timers <= 100000, -duration <= 90s, -batch <= 100000")
	}
	o.status("before:")
	setup, err := session(o.addr, "setup", "")
	if err != nil {
		return err
	}
	defer setup.c.Close()
	const recv = 50000
	ok, fe, err := addTimers(setup, recv, *timers, nil, 1_000_000_000, 0, 1)
	if err != nil {
		return err
	}
	fmt.Printf("added %d timers (first error %q)\n", ok, fe)
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	fmt.Println("baseline", mon.Stop())
	mon, err = startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	a, err := session(o.addr, "lister", "")
	if err != nil {
		return err
	}
	defer a.c.Close()
	var replies atomic.Int64
	go func() {
		for {
			m, err := a.read(time.Time{})
			if err != nil {
				return
			}
			if m.Kind == protocol.KindOK || m.Kind == protocol.KindError {
				replies.Add(1)
			}
		}
	}()
	end := time.Now().Add(*duration)
	sent := 0
	for time.Now().Before(end) && !o.over() {
		var b []byte
		for range *batch {
			b = a.frame(b, &protocol.Request{Op: protocol.OpList, Receiver: recv, FromTid: uint64(1 + sent%*timers), Limit: *limit})
			sent++
		}
		if err := a.write(b); err != nil {
			break
		}
		for replies.Load() < int64(sent-*batch) && time.Now().Before(end) { // keep a batch in flight
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Printf("attack: %d list requests sent, %d replies read in %v; %d bytes per request\n", sent, replies.Load(), *duration, len(protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpList, ID: 100000, Receiver: recv, FromTid: 50000, Limit: *limit})))
	fmt.Println("during the attack", mon.Stop())
	_, _ = setup.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: recv}, 30*time.Second)
	o.status("after:")
	return nil
}

// ---------------------------------------------------------------- overload

// cmdOverload has one non-admin client add timers firing every tick to
// unbound receivers, and follows a victim's periodic timer meanwhile.
func cmdOverload(o *opts, fs *flag.FlagSet, args []string) error {
	timers := fs.Int("timers", 1000000, "attacking timers, each firing every tick")
	duration := fs.Duration("duration", 20*time.Second, "how long to watch")
	period := fs.Uint64("period", 20, "the victim's timer period, ticks")
	tick := fs.Duration("tick", 10*time.Millisecond, "the server's tick")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *timers > 10_000_000 || *duration > 90*time.Second {
		return fmt.Errorf("bounds: -timers <= 10000000, -duration <= 90s")
	}
	o.status("before:")
	adm, err := session(o.addr, "admin", o.token)
	if err != nil {
		return err
	}
	defer adm.c.Close()
	victim, err := session(o.addr, "victim", "")
	if err != nil {
		return err
	}
	defer victim.c.Close()
	const vrecv = 60000
	if _, err := victim.call(&protocol.Request{Op: protocol.OpBind, Receiver: vrecv}, 10*time.Second); err != nil {
		return err
	}
	if _, err := victim.call(&protocol.Request{Op: protocol.OpAdd, Receiver: vrecv, Tid: 1, After: *period, Every: *period}, 10*time.Second); err != nil {
		return err
	}
	type arrival struct {
		at   time.Time
		tick uint64
	}
	var amu sync.Mutex
	var arrivals []arrival
	go func() {
		for {
			m, err := victim.read(time.Time{})
			if err != nil {
				return
			}
			if m.Kind == protocol.KindFire {
				amu.Lock()
				arrivals = append(arrivals, arrival{time.Now(), m.Fire.Tick})
				amu.Unlock()
			}
		}
	}()
	att, err := session(o.addr, "attacker", "")
	if err != nil {
		return err
	}
	defer att.c.Close()
	start := time.Now()
	added := 0
	perRecv := 100000
	for r := 0; added < *timers && !o.over(); r++ {
		n := min(perRecv, *timers-added)
		ok, fe, err := addTimers(att, uint64(61000+r), n, nil, 1, 1, 0)
		added += ok
		if err != nil || fe != "" {
			fmt.Printf("add stopped: %v %s\n", err, fe)
			break
		}
	}
	fmt.Printf("attacker added %d timers firing every tick in %v\n", added, time.Since(start).Round(time.Millisecond))
	smp := startSampler(o.pid)
	mon, err := startMonitor(o.addr, "", 20*time.Millisecond)
	if err != nil {
		return err
	}
	for i := 0; i < int(*duration/time.Second) && !o.over(); i++ {
		time.Sleep(time.Second)
		s, _ := adm.stats()
		amu.Lock()
		var late time.Duration
		if n := len(arrivals); n > 1 {
			// How far the last arrival trails the first one's schedule.
			a0, a1 := arrivals[0], arrivals[n-1]
			late = a1.at.Sub(a0.at) - time.Duration(a1.tick-a0.tick)*(*tick)
		}
		nArr := len(arrivals)
		amu.Unlock()
		fmt.Printf("t=%ds rss=%.1f MiB lag=%d ticks fired_total=%d dropped_total=%d victim events=%d, last one %v behind schedule\n",
			i+1, rssMiB(o.pid), s.Lag, s.FiredTotal, s.DroppedTotal, nArr, late.Round(time.Millisecond))
	}
	fmt.Println(mon.Stop())
	t := time.Now()
	for r := 0; r*perRecv < added; r++ {
		_, _ = att.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: uint64(61000 + r)}, 60*time.Second)
	}
	fmt.Printf("cancelled in %v; peak rss %.1f MiB\n", time.Since(t).Round(time.Millisecond), smp.Stop())
	o.status("after:")
	return nil
}
