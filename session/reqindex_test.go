package session

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestRequestIDIndexModel drives the memory's ring and index with random
// pushes, drops in the middle (an expired entry applied again) and at the
// front (past max_request_ids), against a Go map: every key pushed and not
// dropped is found with its own entry, no other key is, and the index
// holds exactly the live entries. Small key spaces and small rings make
// probe runs collide, wrap around the table's end and shift back across
// it; the drops in the middle make the ring fill with dead entries and
// compact in place, the pushes make it double.
func TestRequestIDIndexModel(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		limit := 1 + rng.IntN(300)
		keys := uint64(2 + rng.IntN(2*limit))
		var r requestIDs
		model := map[reqKey]uint64{} // key -> the tick it was pushed with
		var tick uint64
		for range 5000 {
			k := reqKey{client: rng.Uint64N(3), id: rng.Uint64N(keys)}
			pos, ok := r.lookup(k)
			want, live := model[k]
			require.Equal(t, live, ok, "seed %d: lookup of %v", seed, k)
			if ok {
				require.Equal(t, want, r.at(pos).tick, "seed %d: %v found another entry", seed, k)
				require.False(t, r.at(pos).dead)
				if rng.IntN(3) > 0 {
					continue // a retry
				}
				r.drop(pos) // expired, applied again
				delete(model, k)
			}
			tick++
			e := r.push(k)
			e.tick = tick
			model[k] = tick
			for r.first < r.next { // trim as trimRequestIDs does, by count
				front := r.at(r.first)
				if !front.dead {
					if r.live <= limit {
						break
					}
					delete(model, front.key)
					r.drop(r.first)
				}
				r.first++
			}
			require.Equal(t, len(model), r.live)
		}
		n := 0
		for _, s := range r.slots {
			if s != 0 {
				e := &r.ring[uint32(s)-1]
				require.False(t, e.dead, "seed %d: the index points at a dead entry", seed)
				require.Equal(t, model[e.key], e.tick)
				n++
			}
		}
		require.Equal(t, len(model), n, "seed %d: index slots", seed)
		require.LessOrEqual(t, len(r.ring), 4*max(limit, minRequestRing), "seed %d: the ring grew past what its entries need", seed)
	}
}

// TestRequestIDIndexNoAllocs: once the ring holds max_request_ids, a
// remembered change (a lookup that misses, a push, the oldest dropped)
// allocates nothing; an entry is one 64-byte cache line (reqEntryBytes,
// the docs' 80 bytes a change, count on it).
func TestRequestIDIndexNoAllocs(t *testing.T) {
	require.Equal(t, uintptr(64), unsafe.Sizeof(reqEntry{}))
	var r requestIDs
	const limit = 1000
	id := uint64(0)
	step := func() {
		id++
		k := reqKey{client: 9, id: id}
		if _, ok := r.lookup(k); ok {
			panic("found a new key")
		}
		r.push(k).tick = id
		for r.live > limit {
			if !r.at(r.first).dead {
				r.drop(r.first)
			}
			r.first++
		}
	}
	for range 3 * limit {
		step()
	}
	require.Zero(t, testing.AllocsPerRun(10_000, step))
}

// BenchmarkRequestIDMemory is the memory's share of an identified change
// in steady state, at the default max_request_ids (100,000): a lookup
// that misses, the push of the new entry and the drop of the oldest. One
// op is one change; the Core's other work (BenchmarkRecordAddRequestID)
// is left out, so the index's cache misses are not hidden behind it.
func BenchmarkRequestIDMemory(b *testing.B) {
	var r requestIDs
	limit := Limits{}.WithDefaults().MaxRequestIDs
	id := uint64(0)
	step := func() {
		id++
		k := reqKey{client: 0x5eed, id: id}
		if _, ok := r.lookup(k); ok {
			b.Fatal("found a new key")
		}
		r.push(k).tick = id
		for r.live > limit {
			if !r.at(r.first).dead {
				r.drop(r.first)
			}
			r.first++
		}
	}
	for range 2 * limit {
		step()
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSnapshotRequestIDs is the loop's share of a snapshot of a
// memory holding 100,000 changes: "copy" is what Snapshot does now (the
// entries copied, encoded later by AppendNext off the loop), "encode" what
// it did before (the entries encoded on the loop).
func BenchmarkSnapshotRequestIDs(b *testing.B) {
	var r requestIDs
	for i := range uint64(100_000) {
		e := r.push(reqKey{client: 0x5eed_0000_0000_0000 + i%7, id: i + 1})
		e.tick, e.sum = 1000+i, i*0x9E3779B97F4A7C15
		r.setReply(e, make([]byte, 17))
	}
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		for b.Loop() {
			r.copyLive()
		}
		b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		q := reqSnap{entries: r.ring[:r.next], live: r.live} // the ring itself (it has not wrapped)
		for b.Loop() {
			e := encoder{}
			q.append(&e)
		}
		b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
}

// TestRequestIDIndexConsecutiveIDs: clients number their changes in
// order, and the index keeps a client's consecutive ids together: the
// reqBlock ids of a block have consecutive home slots in one cache line
// (8 slots), so a new change's lookup and insert, and the oldest's drop,
// touch the line the previous change's did. Blocks land at random: at the
// default max_request_ids, in steady state, a lookup that misses probes
// fewer than 4 slots on average (random keys: 0.8) — the blocks do not
// pile up into long runs.
func TestRequestIDIndexConsecutiveIDs(t *testing.T) {
	const mask = 1<<18 - 1
	for _, client := range []uint64{1, 0x5eed, 1 << 63} {
		for id := uint64(0); id < 4096; id += reqBlock {
			home := reqHash(reqKey{client, id}) & mask
			for j := range uint64(reqBlock) {
				h := reqHash(reqKey{client, id + j}) & mask
				require.Equal(t, home+j, h, "client %d id %d", client, id+j)
				require.Equal(t, home/8, h/8, "one cache line")
			}
		}
	}

	var r requestIDs
	limit := Limits{}.WithDefaults().MaxRequestIDs
	var probes, misses uint64
	for id := uint64(1); id <= uint64(4*limit); id++ {
		k := reqKey{client: 0x5eed, id: id}
		if id > uint64(2*limit) {
			m := uint64(len(r.slots) - 1)
			for p := reqHash(k) & m; r.slots[p] != 0; p = (p + 1) & m {
				probes++
			}
			misses++
		}
		r.push(k)
		for r.live > limit {
			if !r.at(r.first).dead {
				r.drop(r.first)
			}
			r.first++
		}
	}
	require.Less(t, float64(probes)/float64(misses), 4.0)
}
