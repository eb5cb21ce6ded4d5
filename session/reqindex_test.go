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
			k := reqKey{client: rng.Uint64N(4), id: rng.Uint64N(keys)}
			switch {
			case k.client == 3: // ids far apart: the hash index
				k.id *= 1 << 40
			case rng.IntN(200) == 0:
				k.id = ^uint64(0) // fits no window
			}
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
			trimModel(&r, model, limit)
			require.Equal(t, len(model), r.live)
		}
		checkRequestIndex(t, &r)
		for k, tick := range model {
			pos, ok := r.lookup(k)
			require.True(t, ok, "seed %d: %v lost", seed, k)
			require.Equal(t, tick, r.at(pos).tick)
		}
		require.LessOrEqual(t, len(r.ring), 4*max(limit, minRequestRing), "seed %d: the ring grew past what its entries need", seed)
	}
}

// checkRequestIndex checks that the windows and the hash index hold
// exactly the live entries of r's ring, each once, where its win says,
// and that each window's range is within its length and holds its ids.
func checkRequestIndex(t *testing.T, r *requestIDs) {
	t.Helper()
	live, windowed := 0, 0
	for p := r.first; p < r.next; p++ {
		if e := r.at(p); !e.dead {
			live++
			if e.win != 0 {
				windowed++
				c := &r.clients[e.win-1]
				require.Equal(t, e.key.client, c.client, "an entry's window is its client's")
				require.Equal(t, uint32(p&uint64(len(r.ring)-1))+1, c.find(e.key.id), "%v is at its place in its window", e.key)
			}
		}
	}
	require.Equal(t, r.live, live)
	n, used := 0, 0
	for s := range r.clients {
		c := &r.clients[s]
		if c.n == 0 {
			v, ok := r.byClient[c.client]
			require.False(t, ok && v == uint32(s), "a free slot is no client's")
			continue
		}
		used++
		require.Equal(t, uint32(s), r.byClient[c.client])
		require.LessOrEqual(t, c.hi-c.lo, uint64(len(c.win)), "a window's range fits it")
		require.False(t, c.oversized(), "a window of %d ids for %d entries", len(c.win), c.n)
		held := 0
		for i, v := range c.win {
			if v != 0 {
				e := &r.ring[v-1]
				require.False(t, e.dead, "a window points at a dead entry")
				require.Equal(t, uint32(s)+1, e.win)
				require.Equal(t, uint64(i), e.key.id&uint64(len(c.win)-1))
				require.True(t, e.key.id-c.lo < c.hi-c.lo, "id %d in [%d, %d)", e.key.id, c.lo, c.hi)
				held++
			}
		}
		require.Equal(t, c.n, held)
		n += held
	}
	require.Equal(t, windowed, n, "the windows hold the windowed entries")
	require.Len(t, r.byClient, used, "a client with a window is in the map, and only one")
	h := 0
	for _, s := range r.slots {
		if s != 0 {
			e := &r.ring[uint32(s)-1]
			require.False(t, e.dead, "the hash index points at a dead entry")
			require.Zero(t, e.win, "an entry in a window is not in the hash index")
			h++
		}
	}
	require.Equal(t, r.hashed, h)
	require.Equal(t, live-windowed, h, "the hash index holds the others")
}

// TestRequestIDWindows: a pipelined client's changes — batches of
// consecutive ids from one counter, arriving out of order across its
// connections, with ids of other requests between them — are all found in
// its window, which spans about as many ids as it holds entries, and the
// hash index holds nothing; a client with ids far apart goes to the hash
// index, and both are found; a client's window goes with its last entry.
func TestRequestIDWindows(t *testing.T) {
	var r requestIDs
	const limit = 2000
	trim := func() {
		for r.live > limit {
			if !r.at(r.first).dead {
				r.drop(r.first)
			}
			r.first++
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := uint64(1)
	var batches [][2]uint64
	for range 400 { // 8 connections' batches of 64 to 256 ids, a few ids between them for reads
		n := 64 + rng.Uint64N(193)
		batches = append(batches, [2]uint64{next, n})
		next += n + rng.Uint64N(4)
		if len(batches) == 8 {
			rng.Shuffle(8, func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
			for _, b := range batches {
				for id := b[0]; id < b[0]+b[1]; id++ {
					k := reqKey{client: 0x5eed, id: id}
					_, ok := r.lookup(k)
					require.False(t, ok)
					r.push(k).tick = id
					trim()
				}
			}
			batches = batches[:0]
		}
	}
	checkRequestIndex(t, &r)
	require.Zero(t, r.hashed, "a pipelined client's ids all fit its window")
	require.Len(t, r.byClient, 1)
	c := &r.clients[r.byClient[0x5eed]]
	require.LessOrEqual(t, c.hi-c.lo, uint64(2*limit), "the window spans about as many ids as entries")
	require.LessOrEqual(t, len(c.win), 8*limit, "a power of two, at most twice the longest range it held")

	for i := range uint64(100) { // one change every 2^32 ids
		r.push(reqKey{client: 7, id: i << 32}).tick = i
	}
	require.Equal(t, 99, r.hashed, "ids far apart go to the hash index (but the first)")
	checkRequestIndex(t, &r)
	for i := range uint64(100) {
		pos, ok := r.lookup(reqKey{client: 7, id: i << 32})
		require.True(t, ok)
		require.Equal(t, i, r.at(pos).tick)
	}
	_, ok := r.lookup(reqKey{client: 7, id: 1})
	require.False(t, ok)

	for r.live > 0 { // everything goes, oldest first
		if !r.at(r.first).dead {
			r.drop(r.first)
		}
		r.first++
		if r.live%1000 == 0 {
			checkRequestIndex(t, &r)
		}
	}
	require.Empty(t, r.byClient, "no window without an entry")
	require.Zero(t, r.hashed)
}

// TestRequestIDWindowsAfterPeak: a window keeps no more length than its
// entries need once most of them went. Each of k clients in turn makes
// its window long with nearly max_request_ids changes at a stride of 8
// ids, then every client sends one more change, which keeps each
// client's window alive among the next one's; before, every client kept
// the window of its peak, and k of them held about k times max_request_ids
// entries' worth of windows (4 MiB each at the default 100,000: 100 clients,
// 400 MB). Every entry is still found, and the windows
// hold at most a few times the slots their entries may span.
func TestRequestIDWindowsAfterPeak(t *testing.T) {
	var r requestIDs
	const limit, k = 2048, 16
	ids := make([]uint64, k) // each client's next id
	push := func(client uint64, stride uint64) {
		id := ids[client] + stride
		ids[client] = id
		key := reqKey{client: client + 1, id: id}
		_, ok := r.lookup(key)
		require.False(t, ok)
		r.push(key).tick = id
		for r.live > limit {
			if !r.at(r.first).dead {
				r.drop(r.first)
			}
			r.first++
		}
	}
	for c := range uint64(k) {
		for range limit - k {
			push(c, 8)
		}
		for o := range uint64(k) {
			push(o, 8)
		}
	}
	checkRequestIndex(t, &r)
	slots := 0
	for s := range r.clients {
		slots += len(r.clients[s].win)
	}
	require.LessOrEqual(t, 4*slots, 64*(limit+reqWindowMin*k),
		"the windows' bytes against max_request_ids entries' worth (64 bytes each, 64 a client)")
	for c := range uint64(k) { // each client's newest change is found
		pos, ok := r.lookup(reqKey{client: c + 1, id: ids[c]})
		require.True(t, ok, "client %d's last change", c+1)
		require.Equal(t, ids[c], r.at(pos).tick)
	}

	// A window whose few entries left span too many ids for them (the
	// lowest id came last) hands them to the hash index when it shrinks;
	// the client's next change starts a new window.
	r = requestIDs{}
	const n = 1000
	for i := range uint64(n) {
		r.push(reqKey{client: 9, id: 8 + 8*i}).tick = i
	}
	r.push(reqKey{client: 9, id: 4}).tick = n
	for r.live > 2 {
		r.drop(r.first)
		r.first++
		checkRequestIndex(t, &r)
	}
	require.Equal(t, 2, r.hashed, "ids 4 and %d, too far apart for a window of 2", 8*n)
	r.push(reqKey{client: 9, id: 8*n + 8}).tick = n + 1
	checkRequestIndex(t, &r)
	for id, tick := range map[uint64]uint64{4: n, 8 * n: n - 1, 8*n + 8: n + 1} {
		pos, ok := r.lookup(reqKey{client: 9, id: id})
		require.True(t, ok, "id %d", id)
		require.Equal(t, tick, r.at(pos).tick)
	}
	require.Equal(t, 1, r.clients[r.byClient[9]].n)
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

	// The hash index alone (a client's consecutive ids go to its window
	// now: this is the index of the ids that do not fit one), a ring's
	// worth of slots, the oldest removed as each new one comes.
	limit := Limits{}.WithDefaults().MaxRequestIDs
	r := requestIDs{ring: make([]reqEntry, 1<<17)}
	rm := uint64(len(r.ring) - 1)
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
		if id > uint64(limit) {
			old := id - uint64(limit)
			r.hashRemove(reqKey{client: 0x5eed, id: old}, uint32(old&rm))
		}
		r.hashInsert(k, uint32(id&rm))
	}
	require.Equal(t, limit, r.hashed)
	require.Less(t, float64(probes)/float64(misses), 4.0)
}

// trimModel forgets r's oldest live entries, as trimRequestIDs does by
// count, until at most limit are live, and deletes each from model.
func trimModel(r *requestIDs, model map[reqKey]uint64, limit int) {
	for r.first < r.next {
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
}
