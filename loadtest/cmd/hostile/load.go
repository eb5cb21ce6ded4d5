package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// Red-team commands that load the server: bind storms, fast-forwards over
// busy timers, connection churn, list stalls and timer overload.

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
