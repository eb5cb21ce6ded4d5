package wheel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// Errors of Restore and Restorer, wrapped with details; test with errors.Is.
var (
	// ErrSnapshot is returned for input that is not a valid snapshot:
	// malformed, not canonical, truncated, or failing its checksum.
	ErrSnapshot = errors.New("wheel: malformed snapshot")
	// ErrSnapshotVersion is returned for a snapshot of a format version
	// this package does not read.
	ErrSnapshotVersion = errors.New("wheel: unsupported snapshot version")
)

// maxSnapData bounds a payload read from a snapshot.
const maxSnapData = 1 << 30

// Restore returns the wheel saved in snapshot, with geometry cfg (which
// need not be the saved wheel's: see Restorer). It is Restorer in one Write.
func Restore(cfg Config, snapshot []byte) (*Wheel, error) {
	r, err := NewRestorer(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := r.Write(snapshot); err != nil {
		return nil, err
	}
	return r.Wheel()
}

// Restorer builds a wheel from a snapshot (see SnapshotVersion) written to
// it in pieces of any size, as read from a file: it is an io.Writer, so
// io.Copy(r, file) feeds it. Memory beyond the wheel being built is bounded
// by the largest record (about 60 bytes plus its data): only a record cut
// between two Writes is copied.
//
// The restored wheel is observably identical to the one frozen: Now, Len,
// ReceiverLen, DataBytes, Get, List and ListPage give the same results,
// Advance fires the same timers in the same order (timers due at Now() not
// fired yet first), paused timers resume with their remaining ticks, and a
// timer added next comes after every restored one in the same-tick order;
// freezing it gives the same bytes (a snapshot of the current format; one
// of an older format gives the current format). NextEvent is the same too when the
// geometry is (it reports ticks at which timers move down a level, which
// depend on the geometry). Only the memory layout differs: the timers are
// packed in the snapshot's record order (format 3 on: slab order, with the
// nodes the loop saved during the snapshot where the encoder met them;
// older formats: add order), and the index is the smallest within 3/4 full.
//
// Input that is not a valid snapshot makes Write or Wheel return an error
// wrapping ErrSnapshot (or ErrSnapshotVersion, or ErrFull when it holds
// more timers than the geometry can), never a panic; the Restorer is then
// dead and every later call returns that error. Restoring costs about
// 140 ns of CPU per timer at 10M timers (BenchmarkRestore), half of it
// decoding the records and half building the key index and linking the
// receivers' lists, which a caller with a second core can do on another
// goroutine meanwhile (IndexBuilder); nothing is allocated per timer but
// the buffer of a payload longer than 16 bytes.
type Restorer struct {
	cfg     Config // normalized
	w       *Wheel // nil until the header is read
	stage   uint8
	version byte
	// The due order section (dueOrder): the due timers in add order, the
	// positions read so far, and which were.
	dueNodes []uint32
	dueOrd   []uint32
	dueLate  []uint64
	dueSeen  []uint64
	count    uint64 // records in the snapshot
	left     uint64 // records still to come
	prev     prevRecord
	// Version 3 (records in any order, with their seq): the highest seq
	// read and whether any was; dueNodes collects the due timers.
	maxSeq   uint32
	anySeq   bool
	resorted int           // receivers whose list sortLists sorted (for the tests)
	crc      uint32        // of the bytes consumed, the checksum excluded
	carry    []byte        // the start of a part cut between Writes
	need     int           // the length of that part, as far as known
	built    bool          // the index is built: w is ready
	ib       *IndexBuilder // made by the header
	pf       *Prefaulter   // made by the header
	err      error
	t        snapTimer
	slot     slotCache // the slot of the previous armed timer (version 3 on)
}

// snapTimer is a record as read.
type snapTimer struct {
	key                 Key
	delay, every, fired uint64
	repeat              uint32
	seq                 uint32 // version 3
	paused              bool
	data                []byte // a view of the input
	// Version 6: the receiver's id (nilIdx: none), and whether the record
	// wrote the receiver whole (the id is then the next, given by records).
	id    uint32
	whole bool
}

// NewRestorer returns a Restorer of a wheel of geometry cfg. It fails only
// on a cfg New rejects.
func NewRestorer(cfg Config) (*Restorer, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return &Restorer{cfg: cfg}, nil
}

// Write consumes the next piece of the snapshot. It returns len(p), or an
// error when the snapshot is invalid (so far) or continues past its end.
// It does not keep p.
func (r *Restorer) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	total := len(p)
	for len(p) > 0 {
		if len(r.carry) == 0 {
			n, need, err := r.consume(p)
			if err != nil {
				return total - len(p) + n, r.fail(err)
			}
			if p = p[n:]; len(p) > 0 { // the start of a part: keep it
				r.carry, r.need = append(r.carry, p...), need
				p = nil
			}
			continue
		}
		// Complete the carried part with the bytes it needs, as far as known.
		k := min(len(p), max(r.need-len(r.carry), 1))
		r.carry, p = append(r.carry, p[:k]...), p[k:]
		n, need, err := r.consume(r.carry)
		if err != nil {
			return total - len(p), r.fail(err)
		}
		rest := copy(r.carry, r.carry[n:])
		r.carry, r.need = r.carry[:rest], need
	}
	if len(r.carry) == 0 {
		r.carry = nil // a part cut with a long payload may have grown it
	}
	return total, nil
}

// Wheel returns the restored wheel once the whole snapshot has been
// written, or an error: the snapshot is incomplete (ErrSnapshot), or two of
// its timers have the same key (ErrSnapshot, found when the index is built
// here). Later calls return the same.
func (r *Restorer) Wheel() (*Wheel, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.stage != stageDone {
		return nil, r.fail(fmt.Errorf("%w: truncated (%s)", ErrSnapshot, r.where()))
	}
	if !r.built {
		if !r.ib.finish(r.Ready(), &r.w.index) {
			return nil, r.fail(fmt.Errorf("%w: two timers have the same key", ErrSnapshot))
		}
		if err := r.ib.takeHeads(); err != nil {
			return nil, r.fail(err)
		}
		if err := r.sortLists(); err != nil {
			return nil, r.fail(err)
		}
		r.built = true
	}
	return r.w, nil
}

func (r *Restorer) fail(err error) error {
	r.err, r.w, r.carry, r.ib, r.slot = err, nil, nil, nil, slotCache{}
	return err
}

// IndexBuilder returns the builder of the restored wheel's key index, for
// a caller that builds it on another goroutine while the Restorer decodes
// (see IndexBuilder for the contract), or nil before the header has been
// written or after an error. Without a caller's Adds, Wheel builds the
// whole index itself. Every call returns the same builder.
func (r *Restorer) IndexBuilder() *IndexBuilder {
	if r.err != nil || r.w == nil {
		return nil
	}
	return r.ib
}

// Ready returns how far the Restorer has decoded, for IndexBuilder.Add: the
// timers of the records written so far (a record cut between two Writes
// excluded). Call it on the goroutine that calls Write.
func (r *Restorer) Ready() RestoreMark {
	if r.w == nil {
		return RestoreMark{}
	}
	return RestoreMark{n: r.w.nodes.n, blocks: r.w.nodes.arr.blocks}
}

func (r *Restorer) where() string {
	switch r.stage {
	case stageHeader:
		return "in the header"
	case stageRecords:
		return fmt.Sprintf("%d records missing", r.left)
	case stageDue:
		return "in the due order"
	default:
		return "no checksum"
	}
}

// consume parses the parts of the snapshot at the start of b and returns
// the bytes consumed. When it stops at a part b holds only the start of, it
// returns need > 0, the length that part needs (from b[n:]) as far as
// known: at least one byte more than b[n:] has.
func (r *Restorer) consume(b []byte) (n, need int, err error) {
	hashed := 0 // b[:hashed] is in r.crc
	for r.stage != stageDone {
		var k int
		switch r.stage {
		case stageHeader:
			k, need, err = r.header(b[n:])
		case stageRecords:
			k, need, err = r.records(b[n:])
		case stageDue:
			k, need, err = r.dueOrder(b[n:])
		case stageTrailer:
			r.crc = crc32.Update(r.crc, castagnoli, b[hashed:n])
			hashed = n
			if len(b)-n < 4 {
				return n, 4, nil
			}
			if got := binary.LittleEndian.Uint32(b[n:]); got != r.crc {
				return n, 0, fmt.Errorf("%w: checksum %#08x, want %#08x", ErrSnapshot, got, r.crc)
			}
			n, hashed = n+4, n+4
			r.stage = stageDone
			continue
		}
		n += k
		if err != nil || need != 0 {
			r.crc = crc32.Update(r.crc, castagnoli, b[hashed:n])
			return n, need, err
		}
	}
	if n < len(b) {
		return n, 0, fmt.Errorf("%w: %d bytes after the end", ErrSnapshot, len(b)-n)
	}
	return n, 0, nil
}

// header parses the header and creates the wheel.
func (r *Restorer) header(b []byte) (n, need int, err error) {
	if !bytes.HasPrefix(b, snapMagic[:min(len(b), len(snapMagic))]) {
		return 0, 0, fmt.Errorf("%w: not a snapshot (magic %q)", ErrSnapshot, b[:min(len(b), len(snapMagic))])
	}
	if len(b) <= len(snapMagic) {
		return 0, len(snapMagic) + 1, nil
	}
	v := b[len(snapMagic)]
	if v < 1 || v > SnapshotVersion {
		return 0, 0, fmt.Errorf("%w: version %d (this package reads 1 to %d)", ErrSnapshotVersion, v, SnapshotVersion)
	}
	r.version = v
	now, off := getUvarint(b, len(snapMagic)+1)
	if off < 0 {
		return varFail(off, b, "now")
	}
	count, off := getUvarint(b, off)
	if off < 0 {
		return varFail(off, b, "count")
	}
	if limit := uint64(maxNodes - (r.cfg.Levels*r.cfg.Slots + 2)); count > limit {
		return 0, 0, fmt.Errorf("%w: the snapshot has %d timers, the geometry room for %d", ErrFull, count, limit)
	}
	r.w, _ = New(now, r.cfg) // cfg is valid
	r.ib = newIndexBuilder(&r.w.nodes, uint32(count))
	r.pf = newPrefaulter(&r.w.nodes, count, r.ib)
	if v >= 3 { // records with their seq: the builder links the receivers' lists
		r.ib.recv = &r.w.recv
	}
	r.count, r.left = count, count
	r.prev = prevRecord{id: nilIdx}
	r.stage = stageRecords
	return off, 0, nil
}

// records parses records and adds their timers to the wheel until the last
// (the stage becomes stageDue, or stageTrailer for version 1) or one b holds only the start of.
func (r *Restorer) records(b []byte) (n, need int, err error) {
	w, t := r.w, &r.t
	for r.left > 0 {
		var k int
		if r.version >= 3 {
			k, need, err = parseRecord3(b[n:], r.version, &r.prev, w.now, t)
		} else {
			k, need, err = parseRecord(b[n:], r.prev.recv, w.now, t)
		}
		if k == 0 {
			if err != nil {
				err = fmt.Errorf("%w (record %d)", err, r.count-r.left)
			}
			return n, need, err
		}
		if r.version >= 3 {
			r.prev.giveID(t)
			r.restoreTimer3(t)
			r.prev.seq = t.seq
		} else {
			w.restoreTimer(t)
		}
		r.prev.recv, r.prev.id = t.key.Receiver, t.id
		r.left--
		n += k
	}
	r.stage = stageDue
	if r.version < 2 { // no due order: the due timers fire in add order
		r.stage = stageTrailer
	}
	if r.version >= 3 {
		if err := r.sortRestored(); err != nil {
			return n, 0, err
		}
	}
	return n, 0, nil
}

// getUvarint reads a varint at b[off:], off <= len(b). It returns the
// offset after it, or varShort when b ends first, or varBad when it
// overflows a uint64 or is not in its shortest form.
//
// With 8 bytes of b from off (every record's varints but those of the
// snapshot's last bytes), a varint of up to 4 bytes (tids, delays below
// 2^28) is read from one load by a switch on its length, which a core
// predicts well when the lengths repeat; one of 5 to 8 bytes (receivers
// from 2^32 to 2^56: the scale scenario's are 2^40 on) from one load
// without a branch on its length (getUvarint8), where binary.Uvarint's
// loop took about 45 instructions and a mispredicted exit.
func getUvarint(b []byte, off int) (uint64, int) {
	if off+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[off : off+8])
		switch {
		case x&0x80 == 0:
			return x & 0x7f, off + 1
		case x&0x8000 == 0:
			if x&0xff00 == 0 {
				return 0, varBad
			}
			return x&0x7f | x>>1&0x3f80, off + 2
		case x&0x800000 == 0:
			if x&0xff0000 == 0 {
				return 0, varBad
			}
			return x&0x7f | x>>1&0x3f80 | x>>2&0x1fc000, off + 3
		case x&0x80000000 == 0:
			if x&0xff000000 == 0 {
				return 0, varBad
			}
			return x&0x7f | x>>1&0x3f80 | x>>2&0x1fc000 | x>>3&0xfe00000, off + 4
		}
		switch v, n := getUvarint8(x); {
		case n > 0:
			return v, off + n
		case n == varBad:
			return 0, varBad
		}
	}
	return getUvarintSlow(b, off)
}

// getUvarint8 reads the varint of 5 to 8 bytes at the start of x (8 bytes
// of b, little-endian), whose first 4 bytes continue it: the first byte
// without its top bit ends it, and the 7-bit groups before it are packed
// by three shifts of pairs. It returns the varint and its length, or
// varBad for a varint not in its shortest form (a last byte of 0), or a
// length of 0 when it is longer than 8 bytes.
func getUvarint8(x uint64) (uint64, int) {
	stop := ^x & 0x8080808080808080
	if stop == 0 {
		return 0, 0
	}
	n := bits.TrailingZeros64(stop) + 1 // the bits up to the last byte's top bit: 40 to 64
	x &= ^uint64(0) >> (64 - n)         // the varint's bytes alone
	if x>>(n-8) == 0 {                  // a last byte of 0
		return 0, varBad
	}
	x = x&0x007f007f007f007f | x>>1&0x3f803f803f803f80
	x = x&0x00003fff00003fff | x>>2&0x0fffc0000fffc000
	x = x&0x000000000fffffff | x>>4&0x00fffffff0000000
	return x, n >> 3
}

// getUvarintSlow is getUvarint's path for the last bytes of b and for
// varints longer than 8 bytes.
func getUvarintSlow(b []byte, off int) (uint64, int) {
	v, k := binary.Uvarint(b[off:])
	switch {
	case k == 0:
		return 0, varShort
	case k < 0 || b[off+k-1] == 0 && k > 1:
		return 0, varBad
	}
	return v, off + k
}

const (
	varShort = -1
	varBad   = -2
)

// varFail is a parse's result for a field getUvarint failed on.
func varFail(off int, b []byte, field string) (n, need int, err error) {
	if off == varShort {
		return 0, len(b) + 1, nil
	}
	return 0, 0, fmt.Errorf("%w: bad varint for %s", ErrSnapshot, field)
}

func errRecord(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, args...))
}

// parseRecord parses the record at the start of b into t, whose data then
// is a view of b. prev is the previous record's receiver, now the
// snapshot's. It returns the record's length, or 0 with need (see
// consume) or an error.
func parseRecord(b []byte, prev, now uint64, t *snapTimer) (n, need int, err error) {
	return parseRecordV(b, 2, &prevRecord{recv: prev, id: nilIdx}, now, t)
}

// parseRecord3 is parseRecord for versions 3 and later (v): p is the
// previous record's receiver and seq, unless the record starts a run, and
// the receivers' ids (version 6).
func parseRecord3(b []byte, v byte, p *prevRecord, now uint64, t *snapTimer) (n, need int, err error) {
	return parseRecordV(b, v, p, now, t)
}

// recAllowed is the flags a record of format version v may have.
func recAllowed(v byte) byte {
	switch {
	case v >= 5:
		return recAll
	case v >= 3:
		return recAllV4
	}
	return recAllV2
}

// parseRecordV parses a record of format version v: with its seq
// (versions 3 and later; version 5 may leave it to recSeqNext) or without
// (versions 1 and 2), its receiver by id or whole (version 6) or whole.
func parseRecordV(b []byte, ver byte, p *prevRecord, now uint64, t *snapTimer) (n, need int, err error) {
	if len(b) == 0 {
		return 0, 1, nil
	}
	fl := b[0]
	if fl&^recAllowed(ver) != 0 {
		return 0, 0, errRecord("flags %#02x", fl)
	}
	prev, prevSeq, hasPrev := p.recv, p.seq, true
	t.id, t.whole = p.id, false
	if fl&recFirst != 0 {
		if ver >= 6 && fl&recSameRecv != 0 {
			return 0, 0, errRecord("the first record of a run with the previous receiver")
		}
		prev, prevSeq, hasPrev = 0, 0, ver < 6 // version 6: a run's first record has none
	}
	off, v := 1, uint64(0)
	t.key.Receiver = prev
	if fl&recSameRecv == 0 {
		if v, off = getUvarint(b, off); off < 0 {
			return varFail(off, b, "receiver")
		}
		if ver >= 6 {
			if v, off, err = p.receiver(b, off, v, t); err != nil {
				return 0, 0, err
			} else if off < 0 {
				return varFail(off, b, "receiver")
			}
		}
		if v == prev && hasPrev {
			return 0, 0, errRecord("receiver %d written, same as the previous", v)
		}
		t.key.Receiver = v
	}
	if t.key.Tid, off = getUvarint(b, off); off < 0 {
		return varFail(off, b, "tid")
	}
	switch {
	case fl&recSeqNext != 0:
		t.seq = prevSeq + 1
		if t.seq > seqMask {
			return 0, 0, errRecord("seq %d", t.seq)
		}
	case ver >= 3:
		if v, off = getUvarint(b, off); off < 0 {
			return varFail(off, b, "seq")
		}
		if v == 2 && ver >= 5 { // zigzag(1)
			return 0, 0, errRecord("seq %d written, the previous plus 1", prevSeq+1)
		}
		seq := int64(prevSeq) + unzigzag(v)
		if seq < 0 || seq > seqMask {
			return 0, 0, errRecord("seq %d", seq)
		}
		t.seq = uint32(seq)
	}
	if t.delay, off = getUvarint(b, off); off < 0 {
		return varFail(off, b, "delay")
	}
	t.every = t.delay
	if fl&recEveryDelay == 0 {
		if t.every, off = getUvarint(b, off); off < 0 {
			return varFail(off, b, "every")
		}
		if t.every == t.delay {
			return 0, 0, errRecord("every %d written, same as the delay", t.every)
		}
	}
	if t.every == 0 {
		return 0, 0, errRecord("every 0")
	}
	return parseRecordTail(b, fl, off, now, t)
}

// parseRecordTail parses the fields of a record after every: see parseRecord.
func parseRecordTail(b []byte, fl byte, off int, now uint64, t *snapTimer) (n, need int, err error) {
	var v uint64
	t.repeat = 0
	if fl&recRepeat != 0 {
		if v, off = getUvarint(b, off); off < 0 {
			return varFail(off, b, "repeat")
		}
		if v == 0 || v > math.MaxUint32 {
			return 0, 0, errRecord("repeat %d", v)
		}
		t.repeat = uint32(v)
	}
	t.fired = 0
	if fl&recFired != 0 {
		if t.fired, off = getUvarint(b, off); off < 0 {
			return varFail(off, b, "fired")
		}
		if t.fired == 0 || t.repeat != 0 && t.fired >= uint64(t.repeat) {
			return 0, 0, errRecord("fired %d of repeat %d", t.fired, t.repeat)
		}
	}
	t.data = nil
	if fl&recData != 0 {
		if v, off = getUvarint(b, off); off < 0 {
			return varFail(off, b, "data length")
		}
		if v == 0 || v > maxSnapData {
			return 0, 0, errRecord("data length %d", v)
		}
		end := off + int(v)
		if end > len(b) {
			return 0, end, nil
		}
		t.data, off = b[off:end:end], end
	}
	t.paused = fl&recPaused != 0
	if !t.paused && t.delay > math.MaxUint64-now {
		return 0, 0, errRecord("due tick past 2^64-1 (now %d, delay %d)", now, t.delay)
	}
	return off, 0, nil
}

// restoreTimer adds timer t, read from a snapshot, to a wheel being
// restored, as the newest. It takes the next node of the slab and gets no
// index entry: Restorer.Wheel builds the index at the end.
func (w *Wheel) restoreTimer(t *snapTimer) {
	i, _ := w.nodes.alloc() // the header checked the count
	n := w.nodes.at(i)
	n.receiver, n.tid, n.seq, n.repeat, n.fired = t.key.Receiver, t.key.Tid, w.seq, t.repeat, uint32(t.fired)
	w.seq++
	if t.every <= math.MaxUint32 && len(t.data) == 0 && t.fired <= math.MaxUint32 {
		n.every = uint32(t.every)
	} else {
		n.every = w.extra.alloc(t.every, t.data)
		w.extra.at(n.every).firedHi = uint32(t.fired >> 32)
		n.seq |= flagExtra
	}
	w.recvAppend(t.key.Receiver, i)
	switch {
	case t.paused:
		n.due, n.wprev, n.wnext = t.delay, markPaused, nilIdx
	case t.delay == 0: // due now, not fired yet: in add order until the due order section
		n.due = w.now
		w.linkTail(w.due, i)
	default:
		n.due = w.now + t.delay
		w.place(i)
	}
}
