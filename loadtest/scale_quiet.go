package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// TurnProbe is what the loop's turns took while one kind of request was
// asked for (Scale with Quiet): the longest turn, as the upper bound of
// its bucket of tickwheel_loop_turn_duration_seconds (the histogram read
// before and after), and the requests' round trips as the client saw
// them.
type TurnProbe struct {
	What     string
	Requests int
	// LongestTurnLE is the upper bound, in seconds, of the highest bucket
	// that gained a turn (+Inf: above the last); Turns the turns counted.
	LongestTurnLE float64
	Turns         uint64
	RoundTripMax  time.Duration
}

// quietProbes is how many times each kind of request is asked for.
const quietProbes = 5

// quiet turns the server's snapshots off (its config file rewritten and
// SIGHUP), waits for the snapshot being written, if any, to end, runs the
// firing plan again (rep.FiringQuiet), asks for stats, /metrics, the
// status page and a list page while reading the loop's turn histogram
// (rep.Probes), measures the idle CPU over IdleFor (rep.IdleCPU), and
// puts the config file back for the restart.
func (p *ScaleParams) quiet(ctx context.Context, s *Spawned, lb *logBuffer, conf string, rep *ScaleReport) error {
	defer func() {
		_ = os.WriteFile(conf, []byte(p.config(orNone(p.SnapshotInterval), p.SnapshotPriority)), 0o600)
	}()
	if err := p.reload(ctx, s, lb, conf, p.config("1000000h", p.SnapshotPriority)); err != nil {
		return err
	}
	// A snapshot begun before the reload takes at most about as long as
	// the longest written so far.
	longest := longestSnapshot(lb)
	wait := 2*longest + 2*time.Second
	p.Logf("scale: snapshots off (SIGHUP); waiting %v for the one being written, if any", wait.Round(time.Second))
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return ctx.Err()
	}

	tg := &TickwheelTarget{Addr: s.Addr, Token: p.Token, Pid: s.PID()}
	lp := DefaultParams()
	lp.Rate, lp.Duration, lp.Lead, lp.Conns = p.Rate, p.Duration, p.Lead, min(p.Conns, 8)
	began := time.Now()
	var err error
	if rep.FiringQuiet, err = Lateness(ctx, tg, lp); err != nil {
		return fmt.Errorf("scale: the quiet firing plan: %w", err)
	}
	for _, l := range lb.lines("snapshot written") {
		if logBegan(l).After(began.Add(-longest)) {
			rep.Problems = append(rep.Problems, "a snapshot was written during the quiet firing plan: "+l["time"])
		}
	}
	p.Logf("scale: the quiet plan fired %d of %d; probing the loop's turns", rep.FiringQuiet.Delivered, rep.FiringQuiet.Expected)
	if rep.Probes, err = p.probeTurns(ctx, s); err != nil {
		return err
	}
	if p.IdleFor > 0 {
		time.Sleep(5 * time.Second) // the probes' connections closed, the status sampler settled
		a, err := schedstat(s.PID())
		if err != nil {
			return err
		}
		time.Sleep(p.IdleFor)
		b, err := schedstat(s.PID())
		if err != nil {
			return err
		}
		rep.IdleCPU, rep.IdleFor = float64(b-a)/float64(p.IdleFor)*100, p.IdleFor
	}
	return nil
}

func orNone(d time.Duration) string {
	if d > 0 {
		return d.String()
	}
	return "-1s"
}

// probeTurns asks for each kind of request quietProbes times, a fifth of
// a second apart, and reads the loop's turn histogram around them.
func (p *ScaleParams) probeTurns(ctx context.Context, s *Spawned) ([]TurnProbe, error) {
	tg := &TickwheelTarget{Addr: s.Addr, Token: p.Token, Pid: s.PID(), NoBind: true}
	if err := tg.Open(ctx, 0, func(int, *Delivery) {}); err != nil {
		return nil, err
	}
	defer tg.Close()
	base := "http://" + p.HTTPAddr
	get := func(path string) func() error {
		return func() error {
			resp, err := http.Get(base + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", path, resp.Status)
			}
			return nil
		}
	}
	kinds := []struct {
		what string
		do   func() error
	}{
		{"stats", func() error { _, err := tg.Stats(ctx); return err }},
		{"GET /metrics", get("/metrics")},
		{"GET / (status page)", get("/")},
		{"GET /status.json (its data)", get("/status.json")},
		{"list (a page of a receiver's timers)", func() error {
			m, err := tg.ctl.call(ctx, &protocol.Request{Op: protocol.OpList, Receiver: scaleBase})
			if err == nil {
				_, _, err = protocol.DecodeListPage(m.Result, nil)
			}
			return err
		}},
	}
	var out []TurnProbe
	for _, k := range kinds {
		before, err := turnHistogram(base)
		if err != nil {
			return nil, err
		}
		pr := TurnProbe{What: k.what, Requests: quietProbes}
		for range quietProbes {
			t0 := time.Now()
			if err := k.do(); err != nil {
				return nil, fmt.Errorf("scale: probing %s: %w", k.what, err)
			}
			pr.RoundTripMax = max(pr.RoundTripMax, time.Since(t0))
			time.Sleep(200 * time.Millisecond)
		}
		after, err := turnHistogram(base)
		if err != nil {
			return nil, err
		}
		pr.LongestTurnLE, pr.Turns = longestBucket(before, after)
		out = append(out, pr)
	}
	return out, nil
}

// turnHistogram reads the cumulative buckets of the loop's turn durations
// from /metrics: upper bound (seconds; +Inf as such) to count.
func turnHistogram(base string) (map[float64]uint64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	h := map[float64]uint64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const prefix = `tickwheel_loop_turn_duration_seconds_bucket{le="`
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		le, count, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		b, err1 := strconv.ParseFloat(le, 64)
		c, err2 := strconv.ParseUint(count, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/metrics: bad bucket line %q", sc.Text())
		}
		h[b] = c
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("/metrics: no tickwheel_loop_turn_duration_seconds buckets (is the operator listener on?)")
	}
	return h, sc.Err()
}

// longestBucket returns the smallest upper bound under which every turn
// counted between before and after falls, and how many there were.
func longestBucket(before, after map[float64]uint64) (float64, uint64) {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	for _, b := range bounds {
		if after[b]-before[b] == total {
			return b, total
		}
	}
	return bounds[len(bounds)-1], total
}

// schedstat returns the CPU time of every thread of process pid, ns (the
// first field of /proc/PID/task/*/schedstat).
func schedstat(pid int) (int64, error) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("schedstat of %d: %v", pid, err)
	}
	var sum int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		v, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		sum += v
	}
	return sum, nil
}
