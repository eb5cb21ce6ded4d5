package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
)

// Set from the flags -mem and -heapprofile.
var (
	memReport       bool
	heapProfilePath string
)

// reportMemory prints, with -mem, where the process's memory goes after
// the adds, per timer: each of the runtime's memory classes
// (runtime/metrics /memory/classes/..., which add up to what the runtime
// has mapped) and the lines of /proc/self/status about memory; with
// -heapprofile it writes a heap profile (the allocations still live, by
// the code that made them).
func reportMemory(n int) error {
	if heapProfilePath != "" {
		f, err := os.Create(heapProfilePath)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if !memReport {
		return nil
	}
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") && d.Kind == metrics.KindUint64 {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		v := s.Value.Uint64()
		fmt.Printf("mem class=%s MiB=%.1f B_per_timer=%.2f\n", s.Name, float64(v)/(1<<20), float64(v)/float64(n))
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil // no /proc: nothing more to say
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Vm") && !strings.HasPrefix(line, "Rss") {
			continue
		}
		name, v, _ := strings.Cut(line, ":")
		var kb int64
		fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
		fmt.Printf("mem status=%s MiB=%.1f B_per_timer=%.2f\n", name, float64(kb)/1024, float64(kb<<10)/float64(n))
	}
	return sc.Err()
}
