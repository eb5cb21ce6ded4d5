package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// logBuf collects log output so tests can check what recovery reported.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// recBytes is record i's content: size bytes that spell out i.
func recBytes(i uint64, size int) []byte {
	b := make([]byte, size)
	s := fmt.Sprintf("rec-%d-", i)
	for k := range b {
		b[k] = s[k%len(s)]
	}
	return b
}

// closeAsCrash closes j but leaves TAIL as a machine crash would: without
// Close's last one, which records every record as fsynced. Damage made to
// the last records afterwards then looks like what a power cut leaves (a
// torn tail), not like damage to fsynced records.
func closeAsCrash(t testing.TB, j *Journal) {
	t.Helper()
	j.tailOn = false
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t testing.TB, o Options) *Journal {
	t.Helper()
	j, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return j
}

// appendRecs appends records first..last of the given size and checks
// their indexes.
func appendRecs(t testing.TB, j *Journal, first, last uint64, size int) {
	t.Helper()
	for i := first; i <= last; i++ {
		idx, err := j.Append(recBytes(i, size))
		if err != nil || idx != i {
			t.Fatalf("Append #%d = %d, %v", i, idx, err)
		}
	}
}

type replayed struct {
	index uint64
	rec   []byte
}

func replayAll(t testing.TB, j *Journal) []replayed {
	t.Helper()
	var out []replayed
	err := j.Replay(func(i uint64, rec []byte) error {
		out = append(out, replayed{i, append([]byte(nil), rec...)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return out
}

// checkReplay checks that replay yields exactly records first..last, each
// with recBytes content of the given size (size < 0: any size).
func checkReplay(t testing.TB, got []replayed, first, last uint64, size int) {
	t.Helper()
	want := 0
	if last >= first {
		want = int(last - first + 1)
	}
	if len(got) != want {
		t.Fatalf("replayed %d records, want %d (%d..%d)", len(got), want, first, last)
	}
	for k, r := range got {
		i := first + uint64(k)
		if r.index != i {
			t.Fatalf("replayed #%d has index %d, want %d", k, r.index, i)
		}
		if size >= 0 && !bytes.Equal(r.rec, recBytes(i, size)) {
			t.Fatalf("record %d content differs", i)
		}
	}
}

func readSnapshot(t testing.TB, j *Journal) ([]byte, uint64, bool) {
	t.Helper()
	r, idx, ok := j.Snapshot()
	if !ok {
		return nil, 0, false
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading snapshot: %v", err)
	}
	return b, idx, true
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// memTempDir is a temporary directory in memory (/dev/shm) where there is
// one, so that tests that open hundreds of journals do not wait on fsync.
func memTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "journal-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// copyDir copies the regular files of src into a new temporary directory
// (in memory where possible).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := memTempDir(t)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == lockName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func flipBit(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

func appendToFile(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func writeAtFile(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// openRecover opens the journal as the server recovers from it: it reads
// the snapshot Open picked whole, and when the read fails with ErrCorrupt
// it rejects that snapshot and opens again (the fallback to the previous
// one). It returns Open's error, or the journal (its log still to replay)
// with the snapshot's payload and index (nil and 0 if there is none).
func openRecover(t testing.TB, o Options) (*Journal, []byte, uint64, error) {
	t.Helper()
	for {
		j, err := Open(o)
		if err != nil {
			return nil, nil, 0, err
		}
		r, idx, ok := j.Snapshot()
		if !ok {
			return j, nil, 0, nil
		}
		b, err := io.ReadAll(r)
		if err == nil {
			return j, b, idx, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("reading snapshot %d: %v does not wrap ErrCorrupt", idx, err)
		}
		if err := j.RejectSnapshot(err); err != nil {
			t.Fatalf("RejectSnapshot: %v", err)
		}
	}
}
