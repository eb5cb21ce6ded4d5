package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/journal"
)

// The log damage tests work on crash images: copies of a running durable
// server's log directory taken after the replies they rely on (fsync
// always), which is what a crash at that moment leaves on disk.

// crashImage starts a durable server (frozen at tick 1000), adds timers
// 1..n of receiver 1 one request (so one log record) each, with data
// "keep-<tid>", then the timer of tid last (if not 0) with data
// lastRecordData, and returns a copy of its log directory taken while it
// runs, and the timers as list shows them before the last one.
func crashImage(t *testing.T, n, last uint64) (string, []protocol.Timer) {
	t.Helper()
	dir := t.TempDir()
	srv := startServer(t, durable(dir, "always"))
	c := helloClient(t, srv, "image")
	for tid := uint64(1); tid <= n; tid++ {
		c.add(protocol.Request{Receiver: 1, Tid: tid, After: 10 * tid, Every: tid, Repeat: 3, Data: keepData(tid)})
	}
	kept := c.list(1)
	if last != 0 {
		c.add(protocol.Request{Receiver: 1, Tid: last, After: 5, Data: []byte(lastRecordData)})
	}
	image := filepath.Join(t.TempDir(), "image")
	require.NoError(t, os.CopyFS(filepath.Join(image, logDir), os.DirFS(filepath.Join(dir, logDir))))
	// The tests tear or flip records that were fsynced (fsync always): a
	// TAIL written after them would rightly call that damage, not a crash.
	// An image without TAIL is a crash before the first checkpoint.
	require.NoError(t, os.Remove(filepath.Join(image, logDir, "TAIL")))
	return image, kept
}

const lastRecordData = "the-last-record"

func keepData(tid uint64) []byte { return fmt.Appendf(nil, "keep-%d", tid) }

// copyImage copies a crash image to a new data directory.
func copyImage(t *testing.T, image string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.CopyFS(dir, os.DirFS(image)))
	return dir
}

// lastSegment returns the path of the last non-empty log segment of the
// data directory dir (later ones must be empty) and its bytes.
func lastSegment(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, logDir, "*.seg"))
	require.NoError(t, err)
	slices.Sort(segs)
	for i := len(segs) - 1; i >= 0; i-- {
		b, err := os.ReadFile(segs[i])
		require.NoError(t, err)
		if b = b[:logEnd(b)]; len(b) > 0 {
			return segs[i], b
		}
	}
	t.Fatalf("no log segment with records in %s", dir)
	return "", nil
}

// segChunk is one chunk of a segment (see server/journal/doc.go): a 7-byte
// header (CRC, length, type) and its data, in 32 KiB blocks.
type segChunk struct {
	start, end int64
	first      bool // a record starts here (a full or first chunk)
}

// logEnd is where a segment's records end: at its size, or where a chunk
// header of zeros starts the zeros the journal preallocates the active
// segment with (journal.Options.Preallocate).
func logEnd(seg []byte) int {
	const block, header = 32 << 10, 7
	o := 0
	for o+header <= len(seg) {
		if rest := block - o%block; rest <= header {
			o += rest // padding
			continue
		}
		if bytes.Equal(seg[o:o+header], make([]byte, header)) {
			return o
		}
		o += header + int(binary.LittleEndian.Uint16(seg[o+4:]))
	}
	return len(seg)
}

// chunks splits a segment into its chunks, failing on trailing bytes.
func chunks(t *testing.T, seg []byte) []segChunk {
	t.Helper()
	const block, header = 32 << 10, 7
	var out []segChunk
	for o := int64(0); o < int64(len(seg)); {
		if rest := block - o%block; rest <= header {
			o += rest // padding
			continue
		}
		n := int64(binary.LittleEndian.Uint16(seg[o+4:]))
		typ := seg[o+6]
		require.LessOrEqual(t, o+header+n, int64(len(seg)), "chunk at %d passes the end", o)
		out = append(out, segChunk{start: o, end: o + header + n, first: typ == 0 || typ == 1})
		o += header + n
	}
	return out
}

// startOn starts a durable server on data directory dir, logging to logs.
func startOn(t *testing.T, dir string, logs *lockedBuffer, mutate func(*Config)) (*Server, error) {
	t.Helper()
	srv, err := newUnstarted(t, slog.New(slog.NewTextHandler(logs, nil)), func(c *Config) {
		durable(dir, "always")(c)
		if mutate != nil {
			mutate(c)
		}
	})
	if err != nil {
		return nil, err
	}
	return srv, srv.Start()
}

// requireServes checks that srv holds exactly want on receiver 1 and takes
// a new timer.
func requireServes(t *testing.T, srv *Server, want []protocol.Timer) {
	t.Helper()
	c := helloClient(t, srv, "check")
	if d := diffTimers(c.list(1), want); d != "" {
		t.Fatalf("receiver 1: %s", d)
	}
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 1})
	c.conn.Close()
}

// TestFaultTornLastRecord: a crash image whose last segment is cut at every
// byte offset of its last record (a crash in the middle of writing it)
// starts, with every record before it recovered, the cut logged with the
// file and offset, and serves; the log it goes on writing is whole (a
// second restart recovers the timer added after the cut).
func TestFaultTornLastRecord(t *testing.T) {
	image, kept := crashImage(t, 10, 99)
	seg, data := lastSegment(t, image)
	segName := filepath.Base(seg)
	cs := chunks(t, data)
	last := cs[len(cs)-1]
	require.True(t, last.first && last.end == int64(len(data)), "the last record is one chunk ending the file")
	require.True(t, bytes.Contains(data[last.start:], []byte(lastRecordData)), "the last record is the last add")
	step := int64(1)
	if testing.Short() {
		step = 7
	}
	cuts := 0
	for cut := last.start; cut < last.end; cut += step {
		t.Run(fmt.Sprint(cut-last.start), func(t *testing.T) {
			dir := copyImage(t, image)
			require.NoError(t, os.Truncate(filepath.Join(dir, logDir, segName), cut))
			var logs lockedBuffer
			srv, err := startOn(t, dir, &logs, nil)
			require.NoError(t, err, "a torn last record must not stop the start")
			requireServes(t, srv, kept)
			if cut > last.start {
				assert.Contains(t, logs.String(), "cut a torn record off the end of the log")
				assert.Contains(t, logs.String(), segName)
				assert.Contains(t, logs.String(), fmt.Sprintf("offset=%d dropped_bytes=%d", last.start, cut-last.start))
			}
			stopNow(t, srv)
			srv, err = startOn(t, dir, &lockedBuffer{}, nil)
			require.NoError(t, err)
			c := helloClient(t, srv, "again")
			assert.Len(t, c.list(1), len(kept))
			assert.Len(t, c.list(2), 1, "the timer added after the cut")
			stopNow(t, srv)
		})
		cuts++
	}
	t.Logf("cut the last record (%d bytes) at %d offsets", last.end-last.start, cuts)
}

// TestFaultFlippedBit: a bit flipped in a record in the middle of the log
// stops the start with an error naming the segment file and the record's
// offset (the server and the real binary alike); with repair (Config.Repair,
// -repair) it starts, keeping every record before the bad one.
func TestFaultFlippedBit(t *testing.T) {
	image, _ := crashImage(t, 20, 0)
	seg, data := lastSegment(t, image)
	segName := filepath.Base(seg)
	marker := keepData(10)
	at := bytes.Index(data, marker)
	require.Positive(t, at)
	cs := chunks(t, data)
	bad := cs[slices.IndexFunc(cs, func(c segChunk) bool { return c.end > int64(at) })]
	data[at+2] ^= 0x10
	require.NoError(t, os.WriteFile(seg, data, 0o600))

	dir := copyImage(t, image)
	_, err := startOn(t, dir, &lockedBuffer{}, nil)
	var ce *journal.CorruptError
	require.ErrorAs(t, err, &ce, "a bad record in the middle of the log stops the start")
	assert.Equal(t, filepath.Join(dir, logDir, segName), ce.File)
	assert.Equal(t, bad.start, ce.Offset)

	var logs lockedBuffer
	srv, err := startOn(t, dir, &logs, func(c *Config) { c.Repair = true })
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "repair cut the log at a bad record")
	requireServes(t, srv, keptBefore(10))
	stopNow(t, srv)

	dir = copyImage(t, image)
	p, err := tryStartProc(t, "-data-dir", dir, "-frozen")
	require.Error(t, err, "the binary must refuse the damaged log")
	assert.False(t, p.alive())
	assert.Contains(t, err.Error(), filepath.Join(dir, logDir, segName))
	assert.Contains(t, err.Error(), fmt.Sprintf("byte offset %d", bad.start))
	p = startProc(t, "-data-dir", dir, "-frozen", "-repair")
	c, err := dialWire(p.addr, "check", procToken)
	require.NoError(t, err)
	got, err := c.listAll(1)
	require.NoError(t, err)
	if d := diffTimers(got, keptBefore(10)); d != "" {
		t.Fatalf("after -repair: %s", d)
	}
	p.term()
}

// keptBefore is receiver 1's timers of a crash image, as list shows them,
// from tid 1 to tid n-1.
func keptBefore(n uint64) []protocol.Timer {
	var out []protocol.Timer
	for tid := uint64(1); tid < n; tid++ {
		out = append(out, protocol.Timer{Receiver: 1, Tid: tid, Due: 1000 + 10*tid, Remaining: 10 * tid, Every: tid,
			Repeat: 3, Data: keepData(tid)})
	}
	return out
}
