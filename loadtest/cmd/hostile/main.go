// Command hostile plays hostile and careless clients against a running
// tickwheel server on loopback, and prints what the server held and how it
// answered: the measurements of docs/RELIABILITY.md and the red-team runs.
// Every run is bounded in count and time (-timeout caps the whole run).
//
//	hostile hold     -addr A -pid P -n 5000 [-hello] [-declare 65536 -send 65535] [-hold 13s]
//	hostile list     -addr A -pid P -timers 10000 -data 4096 -requests 100
//	hostile noread   -addr A -pid P -token-file F [-sessions 1] -receivers 1 -timers 100 -data 4096
//	hostile binds    -addr A -pid P -receivers 10000 -binds 200000
//	hostile rst      -addr A -pid P -token-file F -clients 200 -duration 30s
//	hostile garbage  -addr A -pid P -conns 2000
//	hostile hellos   -addr A -pid P -conns 50 -hellos 2000
//	hostile storm    -addr A -pid P -token-file F -sessions 8 -receivers 200 -duration 20s
//	hostile ff       -addr A -pid P -token-file F -timers 2000 -ticks 1099511627776
//	hostile churn    -addr A -pid P -token-file F -total 20000 -conc 200
//	hostile liststall -addr A -pid P -timers 100000 -limit 1 -duration 10s
//	hostile overload -addr A -pid P -token-file F -timers 1000000 -duration 20s
//	hostile timers   -addr A -pid P -n 1000000 [-per 100000] [-data 0]
//
// -pid is the server's process id, for its RSS (VmRSS) and open descriptors;
// -token-file its admin token (the data dir's admin.token), for stats and
// fast_forward. Traffic goes only to -addr, which must be a loopback address.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// opts are the flags every subcommand takes.
type opts struct {
	addr    string
	pid     int
	token   string
	timeout time.Duration
	ctx     context.Context
}

func main() {
	os.Exit(run(os.Args[1:]))
}

var commands = map[string]func(o *opts, fs *flag.FlagSet, args []string) error{
	"hold":      cmdHold,
	"list":      cmdList,
	"noread":    cmdNoRead,
	"binds":     cmdBinds,
	"rst":       cmdRST,
	"garbage":   cmdGarbage,
	"hellos":    cmdHellos,
	"storm":     cmdStorm,
	"ff":        cmdFF,
	"churn":     cmdChurn,
	"liststall": cmdListStall,
	"overload":  cmdOverload,
	"timers":    cmdTimers,
}

func run(args []string) int {
	if len(args) == 0 || commands[args[0]] == nil {
		fmt.Fprintln(os.Stderr, "usage: hostile hold|list|noread|binds|rst|garbage|hellos|storm|ff|churn|liststall|overload|timers [flags] (see the package doc)")
		return 2
	}
	o := &opts{}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:7420", "server address (loopback only)")
	fs.IntVar(&o.pid, "pid", 0, "server process id, for RSS and fds")
	fs.String("token-file", "", "file holding the server's admin token")
	fs.DurationVar(&o.timeout, "timeout", 115*time.Second, "cap on the whole run")
	// Each subcommand adds its flags to fs and parses them (opts.parse).
	err := commands[args[0]](o, fs, args[1:])
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "hostile:", err)
	return 1
}

// parse parses the flags and checks the address and the time cap.
func (o *opts) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f := fs.Lookup("token-file"); f != nil {
		o.token = readToken(f.Value.String())
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %s: only loopback addresses", o.addr)
	}
	if o.timeout <= 0 || o.timeout > 10*time.Minute {
		return fmt.Errorf("-timeout %v: must be in (0, 10m]", o.timeout)
	}
	var cancel context.CancelFunc
	o.ctx, cancel = context.WithTimeout(context.Background(), o.timeout)
	// Loops stop at o.ctx; a run stuck elsewhere ends shortly after.
	time.AfterFunc(o.timeout+15*time.Second, func() {
		cancel()
		fmt.Fprintln(os.Stderr, "hostile: -timeout passed; exiting")
		os.Exit(3)
	})
	return nil
}

func (o *opts) over() bool { return o.ctx.Err() != nil }

func (o *opts) status(what string) {
	fmt.Printf("%-28s rss=%.1f MiB fds=%d alive=%v\n", what, rssMiB(o.pid), fdCount(o.pid), alive(o.pid))
}

// ---------------------------------------------------------------- hold

// held is one connection of cmdHold.
type held struct {
	c       net.Conn
	first   string // served, refused, ... (with -hello)
	ended   atomic.Int64
	endKind atomic.Value // string: eof, reset, ...
	code    atomic.Int64 // error code of the last error frame read
}

// cmdHold opens n connections and holds them: idle sessions (-hello), or
// connections that never say hello, or connections that start a frame of
// -declare bytes and send -send of it (before or after hello). It follows
// the server's RSS and how many connections it keeps open.
func cmdHold(o *opts, fs *flag.FlagSet, args []string) error {
	n := fs.Int("n", 1000, "connections")
	hello := fs.Bool("hello", false, "say hello on each first")
	declare := fs.Int("declare", 0, "then send a frame header declaring this many bytes (0: none)")
	send := fs.Int("send", 0, "and this many bytes of its payload")
	hold := fs.Duration("hold", 13*time.Second, "how long to hold them after the last is open")
	conc := fs.Int("conc", 100, "connections opened at once")
	every := fs.Duration("every", time.Second, "report interval")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *n < 1 || *n > 20000 || *hold > 100*time.Second {
		return fmt.Errorf("-n 1..20000, -hold <= 100s")
	}
	rss0, fds0 := rssMiB(o.pid), fdCount(o.pid)
	fmt.Printf("before: rss=%.1f MiB fds=%d\n", rss0, fds0)
	hs := make([]*held, *n)
	var mu sync.Mutex
	counts := map[string]int{}
	var refusal string
	t0 := time.Now()
	idx := make(chan int)
	var wg sync.WaitGroup
	var hdr []byte
	if *declare > 0 {
		hdr = make([]byte, 4+*send)
		hdr[0], hdr[1], hdr[2], hdr[3] = byte(*declare>>24), byte(*declare>>16), byte(*declare>>8), byte(*declare)
	}
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				h := &held{}
				hs[i] = h
				w, err := dial(o.addr)
				if err != nil {
					h.first = "dial failed"
				} else {
					h.c = w.c
					h.first = "open"
					if *hello {
						m, err := w.call(&protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "idle"}, 10*time.Second)
						switch {
						case err != nil:
							h.first = "no reply: " + classify(err)
						case m.Kind == protocol.KindOK:
							h.first = "served"
						case m.Code == protocol.CodeLimitExceeded:
							h.first = "refused (limit_exceeded)"
							mu.Lock()
							refusal = m.Text
							mu.Unlock()
						default:
							h.first = fmt.Sprintf("error %v", m.Code)
						}
					}
					if hdr != nil && (h.first == "open" || h.first == "served") {
						if err := w.write(hdr); err != nil {
							h.first += ", partial frame not sent"
						}
					}
				}
				mu.Lock()
				counts[h.first]++
				mu.Unlock()
			}
		}()
	}
	for i := range *n {
		if o.over() {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	opened := time.Since(t0)
	fmt.Printf("opened %d in %v: %v\n", *n, opened.Round(time.Millisecond), counts)
	if refusal != "" {
		fmt.Printf("refusal frame: %q\n", refusal)
	}
	// Read each connection until the server closes it.
	for _, h := range hs {
		if h == nil || h.c == nil {
			continue
		}
		go func() {
			w := &wire{c: h.c, r: bufio.NewReaderSize(h.c, 512)}
			for {
				m, err := w.read(time.Time{})
				if err != nil {
					h.endKind.Store(classify(err))
					h.ended.Store(int64(time.Since(t0)))
					return
				}
				if m.Kind == protocol.KindError {
					h.code.Store(int64(m.Code))
				}
			}
		}()
	}
	openNow := func() (open int, codes map[string]int) {
		codes = map[string]int{}
		for _, h := range hs {
			if h == nil || h.c == nil {
				continue
			}
			if h.ended.Load() == 0 {
				open++
				continue
			}
			k, _ := h.endKind.Load().(string)
			codes[fmt.Sprintf("%s code=%d", k, h.code.Load())]++
		}
		return
	}
	time.Sleep(time.Second)
	rss1 := rssMiB(o.pid)
	open, _ := openNow()
	fmt.Printf("settled (t=%v): rss=%.1f MiB (+%.1f MiB, %.1f KiB per connection) fds=%d open=%d\n",
		time.Since(t0).Round(100*time.Millisecond), rss1, rss1-rss0, (rss1-rss0)*1024/float64(*n), fdCount(o.pid), open)
	end := t0.Add(opened + *hold)
	for time.Now().Before(end) && !o.over() {
		time.Sleep(min(*every, time.Until(end)))
		open, codes := openNow()
		fmt.Printf("t=%5.1fs open=%d rss=%.1f MiB fds=%d closed=%v\n", time.Since(t0).Seconds(), open, rssMiB(o.pid), fdCount(o.pid), codes)
	}
	var firstEnd, lastEnd time.Duration
	for _, h := range hs {
		if h == nil || h.c == nil {
			continue
		}
		if e := time.Duration(h.ended.Load()); e > 0 {
			if firstEnd == 0 || e < firstEnd {
				firstEnd = e
			}
			lastEnd = max(lastEnd, e)
		}
		h.c.Close()
	}
	fmt.Printf("closed by the server between t=%v and t=%v (t from the first dial); peak rss (VmHWM) %.1f MiB\n", firstEnd.Round(10*time.Millisecond), lastEnd.Round(10*time.Millisecond), hwmMiB(o.pid))
	time.Sleep(time.Second)
	o.status("after closing all:")
	return nil
}

// ---------------------------------------------------------------- list

func addTimers(w *wire, receiver uint64, n int, data []byte, after, every uint64, repeat uint64) (int, string, error) {
	reqs := make([]protocol.Request, n)
	for i := range reqs {
		reqs[i] = protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: uint64(i + 1), After: after, Every: every, Repeat: repeat, Data: data}
	}
	return w.pipeline(reqs, 500, 60*time.Second)
}

// cmdList fills a receiver with timers, then has clients send list
// requests and never read the replies.
func cmdList(o *opts, fs *flag.FlagSet, args []string) error {
	timers := fs.Int("timers", 10000, "timers on the receiver")
	size := fs.Int("data", 4096, "bytes of data per timer")
	requests := fs.Int("requests", 100, "list requests per attacking connection, never read")
	conns := fs.Int("conns", 1, "attacking connections")
	hold := fs.Duration("hold", 10*time.Second, "how long to hold")
	drain := fs.Bool("drain", false, "read the replies after all, then stay connected and idle")
	pad := fs.Int("pad", 0, "after the list requests, this many bytes of pings (held unread by the server while it is blocked)")
	trickle := fs.Duration("trickle", 0, "then write one byte every -trickle-every on each attacking connection for this long (at most 90,000 bytes)")
	trickleEvery := fs.Duration("trickle-every", time.Millisecond, "see -trickle")
	churn := fs.Int("churn", 0, "after the hold, add and cancel this many timers with -data bytes (makes the server's GC run)")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *requests > 100000 || *conns > 1000 || *timers > 100000 {
		return fmt.Errorf("bounds: -requests <= 100000, -conns <= 1000, -timers <= 100000")
	}
	o.status("before:")
	w, err := session(o.addr, "setup", o.token)
	if err != nil {
		return err
	}
	defer w.c.Close()
	const recv = 77
	ok, fe, err := addTimers(w, recv, *timers, make([]byte, *size), 1_000_000_000, 0, 1)
	if err != nil {
		return err
	}
	fmt.Printf("added %d timers x %d B (first error: %q)\n", ok, *size, fe)
	time.Sleep(500 * time.Millisecond)
	o.status("after adding:")
	rssSetup := rssMiB(o.pid)
	smp := startSampler(o.pid)
	mon, err := startMonitor(o.addr, "", 50*time.Millisecond)
	if err != nil {
		return err
	}
	var att []*wire
	var drained atomic.Int64
	for range *conns {
		a, err := session(o.addr, "lister", "")
		if err != nil {
			return err
		}
		att = append(att, a)
		var b []byte
		for range *requests {
			b = a.frame(b, &protocol.Request{Op: protocol.OpList, Receiver: recv})
		}
		for lists := len(b); len(b)-lists < *pad; {
			b = a.frame(b, &protocol.Request{Op: protocol.OpPing})
		}
		go func() { _ = a.write(b) }() // the server stops reading: this may block
		if *drain {
			go func() {
				for range *requests {
					if _, err := a.read(time.Now().Add(time.Minute)); err != nil {
						return
					}
				}
				drained.Add(1)
			}()
		}
	}
	if *drain {
		time.Sleep(2 * time.Second)
		fmt.Printf("%d connection(s) read all %d replies and stay idle\n", drained.Load(), *requests)
	}
	fmt.Printf("%d connection(s) sent %d list requests each (%d bytes each)\n", *conns, *requests, len(protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpList, Receiver: recv, ID: 100})))
	for i := 0; i < int(*hold/time.Second) && !o.over(); i++ {
		time.Sleep(time.Second)
		fmt.Printf("t=%ds rss=%.1f MiB\n", i+1, rssMiB(o.pid))
	}
	peak := smp.Stop()
	fmt.Println(mon.Stop())
	fmt.Printf("peak rss %.1f MiB: +%.1f MiB over the setup's %.1f MiB\n", peak, peak-rssSetup, rssSetup)
	if *trickle > 0 {
		mon, err = startMonitor(o.addr, "", 50*time.Millisecond)
		if err != nil {
			return err
		}
		cpu0, t0 := cpuSec(o.pid), time.Now()
		var wg sync.WaitGroup
		var sent atomic.Int64
		ping := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpPing, ID: 9})
		for _, a := range att {
			wg.Add(1)
			go func() {
				defer wg.Done()
				end := time.Now().Add(*trickle)
				for i := 0; i < 90000 && time.Now().Before(end) && !o.over(); i++ {
					if err := a.write(ping[i%len(ping) : i%len(ping)+1]); err != nil {
						return
					}
					sent.Add(1)
					time.Sleep(*trickleEvery)
				}
			}()
		}
		wg.Wait()
		el := time.Since(t0)
		fmt.Printf("trickle: %d one-byte writes in %v; server cpu %.1fs (%.0f%%); rss %.1f MiB\n", sent.Load(), el.Round(time.Millisecond), cpuSec(o.pid)-cpu0, 100*(cpuSec(o.pid)-cpu0)/el.Seconds(), rssMiB(o.pid))
		fmt.Println("during the trickle", mon.Stop())
	}
	if *churn > 0 {
		var reqs []protocol.Request
		for i := range *churn {
			reqs = append(reqs, protocol.Request{Op: protocol.OpAdd, Receiver: recv + 1, Tid: uint64(i), After: 1_000_000, Data: make([]byte, *size)},
				protocol.Request{Op: protocol.OpCancel, Receiver: recv + 1, Tid: uint64(i)})
		}
		_, fe, err := w.pipeline(reqs, 1000, time.Minute)
		fmt.Printf("churned %d add+cancel (%v %s): rss=%.1f MiB\n", *churn, err, fe, rssMiB(o.pid))
	}
	for _, a := range att {
		a.c.Close()
	}
	_, _ = w.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: recv}, 10*time.Second)
	time.Sleep(time.Second)
	o.status("after cleanup:")
	return nil
}

// ---------------------------------------------------------------- noread

// cmdNoRead binds receivers whose timers fire every tick into sessions
// that never read.
func cmdNoRead(o *opts, fs *flag.FlagSet, args []string) error {
	sessions := fs.Int("sessions", 1, "sessions that never read")
	receivers := fs.Int("receivers", 1, "receivers bound by each non-reading session")
	timers := fs.Int("timers", 100, "timers per receiver, each firing every tick")
	size := fs.Int("data", 4096, "bytes of data per timer")
	hold := fs.Duration("hold", 20*time.Second, "how long to hold")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *sessions < 1 || *sessions > 1000 || *receivers > 1000 || *timers > 10000 || *hold > 100*time.Second {
		return fmt.Errorf("bounds: 1 <= -sessions <= 1000, -receivers <= 1000, -timers <= 10000, -hold <= 100s")
	}
	all := *sessions * *receivers // receiver 1000+k*receivers+r is the r-th of session k
	o.status("before:")
	rss0 := rssMiB(o.pid)
	adm, err := session(o.addr, "admin", o.token)
	if err != nil {
		return err
	}
	defer adm.c.Close()
	var readers []*wire
	defer func() {
		for _, a := range readers {
			a.c.Close()
		}
	}()
	for k := range *sessions {
		a, err := session(o.addr, "noreader", "")
		if err != nil {
			return err
		}
		readers = append(readers, a)
		var reqs []protocol.Request
		for r := range *receivers {
			reqs = append(reqs, protocol.Request{Op: protocol.OpBind, Receiver: uint64(1000 + k**receivers + r)})
		}
		if _, fe, err := a.pipeline(reqs, 500, 30*time.Second); err != nil || fe != "" {
			return fmt.Errorf("bind: %v %s", err, fe)
		}
	}
	data := make([]byte, *size)
	// Timers are added by the admin session, so the attacker reads nothing
	// after its binds.
	added := 0
	for r := range all {
		ok, fe, err := addTimers(adm, uint64(1000+r), *timers, data, 1, 1, 0)
		if err != nil || fe != "" {
			return fmt.Errorf("add: %v %s", err, fe)
		}
		added += ok
	}
	fmt.Printf("%d sessions x %d receivers x %d timers x %d B, every tick, into sessions that never read\n", *sessions, *receivers, *timers, *size)
	smp := startSampler(o.pid)
	mon, err := startMonitor(o.addr, "", 50*time.Millisecond)
	if err != nil {
		return err
	}
	for i := 0; i < int(*hold/time.Second) && !o.over(); i++ {
		time.Sleep(time.Second)
		s, _ := adm.stats()
		fmt.Printf("t=%ds rss=%.1f MiB backlog_events=%d dropped_total=%d fired_total=%d lag=%d\n", i+1, rssMiB(o.pid), s.BacklogEvents, s.DroppedTotal, s.FiredTotal, s.Lag)
	}
	peak := smp.Stop()
	fmt.Println(mon.Stop())
	fmt.Printf("peak rss %.1f MiB (+%.1f MiB over %.1f MiB before)\n", peak, peak-rss0, rss0)
	for r := range all {
		_, _ = adm.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: uint64(1000 + r)}, 10*time.Second)
	}
	for _, a := range readers {
		lingerZero(a.c)
		a.c.Close()
	}
	readers = nil
	time.Sleep(time.Second)
	fmt.Printf("after closing the sessions: rss=%.1f MiB\n", rssMiB(o.pid))
	s, _ := adm.stats()
	fmt.Printf("after cleanup: backlog_events=%d timers=%d sessions=%d\n", s.BacklogEvents, s.Timers, s.Sessions)
	// The receivers are unbound now; their backlogs stay until bound again.
	var drain []protocol.Request
	for r := range all {
		drain = append(drain, protocol.Request{Op: protocol.OpBind, Receiver: uint64(1000 + r)})
	}
	d, err := session(o.addr, "drain", "")
	if err == nil {
		var fires int
		d.onPush = func(*protocol.Message) { fires++ }
		_, _, _ = d.pipeline(drain, 500, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		d.c.Close()
	}
	time.Sleep(time.Second)
	s, _ = adm.stats()
	fmt.Printf("after draining: backlog_events=%d\n", s.BacklogEvents)
	o.status("after cleanup:")
	return nil
}

// ---------------------------------------------------------------- binds

// cmdBinds passes receivers back and forth between two sessions.
func cmdBinds(o *opts, fs *flag.FlagSet, args []string) error {
	receivers := fs.Int("receivers", 10000, "receivers")
	binds := fs.Int("binds", 200000, "binds in all")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *binds > 2_000_000 || *receivers > 100000 {
		return fmt.Errorf("bounds: -binds <= 2000000, -receivers <= 100000")
	}
	var ws [2]*wire
	var takeovers [2]atomic.Int64
	for i := range ws {
		w, err := session(o.addr, fmt.Sprintf("binder-%d", i), "")
		if err != nil {
			return err
		}
		defer w.c.Close()
		ws[i] = w
	}
	// Each session's replies and takeover notices are read by its own
	// goroutine; the other session's notices arrive while it binds.
	type result struct{ ok, fail int }
	replies := [2]chan result{make(chan result, 1), make(chan result, 1)}
	want := [2]chan int{make(chan int, 1), make(chan int, 1)}
	for i, w := range ws {
		go func() {
			for n := range want[i] {
				var r result
				for r.ok+r.fail < n {
					m, err := w.read(time.Now().Add(60 * time.Second))
					if err != nil {
						replies[i] <- r
						return
					}
					switch m.Kind {
					case protocol.KindOK:
						r.ok++
					case protocol.KindError:
						r.fail++
					case protocol.KindTakeover:
						takeovers[i].Add(1)
					}
				}
				replies[i] <- r
			}
		}()
	}
	start := time.Now()
	done, fails := 0, 0
	for round := 0; done < *binds && !o.over(); round++ {
		i := round % 2
		n := min(*receivers, *binds-done)
		want[i] <- n
		var b []byte
		for r := range n {
			b = ws[i].frame(b, &protocol.Request{Op: protocol.OpBind, Receiver: uint64(5000 + r)})
		}
		if err := ws[i].write(b); err != nil {
			return err
		}
		r := <-replies[i]
		done += r.ok + r.fail
		fails += r.fail
		if r.ok+r.fail < n {
			return fmt.Errorf("round %d: %d replies of %d", round, r.ok+r.fail, n)
		}
	}
	el := time.Since(start)
	close(want[0])
	close(want[1])
	time.Sleep(200 * time.Millisecond)
	fmt.Printf("%d binds (%d failed) of %d receivers in %v (%.0f/s); takeover notices read: %d + %d\n",
		done, fails, *receivers, el.Round(time.Millisecond), float64(done)/el.Seconds(), takeovers[0].Load(), takeovers[1].Load())
	return nil
}

// ---------------------------------------------------------------- timers

// cmdTimers adds timers that do not fire during the run (no data unless
// -data), spread over receivers of -per timers, and reports the RSS they
// cost.
func cmdTimers(o *opts, fs *flag.FlagSet, args []string) error {
	n := fs.Int("n", 1000000, "timers")
	per := fs.Int("per", 100000, "timers per receiver")
	size := fs.Int("data", 0, "bytes of data per timer")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if *n > 10_000_000 || *per < 1 {
		return fmt.Errorf("bounds: -n <= 10000000, -per >= 1")
	}
	w, err := session(o.addr, "timers", "")
	if err != nil {
		return err
	}
	defer w.c.Close()
	rss0 := rssMiB(o.pid)
	start := time.Now()
	var data []byte
	if *size > 0 {
		data = make([]byte, *size)
	}
	added := 0
	for r := 0; added < *n && !o.over(); r++ {
		ok, fe, err := addTimers(w, uint64(70000+r), min(*per, *n-added), data, 1_000_000_000, 0, 1)
		added += ok
		if err != nil || fe != "" {
			fmt.Printf("stopped: %v %s\n", err, fe)
			break
		}
	}
	el := time.Since(start)
	time.Sleep(time.Second)
	rss1 := rssMiB(o.pid)
	fmt.Printf("added %d timers (%d per receiver, %d B data) in %v: rss %.1f -> %.1f MiB, %.0f B per timer (peak %.1f MiB)\n",
		added, *per, *size, el.Round(time.Millisecond), rss0, rss1, (rss1-rss0)*1024*1024/float64(added), hwmMiB(o.pid))
	for r := 0; r*(*per) < added; r++ {
		_, _ = w.call(&protocol.Request{Op: protocol.OpCancelAll, Receiver: uint64(70000 + r)}, time.Minute)
	}
	return nil
}
