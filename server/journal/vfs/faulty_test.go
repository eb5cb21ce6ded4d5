package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestFaultyModel checks the simulated disk the journal's tests rely on:
// synced bytes survive a cut, bytes a failed Sync dropped stay lost even
// after a later Sync succeeds (unless written again), a file created
// without a directory fsync may vanish, and calls after the cut fail.
func TestFaultyModel(t *testing.T) {
	vanished, kept := true, true // the new file, never dir-synced: each happens
	allD, noD := true, true      // the unsynced tail: neither always
	for seed := range uint64(200) {
		dir := t.TempDir()
		fs := NewFaulty()
		var failSync bool
		fs.SetInject(func(op Op, _ string, _ int64, size int) (int, error) {
			if op == OpSync && failSync {
				return 0, syscall.EIO
			}
			return 0, nil
		})
		synced, dropped, rewritten := bytes.Repeat([]byte("a"), 700), bytes.Repeat([]byte("b"), 700), bytes.Repeat([]byte("c"), 300)
		path := filepath.Join(dir, "f")
		f, err := fs.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, synced, 0)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := fs.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, dropped, 700)
		failSync = true
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Sync = %v", err)
		}
		failSync = false
		mustWrite(t, f, rewritten, 1000) // dropped's bytes around it stay lost
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, bytes.Repeat([]byte("d"), 1200), 1400) // never synced
		other := filepath.Join(dir, "new")
		g, err := fs.OpenFile(other, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, g, synced, 0)
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := fs.Crash(rand.New(rand.NewPCG(seed, 1))); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCut) {
			t.Fatalf("a write after the cut: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// 0..700 synced; 700..1400 dropped by the failed Sync (zeros, the
		// size was synced after), but 1000..1300 written again.
		want := slices.Concat(synced, make([]byte, 300), rewritten, make([]byte, 100))
		if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
			t.Fatalf("seed %d: after the cut the file's %d bytes differ from the synced %d", seed, len(got), len(want))
		}
		// The unsynced bytes: the file keeps its old size or has the new
		// one, each byte after the synced ones is a "d" or a zero.
		tail := got[len(want):]
		if len(tail) != 0 && len(tail) != 1200 || bytes.ContainsFunc(tail, func(r rune) bool { return r != 'd' && r != 0 }) {
			t.Fatalf("seed %d: the unsynced tail is %q", seed, tail)
		}
		n := bytes.Count(tail, []byte("d"))
		allD, noD = allD && n == 1200, noD && n == 0
		if _, err := os.Stat(other); err == nil {
			vanished = false
		} else {
			kept = false
		}
		f.Close()
		g.Close()
	}
	if allD || noD {
		t.Fatalf("the unsynced bytes: always all kept %v, always all dropped %v", allD, noD)
	}
	if vanished || kept {
		t.Fatalf("the file created without a directory fsync: always vanished %v, always kept %v", vanished, kept)
	}
}

func mustWrite(t *testing.T, f File, b []byte, off int64) {
	t.Helper()
	if n, err := f.WriteAt(b, off); n != len(b) || err != nil {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
}
