package session

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// TestDeterminism feeds one long random stream of inputs (seeded) to two
// fresh Cores, as the server would make them: sessions opening, saying
// hello (admin, client, bad token, bad version), binding (ephemeral or not,
// taking receivers over), adding (after, at, every, repeat, data, replace,
// some at the limits), cancelling, pausing, listing, clock ops through a
// clock hook that moves the test's own tw-time, advances with varying max,
// connections reporting what they buffer, flushes to connections that
// keep some bytes buffered or reset inside the write, closes with bytes
// unsent, MayRead, PumpAll, malformed frames, timeouts. Every byte either
// hands its writer must be the other's, and their states (dumpState) the
// same; replaying the first Core's records into a third (a replica,
// checked as it goes) must give that state too.
func TestDeterminism(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	rng := rand.New(rand.NewPCG(20261123, 7))
	a, b := newDetCore(t, true), newDetCore(t, false)
	ids := make([]uint64, detReceivers)
	for i := range ids {
		ids[i] = uint64(i)
	}
	seen := make(map[string]int) // messages written, by kind and code
	bulkTurns := 0               // inputs after which a bulk operation was in progress
	for i := range n {
		in := a.input(rng)
		a.run(in)
		b.run(in)
		if a.c.BulkInProgress() > 0 {
			bulkTurns++
		}
		if !bytes.Equal(a.writes, b.writes) {
			t.Fatalf("input %d (%+v): the Cores wrote different bytes:\n%x\n%x", i, in, a.writes, b.writes)
		}
		tally(t, a.writes, seen)
		a.writes, b.writes = a.writes[:0], b.writes[:0]
		if i%2000 == 0 || i == n-1 {
			if da, db := dumpState(a.c, ids, true), dumpState(b.c, ids, true); da != db {
				t.Fatalf("input %d (%+v): the states differ:\n%s", i, in, diffLines(da, db))
			}
			a.rep.check(ids)
		}
	}
	st := a.c.Stats()
	t.Logf("%d inputs: %d firings, %d dropped (%d lost), %d timers, %d sessions, %d replayed inputs, tw-time +%d; written: %v",
		n, st.FiredTotal, st.DroppedTotal, a.c.lostTotal, st.Timers, st.Connections, a.rep.inputs, a.c.Now()-start, seen)
	require.NotZero(t, a.c.lostTotal, "the stream closed connections with events unsent")
	require.NotZero(t, st.DroppedTotal-a.c.lostTotal, "the stream overflowed backlogs")
	require.NotZero(t, bulkTurns, "no bulk operation went on over turns")
	for _, k := range []string{"ok", "fire", "takeover", "error limit_exceeded", "error exists", "error unauthorized",
		"error malformed", "error timeout", "error invalid_argument", "error unsupported_version"} {
		require.NotZero(t, seen[k], "the stream made no %q", k)
	}
}

// tally counts the messages in writes (session id, length, bytes, ...) by
// kind, and errors by code.
func tally(t *testing.T, writes []byte, seen map[string]int) {
	d := decoder{b: writes}
	for len(d.b) > 0 {
		d.uv()
		for b := d.bytes(); len(b) > 0; {
			payload, n, err := protocol.SplitFrame(b, 1<<30)
			require.NoError(t, err)
			var m protocol.Message
			require.NoError(t, protocol.DecodeMessage(payload, &m))
			k := m.Kind.String()
			if m.Kind == protocol.KindError {
				k += " " + m.Code.String()
			}
			seen[k]++
			b = b[n:]
		}
	}
	require.NoError(t, d.err)
}

const (
	detSlots     = 6
	detReceivers = 12
	detClient    = "det-client"
)

// detCore is one of the Cores and the connections around it.
type detCore struct {
	t     *testing.T
	c     *Core
	now   uint64 // its clock's tw-time
	slots [detSlots]*Session
	conns map[uint64]*detConn // by session id
	ids   [detSlots]uint64    // last request id per slot
	// writes is what its writers were handed during the current input:
	// session id, length, bytes.
	writes []byte
	rep    *replica // replays c's records (the first Core only)
}

// detConn is a connection: what it buffers, whether its peer reads, and
// whether its peer has reset it (the next write closes the session).
type detConn struct {
	buffered int
	stuck    bool
	reset    bool
}

func newDetCore(t *testing.T, replicated bool) *detCore {
	cfg := Config{AdminToken: testAdminToken, ClientToken: detClient, TickNs: 1_000_000, MaxFiresPerTurn: 40, ServerVersion: "det"}
	limits := Limits{MaxData: 64, MaxDataTotal: 3000, MaxTimers: 150, MaxTimersPerReceiver: 20, MaxReceiversPerSession: 5,
		MaxBacklog: 8, MaxBacklogTotal: 50, MaxBacklogBytes: 600, MaxOutbound: 1500, MaxOutboundTotal: 2500, MaxListPage: 5, MaxListBytes: 600,
		MaxOutbox: 6, MaxOutboxTotal: 30, MaxOutboxBytes: 500, MaxBulkPerTurn: 1}
	w, err := wheel.New(start, wheel.Config{Levels: 4, Slots: 8})
	require.NoError(t, err)
	d := &detCore{t: t, c: New(cfg, limits, w, nil, nil), now: start, conns: make(map[uint64]*detConn)}
	d.c.SetClockHook(d.clockHook)
	if replicated {
		w2, err := wheel.New(start, wheel.Config{Levels: 4, Slots: 8})
		require.NoError(t, err)
		d.rep = newReplica(t, d.c, cfg, limits, w2)
	}
	return d
}

// clockHook plays tw-time's clock: a fast-forward moves it by its ticks;
// resuming and changing speed let a little time pass first.
func (d *detCore) clockHook(op ClockOp, _ float64, ticks uint64) uint64 {
	switch op {
	case ClockFastForward:
		d.now += ticks
	case ClockResume:
		d.now += 2
	case ClockSetSpeed:
		d.now++
	}
	return d.now
}

// detInput is one input, the same for both Cores.
type detInput struct {
	kind    detKind
	slot    int
	payload []byte // a request frame's payload
	n       int    // ticks, bytes buffered, how a connection changes
	max     int    // an advance's max fires
}

type detKind uint8

const (
	detOpen detKind = iota
	detApply
	detAdvance
	detBuffered
	detFlush
	detClose
	detMayRead
	detPump
	detConnSet // n: 0 stuck, 1 drains, 2 drains half, 3 resets
	detExpire
)

// input draws the next input from the state of d (both Cores share it).
func (d *detCore) input(rng *rand.Rand) detInput {
	slot := rng.IntN(detSlots)
	s := d.slots[slot]
	switch x := rng.IntN(100); {
	case s == nil:
		return detInput{kind: detOpen, slot: slot}
	case x < 55:
		if s.Waiting() || s.Killed() {
			return detInput{kind: detFlush}
		}
		return detInput{kind: detApply, slot: slot, payload: d.request(rng, slot)}
	case x < 68:
		return detInput{kind: detAdvance, n: rng.IntN(4), max: [...]int{0, 1, 3, 50}[rng.IntN(4)]}
	case x < 72:
		return detInput{kind: detBuffered, slot: slot, n: rng.IntN(2000)}
	case x < 84:
		return detInput{kind: detFlush}
	case x < 86:
		return detInput{kind: detClose, slot: slot}
	case x < 90:
		return detInput{kind: detMayRead, slot: slot}
	case x < 94:
		return detInput{kind: detPump}
	case x < 99:
		return detInput{kind: detConnSet, slot: slot, n: rng.IntN(4)}
	default:
		return detInput{kind: detExpire, slot: slot}
	}
}

// request draws a request of slot's session, as its payload.
func (d *detCore) request(rng *rand.Rand, slot int) []byte {
	d.ids[slot]++
	req := protocol.Request{ID: d.ids[slot], Receiver: uint64(rng.IntN(detReceivers)), Tid: uint64(rng.IntN(8))}
	x := rng.IntN(100)
	if !d.slots[slot].HelloDone() && rng.IntN(10) < 8 {
		x = 0 // mostly a hello first
	}
	switch {
	case x < 6:
		req.Op, req.Version, req.Name = protocol.OpHello, protocol.Version, "det"
		req.Token = [...]string{testAdminToken, detClient, testAdminToken, detClient, "wrong", ""}[rng.IntN(6)]
		if rng.IntN(10) == 0 {
			req.Version++
		}
	case x < 18:
		req.Op, req.Ephemeral, req.Ack = protocol.OpBind, rng.IntN(3) == 0, rng.IntN(2) == 0
	case x < 22:
		req.Op = protocol.OpUnbind
	case x < 27: // below, within and past what the outbox sent
		req.Op, req.Seq = protocol.OpAck, uint64(rng.IntN(4))
		if r := d.c.receivers[req.Receiver]; r != nil {
			req.Seq += r.firstSeq() - 2 + uint64(rng.IntN(r.sent+1))
		}
	case x < 50:
		req.Op = protocol.OpAdd
		d.add(rng, &req)
	case x < 57:
		req.Op = protocol.OpCancel
	case x < 59: // bulk operations (issue 27): of a receiver, or of a group, chunked 1 timer a turn (so that a cancel_all with a request id is often pending: requestid.go)
		req.Op = [...]protocol.Op{protocol.OpCancelAll, protocol.OpPauseAll, protocol.OpResumeAll, protocol.OpResumeAll}[rng.IntN(4)]
		if rng.IntN(2) == 0 {
			req.Receiver, req.Group = 0, 1+uint64(rng.IntN(3))
			if req.Op == protocol.OpCancelAll {
				req.Op = protocol.OpCancelGroup
			}
		}
	case x < 63:
		req.Op = [...]protocol.Op{protocol.OpPause, protocol.OpResume}[rng.IntN(2)]
	case x < 70 && rng.IntN(4) == 0:
		req.Op, req.Group, req.FromReceiver, req.FromTid, req.Limit = protocol.OpListGroup, uint64(rng.IntN(4)), uint64(rng.IntN(detReceivers)), uint64(rng.IntN(8)), uint64(rng.IntN(7))
	case x < 70:
		req.Op, req.FromTid, req.Limit = protocol.OpList, uint64(rng.IntN(8)), uint64(rng.IntN(7))
	case x < 74:
		req.Op = [...]protocol.Op{protocol.OpGet, protocol.OpPing, protocol.OpStats}[rng.IntN(3)]
	case x < 84:
		req.Op, req.Ticks = protocol.OpFastForward, uint64(rng.IntN(12))
		if rng.IntN(50) == 0 {
			req.Ticks = math.MaxUint64
		}
	case x < 92:
		req.Op = [...]protocol.Op{protocol.OpFreeze, protocol.OpResumeSync}[rng.IntN(2)]
	case x < 96:
		req.Op, req.Speed = protocol.OpSetSpeed, [...]float64{1, 0.5, 3, -1, 0}[rng.IntN(5)]
	case x < 98:
		req.Op = 77 // unknown
	default:
		payload := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpPing, ID: req.ID})[protocol.HeaderSize:]
		return payload[:len(payload)-1] // cut short: malformed
	}
	if changesTimers(req.Op) && rng.IntN(4) == 0 { // a request id: small ids, so retries and reuses come up
		req.Client, req.ID = uint64(1+rng.IntN(2)), uint64(rng.IntN(16))
	}
	return protocol.AppendRequest(nil, &req)[protocol.HeaderSize:]
}

// add fills in an add's schedule, data and flags.
func (d *detCore) add(rng *rand.Rand, req *protocol.Request) {
	req.After = uint64(rng.IntN(6))
	if rng.IntN(4) == 0 {
		req.At = d.c.Now() + uint64(rng.IntN(8)) - 1 // at or before now sometimes
	}
	req.Every, req.Repeat = uint64(rng.IntN(4)), uint64(rng.IntN(5))
	if rng.IntN(3) == 0 {
		req.Data = binary.BigEndian.AppendUint64(nil, rng.Uint64())
		req.Data = append(req.Data, make([]byte, rng.IntN(70))...) // over max_data sometimes
	}
	req.Replace = rng.IntN(4) == 0
	req.Group = uint64(rng.IntN(4)) // 0: none
}

// run applies in to d's Core, as the server's glue would, keeping the
// replica in step.
func (d *detCore) run(in detInput) {
	c, s := d.c, d.slots[in.slot] // nil for detOpen
	switch in.kind {
	case detOpen:
		s = c.Open()
		d.slots[in.slot], d.conns[s.id], d.ids[in.slot] = s, &detConn{}, 0
	case detApply:
		c.Apply(s, in.payload)
	case detAdvance:
		d.now += uint64(in.n)
		c.Advance(d.now, in.max)
		c.More()
	case detBuffered:
		c.Buffered(s, in.n)
	case detFlush:
		d.flush()
	case detClose:
		c.Close(s, d.conns[s.id].buffered)
	case detMayRead:
		c.MayRead(s, d.conns[s.id].buffered)
	case detPump:
		c.PumpAll(func(s *Session) int { return d.conns[s.id].buffered })
	case detConnSet:
		d.setConn(d.conns[s.id], in.n)
	case detExpire:
		c.Expire(s, "timeout")
	}
	if d.rep != nil {
		d.rep.sync()
	}
	for i, s := range d.slots {
		if s != nil && s.Closed() {
			d.slots[i] = nil
			if !s.dirty {
				delete(d.conns, s.id)
			}
		}
	}
}

func (d *detCore) setConn(c *detConn, how int) {
	switch how {
	case 0:
		c.stuck = true
	case 1:
		c.stuck, c.buffered = false, 0
	case 2:
		c.buffered /= 2
	default:
		c.reset = true
	}
}

// flush runs Flush with a writer that plays each connection: a stuck one
// buffers what it is handed, a reset one closes its session inside the
// write; a killed session is closed after its write, as the server does.
func (d *detCore) flush() {
	write := func(s *Session, out []byte) int {
		if d.rep != nil {
			d.rep.wrote(s, out)
		}
		d.writes = binary.AppendUvarint(d.writes, s.id)
		d.writes = binary.AppendUvarint(d.writes, uint64(len(out)))
		d.writes = append(d.writes, out...)
		conn := d.conns[s.id]
		switch {
		case len(out) == 0:
		case conn.reset:
			d.c.Close(s, conn.buffered)
		case conn.stuck:
			conn.buffered += len(out)
		}
		return conn.buffered
	}
	d.c.Flush(write, func(s *Session) {
		if s.Killed() {
			d.c.Close(s, d.conns[s.id].buffered)
		}
	})
}
