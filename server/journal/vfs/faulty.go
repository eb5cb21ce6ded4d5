package vfs

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// Op names the kind of call a fault is injected into.
type Op int

const (
	OpOpen Op = iota
	OpWrite
	OpTruncate
	OpSync
	OpSyncDir
)

func (o Op) String() string {
	return [...]string{"open", "write", "truncate", "sync", "syncdir"}[o]
}

// Inject decides the fate of one call on path (for a write, of size bytes
// at off): a nil error lets it through. A failing write first stores its
// first n bytes (0 <= n < size), as a write(2) cut short by ENOSPC does.
// It is called without Faulty's lock (it may sleep, as a slow disk does)
// and must be safe for concurrent use.
type Inject func(op Op, path string, off int64, size int) (n int, err error)

// Faulty is an FS for tests over real files: every byte goes to the real
// file (so that the os package reads what a running system would), and
// Faulty also keeps, per file, the bytes as of its last successful Sync.
// Crash then simulates a power cut: the bytes written since are dropped,
// kept or torn at random, 512-byte sector by sector, as a disk's write
// cache may leave them, and a file created since its directory's last
// SyncDir may vanish. A failed Sync loses the bytes it should have made
// durable, as Linux does after a failed fdatasync (the pages are marked
// clean: "fsyncgate"): a later successful Sync does not save them unless
// they were written again. Files deleted through the os package are left
// deleted. Safe for concurrent use.
type Faulty struct {
	// InOrder makes Crash keep each file's unwritten bytes in the order
	// of their offsets: all of them up to a random byte, none after (a
	// writeback that went front to back). Unset, each 512-byte sector is
	// dropped, kept or torn on its own. Set it before the first call.
	InOrder bool

	mu     sync.Mutex
	inject Inject
	files  map[string]*node
	dead   bool
}

// ErrCut is returned by every call after Crash: the machine is off.
var ErrCut = errors.New("vfs: the power was cut")

// node is one file's bytes. dirty marks the bytes written since the last
// successful Sync, lost those a failed Sync dropped (not on disk, and no
// later Sync writes them). cur has the size the running system sees, dur
// the durable one.
type node struct {
	cur, dur    []byte
	dirty, lost []bool
	created     bool // created here, its directory not fsynced since
}

// NewFaulty returns a Faulty with no fault injected.
func NewFaulty() *Faulty { return &Faulty{files: map[string]*node{}} }

// SetInject sets the fault injector; nil lets every call through.
func (f *Faulty) SetInject(in Inject) {
	f.mu.Lock()
	f.inject = in
	f.mu.Unlock()
}

// fault asks the injector about one call; the caller does not hold mu.
func (f *Faulty) fault(op Op, path string, off int64, size int) (int, error) {
	f.mu.Lock()
	in, dead := f.inject, f.dead
	f.mu.Unlock()
	if dead {
		return 0, ErrCut
	}
	if in == nil {
		return 0, nil
	}
	n, err := in(op, path, off, size)
	if err == nil || n < 0 || n >= size {
		n = 0
	}
	return n, err
}

// OpenFile opens the real file; the first open of a path (or the first
// since its file was deleted or renamed with the os package) reads what
// it holds, taken as durable.
func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if _, err := f.fault(OpOpen, name, 0, 0); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return nil, &os.PathError{Op: "open", Path: name, Err: ErrCut}
	}
	n := f.files[name]
	if _, err := os.Stat(name); n != nil && errors.Is(err, os.ErrNotExist) {
		n = nil // deleted or renamed away with the os package: a new file
	}
	if n == nil {
		b, err := os.ReadFile(name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		n = &node{cur: b, dur: bytes.Clone(b), dirty: make([]bool, len(b)), lost: make([]bool, len(b)),
			created: err != nil}
	}
	rf, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.files[name] = n
	if flag&os.O_TRUNC != 0 {
		n.resize(0)
	}
	return &faultyFile{fs: f, n: n, f: rf}, nil
}

// SyncDir makes the files created in dir durable.
func (f *Faulty) SyncDir(dir string) error {
	if _, err := f.fault(OpSyncDir, dir, 0, 0); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return &os.PathError{Op: "fsync", Path: dir, Err: ErrCut}
	}
	for p, n := range f.files {
		if filepath.Dir(p) == filepath.Clean(dir) {
			n.created = false
		}
	}
	return nil
}

// Crash cuts the power: every file is rewritten as a restart would find
// it, chosen with rnd, and every later call fails with ErrCut.
func (f *Faulty) Crash(rnd *rand.Rand) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
	// In the order of the paths, so that rnd's seed alone decides the
	// outcome (a test's failing seed reruns as it failed).
	for _, p := range slices.Sorted(maps.Keys(f.files)) {
		n := f.files[p]
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			continue // deleted with the os package: taken as durable
		}
		if n.created && rnd.IntN(2) == 0 {
			if err := os.Remove(p); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, n.image(rnd, f.InOrder), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// image is what the disk holds of n after a power cut.
func (n *node) image(rnd *rand.Rand, inOrder bool) []byte {
	size := len(n.dur)
	if len(n.cur) != len(n.dur) && rnd.IntN(2) == 0 {
		size = len(n.cur) // the new size reached the disk
	}
	img := make([]byte, size)
	copy(img, n.dur)
	if inOrder {
		cut := rnd.IntN(min(size, len(n.cur)) + 1)
		for i := range cut {
			if n.dirty[i] {
				img[i] = n.cur[i]
			}
		}
		return img
	}
	const sector = 512
	for s := 0; s < min(size, len(n.cur)); s += sector {
		e := min(s+sector, size, len(n.cur))
		var idx []int
		for i := s; i < e; i++ {
			if n.dirty[i] {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		keep := 0 // dropped
		switch rnd.IntN(3) {
		case 1:
			keep = len(idx) // written
		case 2:
			keep = rnd.IntN(len(idx) + 1) // torn
		}
		for _, i := range idx[:keep] {
			img[i] = n.cur[i]
		}
	}
	return img
}

// resize sets the file's size as the running system sees it.
func (n *node) resize(size int) {
	if size <= len(n.cur) {
		n.cur, n.dirty, n.lost = n.cur[:size], n.dirty[:size], n.lost[:size]
		return
	}
	grow := size - len(n.cur)
	n.cur = append(n.cur, make([]byte, grow)...)
	n.dirty = append(n.dirty, make([]bool, grow)...)
	n.lost = append(n.lost, make([]bool, grow)...)
	for i := size - grow; i < size; i++ {
		n.dirty[i] = true // zeros to be written
	}
}

type faultyFile struct {
	fs *Faulty
	n  *node
	f  *os.File
}

func (ff *faultyFile) Name() string { return ff.f.Name() }

func (ff *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	short, err := ff.fs.fault(OpWrite, ff.f.Name(), off, len(p))
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if ff.fs.dead {
		return 0, &os.PathError{Op: "write", Path: ff.f.Name(), Err: ErrCut}
	}
	if err != nil {
		if short == 0 {
			return 0, &os.PathError{Op: "write", Path: ff.f.Name(), Err: err}
		}
		p = p[:short]
	}
	n, werr := ff.f.WriteAt(p, off)
	if end := int(off) + n; end > len(ff.n.cur) {
		ff.n.resize(end)
	}
	for i := range n {
		ff.n.cur[int(off)+i] = p[i]
		ff.n.dirty[int(off)+i], ff.n.lost[int(off)+i] = true, false
	}
	if werr != nil {
		return n, werr
	}
	if err != nil {
		return n, &os.PathError{Op: "write", Path: ff.f.Name(), Err: err}
	}
	return n, nil
}

func (ff *faultyFile) Truncate(size int64) error {
	if _, err := ff.fs.fault(OpTruncate, ff.f.Name(), size, 0); err != nil {
		return &os.PathError{Op: "truncate", Path: ff.f.Name(), Err: err}
	}
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if ff.fs.dead {
		return &os.PathError{Op: "truncate", Path: ff.f.Name(), Err: ErrCut}
	}
	if err := ff.f.Truncate(size); err != nil {
		return err
	}
	ff.n.resize(int(size))
	return nil
}

// Sync makes durable the bytes dirty when it starts, and the size then
// (bytes written while it runs may or may not be covered by a real
// fdatasync; here they are not); a failed one marks them lost instead.
func (ff *faultyFile) Sync() error {
	n := ff.n
	ff.fs.mu.Lock()
	snap, pend := bytes.Clone(n.cur), slices.Clone(n.dirty)
	ff.fs.mu.Unlock()
	_, err := ff.fs.fault(OpSync, ff.f.Name(), 0, 0)
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if ff.fs.dead {
		return &os.PathError{Op: "fdatasync", Path: ff.f.Name(), Err: ErrCut}
	}
	// unchanged: byte i is still what the fsync was to write.
	unchanged := func(i int) bool { return pend[i] && i < len(n.cur) && n.dirty[i] && n.cur[i] == snap[i] }
	if err != nil {
		for i := range pend {
			if unchanged(i) {
				n.dirty[i], n.lost[i] = false, true
			}
		}
		return &os.PathError{Op: "fdatasync", Path: ff.f.Name(), Err: err}
	}
	dur := make([]byte, len(snap)) // beyond the old size, bytes never written stay zeros
	copy(dur, n.dur)
	for i := range pend {
		if pend[i] {
			dur[i] = snap[i]
		}
		if unchanged(i) {
			n.dirty[i] = false
		}
	}
	n.dur = dur
	return nil
}

func (ff *faultyFile) Size() (int64, error) {
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if ff.fs.dead {
		return 0, ErrCut
	}
	return int64(len(ff.n.cur)), nil
}

func (ff *faultyFile) Close() error { return ff.f.Close() }

// ENOSPC and EIO are the errors a full or failing disk returns.
var (
	ENOSPC error = syscall.ENOSPC
	EIO    error = syscall.EIO
)
