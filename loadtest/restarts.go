package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RestartsParams is a chain of crash restarts of one data directory: each
// binary in Bins in turn, Rounds times, is started on Dir, timed from exec
// to accepting connections, and killed with SIGKILL, and the next starts at
// once, as a supervisor restarts a crashed server. Starting each right
// after the last one's kill is the case a crash meets: the memory the
// killed server held is free again, not yet handed back to a VM's host (on
// a host that takes free guest pages back, fresh pages cost several times
// more to clear; docs/BENCHMARKS.md, "Recovery at 100M on a slower host").
type RestartsParams struct {
	Bins   []string
	Dir    string // the data directory; the caller copies it first if it is to be kept as it was
	Rounds int
	// Hold is how long each server runs once accepting before it is killed
	// (0: at once). A server that has run a while has given back the memory
	// its restore used and no longer needs: on a host that takes free guest
	// pages back, the next start backs that much again from such pages, as
	// a restart after a crash of a long-running server does.
	Hold time.Duration
	Args []string  // more flags for each server
	Log  io.Writer // each server's log (nil: kept only to be read)
	Logf func(format string, args ...any)
}

// Restart is one start of RestartsParams.
type Restart struct {
	Bin        string
	Round      int
	Wall       time.Duration // exec to accepting connections
	User, Sys  float64       // CPU seconds until accepting
	HWMKiB     int64         // peak RSS until accepting
	Timers     int           // the "state recovered" line's
	ServerTook time.Duration // the "state recovered" line's took
	// Steal is the CPU time the VM's host ran something else while this VM's
	// CPUs (all of them) wanted to run, from exec to accepting (Linux's
	// /proc/stat; -1: not known): a start the host slowed shows it.
	Steal float64
}

// RestartsReport is what Restarts measured, in the order run.
type RestartsReport struct {
	Runs []Restart
}

// Restarts runs the chain. The binaries must agree on Dir's format; each
// start must recover the same number of timers as the first (a chain that
// lost state is an error, not a figure).
func Restarts(ctx context.Context, p RestartsParams) (*RestartsReport, error) {
	rep := &RestartsReport{}
	var last *Spawned
	defer func() {
		if last != nil {
			last.Kill()
		}
	}()
	for round := 1; round <= p.Rounds; round++ {
		for _, bin := range p.Bins {
			if last != nil {
				last.Kill()
				last = nil
			}
			lb := &logBuffer{out: p.Log}
			steal0 := hostSteal()
			s, err := SpawnWith(ctx, SpawnOptions{Path: bin, Args: append([]string{"-data-dir", p.Dir}, p.Args...), Log: lb})
			if err != nil {
				return rep, fmt.Errorf("round %d, %s: %w", round, bin, err)
			}
			last = s
			r := Restart{Bin: bin, Round: round, Wall: s.Ready.Sub(s.Started), Steal: -1}
			if steal := hostSteal(); steal >= 0 && steal0 >= 0 {
				r.Steal = steal - steal0
			}
			if ps, err := ReadProc(s.PID()); err == nil {
				r.User, r.Sys, r.HWMKiB = ps.UserSeconds, ps.SysSeconds, ps.HWMKiB
			}
			if ls := lb.lines("persistence on: state recovered"); len(ls) > 0 {
				r.Timers, _ = strconv.Atoi(ls[0]["timers"])
				r.ServerTook, _ = time.ParseDuration(ls[0]["took"])
			} else {
				return rep, fmt.Errorf("round %d, %s: no \"state recovered\" line: not a durable restart of %s", round, bin, p.Dir)
			}
			if len(rep.Runs) > 0 && r.Timers != rep.Runs[0].Timers {
				return rep, fmt.Errorf("round %d, %s: recovered %d timers, the first start %d", round, bin, r.Timers, rep.Runs[0].Timers)
			}
			rep.Runs = append(rep.Runs, r)
			if p.Logf != nil {
				p.Logf("restarts: %s", r.line())
			}
			if p.Hold > 0 {
				select {
				case <-time.After(p.Hold):
				case <-ctx.Done():
					return rep, ctx.Err()
				}
			}
		}
	}
	return rep, nil
}

func (r Restart) line() string {
	steal := ""
	if r.Steal >= 0 {
		steal = fmt.Sprintf(", host steal %.2f s", r.Steal)
	}
	return fmt.Sprintf("round %d %-20s %7.2f s (server %.2f s), CPU %.2f s (user %.2f, sys %.2f), peak RSS %.0f MiB, %d timers%s",
		r.Round, filepath.Base(r.Bin), r.Wall.Seconds(), r.ServerTook.Seconds(), r.User+r.Sys, r.User, r.Sys,
		kib2mib(r.HWMKiB), r.Timers, steal)
}

// hostSteal returns the steal time of all the CPUs since boot, in seconds
// (the "cpu" line of /proc/stat, in USER_HZ of 1/100 s), or -1 where it
// cannot be read.
func hostSteal() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	v, err := strconv.ParseFloat(f[8], 64)
	if err != nil {
		return -1
	}
	return v / 100
}

// Print writes every run and, for each binary, the median and the range of
// its wall and CPU times.
func (rep *RestartsReport) Print(w io.Writer) {
	var bins []string
	for _, r := range rep.Runs {
		fmt.Fprintln(w, r.line())
		if !slices.Contains(bins, r.Bin) {
			bins = append(bins, r.Bin)
		}
	}
	for _, b := range bins {
		var wall, cpu, sys []float64
		for _, r := range rep.Runs {
			if r.Bin == b {
				wall, cpu, sys = append(wall, r.Wall.Seconds()), append(cpu, r.User+r.Sys), append(sys, r.Sys)
			}
		}
		fmt.Fprintf(w, "median %-20s wall %s, CPU %s, of which sys %s (%d starts)\n", filepath.Base(b),
			medianRange(wall), medianRange(cpu), medianRange(sys), len(wall))
	}
}

// medianRange formats the median of v and its range, "m s (lo-hi)".
func medianRange(v []float64) string {
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.2f s (%.2f-%.2f)", m, s[0], s[len(s)-1])
}

// CopyDir copies data directory src to dst (its files and subdirectories;
// not its LOCK file), for a chain that must leave its source as it was.
func CopyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if d.Name() == "LOCK" {
			return nil
		}
		return copyFile(path, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
