package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// The journal writes its segments itself, in the format of
// github.com/rosedblabs/wal v1.3.8 (LevelDB's log format; see the package
// comment), which it used to write them with: logs written by either read
// the same. The library opens its segments with O_APPEND, so every write
// lands at the file's size; a file preallocated ahead of its records
// (Options.Preallocate) needs writes at an offset of our own.

const (
	segExt       = ".seg"
	firstSegment = 1
)

// segFileName is the path of segment id in dir: 000000001.seg, ...
func segFileName(dir string, id uint32) string {
	return filepath.Join(dir, fmt.Sprintf("%09d%s", id, segExt))
}

// appendChunks appends the chunks of one record's data to buf, as they are
// written at byte offset off of a segment: zero padding first if 7 bytes or
// fewer are left in off's block, then one full chunk, or a first, middle
// ones and a last. It returns buf and the segment offset after the record.
func appendChunks(buf []byte, off int64, data []byte) ([]byte, int64) {
	b := off % blockSize
	if b+chunkHeader >= blockSize {
		buf = append(buf, make([]byte, blockSize-b)...)
		off += blockSize - b
		b = 0
	}
	if b+chunkHeader+int64(len(data)) <= blockSize {
		return appendChunk(buf, data, chunkFull), off + chunkHeader + int64(len(data))
	}
	typ := byte(chunkFirst)
	for len(data) > 0 {
		n := min(blockSize-b-chunkHeader, int64(len(data)))
		if n == int64(len(data)) {
			typ = chunkLast
		}
		buf = appendChunk(buf, data[:n], typ)
		data = data[n:]
		off += chunkHeader + n
		b = (b + chunkHeader + n) % blockSize
		typ = chunkMiddle
	}
	return buf, off
}

// appendChunk appends one chunk: the CRC-32/IEEE of length, type and data,
// the length (uint16), the type, the data.
func appendChunk(buf, data []byte, typ byte) []byte {
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, typ) // the header, CRC and length below
	h := buf[at:]
	binary.LittleEndian.PutUint16(h[4:6], uint16(len(data)))
	sum := crc32.Update(crc32.ChecksumIEEE(h[4:]), crc32.IEEETable, data)
	binary.LittleEndian.PutUint32(h[:4], sum)
	return append(buf, data...)
}

// writeRec writes one record's data at the end of the active segment's
// records with a single pwrite(2), first starting the next segment if it
// would end past Options.SegmentSize (a record is at most half a segment,
// so it fits in a new one). It returns the record's end offset in the
// active segment, which the caller makes j.act.size. On error nothing of
// the journal's state has moved, but part of the record may be in the file:
// the caller marks the segment dirty so that it is cut back.
func (j *Journal) writeRec(data []byte) (int64, error) {
	buf, end := appendChunks(j.wbuf[:0], j.act.size, data)
	if end > j.opts.SegmentSize && j.act.size > 0 {
		if err := j.rotate(); err != nil {
			return 0, err
		}
		buf, end = appendChunks(j.wbuf[:0], 0, data)
	}
	j.wbuf = buf[:0]
	if j.sf == nil {
		return 0, errors.New("journal: active segment not open")
	}
	j.preallocate(end)
	if _, err := j.sf.WriteAt(buf, j.act.size); err != nil {
		return 0, err
	}
	j.alloc = max(j.alloc, end)
	return end, nil
}

// preallocate makes the active segment's file reach past end, in steps of
// Options.Preallocate, by writing zeros after its records. A later
// fdatasync of records written inside the file then commits no new file
// size and allocates no block: it writes data only, not ext4's journal
// (Append+Sync here: 147-154 instead of 204-220 µs; a throwaway loop of
// 3.8 KiB writes: ~105 instead of ~190 µs). fallocate(2) would not do: its
// blocks are unwritten extents, and each write into one changes the extent
// tree, metadata that fdatasync commits (no gain, or a loss, measured). A
// failed write of zeros (a full disk) is left to the record's write that
// follows, which fails the same way or fits.
func (j *Journal) preallocate(end int64) {
	step := j.opts.Preallocate
	if step <= 0 || end <= j.alloc {
		return
	}
	to := min((end+step-1)/step*step, j.opts.SegmentSize)
	for j.alloc < to {
		n, err := j.sf.WriteAt(zeros[:min(to-j.alloc, int64(len(zeros)))], j.alloc)
		j.alloc += int64(n)
		if err != nil {
			return
		}
	}
}

// zeros is what preallocate writes.
var zeros [64 << 10]byte

// trimActive cuts the active segment's file back to its records when it
// was preallocated past them (a clean Close, a rotation), so that a file
// that is no longer written holds no zero tail. The caller fsyncs.
func (j *Journal) trimActive() error {
	if j.sf == nil || j.alloc <= j.act.size {
		return nil
	}
	if err := j.sf.Truncate(j.act.size); err != nil {
		return fmt.Errorf("journal: cutting the preallocated tail of %s: %w", j.sf.Name(), err)
	}
	j.alloc = j.act.size
	return nil
}

// rotate closes the active segment (its preallocated tail cut off, its
// records fsynced, so every record written so far is durable) and starts
// the next one. On error the active segment stays as it was; a failed fsync
// rewinds the records not known durable (see rewind).
func (j *Journal) rotate() error {
	if j.sf == nil {
		return errors.New("journal: active segment not open")
	}
	if err := j.trimActive(); err != nil {
		return err
	}
	// The segment's directory entry too, if it was created since the last
	// directory fsync: without it a power cut may lose the whole file,
	// whose records rotated then counts durable (found by TestPowerLoss).
	// And a failed background fsync since the last Append's check fails
	// the rotation: its pages may be gone (fsyncActive).
	if err := j.fsyncActive(); err != nil {
		j.rewind(err)
		return fmt.Errorf("journal: fsync of a full segment: %w", err)
	}
	id := j.act.id + 1
	f, err := j.opts.FS.OpenFile(segFileName(j.dir, id), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("journal: starting a new segment: %w", err)
	}
	j.rotated(id, f)
	return nil
}

// rotated records that segment id, open as f, is now the active one; every
// record written so far is durable (the previous segment was fsynced).
func (j *Journal) rotated(id uint32, f vfs.File) {
	j.mu.Lock()
	j.closedSeg = append(j.closedSeg, j.act)
	j.mu.Unlock()
	j.act = segInfo{id: id}
	j.durOff, j.alloc = 0, 0
	j.markDurable(j.wIdx)
	j.smu.Lock()
	old := j.sf
	j.sf = f
	j.dirDirty = true
	if j.durable < j.wIdx {
		j.durable = j.wIdx
	}
	j.smu.Unlock()
	j.signalWrote() // the directory, for the new segment's entry
	if old != nil {
		_ = old.Close() // a concurrent fsync on it finishes first (os.File refcount)
	}
}
