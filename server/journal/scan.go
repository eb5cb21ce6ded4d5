package journal

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

const (
	chunkHeader = 7
	chunkFull   = 0
	chunkFirst  = 1
	chunkMiddle = 2
	chunkLast   = 3
)

// errBad is a structural fault at segReader.bad: a chunk whose CRC, length
// or type is wrong, or a file that ends inside a record.
type errBad struct{ reason string }

func (e errBad) Error() string { return e.reason }

// segReader reads the records of one segment file in order, checking every
// chunk strictly (the library's own Reader does not check lengths or the
// order of chunk types). It reads a block at a time into one buffer.
type segReader struct {
	f       *os.File
	size    int64
	block   []byte
	blockNo int64 // block held in block; -1 if none
	pos     int64 // next chunk
	rec     []byte
	start   int64 // start of the record last returned, or of the bad one
	end     int64 // end of the last good record (and of any padding before it)
}

func newSegReader(f *os.File, size int64, buf []byte) *segReader {
	return &segReader{f: f, size: size, block: buf[:blockSize], blockNo: -1}
}

// load makes block hold the block containing pos and returns it.
func (r *segReader) load(pos int64) ([]byte, error) {
	no := pos / blockSize
	base := no * blockSize
	n := min(int64(blockSize), r.size-base)
	if no != r.blockNo || int64(len(r.block)) != n {
		r.block = r.block[:n]
		if _, err := r.f.ReadAt(r.block, base); err != nil {
			r.blockNo = -1
			return nil, err
		}
		r.blockNo = no
	}
	return r.block, nil
}

// next returns the next record's data (valid until the next call), io.EOF
// at a clean end of file, an errBad (with r.start at the bad record) or a
// read error. Zeros from where a record would start to the end of the file
// (a preallocated tail, see Options.Preallocate) are a clean end: r.size
// becomes their start, where the next record goes.
func (r *segReader) next() ([]byte, error) {
	assembling := false
	r.start = r.pos
	for {
		off := r.pos % blockSize
		if r.pos >= r.size {
			if assembling {
				return nil, errBad{"file ends inside a record"}
			}
			return nil, io.EOF
		}
		if !assembling && off+chunkHeader >= blockSize {
			if err := r.padding(off); err != nil {
				return nil, err
			}
			r.start = r.pos
			continue
		}
		if !assembling {
			if zero, err := r.zeroFrom(r.pos); err != nil || zero {
				r.size = r.pos
				return nil, cmp.Or(err, io.EOF)
			}
		}
		if r.size-r.pos < chunkHeader {
			return nil, errBad{"file ends inside a chunk header"}
		}
		b, err := r.load(r.pos)
		if err != nil {
			return nil, err
		}
		h := b[off : off+chunkHeader]
		n := int64(binary.LittleEndian.Uint16(h[4:6]))
		typ := h[6]
		switch {
		case typ > chunkLast:
			return nil, errBad{fmt.Sprintf("bad chunk type %d", typ)}
		case off+chunkHeader+n > blockSize:
			return nil, errBad{fmt.Sprintf("chunk length %d runs past its block", n)}
		case r.pos+chunkHeader+n > r.size:
			return nil, errBad{"file ends inside a chunk"}
		}
		data := b[off+chunkHeader : off+chunkHeader+n]
		if crc32.ChecksumIEEE(b[off+4:off+chunkHeader+n]) != binary.LittleEndian.Uint32(h[:4]) {
			return nil, errBad{"chunk CRC mismatch"}
		}
		if reason := chunkOrder(typ, assembling, off, n); reason != "" {
			return nil, errBad{reason}
		}
		r.pos += chunkHeader + n
		switch typ {
		case chunkFull:
			r.end = r.pos
			return data, nil
		case chunkFirst:
			r.rec = append(r.rec[:0], data...)
			assembling = true
		case chunkMiddle:
			r.rec = append(r.rec, data...)
		case chunkLast:
			r.rec = append(r.rec, data...)
			r.end = r.pos
			return r.rec, nil
		}
	}
}

// chunkOrder checks a chunk's type against its place, as the library writes
// them: a first chunk fills its block to the end, a middle one a whole
// block, a middle or last one starts a block.
func chunkOrder(typ byte, assembling bool, off, n int64) string {
	switch typ {
	case chunkFull, chunkFirst:
		if assembling {
			return "a record's chunks are interrupted"
		}
		if typ == chunkFirst && off+chunkHeader+n != blockSize {
			return "a first chunk does not fill its block"
		}
	case chunkMiddle, chunkLast:
		if !assembling {
			return "a middle or last chunk without a first"
		}
		if off != 0 || (typ == chunkMiddle && n != blockSize-chunkHeader) {
			return "a middle or last chunk out of place"
		}
	}
	return ""
}

// padding skips the zeros the library writes when 7 bytes or fewer are
// left in a block (a file may end inside them).
func (r *segReader) padding(off int64) error {
	n := min(blockSize-off, r.size-r.pos)
	b, err := r.load(r.pos)
	if err != nil {
		return err
	}
	for _, c := range b[off : off+n] {
		if c != 0 {
			return errBad{"non-zero block padding"}
		}
	}
	r.pos += n
	return nil
}

// zeroFrom reports whether the file holds only zeros from pos to its end.
// It stops at the first non-zero byte: where a record starts, at its
// header's first bytes; the whole tail is read once, at the end.
func (r *segReader) zeroFrom(pos int64) (bool, error) {
	for p := pos; p < r.size; {
		b, err := r.load(p)
		if err != nil {
			return false, err
		}
		base := (p / blockSize) * blockSize
		for _, c := range b[p-base:] {
			if c != 0 {
				return false, nil
			}
		}
		p = base + int64(len(b))
	}
	return true, nil
}

// zeroHeader reports whether a whole chunk header of zeros is at pos: never
// written (no chunk has length 0, and a bit flip does not clear 7 bytes),
// as a sector of a preallocated segment reads when the disk lost its write.
// In the last segment that is a torn tail even with valid records after it:
// they were written after it, so none was fsynced when the machine
// stopped (fdatasync covers every byte written before it). A segment that
// grows by appending has no such gap: its size commits after its data.
func (r *segReader) zeroHeader(pos int64) bool {
	if r.size-pos < chunkHeader {
		return false
	}
	b, err := r.load(pos)
	if err != nil {
		return false
	}
	off := pos % blockSize
	return off+chunkHeader <= int64(len(b)) && string(b[off:off+chunkHeader]) == "\x00\x00\x00\x00\x00\x00\x00"
}

// validAfter reports whether a valid full or first chunk, holding an index
// above after, starts anywhere past from. It tells a torn tail (nothing
// valid follows) from a damaged record with good ones after it.
func (r *segReader) validAfter(from int64, after uint64) (bool, error) {
	_, _, ok, err := r.nextValid(from, after)
	return ok, err
}

// nextValid returns the offset and index of the first valid full or first
// chunk, holding an index above after, that starts at or past from. Chunks
// never cross blocks, so it reads one block at a time.
func (r *segReader) nextValid(from int64, after uint64) (int64, uint64, bool, error) {
	for p := from; p+chunkHeader < r.size; {
		b, err := r.load(p)
		if err != nil {
			return 0, 0, false, err
		}
		base := (p / blockSize) * blockSize
		for off := p - base; off+chunkHeader < int64(len(b)); off++ {
			typ := b[off+6]
			n := int64(binary.LittleEndian.Uint16(b[off+4 : off+6]))
			if (typ != chunkFull && typ != chunkFirst) || n == 0 || off+chunkHeader+n > int64(len(b)) {
				continue
			}
			if crc32.ChecksumIEEE(b[off+4:off+chunkHeader+n]) != binary.LittleEndian.Uint32(b[off:]) {
				continue
			}
			if idx, k := binary.Uvarint(b[off+chunkHeader : off+chunkHeader+n]); k > 0 && idx > after {
				return base + off, idx, true, nil
			}
		}
		p = base + blockSize
	}
	return 0, 0, false, nil
}

// highestFrom returns the highest index of a record that can still be read
// in the segment from byte from on (indexRange). 0 if none.
func (r *segReader) highestFrom(from int64) (uint64, error) {
	_, hi, err := r.indexRange(from)
	return hi, err
}

// indexRange returns the lowest and highest indexes of the records that
// can still be read in the segment from byte from on: it reads records in
// order and, after a bad one, goes on at the next valid chunk (nextValid).
// 0, 0 if none.
func (r *segReader) indexRange(from int64) (lo, hi uint64, err error) {
	r.pos = from
	for r.pos < r.size {
		data, err := r.next()
		if err == io.EOF {
			break
		}
		if _, bad := err.(errBad); bad {
			p, _, ok, err := r.nextValid(r.start+1, 0)
			if err != nil || !ok {
				return lo, hi, err
			}
			r.pos = p
			continue
		}
		if err != nil {
			return lo, hi, err
		}
		if idx, _, ok := decodeRecord(data); ok {
			if lo == 0 || idx < lo {
				lo = idx
			}
			hi = max(hi, idx)
		}
	}
	return lo, hi, nil
}

// decodeRecord splits a record's data into its index and the caller's bytes.
func decodeRecord(data []byte) (uint64, []byte, bool) {
	idx, k := binary.Uvarint(data)
	if k <= 0 || idx == 0 {
		return 0, nil, false
	}
	return idx, data[k:], true
}

// scanLog checks the segments, cuts a torn tail off the last one (or, with
// Repair, the log at its first bad record), and returns what the segments
// hold and the last index in the log. snap is the chosen snapshot's index:
// records above it must run snap+1, snap+2, ... with no gap; records at or
// below it need only increase. The scan that counts starts at the segment
// holding snap+1: a segment followed by one that starts at or below snap+1
// holds only records the snapshot covers, none of which will be replayed,
// so a bad record in it is logged and skipped (skipCovered), never fatal.
func (j *Journal) scanLog(ids []uint32, snap uint64) ([]segInfo, uint64, error) {
	var (
		segs []segInfo
		prev uint64
		buf  = make([]byte, blockSize)
	)
	firsts, err := j.firstIndexes(ids, buf)
	if err != nil {
		return nil, 0, err
	}
	covered := coveredSegments(firsts, snap)
	for i, id := range ids {
		path := j.segPath(id)
		s, bad, err := j.scanSegment(path, id, snap, &prev, buf, i == len(ids)-1)
		if err != nil {
			return nil, 0, err
		}
		if bad != nil && i < covered {
			s = j.skipCovered(bad, s, firsts[i+1:], snap)
			prev = max(prev, s.last)
			segs = append(segs, s)
			continue
		}
		if bad != nil {
			if err := j.lostBy(bad, prev, snap, s, ids[i+1:], buf); err != nil {
				return nil, 0, err
			}
			if !j.opts.Repair {
				return nil, 0, bad
			}
			if err := j.repairAt(bad, s, ids[i+1:]); err != nil {
				return nil, 0, err
			}
			return append(segs, s), prev, nil
		}
		segs = append(segs, s)
	}
	return segs, prev, nil
}

// scanSegment reads one segment. It returns the segment's good extent and,
// for a fault that is not a torn tail of the last segment, a *CorruptError;
// a torn tail it cuts off itself.
func (j *Journal) scanSegment(path string, id uint32, snap uint64, prev *uint64, buf []byte, last bool) (segInfo, *CorruptError, error) {
	s := segInfo{id: id}
	f, err := os.Open(path)
	if err != nil {
		return s, nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return s, nil, fmt.Errorf("journal: %w", err)
	}
	r := newSegReader(f, st.Size(), buf)
	for {
		data, err := r.next()
		if err == io.EOF {
			s.size = r.size
			return s, nil, nil
		}
		if eb, isBad := err.(errBad); isBad {
			s.size = r.end
			ce := &CorruptError{File: path, Offset: r.start, Reason: eb.reason}
			at, idx, more, err := r.nextValid(r.start+1, *prev)
			if err != nil {
				return s, nil, fmt.Errorf("journal: reading %s: %w", path, err)
			}
			if more && idx <= snap+1 {
				// The bad bytes come before record idx: if they were a
				// record, the snapshot covers it. Go on from idx.
				j.log.Warn("journal: a bad record the snapshot covers: not needed, skipped (the file is kept as it is)",
					"file", path, "offset", r.start, "reason", eb.reason, "resumed_at", at, "snapshot_index", snap)
				r.pos, s.from = at, at
				continue
			}
			if !last {
				return s, ce, nil
			}
			if err := j.tornTail(r, ce, max(*prev, snap), snap, more); err != nil {
				if ce, isBad := err.(*CorruptError); isBad {
					return s, ce, nil
				}
				return s, nil, err
			}
			return s, nil, nil
		}
		if err != nil {
			return s, nil, fmt.Errorf("journal: reading %s: %w", path, err)
		}
		idx, _, ok := decodeRecord(data)
		want := max(*prev, snap) + 1
		switch {
		case !ok:
			err = &CorruptError{File: path, Offset: r.start, Reason: "record has no index"}
		case idx <= *prev:
			err = &CorruptError{File: path, Offset: r.start,
				Reason: fmt.Sprintf("index %d after %d", idx, *prev)}
		case idx > snap && idx != want:
			err = &CorruptError{File: path, Offset: r.start,
				Reason: fmt.Sprintf("index %d where %d was due (records missing)", idx, want)}
		}
		if err != nil {
			s.size = r.start
			return s, err.(*CorruptError), nil
		}
		*prev = idx
		if s.first == 0 {
			s.first = idx
		}
		s.last = idx
	}
}

// tornTail decides about a bad chunk (ce, at r.start) in the last segment
// after the good records up to index good: a torn tail that a power cut
// left, which it cuts off (nil), or damage (ce, its reason completed).
// more says whether a valid record above good follows. A power cut leaves
// only bytes that were never fsynced in a bad state, so the bad chunk is
// a torn tail when nothing at or below the last index known fsynced (the
// TAIL file's, or the snapshot's) is missing or follows it: the records
// after it, if any, were written after it and stored out of order by the
// disk, none of them fsynced (fdatasync covers every byte written before
// it). A bad chunk at or below that index, or followed by a record at or
// below it, is damage. Without a TAIL file nothing tells that the records
// after it were not fsynced, so a bad chunk followed by valid ones is
// damage then, unless its header is all zeros (zeroHeader).
func (j *Journal) tornTail(r *segReader, ce *CorruptError, good, snap uint64, more bool) error {
	floor := max(snap, j.tail.Durable)
	if good < floor {
		// Not torn by a crash: TAIL says the record was fsynced.
		ce.Reason += fmt.Sprintf(" at the end of the log, but %s records index %d as fsynced", tailName, j.tail.Durable)
		return ce
	}
	if !more {
		return j.cutTail(ce.File, r.end, r.size)
	}
	if !j.tailOK && !r.zeroHeader(r.start) {
		ce.Reason += fmt.Sprintf(" (valid records follow, and with no %s file nothing tells that they were not fsynced)", tailName)
		return ce
	}
	lo, hi, err := r.indexRange(r.start)
	if err != nil {
		return fmt.Errorf("journal: reading %s: %w", ce.File, err)
	}
	if lo <= good {
		ce.Reason += fmt.Sprintf(" (valid records follow, one of them index %d, at or below %d)", lo, good)
		return ce
	}
	return j.cutTorn(ce, r.end, r.size, good, hi, floor)
}

// cutTorn cuts the last segment at a torn record followed by valid
// records that were never fsynced (tornTail), keeping a copy of the
// segment as it was in a repaired-<time> directory (asideDir): the records
// good+1..hi are cut, none of them known durable (floor).
func (j *Journal) cutTorn(ce *CorruptError, end, size int64, good, hi, floor uint64) error {
	aside, err := j.asideDir()
	if err != nil {
		return err
	}
	if err := copyFile(ce.File, filepath.Join(aside, filepath.Base(ce.File))); err != nil {
		return fmt.Errorf("journal: keeping a copy of %s before cutting its torn tail: %w", ce.File, err)
	}
	if err := syncDir(aside); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := syncDir(j.dir); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := truncateFile(ce.File, end); err != nil {
		return fmt.Errorf("journal: cutting the torn tail of %s: %w", ce.File, err)
	}
	j.log.Warn("journal: cut a torn end of the log: a bad record followed by valid ones, none of them fsynced (a power cut that stored unsynced sectors out of order); nothing known durable is lost, and the segment as it was is kept in the aside directory",
		"file", ce.File, "offset", ce.Offset, "reason", ce.Reason, "first_cut", good+1, "last_cut", hi,
		"records_cut", hi-good, "dropped_bytes", size-end, "durable_index", floor, "aside", aside)
	return nil
}

// cutTail truncates the last segment after its last good record.
func (j *Journal) cutTail(path string, good, size int64) error {
	if err := truncateFile(path, good); err != nil {
		return fmt.Errorf("journal: cutting the torn tail of %s: %w", path, err)
	}
	j.log.Warn("journal: cut a torn record off the end of the log",
		"file", path, "offset", good, "dropped_bytes", size-good)
	return nil
}

func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Replay calls fn with every log record after the snapshot's index, in
// order, checking each again as it reads it. rec is valid only during the
// call. It stops at fn's first error and returns it. Replay must be called
// before the first Append or CreateSnapshot (ErrRecoveryOver after).
func (j *Journal) Replay(fn func(index uint64, rec []byte) error) error {
	if j.closed {
		return ErrClosed
	}
	if j.started {
		return ErrRecoveryOver
	}
	buf := make([]byte, blockSize)
	next := j.snapIndex + 1
	for _, s := range j.replay {
		if err := j.replaySegment(s, buf, &next, fn); err != nil {
			return err
		}
	}
	return nil
}

func (j *Journal) replaySegment(s segInfo, buf []byte, next *uint64, fn func(uint64, []byte) error) error {
	path := j.segPath(s.id)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	r := newSegReader(f, s.size, buf)
	r.pos = s.from
	for {
		data, err := r.next()
		if err == io.EOF {
			return nil
		}
		if eb, isBad := err.(errBad); isBad {
			return &CorruptError{File: path, Offset: r.start, Reason: eb.reason + " (changed since Open)"}
		}
		if err != nil {
			return fmt.Errorf("journal: reading %s: %w", path, err)
		}
		idx, rec, ok := decodeRecord(data)
		if !ok || idx > *next {
			return &CorruptError{File: path, Offset: r.start, Reason: "index out of sequence (changed since Open)"}
		}
		if idx < *next {
			continue // covered by the snapshot
		}
		if err := fn(idx, rec); err != nil {
			return err
		}
		*next = idx + 1
	}
}
