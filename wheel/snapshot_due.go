package wheel

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The due order section of a snapshot (versions 2 to 4). The timers due at
// or before Now() not fired yet (records with delay 0, not paused: m of
// them) fire in the rotation's order (fair.go), which is not their add
// order, so the snapshot says it: m entries, one per such timer in firing
// order, each its position (0..m-1) among those m timers in add order
// (version 2: record order, which is add order; versions 3 and 4: seq
// order), a varint, and in version 4 then how many ticks before Now() it
// was due, a varint (0 but after a bounded Advance left timers due and a
// later one moved time on: see Advance). Each position appears once; with
// m = 0 the section is empty. Versions 2 and 3 have no lateness (every due
// timer is due at Now()); a version 1 snapshot has no section: its due
// timers fire in add order.

// rankDue lists, for the due set at the Freeze in firing order, each
// timer's position among the due timers in add order (Frozen.dueRank).
func (f *Frozen) rankDue() {
	a := f.due
	slices.Sort(a) // by add order; the low half is the firing position
	ord := make([]uint32, len(a))
	for j, e := range a {
		ord[uint32(e)] = uint32(j)
	}
	f.dueRank, f.due = ord, nil
}

// appendDueOrder appends the due order section's entries until len(dst)
// reaches stop or the last is appended, after which the stage is
// stageTrailer.
func (f *Frozen) appendDueOrder(dst []byte, stop int) []byte {
	if f.dueRank == nil {
		f.rankDue()
	}
	for f.nextDue < len(f.dueRank) {
		if len(dst) >= stop {
			return dst
		}
		dst = binary.AppendUvarint(dst, uint64(f.dueRank[f.nextDue]))
		dst = binary.AppendUvarint(dst, f.dueLate[f.nextDue])
		f.nextDue++
	}
	f.stage = stageTrailer
	return dst
}

// dueOrder parses the due order section's entries and, after the last,
// relinks the restored wheel's due list (in add order until then) into
// that order, each timer due its lateness before Now(); the stage becomes
// stageTrailer. It returns the bytes consumed, or need (see consume) when
// b ends inside an entry.
func (r *Restorer) dueOrder(b []byte) (n, need int, err error) {
	w := r.w
	if r.dueNodes == nil { // first call: the due timers, in add order
		r.dueNodes = []uint32{}
		for i := w.nodes.at(w.due).wnext; i != w.due; i = w.nodes.at(i).wnext {
			r.dueNodes = append(r.dueNodes, i)
		}
		r.dueSeen = make([]uint64, (len(r.dueNodes)+63)/64)
	}
	m := len(r.dueNodes)
	for len(r.dueOrd) < m {
		v, off := getUvarint(b, n)
		if off < 0 {
			return varFail2(off, b, n, "due order")
		}
		if v >= uint64(m) || r.dueSeen[v/64]&(1<<(v%64)) != 0 {
			return n, 0, fmt.Errorf("%w: due order: position %d of %d due timers repeated or out of range", ErrSnapshot, v, m)
		}
		var late uint64
		if r.version >= 4 {
			if late, off = getUvarint(b, off); off < 0 {
				return varFail2(off, b, n, "due lateness")
			}
			if late > w.now {
				return n, 0, fmt.Errorf("%w: due order: a timer due %d ticks before tick %d", ErrSnapshot, late, w.now)
			}
		}
		r.dueSeen[v/64] |= 1 << (v % 64)
		r.dueOrd = append(r.dueOrd, uint32(v))
		r.dueLate = append(r.dueLate, late)
		n = off
	}
	prev, behind := w.due, false
	for k, j := range r.dueOrd {
		i := r.dueNodes[j]
		w.nodes.at(i).due = w.now - r.dueLate[k]
		behind = behind || r.dueLate[k] != 0
		w.nodes.at(prev).wnext = i
		w.nodes.at(i).wprev = prev
		prev = i
	}
	w.nodes.at(prev).wnext = w.due
	w.nodes.at(w.due).wprev = prev
	if behind { // list mode holds timers due at Now() only (OldestDue)
		w.toRotation()
	}
	r.dueNodes, r.dueOrd, r.dueSeen, r.dueLate = nil, nil, nil, nil
	r.stage = stageTrailer
	return n, 0, nil
}

// varFail2 is varFail for a field at b[off:] after n bytes already parsed
// in this call: those are consumed, and need counts from them.
func varFail2(code int, b []byte, off int, field string) (n, need int, err error) {
	if code == varShort {
		return off, len(b) - off + 1, nil
	}
	return off, 0, fmt.Errorf("%w: bad varint for %s", ErrSnapshot, field)
}
