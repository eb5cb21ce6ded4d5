package client

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// AckMode says whether a receiver is bound in acknowledged mode, and who
// acknowledges its events. See the package doc, "Acknowledged mode".
type AckMode uint8

// Ack modes.
const (
	// AckNone: not acknowledged (the default). The server forgets an
	// event once it has written it to the connection.
	AckNone AckMode = iota
	// AckAuto: acknowledged mode; the Client acknowledges each event once
	// the handler (WithHandler) has returned for it, or once the Events
	// consumer has received it from the channel.
	AckAuto
	// AckManual: acknowledged mode; the user acknowledges with Client.Ack,
	// typically after its own work for the event is done.
	AckManual
)

// String returns "none", "auto", "manual" or "ack(N)".
func (m AckMode) String() string {
	switch m {
	case AckNone:
		return "none"
	case AckAuto:
		return "auto"
	case AckManual:
		return "manual"
	}
	return "ack(" + strconv.Itoa(int(m)) + ")"
}

// Timing of automatic acks.
const (
	// ackDelay is how long an event taken by the user may wait for its
	// ack when the Client has nothing else to write: acks ride along with
	// any other write, else they go this long after the first one is due.
	ackDelay = time.Millisecond
	// ackBatch: every ackBatch events per auto-mode receiver (counting at
	// most maxBatchReceivers of them) the Client queues, the acks due are
	// sent without waiting for ackDelay, so that the server's outbox stays
	// short under a high rate, and yet with many receivers one ack covers
	// many events (each ack is a request the server answers).
	ackBatch          = 256
	maxBatchReceivers = 64
	// maxKept is how many delivered and unacknowledged events the Client
	// remembers per receiver to recognize their redelivery as duplicates.
	maxKept = 1 << 16
	// closeFlushTimeout bounds Close's write of the last acks.
	closeFlushTimeout = time.Second
)

// Ack acknowledges every event of receiver up to and including seq: the
// server removes them from the receiver's outbox and will not deliver them
// again. Acks are cumulative; an ack at or below the current one changes
// nothing and succeeds. Use it with AckManual, after your own work for the
// event is done; with AckAuto it acks ahead of the automatic acks.
//
// Ack normally sends the ack at once and returns the server's answer:
// ErrNotFound if this session has not bound the receiver, ErrInvalidArgument
// if it is not bound in acknowledged mode or seq is above the last seq the
// server delivered. One case is not sent at once: the ack of an event this
// Client delivered while the connection is being replaced, or before the
// server has re-delivered that event after the re-bind (see the package
// doc on duplicates). Ack then records it and returns nil; the Client sends
// it as soon as the server allows it on the new connection.
func (c *Client) Ack(ctx context.Context, receiver, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.acks.deferAck(c.current(), receiver, seq) {
		return nil
	}
	_, err := c.do(ctx, &protocol.Request{Op: protocol.OpAck, Receiver: receiver, Seq: seq}, nil)
	if err == nil {
		c.acks.ackedAtOnce(receiver, seq)
	}
	return err
}

// Redelivered returns how many events the server delivered again after a
// re-bind (the unacknowledged events of acknowledged-mode receivers) that
// this Client had already delivered to the user, and so dropped instead of
// delivering twice. Safe from any goroutine.
func (c *Client) Redelivered() uint64 { return c.acks.redelivered.Load() }

// current returns the connection calls go to now (nil while reconnecting).
func (c *Client) current() *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cn
}

// takenCountWait bounds how long takenCount waits for an event's send to
// be counted.
const takenCountWait = time.Second

// takenCount returns how many events the user has taken from the event
// queue: handled by the handler (counted once it returned), or received
// from the Events channel. The latter is pushed - len(evq), read in that
// order: every event counted in pushed was in the channel before, so the
// count is never above the truth; a push between the two reads would lower
// it, so they are read again when pushed moved meanwhile. An event sent to
// the channel and not yet counted in pushed would lower it too (the user
// may have taken it already: Unbind then left it unacked, and the next
// binder got it again, TestTakenCountDuringPush), so while a send is in
// progress and the channel has room (the send is not blocked: it is done
// or about to be, and its count follows at once) it waits for the count:
// by time, not by a number of yields, which a lone spinning goroutine runs
// through in microseconds while the sender waits for a core
// (TestTakenCountDuringPush failed under -race that way). takenCountWait
// bounds it; past it, the count is the lower one, which only delays an ack.
func (c *Client) takenCount() uint64 {
	if c.o.handler != nil {
		return c.handledN.Load()
	}
	var p, l uint64
	var deadline time.Time
	for spins := 0; ; spins++ {
		p = c.pushed.Load()
		l = uint64(len(c.evq))
		if c.pushed.Load() != p {
			continue
		}
		if !c.pushing.Load() || l == uint64(cap(c.evq)) {
			break
		}
		if spins < 64 {
			runtime.Gosched()
			continue
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(takenCountWait)
		} else if now.After(deadline) {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	if l > p {
		return 0
	}
	return p - l
}

// acker keeps the state of the acknowledged-mode receivers: what was
// delivered and taken, what to ack, and the events kept to recognize
// duplicates. Its methods are safe from any goroutine.
type acker struct {
	log         *slog.Logger
	taken       func() uint64 // Client.takenCount
	redelivered atomic.Uint64

	// n is len(recv), read without mu so that a Client without
	// acknowledged-mode receivers pays nothing per event.
	n atomic.Int32

	mu    sync.Mutex
	recv  map[uint64]*ackRecv // acknowledged-mode receivers bound here
	dirty map[uint64]struct{} // receivers whose handled is above sent
	// queue holds the auto-mode events pushed to the event queue and not
	// yet taken by the user, in push order.
	queue  []takenRec
	head   int   // queue[head:] is live
	cn     *conn // the current connection: its writer sends the acks
	armed  bool  // the current writer runs its ack timer (or is woken to)
	urgent bool  // ackBatch events went by: send the acks due now
	pushes int   // auto-mode events queued since the last urgent
}

// ackRecv is one acknowledged-mode receiver.
type ackRecv struct {
	mode AckMode
	// gen counts the times the server's numbering was found to have
	// started again (a server that lost its state): queued events of an
	// older gen are not acked.
	gen uint64
	cn  *conn // the connection of the last bind reply
	// recvd is the highest seq the server has delivered on cn (first_seq
	// - 1 at the bind reply): an ack above it would be refused.
	recvd uint64
	sent  uint64 // highest ack sent on cn, or first_seq - 1
	// handed is the highest seq queued to the user; handled the highest
	// the user has taken (auto) or acked with a deferred Ack.
	handed, handled uint64
	kept            keptRing // handed events not known acked, by seq
}

// takenRec is an auto-mode event pushed as the idx-th event of the queue.
type takenRec struct{ idx, receiver, seq, gen uint64 }

// ackItem is an ack to send.
type ackItem struct{ receiver, seq, gen uint64 }

func (a *acker) init(log *slog.Logger, taken func() uint64) {
	a.log, a.taken = log, taken
	a.recv = make(map[uint64]*ackRecv)
	a.dirty = make(map[uint64]struct{})
}

// wakeLocked makes sure the current writer runs its ack timer, or, when
// urgent, sends the acks due at once.
func (a *acker) wakeLocked(urgent bool) {
	if urgent {
		a.urgent = true
	} else if a.armed {
		return
	}
	a.armed = true
	if a.cn != nil {
		a.cn.ring()
	}
}

// setConn makes cn (nil: none) the connection whose writer sends acks.
func (a *acker) setConn(cn *conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cn, a.armed = cn, false
	if cn != nil && a.outstandingLocked() {
		a.wakeLocked(false)
	}
}

// lost forgets cn if it is the current connection.
func (a *acker) lost(cn *conn) {
	a.mu.Lock()
	if a.cn == cn {
		a.cn, a.armed = nil, false
	}
	a.mu.Unlock()
}

func (a *acker) outstandingLocked() bool { return a.head < len(a.queue) || len(a.dirty) > 0 }

// bound records an acknowledged-mode bind reply on cn: pending events
// follow, from seq first.
func (a *acker) bound(cn *conn, receiver uint64, mode AckMode, pending, first uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.recv[receiver]
	if st == nil {
		st = &ackRecv{}
		a.recv[receiver] = st
		a.n.Store(int32(len(a.recv)))
	}
	acked := satSub(first, 1) // the server's acked seq
	st.mode, st.cn, st.recvd, st.sent = mode, cn, acked, acked
	a.log.Debug("tickwheel: bound in acknowledged mode", "receiver", receiver, "first_seq", first, "pending", pending,
		"handed", st.handed, "handled", st.handled, "kept", st.kept.n)
	if st.handed > satAdd(acked, pending) {
		// The server's outbox ends below what it delivered before: its
		// numbering started again.
		a.log.Debug("tickwheel: the server's numbering started again", "receiver", receiver, "handed", st.handed)
		st.restart()
	}
	st.trim(acked)
	if st.handled > st.sent {
		a.dirty[receiver] = struct{}{}
		a.wakeLocked(false)
	}
}

// forget drops receiver's state: it is no longer bound here in
// acknowledged mode.
func (a *acker) forget(receiver uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.recv[receiver]; !ok {
		return
	}
	delete(a.recv, receiver)
	delete(a.dirty, receiver)
	a.n.Store(int32(len(a.recv)))
	if len(a.recv) == 0 {
		a.queue, a.head = a.queue[:0], 0
	}
}

// fire notes a fire received on cn, to be pushed as the idx-th event of
// the queue unless it is a duplicate. dup reports a redelivered event the
// user already has; acked that the receiver is in acknowledged mode (its
// seqs have no gaps to report: the server drops nothing in that mode).
// An event of an auto-mode receiver is queued to be acked once taken.
func (a *acker) fire(cn *conn, f *protocol.Fire, idx uint64) (dup, acked bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.recv[f.Receiver]
	if st == nil || st.cn != cn || f.Seq == 0 {
		return false, false
	}
	st.recvd = max(st.recvd, f.Seq)
	if f.Seq <= st.handed {
		// The bind reply showed the server's outbox reaching what it
		// delivered before (see bound), so a seq at or below it is a
		// redelivery — unless a kept fingerprint says it is not the same
		// event (a renumbering the reply could not show). Past the kept
		// window (maxKept), the seq alone decides.
		if fp, ok := st.kept.find(f.Seq); !ok || fp == fingerprint(f.Tid, f.Tick, f.Fired) {
			if !ok {
				a.log.Debug("tickwheel: a redelivered seq past the kept events is taken for a duplicate", "receiver", f.Receiver,
					"seq", f.Seq, "tid", f.Tid, "handed", st.handed, "kept_first", st.kept.first, "kept", st.kept.n)
			}
			a.redelivered.Add(1)
			if st.handled > st.sent && st.recvd >= st.handled {
				// The redelivery has caught up with what the user took
				// before the re-bind: ack it now, not a timer later, lest
				// the next loss deliver it all again.
				a.wakeLocked(true)
			}
			return true, true
		}
		a.log.Debug("tickwheel: a redelivered seq is a new event: a new numbering", "receiver", f.Receiver, "seq", f.Seq,
			"tid", f.Tid, "handed", st.handed, "handled", st.handled)
		st.restart() // not what was delivered with that seq: a new numbering
	}
	st.handed = f.Seq
	st.kept.push(f.Seq, fingerprint(f.Tid, f.Tick, f.Fired))
	if st.mode == AckAuto {
		a.queuedLocked(idx, f.Receiver, f.Seq, st.gen)
	}
	return false, true
}

// queuedLocked notes that the auto-mode event (receiver, seq) of
// generation gen is about to be pushed as the idx-th event of the queue.
func (a *acker) queuedLocked(idx, receiver, seq, gen uint64) {
	if a.head > 0 && a.head >= len(a.queue)/2 {
		a.queue = a.queue[:copy(a.queue, a.queue[a.head:])]
		a.head = 0
	}
	a.queue = append(a.queue, takenRec{idx: idx, receiver: receiver, seq: seq, gen: gen})
	a.pushes++
	if a.pushes >= ackBatch*min(max(len(a.recv), 1), maxBatchReceivers) {
		a.pushes = 0
		a.wakeLocked(true)
	} else {
		a.wakeLocked(false)
	}
}

// collectLocked moves the events the user has taken to handled and
// returns the acks due on cn — of receiver only, when only is set — marking
// them sent.
func (a *acker) collectLocked(cn *conn, only *uint64) []ackItem {
	taken := a.taken()
	for a.head < len(a.queue) && a.queue[a.head].idx <= taken {
		e := a.queue[a.head]
		a.head++
		st := a.recv[e.receiver]
		if st != nil && st.gen == e.gen && st.mode == AckAuto && e.seq > st.handled {
			st.handled = e.seq
			a.dirty[e.receiver] = struct{}{}
		}
	}
	if a.head == len(a.queue) {
		a.queue, a.head = a.queue[:0], 0
	}
	var items []ackItem
	for r := range a.dirty {
		if only != nil && r != *only {
			continue
		}
		st := a.recv[r]
		if st == nil {
			delete(a.dirty, r)
			continue
		}
		if st.cn != cn {
			continue // waiting for the re-bind on the new connection
		}
		if seq := min(st.handled, st.recvd); seq > st.sent {
			st.sent = seq
			items = append(items, ackItem{receiver: r, seq: seq, gen: st.gen})
		}
		if st.handled <= st.sent {
			delete(a.dirty, r)
		}
	}
	return items
}

// writerPass runs on cn's writer at each wake-up. It sends the acks due
// when the ack timer fired, when something else is about to be written
// (piggy), or when ackBatch events went by; and it reports whether the ack
// timer must run: while acks may become due.
func (a *acker) writerPass(cn *conn, timer, piggy bool) (arm bool) {
	a.mu.Lock()
	if a.cn != cn {
		a.mu.Unlock()
		return false
	}
	var items []ackItem
	if timer || piggy || a.urgent {
		a.urgent = false
		items = a.collectLocked(cn, nil)
	}
	arm = a.outstandingLocked()
	a.armed = arm
	// Queued before a.mu is released: a flushTo (Unbind's), which takes
	// a.mu, then finds them queued ahead of the request it precedes.
	a.send(cn, items)
	a.mu.Unlock()
	return arm
}

// send queues ack requests for items on cn; their replies go to ackDone.
// Callers hold a.mu (lock order: a.mu, then cn.mu; nothing takes a.mu
// while holding cn.mu): acks collected under a.mu are in cn.wbuf by the
// time a.mu is free again.
func (a *acker) send(cn *conn, items []ackItem) {
	if len(items) == 0 {
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.dead {
		return
	}
	for _, it := range items {
		req := protocol.Request{Op: protocol.OpAck, ID: cn.ids.Add(1), Receiver: it.receiver, Seq: it.seq}
		cn.wbuf = protocol.AppendRequest(cn.wbuf, &req)
		cn.pending[req.ID] = &call{op: protocol.OpAck, done: a.ackDone(it)}
	}
}

// ackDone handles the reply to an automatic ack: errors are logged (the
// events are then delivered again after the next bind).
func (a *acker) ackDone(it ackItem) func([]byte, error) {
	return func(_ []byte, err error) {
		switch {
		case err == nil:
			a.confirmed(it.receiver, it.gen, it.seq)
		case errors.Is(err, ErrDisconnected) || errors.Is(err, ErrClosed):
			a.log.Debug("tickwheel: ack lost with the connection", "receiver", it.receiver, "seq", it.seq, "err", err)
		default:
			a.log.Warn("tickwheel: ack refused", "receiver", it.receiver, "seq", it.seq, "err", err)
		}
	}
}

// confirmed notes that the server acked receiver up to seq: the events
// kept for duplicates up to there can go.
func (a *acker) confirmed(receiver, gen, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.recv[receiver]; st != nil && st.gen == gen {
		st.trim(seq)
	}
}

// deferAck records a user's ack that cannot be sent on the current
// connection cur yet (see Ack) and reports whether it did.
func (a *acker) deferAck(cur *conn, receiver, seq uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.recv[receiver]
	if st == nil || seq > st.handed || (st.cn == cur && cur != nil && seq <= st.recvd) {
		return false
	}
	if seq > st.handled {
		st.handled = seq
		a.dirty[receiver] = struct{}{}
		a.wakeLocked(false)
	}
	return true
}

// ackedAtOnce notes a user's ack the server accepted.
func (a *acker) ackedAtOnce(receiver, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.recv[receiver]; st != nil && seq <= st.recvd {
		st.sent = max(st.sent, seq)
		st.handled = max(st.handled, seq)
		st.trim(seq)
	}
}

// flushTo queues on cn the acks due now, of receiver only when only is
// set (for Unbind). Every ack collected before it returns, by it or by a
// writer pass, is queued by then: the caller's next request follows them.
// (Before, a writer pass queued its acks after releasing a.mu, so an
// Unbind could be written between its collect and its queueing; the
// server refused the ack of the no longer bound receiver and delivered the
// events the user had taken to the next binder again: TestAckUnbind,
// TestAckFlushAfterWriterPass.)
func (a *acker) flushTo(cn *conn, only *uint64) {
	if a.n.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.send(cn, a.collectLocked(cn, only))
}

// flush returns the acks due on cn now, of receiver only when only is set
// (for Close, which writes them itself).
func (a *acker) flush(cn *conn, only *uint64) []ackItem {
	if a.n.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.collectLocked(cn, only)
}

// restart forgets what was delivered: the server's numbering started
// again, so earlier seqs say nothing about later events.
func (st *ackRecv) restart() {
	st.gen++
	st.handed, st.handled = 0, 0
	st.kept = keptRing{}
}

// trim forgets the kept events up to seq (acked: never delivered again).
func (st *ackRecv) trim(seq uint64) { st.kept.trim(seq) }

func satSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
