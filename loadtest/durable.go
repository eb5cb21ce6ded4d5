package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Persistence modes of a spawned server (-persist): "off" keeps its state
// in memory (-data-dir ""); "no", "everysec" and "always" keep it in a
// temporary data directory with that fsync policy.
var PersistModes = []string{"off", "no", "everysec", "always"}

// PersistArgs returns the server flags for a persistence mode, with dir
// the data directory for a durable one. A spawned server is always given
// -data-dir, so that it never writes ./tickwheel-data where it runs.
func PersistArgs(mode, dir string) ([]string, error) {
	switch mode {
	case "off":
		return []string{"-data-dir", ""}, nil
	case "no", "everysec", "always":
		if dir == "" {
			return nil, fmt.Errorf("persistence %s needs a data directory", mode)
		}
		return []string{"-data-dir", dir, "-fsync", mode}, nil
	}
	return nil, fmt.Errorf("persistence %q: want off, no, everysec or always", mode)
}

// Preload adds n timers without data, due 1 hour to 1 week from now, over
// conns connections, for receivers no scenario uses, without binding them:
// they stay in the server (and in its snapshots) for the whole run and
// never fire within it. It returns the adds per second.
func Preload(ctx context.Context, addr, token string, n, conns int) (float64, error) {
	t := &TickwheelTarget{Addr: addr, Token: token, NoBind: true}
	if err := t.Open(ctx, conns, func(int, *Delivery) {}); err != nil {
		return 0, err
	}
	defer t.Close()
	per := preloadPlan(n, conns)
	t0 := Now()
	r, err := addAll(ctx, t, per)
	el := Now() - t0
	if err == nil && r.OK != n {
		err = fmt.Errorf("preload: %d of %d adds accepted: %v", r.OK, n, r.Errors)
	}
	return float64(n) / (float64(el) / 1e9), err
}

// preloadPlan is n timers over conns workers, due 1 hour to 1 week away,
// for receivers 1<<40 + 0..999 (1000 receivers: at most 100k timers each,
// the default max_timers_per_receiver, up to 100M timers).
func preloadPlan(n, conns int) [][]Timer {
	now := Now()
	span := int64(7*24*time.Hour - time.Hour)
	per := make([][]Timer, conns)
	for i := range n {
		due := now + int64(time.Hour) + int64(float64(span)*float64(i)/float64(max(n, 1)))
		w := i % conns
		per[w] = append(per[w], Timer{Receiver: 1<<40 | uint64(i%1000), Tid: uint64(i/1000 + 1), Due: due, Repeat: 1})
	}
	return per
}

// logBuffer keeps a spawned server's log lines (and copies them to an
// optional writer) so that its reports can be read back.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	if l.out != nil {
		_, _ = l.out.Write(p)
	}
	return len(p), nil
}

// lines returns the log lines holding msg, as key=value maps.
func (l *logBuffer) lines(msg string) []map[string]string {
	return l.linesWith(`msg="` + msg)
}

// linesWith returns the log lines holding sub, as key=value maps.
func (l *logBuffer) linesWith(sub string) []map[string]string {
	l.mu.Lock()
	data := append([]byte(nil), l.buf.Bytes()...)
	l.mu.Unlock()
	var out []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, parseLogLine(sc.Text()))
		}
	}
	return out
}

// parseLogLine splits a slog text line into its key=value pairs (quoted
// values unquoted).
func parseLogLine(line string) map[string]string {
	m := map[string]string{}
	for len(line) > 0 {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		m[k] = v
		line = rest
	}
	return m
}

// RecoveryParams configure Recovery.
type RecoveryParams struct {
	Bin    string   // the tickwheel binary
	CPUs   string   // the CPU list it is pinned to ("" = not pinned)
	Token  string   // its admin token (given in $TICKWHEEL_ADMIN_TOKEN by the caller)
	Args   []string // extra server flags (-tick ...)
	Fsync  string   // everysec, always or no
	Dir    string   // the data directory (empty, made by the caller)
	N      int      // timers held when the server is stopped
	Tail   int      // timers added after the graceful restart, before the crash
	Conns  int
	Log    io.Writer // the servers' logs are also copied here (nil: kept only)
	Logf   func(string, ...any)
	NoFile uint64
}

// Recovery measures how long a durable server takes to come back with
// N live timers. It spawns the server on an empty data directory, adds N
// timers (not ephemeral, due 1 hour to 1 week away), stops it gracefully
// (SIGTERM: a last snapshot, so the next start replays no log), starts it
// again and times it until it accepts connections (the server's own
// "state recovered ... took=" is read from its log); then adds Tail more
// timers, waits for the log to be fsynced (everysec: 1.5 s), kills it
// (SIGKILL: a crash, so the next start loads the snapshot and replays the
// log after it) and times that start too. The snapshot's size is read
// from the data directory after the graceful stop.
func Recovery(ctx context.Context, p RecoveryParams) (*Result, error) {
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res := &Result{Scenario: "recover", Target: "tickwheel(fsync=" + p.Fsync + ")", Params: map[string]any{}, Extra: map[string]float64{}}
	res.Params["n"], res.Params["tail"], res.Params["conns"], res.Params["fsync"] = p.N, p.Tail, p.Conns, p.Fsync
	args := append([]string{"-data-dir", p.Dir, "-fsync", p.Fsync}, p.Args...)
	spawn := func(what string) (*Spawned, *logBuffer, error) {
		lb := &logBuffer{out: p.Log}
		s, err := SpawnWith(ctx, SpawnOptions{Path: p.Bin, CPUs: p.CPUs, Args: args, Log: lb})
		if err != nil {
			return nil, lb, fmt.Errorf("%s: %w", what, err)
		}
		s.StopWait = 10 * time.Minute
		logf("recover: %s: pid %d on %s, accepting after %v", what, s.PID(), s.Addr, s.Ready.Sub(s.Started).Round(time.Millisecond))
		return s, lb, nil
	}
	add := func(s *Spawned, n int, base int) error {
		t := &TickwheelTarget{Addr: s.Addr, Token: p.Token, NoBind: true}
		if err := t.Open(ctx, p.Conns, func(int, *Delivery) {}); err != nil {
			return err
		}
		defer t.Close()
		per := preloadPlan(n, p.Conns)
		for w := range per { // tids after those already added
			for i := range per[w] {
				per[w][i].Tid += uint64(base / 1000)
			}
		}
		t0 := Now()
		r, err := addAll(ctx, t, per)
		el := time.Duration(Now() - t0)
		if err == nil && r.OK != n {
			err = fmt.Errorf("%d of %d adds accepted: %v", r.OK, n, r.Errors)
		}
		logf("recover: added %d timers in %v (%.2fM/s)", n, el.Round(time.Millisecond), float64(n)/el.Seconds()/1e6)
		return err
	}
	recovered := func(lb *logBuffer, prefix string) {
		ls := lb.lines("persistence on: state recovered")
		if len(ls) == 0 {
			res.Problems = append(res.Problems, prefix+": no \"state recovered\" line in the server's log")
			return
		}
		l := ls[len(ls)-1]
		if d, err := time.ParseDuration(l["took"]); err == nil {
			res.Extra[prefix+"_recovered_took_s"] = d.Seconds()
		}
		for _, k := range []string{"timers", "records_replayed"} {
			if v, err := strconv.ParseFloat(l[k], 64); err == nil {
				res.Extra[prefix+"_"+k] = v
			}
		}
	}

	s, _, err := spawn("first start (empty)")
	if err != nil {
		return nil, err
	}
	t0 := Now()
	if err := add(s, p.N, 0); err != nil {
		s.Kill()
		return nil, fmt.Errorf("adding %d timers: %w", p.N, err)
	}
	res.setRate("adds/s", p.N, Now()-t0)
	if st, err := ReadProc(s.PID()); err == nil {
		res.Extra["rss_mib_with_timers"] = float64(st.RSSKiB) / 1024
	}
	stopAt := time.Now()
	if err := s.Stop(); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("graceful stop: %v", err))
	}
	res.Extra["graceful_stop_s"] = time.Since(stopAt).Seconds()
	snapBytes, snaps, logBytes := dataDirSizes(filepath.Join(p.Dir, "log"))
	res.Extra["snapshot_bytes"] = float64(snapBytes)
	res.Extra["snapshot_bytes_per_timer"] = float64(snapBytes) / float64(max(p.N, 1))
	res.Extra["snapshot_files"] = float64(snaps)
	res.Extra["log_bytes_after_stop"] = float64(logBytes)
	logf("recover: graceful stop in %.2fs; newest snapshot %d bytes (%.1f per timer), %d log bytes kept",
		res.Extra["graceful_stop_s"], snapBytes, res.Extra["snapshot_bytes_per_timer"], logBytes)

	s, lb, err := spawn("restart after a graceful stop")
	if err != nil {
		return nil, err
	}
	res.Extra["graceful_restart_ready_s"] = s.Ready.Sub(s.Started).Seconds()
	recovered(lb, "graceful")
	if st, err := ReadProc(s.PID()); err == nil {
		res.Extra["rss_mib_after_recovery"] = float64(st.RSSKiB) / 1024
	}
	if p.Tail > 0 {
		if err := add(s, p.Tail, p.N); err != nil {
			s.Kill()
			return nil, fmt.Errorf("adding the tail: %w", err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // everysec's fsync
	s.Kill()
	_, _, logBytes = dataDirSizes(filepath.Join(p.Dir, "log"))
	res.Extra["log_bytes_at_crash"] = float64(logBytes)

	s, lb, err = spawn("restart after SIGKILL")
	if err != nil {
		return nil, err
	}
	res.Extra["crash_restart_ready_s"] = s.Ready.Sub(s.Started).Seconds()
	recovered(lb, "crash")
	if got, want := res.Extra["crash_timers"], float64(p.N+p.Tail); got != want {
		res.Problems = append(res.Problems, fmt.Sprintf("after the crash the server recovered %.0f timers, want %.0f", got, want))
	}
	if got := res.Extra["graceful_timers"]; got != float64(p.N) {
		res.Problems = append(res.Problems, fmt.Sprintf("after the graceful stop the server recovered %.0f timers, want %d", got, p.N))
	}
	s.Kill() // its state is not needed any more
	res.Failed = len(res.Problems) > 0
	return res, nil
}

// dataDirSizes returns the size of the newest snapshot, the number of
// snapshots, and the bytes of log segments in a journal directory.
func dataDirSizes(dir string) (snap int64, snaps int, logBytes int64) {
	ents, _ := os.ReadDir(dir)
	var newest string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || fi.IsDir() {
			continue
		}
		switch name := e.Name(); {
		case strings.HasSuffix(name, ".snap"):
			snaps++
			if name > newest {
				newest, snap = name, fi.Size()
			}
		case strings.HasSuffix(name, ".SEG") || strings.HasSuffix(name, ".seg"):
			logBytes += fi.Size()
		}
	}
	return snap, snaps, logBytes
}
