package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clkTck is USER_HZ, the unit of utime and stime in /proc/PID/stat; it is
// 100 on every Linux architecture Go supports.
const clkTck = 100

// ProcStats is a process's CPU time and resident memory at one instant.
type ProcStats struct {
	CPUSeconds  float64 // utime + stime
	UserSeconds float64 `json:",omitempty"` // utime
	SysSeconds  float64 `json:",omitempty"` // stime
	RSSKiB      int64   // VmRSS
	HWMKiB      int64   `json:",omitempty"` // VmHWM: the peak RSS
	NoFile      int64   `json:",omitempty"` // soft RLIMIT_NOFILE (Max open files)
}

// ReadProc reads /proc/PID/stat, status and limits.
func ReadProc(pid int) (ProcStats, error) {
	var p ProcStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// Fields after the command (which is in parentheses and may hold spaces).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return p, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // f[0] is field 3 (state); utime is field 14, stime 15
		return p, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	p.CPUSeconds = float64(ut+st) / clkTck
	p.UserSeconds, p.SysSeconds = float64(ut)/clkTck, float64(st)/clkTck
	if s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(s))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				p.RSSKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				p.HWMKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
	}
	if s, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); err == nil {
		for _, line := range strings.Split(string(s), "\n") {
			if v, ok := strings.CutPrefix(line, "Max open files"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					p.NoFile, _ = strconv.ParseInt(f[0], 10, 64)
				}
			}
		}
	}
	return p, nil
}

// RaiseNoFile raises this process's soft RLIMIT_NOFILE to want (or the hard
// limit, if lower) and returns the soft and hard limits in force after.
func RaiseNoFile(want uint64) (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	if r.Cur < want {
		r.Cur = min(want, r.Max)
		err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	}
	return r.Cur, r.Max, err
}

// Spawned is a tickwheel server started as a subprocess.
type Spawned struct {
	Cmd      *exec.Cmd
	Addr     string
	Pinned   string        // how it was pinned, or why not
	Started  time.Time     // when the process was started
	Ready    time.Time     // when it first accepted a connection
	StopWait time.Duration // how long Stop waits before SIGKILL; 0 = 5 s

	exited  chan struct{}
	waitErr error
}

// Spawn starts the tickwheel binary at path, serving on a free loopback
// port with the given extra flags, pinned to the CPU list cpus (taskset
// syntax: "0", "0,2", "2-3") with taskset when taskset exists (cpus "": not
// pinned). The child inherits this process's RLIMIT_NOFILE. It returns once
// the server accepts connections. The caller's flags must say where the
// server keeps its state (-data-dir DIR, or -data-dir "" for none): a
// durable server would otherwise write ./tickwheel-data in the working
// directory.
func Spawn(ctx context.Context, path string, cpus string, args ...string) (*Spawned, error) {
	return SpawnWith(ctx, SpawnOptions{Path: path, CPUs: cpus, Args: args})
}

// SpawnOptions are Spawn's, with where the server's log goes.
type SpawnOptions struct {
	Path string
	CPUs string
	Args []string
	Addr string    // the address to serve on; "" picks a free loopback port
	Log  io.Writer // the server's stderr (its log); nil = this process's stderr
	Env  []string  // added to this process's environment ("KEY=value")
}

// SpawnWith is Spawn with options.
func SpawnWith(ctx context.Context, o SpawnOptions) (*Spawned, error) {
	addr := o.Addr
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	// The operator HTTP listener on a free port: servers spawned at once
	// must not share its default port (a later -http-addr in Args wins).
	argv := append([]string{o.Path, "-addr", addr, "-http-addr", "127.0.0.1:0"}, o.Args...)
	s := &Spawned{Addr: addr, Pinned: "not pinned"}
	if cpus := o.CPUs; cpus != "" {
		if _, err := CPUCount(cpus); err != nil {
			return nil, err
		}
		if ts, err := exec.LookPath("taskset"); err == nil {
			argv = append([]string{ts, "-c", cpus}, argv...)
			s.Pinned = "taskset -c " + cpus
		} else {
			s.Pinned = "not pinned: taskset not found"
		}
	}
	s.Cmd = exec.Command(argv[0], argv[1:]...)
	dieWithParent(s.Cmd)
	if o.Env != nil {
		s.Cmd.Env = append(os.Environ(), o.Env...)
	}
	var stderr io.Writer = os.Stderr
	if o.Log != nil {
		stderr = o.Log
	}
	tail := &tailBuffer{max: 4 << 10} // for the error when it exits before listening
	s.Cmd.Stderr = io.MultiWriter(stderr, tail)
	s.Started = time.Now()
	if err := s.Cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		s.waitErr = s.Cmd.Wait()
		close(exited)
	}()
	s.exited = exited
	deadline := time.Now().Add(10 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			s.Ready = time.Now()
			return s, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("spawned server exited before listening on %s: %v; the end of its log:\n%s",
				addr, s.waitErr, tail.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("spawned server never listened on %s: %v", addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PID is the server's pid (taskset execs the server in its own process).
func (s *Spawned) PID() int { return s.Cmd.Process.Pid }

// Stop sends SIGTERM (a graceful stop: a durable server writes a last
// snapshot), waits up to StopWait (default 5 s), then kills.
func (s *Spawned) Stop() error {
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	wait := s.StopWait
	if wait == 0 {
		wait = 5 * time.Second
	}
	select {
	case <-s.exited:
		return s.waitErr
	case <-time.After(wait):
		_ = s.Cmd.Process.Kill()
		<-s.exited
		return s.waitErr
	}
}

// Kill kills the server with SIGKILL (a crash) and waits for it.
func (s *Spawned) Kill() {
	_ = s.Cmd.Process.Kill()
	<-s.exited
}

// PinSelf pins every thread of this process to the CPU list cpus with
// taskset, and sets GOMAXPROCS to the number of CPUs in it at once (the
// runtime would only notice the new affinity at its next periodic check),
// unless $GOMAXPROCS is set.
func PinSelf(cpus string) string {
	n, err := CPUCount(cpus)
	if err != nil {
		return fmt.Sprintf("not pinned: %v", err)
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return "not pinned: taskset not found"
	}
	out, err := exec.Command(ts, "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("not pinned: %v: %s", err, bytes.TrimSpace(out))
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(n)
	}
	return fmt.Sprintf("taskset -a -p -c %s, GOMAXPROCS=%d", cpus, runtime.GOMAXPROCS(0))
}

// CPUCount returns how many CPUs a taskset CPU list names ("1", "0,2",
// "2-3,6"), or an error for a malformed list or one naming a CPU twice.
func CPUCount(cpus string) (int, error) {
	seen := map[int]bool{}
	for _, part := range strings.Split(cpus, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a >= 4096 {
			return 0, fmt.Errorf("bad CPU list %q (want e.g. 1, 0,2 or 2-3)", cpus)
		}
		for c := a; c <= b; c++ {
			if seen[c] {
				return 0, fmt.Errorf("bad CPU list %q: CPU %d named twice", cpus, c)
			}
			seen[c] = true
		}
	}
	return len(seen), nil
}

// tailBuffer keeps the last max bytes written to it. Safe for one writer
// and a reader after the writer is done (exec's copying goroutine has
// finished once Wait returned).
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
