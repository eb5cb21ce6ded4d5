package client

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// Tests of the Client's acknowledged-mode logic against scripted fake
// servers: dropped notices, duplicate removal after a re-bind, ack
// batching and deferred acks.

// ackFake is a fake server for one receiver in acknowledged mode. The n-th
// bind (from 1; one per connection in these tests) is answered by
// onBind(n), which returns the reply's [pending, dropped, first_seq] and
// the fires that follow it. It answers acks with ok and records them,
// with the connection's bind number, and checks that none is above the
// last seq it sent on that connection.
type ackFake struct {
	t      *testing.T
	onBind func(n int) (reply []uint64, fires []protocol.Fire)

	mu     sync.Mutex
	binds  int
	sent   map[int]uint64 // bind number -> highest seq sent on its connection
	acks   []ackSeen
	conn   net.Conn // the last bind's connection, for push
	fake   *fakeServer
	connOf map[io.Writer]int // connection -> bind number
}

type ackSeen struct {
	bind int
	seq  uint64
}

func startAckFake(t *testing.T, onBind func(n int) ([]uint64, []protocol.Fire)) *ackFake {
	f := &ackFake{t: t, onBind: onBind, sent: make(map[int]uint64), connOf: make(map[io.Writer]int)}
	f.fake = startFake(t, f.serve)
	return f
}

func (f *ackFake) addr() string { return f.fake.addr() }

func (f *ackFake) serve(w io.Writer, req protocol.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []byte
	switch req.Op {
	case protocol.OpBind:
		f.binds++
		n := f.binds
		f.connOf[w], f.conn = n, w.(net.Conn)
		reply, fires := f.onBind(n)
		out = protocol.AppendOK(nil, req.ID, reply...)
		for i := range fires {
			out = protocol.AppendFire(out, &fires[i])
			f.sent[n] = max(f.sent[n], fires[i].Seq)
		}
	case protocol.OpAck:
		n := f.connOf[w]
		if req.Seq > f.sent[n] {
			f.t.Errorf("ack %d on connection %d, which was sent up to %d", req.Seq, n, f.sent[n])
		}
		f.acks = append(f.acks, ackSeen{bind: n, seq: req.Seq})
		out = protocol.AppendOK(nil, req.ID)
	default:
		out = protocol.AppendOK(nil, req.ID, 0)
	}
	_, err := w.Write(out)
	return err == nil
}

// push sends fires on the last bind's connection.
func (f *ackFake) push(fires ...protocol.Fire) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []byte
	for i := range fires {
		out = protocol.AppendFire(out, &fires[i])
		f.sent[f.binds] = max(f.sent[f.binds], fires[i].Seq)
	}
	_, err := f.conn.Write(out)
	require.NoError(f.t, err)
}

// lastAck returns the highest ack seen on the n-th bind's connection.
func (f *ackFake) lastAck(n int) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last uint64
	for _, a := range f.acks {
		if a.bind == n {
			last = max(last, a.seq)
		}
	}
	return last
}

func (f *ackFake) ackList() []ackSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ackSeen(nil), f.acks...)
}

// fire is the fire of seq of receiver 5, as timer tid's firing at tick.
func fire(seq, tid, tick uint64) protocol.Fire {
	return protocol.Fire{Receiver: 5, Tid: tid, Tick: tick, Fired: seq, Seq: seq}
}

// fires returns the fires of seqs from..to of timer 1, due at 1000 + seq.
func fires(from, to uint64) []protocol.Fire {
	var fs []protocol.Fire
	for s := from; s <= to; s++ {
		fs = append(fs, fire(s, 1, 1000+s))
	}
	return fs
}

// seqsOf reads n events and returns them as "seq" for fires of timer 1,
// "tid:seq" for others, "-count" for Dropped events.
func seqsOf(t *testing.T, ch <-chan Event, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ev := nextEvent(t, ch)
		switch {
		case ev.Kind == Dropped:
			out = append(out, fmt.Sprintf("-%d", ev.Count))
		case ev.Tid == 1:
			out = append(out, fmt.Sprint(ev.Seq))
		default:
			out = append(out, fmt.Sprintf("%d:%d", ev.Tid, ev.Seq))
		}
	}
	return out
}

// TestDroppedNotice: the server's notice that events first..last were
// dropped is a Dropped event of their count, in order, and the gap they
// leave in the seqs is not counted again.
func TestDroppedNotice(t *testing.T) {
	f := startFake(t, func(w io.Writer, req protocol.Request) bool {
		out := protocol.AppendOK(nil, req.ID, 0, 0)
		if req.Op == protocol.OpBind {
			out = protocol.AppendDropped(out, req.Receiver, 1, 2) // before any event
			out = protocol.AppendFire(out, &protocol.Fire{Receiver: req.Receiver, Tid: 1, Seq: 3})
			out = protocol.AppendDropped(out, req.Receiver, 4, 6)
			out = protocol.AppendFire(out, &protocol.Fire{Receiver: req.Receiver, Tid: 1, Seq: 7})
			out = protocol.AppendFire(out, &protocol.Fire{Receiver: req.Receiver, Tid: 1, Seq: 9})
		}
		_, err := w.Write(out)
		return err == nil
	})
	c := dial(t, f.addr())
	_, err := c.Bind(tctx(t), 5, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"-2", "3", "-3", "7", "-1", "9"}, seqsOf(t, c.Events(), 6))
	assert.Equal(t, uint64(6), c.Dropped())
	noEvent(t, c.Events())
}

// TestAckRebindDuplicates: after a reconnect the re-bind's reply gives
// first_seq, and the events that follow are the server's outbox. Those the
// user already has are dropped and counted (Redelivered); events with seqs
// the user had but different content mean the server's numbering started
// again (it lost its state), and are delivered; a first_seq past the last
// seq is no drop.
func TestAckRebindDuplicates(t *testing.T) {
	cases := []struct {
		name        string
		reply       []uint64
		fires       []protocol.Fire
		want        []string
		redelivered uint64
	}{
		{"all again and a new one", []uint64{3, 0, 1}, fires(1, 3), []string{"3"}, 2},
		{"the first acked", []uint64{2, 0, 2}, fires(2, 3), []string{"3"}, 1},
		{"nothing pending", []uint64{0, 0, 3}, fires(3, 3), []string{"3"}, 0},
		{"a jump forward", []uint64{0, 0, 10}, fires(10, 10), []string{"10"}, 0},
		{"a new numbering", []uint64{2, 0, 1}, []protocol.Fire{fire(1, 7, 9001), fire(2, 7, 9002), fire(3, 7, 9003)},
			[]string{"7:1", "7:2", "7:3"}, 0},
		{"a new numbering, nothing pending", []uint64{0, 0, 1}, []protocol.Fire{fire(1, 7, 9001)}, []string{"7:1"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startAckFake(t, func(n int) ([]uint64, []protocol.Fire) {
				if n == 1 {
					return []uint64{2, 0, 1}, fires(1, 2)
				}
				return tc.reply, tc.fires
			})
			c := dial(t, f.addr(), WithReconnect(time.Millisecond, time.Millisecond))
			r, err := c.Bind(tctx(t), 5, &BindOptions{Ack: AckAuto})
			require.NoError(t, err)
			assert.Equal(t, BindResult{Pending: 2, FirstSeq: 1}, r)
			assert.Equal(t, []string{"1", "2"}, seqsOf(t, c.Events(), 2))

			c.dropConn()
			assert.Equal(t, tc.want, seqsOf(t, c.Events(), len(tc.want)))
			noEvent(t, c.Events())
			assert.Equal(t, tc.redelivered, c.Redelivered())
			assert.Zero(t, c.Dropped())
			last := tc.fires[len(tc.fires)-1].Seq
			eventually(t, "the ack of the last event", func() bool { return f.lastAck(2) == last })
			o, ok := c.bindOptions(5)
			assert.True(t, ok)
			assert.Equal(t, BindOptions{Ack: AckAuto}, o, "re-bound with the same options")
		})
	}
}

// TestAckBatched: auto acks are cumulative and batched: a burst of 2000
// events taken by the user gives a few acks, increasing, the last one
// covering everything — with the Events channel and with a handler. The
// Client sends the acks due once per ackBatch events queued, with other
// writes (none here) and else when its ack timer fires, at most once per
// ackDelay: how many acks a burst gives depends on how long the user takes
// to take it, and the bound counts the timer's turns in that time. (A
// fixed bound of n/ackBatch+10 assumed the burst was taken within about
// 10 ms; on a loaded machine with -race the test goroutine took 2000
// events in 20-30 ms and the test failed about 1 run in 50.)
func TestAckBatched(t *testing.T) {
	for _, handler := range []bool{false, true} {
		t.Run(fmt.Sprintf("handler=%v", handler), func(t *testing.T) {
			const n = 2000
			f := startAckFake(t, func(int) ([]uint64, []protocol.Fire) { return []uint64{n, 0, 1}, fires(1, n) })
			var opts []Option
			got := make(chan Event, n)
			if handler {
				opts = append(opts, WithHandler(func(ev Event) { got <- ev }))
			}
			c := dial(t, f.addr(), opts...)
			events := c.Events()
			if handler {
				events = got
			}
			start := time.Now() // no ack can go before the bind
			_, err := c.Bind(tctx(t), 5, &BindOptions{Ack: AckAuto})
			require.NoError(t, err)
			for i := uint64(1); i <= n; i++ {
				require.Equal(t, i, nextEvent(t, events).Seq)
			}
			eventually(t, "the ack of the last event", func() bool { return f.lastAck(1) == n })
			acks := f.ackList() // none can follow the last one: nothing more is due
			took := time.Since(start)
			timerTurns := int(took/ackDelay) + 1
			assert.LessOrEqual(t, len(acks), n/ackBatch+timerTurns+1,
				"acks are batched: %d events, %v (%d ack timer turns)", n, took, timerTurns)
			for i := 1; i < len(acks); i++ {
				assert.Greater(t, acks[i].seq, acks[i-1].seq, "acks increase")
			}
		})
	}
}

// TestAckNotTaken: events the user has not taken are not acked: with the
// Events channel, those still in it; with a handler, the one it is still
// handling.
func TestAckNotTaken(t *testing.T) {
	f := startAckFake(t, func(int) ([]uint64, []protocol.Fire) { return []uint64{5, 0, 1}, fires(1, 5) })
	c := dial(t, f.addr())
	_, err := c.Bind(tctx(t), 5, &BindOptions{Ack: AckAuto})
	require.NoError(t, err)
	assert.Equal(t, []string{"1", "2"}, seqsOf(t, c.Events(), 2))
	eventually(t, "the ack of the events taken", func() bool { return f.lastAck(1) == 2 })
	_, err = c.Ping(tctx(t)) // a write: acks due would ride along
	require.NoError(t, err)
	assert.Equal(t, uint64(2), f.lastAck(1), "3..5 are still in the channel")

	release := make(chan struct{})
	handling := make(chan uint64, 5)
	h := dial(t, f.addr(), WithHandler(func(ev Event) {
		handling <- ev.Seq
		if ev.Seq == 2 {
			<-release
		}
	}))
	_, err = h.Bind(tctx(t), 5, &BindOptions{Ack: AckAuto})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), <-handling)
	assert.Equal(t, uint64(2), <-handling)
	eventually(t, "the ack of the event handled", func() bool { return f.lastAck(2) == 1 })
	_, err = h.Ping(tctx(t))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), f.lastAck(2), "the handler has not returned for 2")
	close(release)
	eventually(t, "the acks of the rest", func() bool { return f.lastAck(2) == 5 })
}

// TestAckDeferred: a manual Ack of an event the Client delivered, made
// while the connection is being replaced, returns nil at once; the Client
// sends it on the new connection once the server has delivered that seq
// again there (never above what the server sent on it), and drops the
// redelivered events as duplicates.
func TestAckDeferred(t *testing.T) {
	f := startAckFake(t, func(n int) ([]uint64, []protocol.Fire) {
		if n == 1 {
			return []uint64{2, 0, 1}, fires(1, 2)
		}
		return []uint64{2, 0, 1}, fires(1, 1) // 2 comes later, by push
	})
	c := dial(t, f.addr(), WithReconnect(200*time.Millisecond, 200*time.Millisecond))
	ctx := tctx(t)
	_, err := c.Bind(ctx, 5, &BindOptions{Ack: AckManual})
	require.NoError(t, err)
	assert.Equal(t, []string{"1", "2"}, seqsOf(t, c.Events(), 2))

	c.dropConn()
	eventually(t, "the Client to see the loss", func() bool { return c.current() == nil })
	require.NoError(t, c.Ack(ctx, 5, 2), "deferred while reconnecting")
	assert.Zero(t, f.lastAck(1), "not sent on the lost connection")
	eventually(t, "the ack of what the new connection delivered", func() bool { return f.lastAck(2) == 1 })

	f.push(fires(2, 2)...)
	eventually(t, "the ack of 2 once delivered again", func() bool { return f.lastAck(2) == 2 })
	noEvent(t, c.Events())
	assert.Equal(t, uint64(2), c.Redelivered())

	// Beyond what the Client delivered, Ack asks the server at once.
	f.push(fires(3, 3)...)
	assert.Equal(t, []string{"3"}, seqsOf(t, c.Events(), 1))
	require.NoError(t, c.Ack(ctx, 5, 3))
	assert.Equal(t, uint64(3), f.lastAck(2), "sent before Ack returned")
}

// TestBindAckOldServer: a server that does not know acknowledged mode
// answers [pending, dropped]: Bind says so, and the Client re-binds the
// receiver without it.
func TestBindAckOldServer(t *testing.T) {
	f := startFake(t, func(w io.Writer, req protocol.Request) bool {
		_, err := w.Write(protocol.AppendOK(nil, req.ID, 0, 0))
		return err == nil
	})
	c := dial(t, f.addr())
	_, err := c.Bind(tctx(t), 5, &BindOptions{Ack: AckAuto, Ephemeral: true})
	require.ErrorContains(t, err, "does not support acknowledged mode")
	o, ok := c.bindOptions(5)
	assert.True(t, ok)
	assert.Equal(t, BindOptions{Ephemeral: true}, o)

	_, err = c.Bind(tctx(t), 5, &BindOptions{Ack: 7})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, "manual", AckManual.String())
	assert.Equal(t, "ack(7)", AckMode(7).String())
}
