package journal

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// TestRealPartialWrite makes the kernel cut a write short: a child process
// (this test binary again) lowers RLIMIT_FSIZE just past the segment's end,
// so the library's write(2) stores part of a record and then fails with
// EFBIG. The journal must cut the partial record off before writing again,
// and write everything once the limit is lifted.
func TestRealPartialWrite(t *testing.T) {
	if dir := os.Getenv("JOURNAL_FSIZE_CHILD"); dir != "" {
		fsizeChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealPartialWrite$", "-test.v")
	cmd.Env = append(os.Environ(), "JOURNAL_FSIZE_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	checkReplay(t, replayAll(t, j), 1, 120, 1000)
	j.Close()
}

func fsizeChild(t *testing.T, dir string) {
	signal.Ignore(syscall.SIGXFSZ)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip(err)
	}
	j := mustOpen(t, Options{Dir: dir, Sync: SyncAlways})
	appendRecs(t, j, 1, 100, 1000)
	good := j.act.size
	lim := syscall.Rlimit{Cur: uint64(good) + 300, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip(err)
	}
	for i := uint64(101); i <= 110; i++ {
		idx, err := j.Append(recBytes(i, 1000))
		if idx != i || !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("Append over RLIMIT_FSIZE = %d, %v", idx, err)
		}
		if got := fileSize(t, j.segPath(j.act.id)); got != good+300 {
			t.Fatalf("segment %d bytes, want %d good + a 300-byte partial record", got, good)
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	appendRecs(t, j, 111, 120, 1000)
	if err := j.Sync(); err != nil || j.Healthy() != nil {
		t.Fatalf("Sync %v, Healthy %v", err, j.Healthy())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}
