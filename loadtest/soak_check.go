package loadtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// The receivers of the soak's checked clients: numbers no hostile client
// of the soak uses.
const (
	durableReceiver = 1<<50 | 1
	wellReceiver    = 1<<50 | 2
)

// tidState is what the durable checker knows of one of its timers.
type tidState uint8

const (
	tidPresent   tidState = iota + 1 // its add was acknowledged (and no cancel since)
	tidCancelled                     // its cancel was acknowledged
	tidUnsure                        // a request on it got no reply (a kill, a timeout)
	tidRefused                       // its add was refused (unavailable, ...)
)

// durableCheck adds and cancels timers due far away on durableReceiver and
// keeps what the server acknowledged; verify compares that with the
// server's list after each kill -9 and at the end. Safe for concurrent use.
type durableCheck struct {
	mu     sync.Mutex
	state  map[uint64]tidState
	live   []uint64 // tids in tidPresent, for picking cancels (may hold stale ones)
	nextID uint64

	addsAcked, cancelsAcked, refused, unsure atomic.Int64
	missing, resurrected, refusedPresent     atomic.Int64
	cancelNotFound                           atomic.Int64 // a cancel of an acknowledged timer found none
}

func newDurableCheck() *durableCheck { return &durableCheck{state: map[uint64]tidState{}} }

// run adds and cancels until ctx ends, reconnecting when the connection
// dies. Every change is one request waiting for its reply (fsync always:
// the reply means the record is on disk).
func (d *durableCheck) run(ctx context.Context, addr string) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for ctx.Err() == nil {
		c, err := dialSoak(addr, "soak-durable", "", nil)
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		for ctx.Err() == nil {
			if err := d.step(c, rng); err != nil {
				break
			}
		}
		c.close()
	}
}

// step sends one add or cancel and records its outcome.
func (d *durableCheck) step(c *soakConn, rng *rand.Rand) error {
	d.mu.Lock()
	var tid uint64
	cancel := len(d.live) > 0 && (len(d.live) > 3000 || rng.IntN(3) == 0)
	if cancel {
		i := rng.IntN(len(d.live))
		tid = d.live[i]
		d.live[i] = d.live[len(d.live)-1]
		d.live = d.live[:len(d.live)-1]
		if d.state[tid] != tidPresent {
			d.mu.Unlock()
			return nil
		}
	} else {
		d.nextID++
		tid = d.nextID
	}
	d.mu.Unlock()
	req := protocol.Request{Op: protocol.OpAdd, Receiver: durableReceiver, Tid: tid, After: 1 << 40, Repeat: 1, Data: []byte("durable")}
	if cancel {
		req = protocol.Request{Op: protocol.OpCancel, Receiver: durableReceiver, Tid: tid}
	}
	m, err := c.call(req, 10*time.Second)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil:
		d.state[tid] = tidUnsure
		d.unsure.Add(1)
		return err
	case m.Kind == protocol.KindOK && cancel:
		d.state[tid] = tidCancelled
		d.cancelsAcked.Add(1)
	case m.Kind == protocol.KindOK:
		d.state[tid] = tidPresent
		d.live = append(d.live, tid)
		d.addsAcked.Add(1)
	case cancel && m.Code == protocol.CodeNotFound:
		d.state[tid] = tidCancelled // gone: a loss, unless verify counted it already
		d.cancelNotFound.Add(1)
		d.missing.Add(1)
	case cancel:
		d.state[tid] = tidPresent // refused (unavailable): it stays
		d.live = append(d.live, tid)
	default:
		d.state[tid] = tidRefused
		d.refused.Add(1)
	}
	return nil
}

// verify lists durableReceiver on a fresh session and compares: an
// acknowledged add missing or an acknowledged cancel back is a lost
// change; what was unsure takes the server's word. Call it while run is
// stopped.
func (d *durableCheck) verify(addr, token string) error {
	c, err := dialSoak(addr, "soak-verify", token, nil)
	if err != nil {
		return err
	}
	defer c.close()
	got, err := c.listAll(durableReceiver)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.live = d.live[:0]
	for tid, st := range d.state {
		in := got[tid]
		switch {
		case st == tidPresent && !in:
			d.missing.Add(1)
		case st == tidCancelled && in:
			d.resurrected.Add(1)
		case st == tidRefused && in:
			d.refusedPresent.Add(1)
		}
		if in {
			d.state[tid] = tidPresent
			d.live = append(d.live, tid)
		} else {
			delete(d.state, tid) // gone for good: its tid is never used again
		}
	}
	return nil
}

// wellSample is one event of the well-behaved receiver.
type wellSample struct {
	due  time.Time
	late time.Duration
}

// wellBehaved is the receiver every other client may disturb but must not
// harm: bound in acknowledged mode, it adds a timer every 20 ms due 200 ms
// later (its due instant in the data), reads every event and acknowledges
// it. Events are told apart by tid (a redelivery after a kill comes again).
type wellBehaved struct {
	mu       sync.Mutex
	expected map[uint64]time.Time // acknowledged adds: tid -> due
	got      map[uint64]bool
	samples  []wellSample
	nextTid  uint64
	maxSeq   atomic.Uint64

	addsRefused, addsUnsure, redelivered, reportedDropped, dropNotices atomic.Int64
	sessions, ackErrors                                                atomic.Int64
	ackError                                                           atomic.Value // string: the first ack error
}

func newWellBehaved() *wellBehaved {
	return &wellBehaved{expected: map[uint64]time.Time{}, got: map[uint64]bool{}}
}

// wellLead is how far ahead the well-behaved receiver's timers are due.
const wellLead = 200 * time.Millisecond

// run keeps a session bound to wellReceiver until ctx ends, adding timers
// until addUntil.
func (w *wellBehaved) run(ctx context.Context, addr string, addUntil time.Time) {
	for ctx.Err() == nil {
		w.maxSeq.Store(0) // after a bind only events delivered since can be acked
		c, err := dialSoak(addr, "soak-well", "", w.onPush)
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		w.sessions.Add(1)
		c.onStrayError = func(m *protocol.Message) {
			w.ackErrors.Add(1)
			w.ackError.CompareAndSwap(nil, fmt.Sprintf("%v %s", m.Code, m.Text))
		}
		m, err := c.call(protocol.Request{Op: protocol.OpBind, Receiver: wellReceiver, Ack: true}, 10*time.Second)
		if err == nil && m.Kind == protocol.KindOK {
			if v, _ := protocol.DecodeUints(m.Result, nil); len(v) >= 2 {
				w.reportedDropped.Add(int64(v[1]))
			}
			w.loop(ctx, c, addUntil)
		}
		c.close()
	}
}

func (w *wellBehaved) loop(ctx context.Context, c *soakConn, addUntil time.Time) {
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	acked := uint64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-tk.C:
		}
		if s := w.maxSeq.Load(); s > acked {
			if c.send(protocol.Request{Op: protocol.OpAck, Receiver: wellReceiver, Seq: s}) != nil {
				return
			}
			acked = s
		}
		if time.Now().After(addUntil) {
			continue
		}
		w.mu.Lock()
		w.nextTid++
		tid := w.nextTid
		w.mu.Unlock()
		due := time.Now().Add(wellLead)
		data := binary.BigEndian.AppendUint64(nil, uint64(due.UnixNano()))
		m, err := c.call(protocol.Request{Op: protocol.OpAdd, Receiver: wellReceiver, Tid: tid, AfterNs: uint64(wellLead), Repeat: 1, Data: data}, 10*time.Second)
		switch {
		case err != nil:
			w.addsUnsure.Add(1)
			return
		case m.Kind == protocol.KindOK:
			w.mu.Lock()
			w.expected[tid] = due
			w.mu.Unlock()
		default:
			w.addsRefused.Add(1)
		}
	}
}

// onPush records an event (on the connection's reader goroutine).
func (w *wellBehaved) onPush(m *protocol.Message) {
	switch {
	case m.Kind == protocol.KindDropped && m.Receiver == wellReceiver:
		w.dropNotices.Add(int64(m.Last - m.First + 1))
	case m.Kind == protocol.KindFire && m.Fire.Receiver == wellReceiver:
		now := time.Now()
		if m.Fire.Seq > w.maxSeq.Load() {
			w.maxSeq.Store(m.Fire.Seq)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.got[m.Fire.Tid] {
			w.redelivered.Add(1)
			return
		}
		w.got[m.Fire.Tid] = true
		if len(m.Fire.Data) == 8 {
			due := time.Unix(0, int64(binary.BigEndian.Uint64(m.Fire.Data)))
			w.samples = append(w.samples, wellSample{due: due, late: now.Sub(due)})
		}
	}
}

// writeSamples writes the events' due instants and lateness (see
// SoakParams.LateLog), in due order.
func (w *wellBehaved) writeSamples(out io.Writer) {
	w.mu.Lock()
	ss := slices.Clone(w.samples)
	w.mu.Unlock()
	slices.SortFunc(ss, func(a, b wellSample) int { return a.due.Compare(b.due) })
	bw := bufio.NewWriter(out)
	for _, s := range ss {
		fmt.Fprintf(bw, "%s %d\n", s.due.UTC().Format("2006-01-02T15:04:05.000"), s.late.Milliseconds())
	}
	bw.Flush()
}

// missing returns how many acknowledged adds never fired.
func (w *wellBehaved) missing() (missing, expected int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for tid := range w.expected {
		if !w.got[tid] {
			missing++
		}
	}
	return missing, len(w.expected)
}

// window is a stretch of the soak with a known disturbance.
type window struct{ from, to time.Time }

func inAny(t time.Time, ws []window) bool {
	for _, w := range ws {
		if !t.Before(w.from) && !t.After(w.to) {
			return true
		}
	}
	return false
}

// lateness summarises the samples due outside every window of skip, and
// those inside only.
// worstDue is the due instant of the worst of them.
func (w *wellBehaved) lateness(only, skip []window) (n int, p50, p99, worst time.Duration, worstDue time.Time) {
	w.mu.Lock()
	var ls []time.Duration
	for _, s := range w.samples {
		if inAny(s.due, skip) || (only != nil && !inAny(s.due, only)) {
			continue
		}
		ls = append(ls, s.late)
		if s.late >= worst {
			worst, worstDue = s.late, s.due
		}
	}
	w.mu.Unlock()
	if len(ls) == 0 {
		return 0, 0, 0, 0, worstDue
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	q := func(f float64) time.Duration { return ls[min(len(ls)-1, int(f*float64(len(ls))))] }
	return len(ls), q(0.5), q(0.99), ls[len(ls)-1], worstDue
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
