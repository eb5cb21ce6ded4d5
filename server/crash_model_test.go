package server

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tickwheel/tickwheel/protocol"
)

// crashModel is what the crash tests expect of a frozen server: tw-time,
// the firings so far, and the timers and backlogs of the receivers the
// workers use (never bound, so every firing waits in a backlog). It is
// built from the requests that got a reply, by the protocol's rules; each
// reply is checked against it as it comes.
type crashModel struct {
	now   uint64
	fired uint64 // fired_total
	recv  map[uint64]*mReceiver
}

type mTimer struct {
	due, remaining, every, fired, repeat uint64 // due when running, remaining when paused
	paused                               bool
	data                                 string
}

type mEvent struct {
	tid, tick, fired, repeat uint64
	last                     bool
	data                     string
}

// mReceiver is one receiver: its timers by tid, its backlog, and the seq of
// its last event (0 once its record is forgotten: unbound, no timers, no
// backlog).
type mReceiver struct {
	timers map[uint64]*mTimer
	events []mEvent
	seq    uint64
}

func newCrashModel(now uint64, receivers []uint64) *crashModel {
	m := &crashModel{now: now, recv: map[uint64]*mReceiver{}}
	for _, r := range receivers {
		m.recv[r] = &mReceiver{timers: map[uint64]*mTimer{}}
	}
	return m
}

func (r *mReceiver) clone() *mReceiver {
	c := &mReceiver{timers: make(map[uint64]*mTimer, len(r.timers)), events: slices.Clone(r.events), seq: r.seq}
	for tid, t := range r.timers {
		tc := *t
		c.timers[tid] = &tc
	}
	return c
}

// tidy forgets the receiver's sequence numbers once nothing of it is left.
func (r *mReceiver) tidy() {
	if len(r.timers) == 0 && len(r.events) == 0 {
		r.seq = 0
	}
}

// outcome is a reply as the model predicts it.
type outcome struct {
	code  protocol.Code // 0: OK
	vals  []uint64      // an OK result of uints
	timer *protocol.Timer
}

func refused(code protocol.Code) outcome { return outcome{code: code} }

// apply applies req, a request on receiver id's timers, at tw-time now, and
// returns the reply the server must give.
func (r *mReceiver) apply(id, now uint64, req *protocol.Request) outcome {
	defer r.tidy()
	t := r.timers[req.Tid]
	switch req.Op {
	case protocol.OpAdd:
		return r.add(now, req)
	case protocol.OpCancelAll:
		n := uint64(len(r.timers))
		clear(r.timers)
		return outcome{vals: []uint64{n}}
	}
	if t == nil {
		return refused(protocol.CodeNotFound)
	}
	switch req.Op {
	case protocol.OpCancel:
		delete(r.timers, req.Tid)
	case protocol.OpPause:
		if t.paused {
			return refused(protocol.CodeBadState)
		}
		t.paused, t.remaining = true, t.due-now
	case protocol.OpResume:
		if !t.paused {
			return refused(protocol.CodeBadState)
		}
		t.paused, t.due = false, now+t.remaining
	case protocol.OpGet:
		pt := t.wire(id, req.Tid, now)
		return outcome{timer: &pt}
	default:
		panic(fmt.Sprintf("model: op %s", req.Op))
	}
	return outcome{}
}

func (r *mReceiver) add(now uint64, req *protocol.Request) outcome {
	var due uint64
	switch {
	case req.At != 0 && req.At <= now, req.At == 0 && req.After == 0:
		due = now + 1 // not in the future: the next tick
	case req.At != 0:
		due = req.At
	default:
		due = now + req.After
	}
	if r.timers[req.Tid] != nil && !req.Replace {
		return refused(protocol.CodeExists)
	}
	every := req.Every
	if every == 0 {
		every = due - now
	}
	r.timers[req.Tid] = &mTimer{due: due, every: every, repeat: req.Repeat, data: string(req.Data)}
	return outcome{vals: []uint64{due}}
}

// wire is the timer as get and list show it.
func (t *mTimer) wire(receiver, tid, now uint64) protocol.Timer {
	pt := protocol.Timer{Receiver: receiver, Tid: tid, Due: t.due, Every: t.every, Fired: t.fired, Repeat: t.repeat,
		Paused: t.paused}
	if t.data != "" {
		pt.Data = []byte(t.data)
	}
	if t.paused {
		pt.Due, pt.Remaining = now+t.remaining, t.remaining
	} else {
		pt.Remaining = t.due - now
	}
	return pt
}

// list is the receiver's timers as list shows them, by tid.
func (r *mReceiver) list(id, now uint64) []protocol.Timer {
	var out []protocol.Timer
	for _, tid := range slices.Sorted(maps.Keys(r.timers)) {
		out = append(out, r.timers[tid].wire(id, tid, now))
	}
	return out
}

// ff moves tw-time on by n ticks, firing what is due, and returns the
// number of firings. Events of one tick are kept in tid order: the checks
// do not depend on the order within a tick.
func (m *crashModel) ff(n uint64) uint64 {
	to := m.now + n
	var fired uint64
	for _, r := range m.recv {
		var evs []mEvent
		for tid, t := range r.timers {
			for !t.paused && t.due <= to {
				t.fired++
				last := t.repeat != 0 && t.fired == t.repeat
				evs = append(evs, mEvent{tid: tid, tick: t.due, fired: t.fired, repeat: t.repeat, last: last, data: t.data})
				if last {
					delete(r.timers, tid)
					break
				}
				t.due += t.every
			}
		}
		slices.SortFunc(evs, cmpEvent)
		r.events = append(r.events, evs...)
		r.seq += uint64(len(evs))
		fired += uint64(len(evs))
	}
	m.now, m.fired = to, m.fired+fired
	return fired
}

func cmpEvent(a, b mEvent) int {
	return cmp.Or(cmp.Compare(a.tick, b.tick), cmp.Compare(a.tid, b.tid), cmp.Compare(a.fired, b.fired))
}

// timers is the number of live timers.
func (m *crashModel) timers() (n uint64) {
	for _, r := range m.recv {
		n += uint64(len(r.timers))
	}
	return n
}

// backlog is the number of events waiting in the backlogs.
func (m *crashModel) backlog() (n uint64) {
	for _, r := range m.recv {
		n += uint64(len(r.events))
	}
	return n
}

// check compares a reply with the predicted outcome.
func (o outcome) check(req *protocol.Request, m protocol.Message) error {
	if m.Kind == protocol.KindError || o.code != 0 {
		if m.Kind != protocol.KindError || m.Code != o.code {
			return fmt.Errorf("%s %+v: got %s %s %s, want code %s", req.Op, *req, m.Kind, m.Code, m.Text, o.code)
		}
		return nil
	}
	if o.timer != nil {
		var got protocol.Timer
		if err := protocol.DecodeTimer(m.Result, &got); err != nil {
			return err
		}
		if !timersEqual(got, *o.timer) {
			return fmt.Errorf("%s %+v: got %+v, want %+v", req.Op, *req, got, *o.timer)
		}
		return nil
	}
	got, err := protocol.DecodeUints(m.Result, nil)
	if err != nil {
		return err
	}
	if !slices.Equal(got, o.vals) {
		return fmt.Errorf("%s %+v: got %v, want %v", req.Op, *req, got, o.vals)
	}
	return nil
}

func timersEqual(a, b protocol.Timer) bool {
	return a.Receiver == b.Receiver && a.Tid == b.Tid && a.Due == b.Due && a.Remaining == b.Remaining &&
		a.Every == b.Every && a.Fired == b.Fired && a.Repeat == b.Repeat && a.Paused == b.Paused &&
		bytes.Equal(a.Data, b.Data)
}

// diffTimers describes how got differs from want, or returns "".
func diffTimers(got, want []protocol.Timer) string {
	if len(got) == len(want) && !slices.ContainsFunc(got, func(t protocol.Timer) bool {
		i := slices.IndexFunc(want, func(w protocol.Timer) bool { return w.Tid == t.Tid })
		return i < 0 || !timersEqual(t, want[i])
	}) {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "got %d timers, want %d", len(got), len(want))
	for _, t := range got {
		i := slices.IndexFunc(want, func(w protocol.Timer) bool { return w.Tid == t.Tid })
		switch {
		case i < 0:
			fmt.Fprintf(&b, "\n  unexpected %+v", t)
		case !timersEqual(t, want[i]):
			fmt.Fprintf(&b, "\n  got  %+v\n  want %+v", t, want[i])
		}
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(t protocol.Timer) bool { return t.Tid == w.Tid }) {
			fmt.Fprintf(&b, "\n  missing %+v", w)
		}
	}
	return b.String()
}

// randomOp makes a worker's next request on one of its receivers at tw-time
// now: mostly adds (some of them refused on purpose: a duplicate tid
// without replace; some with an at in the past or no delay at all, due at
// the next tick), and cancels,
// pauses, resumes, gets and the odd cancel_all, mostly of live timers.
func randomOp(rng *rand.Rand, m *crashModel, receivers []uint64) protocol.Request {
	now := m.now
	req := protocol.Request{Receiver: receivers[rng.IntN(len(receivers))]}
	live := slices.Sorted(maps.Keys(m.recv[req.Receiver].timers))
	req.Tid = 1 + rng.Uint64N(crashTids)
	p := rng.IntN(100)
	if p >= 50 && len(live) > 0 && rng.IntN(5) > 0 {
		req.Tid = live[rng.IntN(len(live))]
	}
	switch {
	case p < 50:
		req.Op = protocol.OpAdd
		switch k := rng.IntN(20); {
		case k < 10:
			req.After = 1 + rng.Uint64N(40)
		case k < 16:
			req.At = now + 1 + rng.Uint64N(40)
		case k < 19:
			req.At = now - rng.Uint64N(min(now, 5)) // at or before tw-time: due at the next tick
		}
		if rng.IntN(2) == 0 {
			req.Every = 3 + rng.Uint64N(13)
		}
		if rng.IntN(10) >= 3 {
			req.Repeat = 1 + rng.Uint64N(5)
		}
		if rng.IntN(2) == 0 {
			req.Data = fmt.Appendf(nil, "d%d", rng.Uint64N(1e6))
		}
		req.Replace = rng.IntN(4) == 0
	case p < 62:
		req.Op = protocol.OpCancel
	case p < 74:
		req.Op = protocol.OpPause
	case p < 86:
		req.Op = protocol.OpResume
	case p < 98:
		req.Op = protocol.OpGet
	default:
		req.Op, req.Tid = protocol.OpCancelAll, 0
	}
	return req
}

// crashTids is how many tids each receiver's timers use.
const crashTids = 20
