package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// The TAIL file remembers how far the log reached, so that Open notices a
// log that ends before it: a deleted last segment, or one cut short, looks
// like a log that simply ends there. It holds three slots, at byte offsets
// 0, 512 and 1024 (three sectors). Open writes slot 0 for a new log and
// fsyncs it; it is never written again, so a power cut always leaves it
// readable. Checkpoint and Close write slots 1 and 2 in turn, without
// fsync: a write torn by a power cut spoils only the slot it went to.
// Open takes the valid slot with the highest last index: every slot holds
// an index that was fsynced when it was written, so whichever survives is
// never ahead of the log, only perhaps behind. A slot is 36 bytes: magic
// "TICKTAIL", the durable index, the last index and the caller's note
// (little-endian uint64s), and a CRC-32C of what precedes it (uint32). (A
// 36-byte file, one slot, as the first TAIL files were, reads too.)

const (
	tailName  = "TAIL"
	tailMagic = "TICKTAIL"
	tailSize  = 36
	tailSlot  = 512 // the distance between slots
	tailSlots = 3
)

// ErrTailMissing matches (errors.Is) every *TailError.
var ErrTailMissing = errors.New("journal: the end of the log is missing")

// Tail is what the last Checkpoint recorded.
type Tail struct {
	Durable uint64 // every record <= Durable had been written and fsynced
	Last    uint64 // the last index appended at the time
	Note    uint64 // the caller's value at the time (the server: its number of timers)
}

// TailError is returned by Open when the log (with the snapshot) ends
// before the index the last Checkpoint recorded as written and fsynced:
// records LogLast+1..Tail.Durable, at least, are gone.
type TailError struct {
	File    string // the TAIL file
	LogLast uint64 // the last index the log and snapshot hold
	Tail    Tail
}

func (e *TailError) Error() string {
	missing := fmt.Sprintf("records %d to %d (%d records, at least) are", e.LogLast+1, e.Tail.Durable, e.Tail.Durable-e.LogLast)
	if e.Tail.Durable == e.LogLast+1 {
		missing = fmt.Sprintf("record %d (at least) is", e.Tail.Durable)
	}
	return fmt.Sprintf("journal: the log ends at index %d, but %s records that every record up to %d was written and fsynced: %s missing (a deleted or truncated segment?)",
		e.LogLast, e.File, e.Tail.Durable, missing)
}

// Is makes errors.Is(err, ErrTailMissing) true.
func (e *TailError) Is(target error) bool { return target == ErrTailMissing }

// Checkpoint records in Options.Dir's TAIL file the last index known
// fsynced, the last index appended and note (an opaque value of the
// caller's, reported back by Open in a TailError or RepairReport: the
// server passes its number of timers). A later Open refuses a log that ends
// before that durable index (unless Options.Repair). It costs one small
// write, with no fsync: after a machine crash TAIL may be older, never
// ahead of the log, because the index it records was fsynced before it was
// written. Call it from the loop goroutine, now and then (the server does
// once a second).
func (j *Journal) Checkpoint(note uint64) error {
	if j.closed {
		return ErrClosed
	}
	j.smu.Lock()
	d := j.durable
	j.smu.Unlock()
	j.tailOn, j.note = true, note
	return j.writeTail(Tail{Durable: d, Last: j.last, Note: note}, false)
}

// writeTail writes the TAIL file, fsyncing it if sync (Open's first one;
// the directory is fsynced by Open).
func (j *Journal) writeTail(t Tail, sync bool) error {
	var b [tailSize]byte
	copy(b[:], tailMagic)
	binary.LittleEndian.PutUint64(b[8:], t.Durable)
	binary.LittleEndian.PutUint64(b[16:], t.Last)
	binary.LittleEndian.PutUint64(b[24:], t.Note)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	// One write, into slot 0 (Open's, sync) or the one of slots 1 and 2
	// not holding the newest good TAIL: a torn one fails its CRC and Open
	// reads another slot.
	slot := 0
	if !sync {
		slot = 1 + j.tailNext
	}
	f, err := j.opts.FS.OpenFile(filepath.Join(j.dir, tailName), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	_, err = f.WriteAt(b[:], int64(slot)*tailSlot)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: writing %s: %w", tailName, err)
	}
	if !sync {
		j.tailNext ^= 1
	}
	return nil
}

// readTail reads the TAIL file: the valid slot with the highest last
// index; ok false if there is none or no slot is good (logged: a damaged
// TAIL only loses the check, never the log). It sets the slot the next
// Checkpoint writes: of slots 1 and 2, the one not holding that TAIL.
func (j *Journal) readTail() (Tail, bool) {
	p := filepath.Join(j.dir, tailName)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Tail{}, false
	}
	var best Tail
	ok := false
	for slot := 0; slot < tailSlots && err == nil; slot++ {
		off := slot * tailSlot
		if len(b) < off+tailSize {
			break
		}
		t, good := parseTail(b[off : off+tailSize])
		if good && (!ok || t.Last > best.Last || (t.Last == best.Last && t.Durable > best.Durable)) {
			best, ok = t, true
			j.tailNext = 0
			if slot == 1 {
				j.tailNext = 1
			}
		}
	}
	if !ok {
		j.log.Warn("journal: ignoring an unreadable TAIL file: a missing end of the log cannot be detected this time",
			"file", p, "bytes", len(b), "err", err)
	}
	return best, ok
}

// parseTail decodes one slot; ok false if it is not a valid one.
func parseTail(b []byte) (Tail, bool) {
	if string(b[:8]) != tailMagic || crc32.Checksum(b[:32], castagnoli) != binary.LittleEndian.Uint32(b[32:]) {
		return Tail{}, false
	}
	return Tail{
		Durable: binary.LittleEndian.Uint64(b[8:]),
		Last:    binary.LittleEndian.Uint64(b[16:]),
		Note:    binary.LittleEndian.Uint64(b[24:]),
	}, true
}

// checkTail compares the recovered log's last index with TAIL's: a log
// that ends before TAIL's durable index fails Open with a *TailError, or
// with Options.Repair is accepted and reported (j.repaired). After a
// repair TAIL is moved aside with the rest, so that the next Open does not
// refuse the log the repair left; the caller's next Checkpoint writes it
// again.
func (j *Journal) checkTail() error {
	t, ok := j.tail, j.tailOK
	if !ok {
		return nil
	}
	r := &j.repaired
	if t.Durable > j.last {
		te := &TailError{File: filepath.Join(j.dir, tailName), LogLast: j.last, Tail: t}
		if !j.opts.Repair {
			return te
		}
		if r.LostFrom == 0 || j.last+1 < r.LostFrom {
			r.LostFrom = j.last + 1
		}
		r.LostTo = max(r.LostTo, t.Durable)
		if r.Reason != "" {
			r.Reason += "; "
		}
		r.Reason += fmt.Sprintf("the log ends at index %d but %s recorded %d as written and fsynced", j.last, te.File, t.Durable)
		j.log.Warn("journal: repair accepted a log whose end is missing",
			"log_last", j.last, "tail_durable", t.Durable, "first_lost", j.last+1, "last_lost", t.Durable,
			"records_lost", t.Durable-j.last)
	}
	if r.Reason == "" {
		return nil
	}
	r.Tail, r.TailOK = t, true
	aside, err := j.asideDir()
	if err != nil {
		return err
	}
	r.Aside = aside
	p := filepath.Join(j.dir, tailName)
	if err := os.Rename(p, filepath.Join(aside, tailName)); err != nil {
		return fmt.Errorf("journal: repair: %w", err)
	}
	return nil
}
