package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The fuzz targets damage the files of a real journal (segments, snapshots,
// TAIL) with a list of edits the fuzzer chooses: flipped bits, truncation,
// inserted or overwritten bytes, a deleted file. Open must never panic; it
// either recovers a prefix of what was written, never a wrong record or
// snapshot, or fails naming the file (and, for a bad record, the offset).
//
//	go test ./server/journal -run '^$' -fuzz FuzzOpenDamaged -fuzztime 3m
//	go test ./server/journal -run '^$' -fuzz FuzzSnapshotReader -fuzztime 3m

// fuzzRecords is how many records fuzzBase writes; record i is
// fuzzRec(i) bytes long, so that some records span blocks.
const fuzzRecords = 120

func fuzzRec(i uint64) []byte {
	size := 60 + int(i%7)*30
	if i%25 == 0 {
		size = 40_000 // first, middle and last chunks
	}
	return recBytes(i, size)
}

var fuzzBaseOnce struct {
	sync.Once
	files map[string][]byte
	names []string // sorted
	err   error
}

// fuzzBase builds, once per process, a journal of fuzzRecords records over
// 128 KiB segments with snapshots at 40 and 80 and a checkpoint, and
// returns its files' contents by name.
func fuzzBase(tb testing.TB) (map[string][]byte, []string) {
	b := &fuzzBaseOnce
	b.Do(func() {
		dir, err := os.MkdirTemp("", "journal-fuzz-base-")
		if err != nil {
			b.err = err
			return
		}
		defer os.RemoveAll(dir)
		b.err = buildFuzzBase(dir)
		if b.err != nil {
			return
		}
		b.files = map[string][]byte{}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir() || e.Name() == lockName {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				b.err = err
				return
			}
			b.files[e.Name()] = data
			b.names = append(b.names, e.Name())
		}
		sort.Strings(b.names)
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.files, b.names
}

func buildFuzzBase(dir string) error {
	j, err := Open(Options{Dir: dir, Sync: SyncNo, SegmentSize: 128 << 10})
	if err != nil {
		return err
	}
	defer j.Close()
	for i := uint64(1); i <= fuzzRecords; i++ {
		if _, err := j.Append(fuzzRec(i)); err != nil {
			return err
		}
		if i == 40 || i == 80 {
			w, err := j.CreateSnapshot(i)
			if err != nil {
				return err
			}
			_, _ = w.Write(snapContent(i))
			if err := w.Commit(); err != nil {
				return err
			}
		}
	}
	if err := j.Sync(); err != nil {
		return err
	}
	if err := j.Checkpoint(fuzzRecords); err != nil {
		return err
	}
	return j.Close()
}

// damage applies edits to files. Each edit is 8 bytes: the file (an index
// into names), the kind, a 4-byte offset (modulo the file's size), and two
// bytes of argument.
func damage(files map[string][]byte, names []string, edits []byte) map[string][]byte {
	out := make(map[string][]byte, len(files))
	for n, b := range files {
		out[n] = append([]byte(nil), b...)
	}
	for ; len(edits) >= 8; edits = edits[8:] {
		name := names[int(edits[0])%len(names)]
		b, ok := out[name]
		if !ok {
			continue // deleted
		}
		off := 0
		if len(b) > 0 {
			off = int(binary.LittleEndian.Uint32(edits[2:6]) % uint32(len(b)))
		}
		arg := edits[6:8]
		switch edits[1] % 6 {
		case 0: // flip one bit
			if len(b) > 0 {
				b[off] ^= 1 << (arg[0] % 8)
			}
		case 1: // truncate
			b = b[:off]
		case 2: // insert two bytes
			b = append(b[:off], append([]byte{arg[0], arg[1]}, b[off:]...)...)
		case 3: // zero a run (a lost sector)
			n := min(int(arg[0])<<4+1, len(b)-off)
			clear(b[off : off+n])
		case 4: // overwrite two bytes
			copy(b[off:], arg)
		case 5: // delete the file
			delete(out, name)
			continue
		}
		out[name] = b
	}
	return out
}

// checkRecovered checks what an opened journal offers: a snapshot of one
// of the indexes written with its exact content, then records following it
// in sequence, each exactly as written.
func checkRecovered(t *testing.T, j *Journal) uint64 {
	t.Helper()
	last := uint64(0)
	if r, idx, ok := j.Snapshot(); ok {
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("snapshot %d read whole, then: %v", idx, err)
		}
		if (idx != 40 && idx != 80) || !bytes.Equal(data, snapContent(idx)) {
			t.Fatalf("a wrong snapshot: index %d, %d bytes", idx, len(data))
		}
		last = idx
	}
	err := j.Replay(func(i uint64, rec []byte) error {
		if i != last+1 || i > fuzzRecords || !bytes.Equal(rec, fuzzRec(i)) {
			t.Fatalf("a wrong record: index %d after %d, %d bytes", i, last, len(rec))
		}
		last = i
		return nil
	})
	if err != nil {
		t.Fatalf("Replay after a successful Open: %v", err)
	}
	if j.LastIndex() != last {
		t.Fatalf("LastIndex %d, but the state recovered reaches %d", j.LastIndex(), last)
	}
	return last
}

func writeFuzzDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := memTempDir(t)
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func fuzzSeeds(f *testing.F, names []string) {
	f.Add([]byte{})
	for i := range names {
		for kind := byte(0); kind < 6; kind++ {
			f.Add([]byte{byte(i), kind, 0x10, 0x27, 0, 0, 3, 0xff})    // around byte 10000
			f.Add([]byte{byte(i), kind, 0x31, 0, 0, 0, 1, 0x80})       // byte 49
			f.Add([]byte{byte(i), kind, 0xff, 0xff, 0xff, 0x7f, 0, 9}) // somewhere
		}
	}
}

// FuzzOpenDamaged opens a damaged copy of a real journal, without and with
// Repair. Without, Open recovers a prefix or fails naming the file (and the
// offset of a bad record). With Repair it starts, recovers a prefix, keeps
// what it cut, and the repaired log opens again without Repair, with a
// record appended after the repair.
func FuzzOpenDamaged(f *testing.F) {
	files, names := fuzzBase(f)
	fuzzSeeds(f, names)
	f.Fuzz(func(t *testing.T, edits []byte) {
		dir := writeFuzzDir(t, damage(files, names, edits))
		o := Options{Dir: dir, Sync: SyncNo, SegmentSize: 128 << 10}
		j, _, _, err := openRecover(t, o)
		if err == nil {
			checkRecovered(t, j)
			j.Close()
		} else {
			var ce *CorruptError
			var te *TailError
			switch {
			case errors.As(err, &ce):
				if ce.File == "" || ce.Offset < 0 || !strings.Contains(err.Error(), ce.File) {
					t.Fatalf("a corrupt log reported without its file and offset: %v", err)
				}
			case errors.As(err, &te):
				if !strings.Contains(err.Error(), tailName) {
					t.Fatalf("a missing tail reported without TAIL: %v", err)
				}
			default:
				t.Fatalf("Open failed with neither a CorruptError nor a TailError: %v", err)
			}
		}
		o.Repair = true
		j, err = Open(o)
		if err != nil {
			t.Fatalf("Open with Repair: %v", err)
		}
		last := checkRecovered(t, j)
		if _, err := j.Append([]byte("after the repair")); err != nil {
			t.Fatalf("Append after the repair: %v", err)
		}
		if err := j.Close(); err != nil {
			t.Fatalf("Close after the repair: %v", err)
		}
		o.Repair = false
		j, err = Open(o)
		if err != nil {
			t.Fatalf("Open after a repair: %v", err)
		}
		defer j.Close()
		n := 0
		if err := j.Replay(func(i uint64, rec []byte) error {
			n++
			if i == last+1 && string(rec) != "after the repair" {
				t.Fatalf("record %d: %q", i, rec)
			}
			return nil
		}); err != nil {
			t.Fatalf("Replay after a repair: %v", err)
		}
		if j.LastIndex() != last+1 {
			t.Fatalf("LastIndex %d after the repair's %d and one append", j.LastIndex(), last)
		}
	})
}

// FuzzSnapshotReader damages the newest snapshot file of a real journal
// and reads it as Open and a restore do: openSnapshot either accepts the
// file or fails with an error wrapping ErrCorrupt; a file accepted by its
// ends alone then reads to io.EOF with exactly the payload written, or
// fails with ErrCorrupt; a file accepted whole (Repair) reads the payload
// written. Never a panic, never a damaged payload with io.EOF.
func FuzzSnapshotReader(f *testing.F) {
	files, names := fuzzBase(f)
	var snap string
	for _, n := range names {
		if strings.HasSuffix(n, snapExt) {
			snap = n // the newest, names sort by index
		}
	}
	fuzzSeeds(f, []string{snap})
	f.Fuzz(func(t *testing.T, edits []byte) {
		b := damage(map[string][]byte{snap: files[snap]}, []string{snap}, edits)[snap]
		if b == nil {
			return // deleted
		}
		p := filepath.Join(memTempDir(t), snap)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, whole := range []bool{false, true} {
			fh, n, err := openSnapshot(p, 80, whole)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("openSnapshot(whole %v): %v does not wrap ErrCorrupt", whole, err)
				}
				continue
			}
			data, err := io.ReadAll(newSnapReader(fh, 80, n))
			fh.Close()
			switch {
			case err != nil && (whole || !errors.Is(err, ErrCorrupt)):
				t.Fatalf("opened (whole %v), then: %v", whole, err)
			case err == nil && !bytes.Equal(data, snapContent(80)):
				t.Fatalf("a damaged snapshot read to io.EOF: %d bytes of payload", len(data))
			}
		}
	})
}
