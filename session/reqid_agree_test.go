package session

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestRequestIDsCoresAgree: a Core restored from a snapshot taken midway
// and fed the same requests and ticks from then on answers every change
// and every retry byte for byte as the live Core does, and a third,
// replaying the live Core's records from that snapshot, ends with the
// same snapshot bytes. The windows and the hash index of the three are
// laid out differently (grown change by change, or rebuilt in ring order
// by the restore), which must not show. The ids are hostile: 0, 1 and the
// largest uint64, huge gaps, decreasing runs, a client restarting its
// counter, clients interleaving, ids reused with other bytes
// (request_id_reused), retries of old changes past max_request_ids and
// request_id_ticks, with limits small enough that entries go by both.
func TestRequestIDsCoresAgree(t *testing.T) {
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000, ServerVersion: "test"}
	limits := Limits{MaxRequestIDs: 40, RequestIDTicks: 25, MaxTimers: 1_000_000, MaxTimersPerReceiver: 1_000_000}
	hello := frame(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "a", Token: testAdminToken})
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 25))
		h := newHarness(t, func(_ *Config, l *Limits) { *l = limits })
		live, ls := h.c, h.session()
		h.flush()
		counters := [4]uint64{1, 1, 1 << 60, 1}
		var sent [][]byte // changes sent so far, to retry
		next := func() []byte {
			if len(sent) > 0 && rng.IntN(3) == 0 {
				return sent[rng.IntN(len(sent))] // a retry, maybe long past
			}
			client := 1 + rng.Uint64N(4)
			var id uint64
			switch rng.IntN(10) {
			case 0:
				id = [...]uint64{0, 1, ^uint64(0), ^uint64(0) - 1}[rng.IntN(4)]
			case 1:
				counters[client-1] += 1 << (20 + rng.IntN(40)) // a huge gap
				id = counters[client-1]
			case 2:
				counters[client-1] = 1 + rng.Uint64N(3) // the client restarted its counter
				id = counters[client-1]
			case 3:
				counters[client-1] -= min(counters[client-1], rng.Uint64N(20)) // going down
				id = counters[client-1]
			default:
				counters[client-1]++
				id = counters[client-1]
			}
			req := protocol.Request{Op: protocol.OpAdd, ID: id, Client: client, Receiver: client, Tid: rng.Uint64N(30), After: 1 + rng.Uint64N(40)}
			if rng.IntN(4) == 0 {
				req.Op, req.After = protocol.OpCancel, 0
			}
			p := frame(req)
			sent = append(sent, p)
			return p
		}
		var replica *Core
		var rs *Session
		for step := range 3000 {
			if step == 1000 {
				snap := live.Snapshot()
				base, _ := snap.AppendNext(nil, 0)
				snap.Release()
				var err error
				replica, err = Restore(cfg, base, testLogger(), nil)
				require.NoError(t, err)
				rs = replica.Open()
				replica.Apply(rs, hello)
				replica.Flush(discardOut, nil)
			}
			if rng.IntN(8) == 0 {
				to := live.Now() + 1 + rng.Uint64N(6)
				live.Advance(to, 10_000)
				if replica != nil {
					replica.Advance(to, 10_000)
				}
			} else {
				p := next()
				at := len(ls.out)
				h.apply(ls, p)
				want := append([]byte(nil), ls.out[at:]...)
				if replica != nil {
					at := len(rs.out)
					replica.Apply(rs, p)
					require.Equal(t, want, rs.out[at:], "seed %d step %d: the restored Core's answer", seed, step)
				}
			}
			h.flush()
			if replica != nil {
				replica.Flush(discardOut, nil)
			}
			checkRequestIndex(t, &live.reqIDs)
		}
		checkRequestIndex(t, &replica.reqIDs)
		var a, b encoder
		live.appendRequestIDs(&a)
		replica.appendRequestIDs(&b)
		require.Equal(t, a.b, b.b, "seed %d: the restored Core remembers the same", seed)
		require.Positive(t, live.reqIDs.hits, "seed %d: some retries were answered from memory", seed)
		h.replayCheck() // the replica replaying the live Core's records holds the same state
	}
}
