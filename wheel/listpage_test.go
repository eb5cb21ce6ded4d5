package wheel

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkListPage compares ListPage with the model, called by checkReceiver
// with the model's timers of recv (want, in add order): one page from a
// from-tid chosen among the receiver's tids and the edges, and every few
// checks a walk through all pages, which must give each timer exactly once
// in ascending tid order. The choices derive from the check counter, so the
// fuzzer's op stream is not consumed.
func (r *modelRunner) checkListPage(recv uint64, want []Info) {
	sorted := slices.SortedFunc(slices.Values(want), func(a, b Info) int { return cmp.Compare(a.Tid, b.Tid) })
	h := uint64(r.checks)*0x9E3779B97F4A7C15 ^ recv
	sizes := []int{1, 2, 3, 7, 64, math.MaxInt}
	n := sizes[h%uint64(len(sizes))]
	var from uint64
	switch k := (h >> 8) % 5; {
	case k == 0 || len(sorted) == 0:
		from = h >> 16 // anywhere
	case k == 1:
		from = math.MaxUint64
	default:
		tid := sorted[int(h>>16)%len(sorted)].Tid
		from = addSigned(tid, int(k)-3) // just below, at, or just past a tid
	}
	r.comparePage(recv, from, n, sorted)

	if r.checks%8 != 0 || len(sorted)/32 > n {
		return
	}
	var all []Info
	from = 0
	for pages := 0; ; pages++ {
		if pages > len(sorted)+1 {
			r.failf("ListPage(%d) paging with n=%d does not end", recv, n)
		}
		page := r.w.ListPage(recv, from, n, nil)
		all = append(all, page...)
		if len(page) < n || page[len(page)-1].Tid == math.MaxUint64 {
			break
		}
		from = page[len(page)-1].Tid + 1
	}
	r.samePage(fmt.Sprintf("ListPage(%d) paged by %d", recv, n), all, sorted)
}

// comparePage checks one page against the model's sorted timers.
func (r *modelRunner) comparePage(recv, from uint64, n int, sorted []Info) {
	i, _ := slices.BinarySearchFunc(sorted, from, func(in Info, t uint64) int { return cmp.Compare(in.Tid, t) })
	want := sorted[i:]
	want = want[:min(len(want), n)]
	marker := Info{Key: Key{Receiver: 0xbeef, Tid: uint64(r.op)}, Due: 9}
	got := r.w.ListPage(recv, from, n, append(r.listBuf[:0], marker))
	r.listBuf = got
	if got[0].Key != marker.Key || got[0].Due != marker.Due {
		r.failf("ListPage(%d, %d, %d, dst) did not keep dst[0]", recv, from, n)
	}
	r.samePage(fmt.Sprintf("ListPage(%d, from=%d, n=%d)", recv, from, n), got[1:], want)
}

func (r *modelRunner) samePage(what string, got, want []Info) {
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = r.infoEqual(got[i], want[i])
	}
	if ok {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s at now=%d differs:\n\twheel:", what, r.m.now)
	for _, in := range got {
		b.WriteString("\n\t  " + infoString(in))
	}
	b.WriteString("\n\tmodel:")
	for _, in := range want {
		b.WriteString("\n\t  " + infoString(in))
	}
	r.failf("%s", b.String())
}

func tidsOf(in []Info) []uint64 {
	out := make([]uint64, len(in))
	for i := range in {
		out[i] = in[i].Tid
	}
	return out
}

func TestListPage(t *testing.T) {
	w := newWheel(t, 100, Config{})
	assert.Empty(t, w.ListPage(1, 0, 10, nil), "no timers")
	for _, tid := range []uint64{50, 3, math.MaxUint64, 0, 7, 1 << 40} {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: tid%100 + 1, Data: []byte{byte(tid)}}))
	}
	require.NoError(t, w.Add(Key{2, 4}, Spec{After: 1}))

	assert.Equal(t, []uint64{0, 3, 7, 50, 1 << 40, math.MaxUint64}, tidsOf(w.ListPage(1, 0, 100, nil)))
	assert.Equal(t, []uint64{0, 3}, tidsOf(w.ListPage(1, 0, 2, nil)))
	assert.Equal(t, []uint64{7, 50}, tidsOf(w.ListPage(1, 4, 2, nil)))
	assert.Equal(t, []uint64{7, 50}, tidsOf(w.ListPage(1, 7, 2, nil)), "from is inclusive")
	assert.Equal(t, []uint64{math.MaxUint64}, tidsOf(w.ListPage(1, 1<<40+1, 5, nil)))
	assert.Equal(t, []uint64{math.MaxUint64}, tidsOf(w.ListPage(1, math.MaxUint64, 5, nil)))
	assert.Empty(t, w.ListPage(1, 0, 0, nil), "n = 0")
	assert.Empty(t, w.ListPage(1, 0, -1, nil), "n < 0")
	assert.Empty(t, w.ListPage(3, 0, 5, nil), "unknown receiver")
	assert.Equal(t, []uint64{4}, tidsOf(w.ListPage(2, 0, math.MaxInt, nil)))

	// The same Info as Get, and dst is appended to.
	dst := []Info{{Due: 1}}
	dst = w.ListPage(1, 50, 1, dst)
	require.Len(t, dst, 2)
	assert.Equal(t, uint64(1), dst[0].Due)
	in, err := w.Get(Key{1, 50})
	require.NoError(t, err)
	assert.Equal(t, in, dst[1])
}

// TestListPageOrders pages through receivers filled in ascending, descending
// and random tid order, with timers of other receivers in between.
func TestListPageOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, order := range []string{"ascending", "descending", "random"} {
		w := newWheel(t, 0, Config{})
		const count = 3000
		tids := make([]uint64, count)
		for i := range tids {
			tids[i] = uint64(i) * 1000
		}
		switch order {
		case "descending":
			slices.Reverse(tids)
		case "random":
			rng.Shuffle(len(tids), func(i, j int) { tids[i], tids[j] = tids[j], tids[i] })
		}
		for i, tid := range tids {
			require.NoError(t, w.Add(Key{1, tid}, Spec{After: 1 + uint64(i)}))
			require.NoError(t, w.Add(Key{2, tid}, Spec{After: 1 + uint64(i)}))
		}
		want := slices.Sorted(slices.Values(tids))
		for _, n := range []int{1, 7, 1000, count, count + 1} {
			var got []uint64
			from := uint64(0)
			for {
				page := w.ListPage(1, from, n, nil)
				got = append(got, tidsOf(page)...)
				if len(page) < n {
					break
				}
				from = page[len(page)-1].Tid + 1
			}
			assert.Equal(t, want, got, "%s, n=%d", order, n)
		}
	}
}

// TestListPageAllocs: a page allocates nothing once the buffers have grown.
func TestListPageAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	w := newWheel(t, 0, Config{})
	for i := range 10_000 {
		require.NoError(t, w.Add(Key{1, uint64(i)}, Spec{After: 1 + uint64(i), Data: []byte("data")}))
	}
	dst := make([]Info, 0, 1001)
	page := func() { dst = w.ListPage(1, 5000, 1001, dst[:0]) }
	page()
	assert.Zero(t, testing.AllocsPerRun(100, page))
	assert.Len(t, dst, 1001)
}

// BenchmarkListPage: one page of 1001 timers (the server's default page and
// one more, to learn the next tid) from a receiver with 100k timers. tids
// added in ascending order are the worst case for the heap: the receiver's
// list is newest first, so each timer walked displaces the largest kept.
func BenchmarkListPage(b *testing.B) {
	const count, page = 100_000, 1001
	for _, order := range []string{"ascending", "random"} {
		w := newWheel(b, 0, Config{})
		tids := make([]uint64, count)
		for i := range tids {
			tids[i] = uint64(i)
		}
		if order == "random" {
			rand.New(rand.NewPCG(1, 1)).Shuffle(count, func(i, j int) { tids[i], tids[j] = tids[j], tids[i] })
		}
		for i, tid := range tids {
			if err := w.Add(Key{1, tid}, Spec{After: 1 + uint64(i)%10_000, Data: make([]byte, 64)}); err != nil {
				b.Fatal(err)
			}
		}
		for _, from := range []uint64{0, count / 2} {
			b.Run(fmt.Sprintf("order=%s/from=%d", order, from), func(b *testing.B) {
				dst := make([]Info, 0, page)
				b.ReportAllocs()
				for b.Loop() {
					dst = w.ListPage(1, from, page, dst[:0])
				}
				if len(dst) != page {
					b.Fatalf("page of %d", len(dst))
				}
			})
		}
		b.Run(fmt.Sprintf("order=%s/List", order), func(b *testing.B) {
			var dst []Info
			b.ReportAllocs()
			for b.Loop() {
				dst = w.List(1, dst[:0])
			}
		})
	}
}

// TestSelectSmallest checks selectSmallest against a sort on random,
// sorted, reversed and organ-pipe inputs, every k.
func TestSelectSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, m := range []int{1, 2, 3, 9, 10, 17, 64, 200} {
		inputs := map[string][]uint64{"random": {}, "sorted": {}, "reversed": {}, "organ": {}}
		for i := range m {
			inputs["random"] = append(inputs["random"], rng.Uint64())
			inputs["sorted"] = append(inputs["sorted"], uint64(i))
			inputs["reversed"] = append(inputs["reversed"], uint64(m-i))
			inputs["organ"] = append(inputs["organ"], uint64(min(i, m-i)*2+i%2))
		}
		for name, tids := range inputs {
			want := slices.Sorted(slices.Values(tids))
			for k := 1; k <= m; k++ {
				a := make([]tidRef, m)
				for i, tid := range tids {
					a[i] = tidRef{tid: tid, i: uint32(i)}
				}
				selectSmallest(a, k)
				got := make([]uint64, k)
				for i := range k {
					got[i] = a[i].tid
					require.Equal(t, tids[a[i].i], a[i].tid, "entries keep their index")
				}
				require.Equal(t, want[k-1], a[k-1].tid, "%s m=%d k=%d: the k-th smallest at k-1", name, m, k)
				slices.Sort(got)
				require.Equal(t, want[:k], got, "%s m=%d k=%d", name, m, k)
			}
		}
	}
}

// TestListPageCostPerPage: paging through a receiver with many timers
// costs O(page) a page once paging is under way, not a walk of all its
// timers each time (19-25 ms a page at 2M timers); a timer added between
// pages is seen when its tid is ahead, a removed one is not, and no tid
// repeats. The cost is counted (ListWork), not timed.
func TestListPageCostPerPage(t *testing.T) {
	const m, n = 100_000, 100
	w := newWheel(t, 100, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	tids := make([]uint64, m)
	for i, p := range rng.Perm(m) {
		tids[i] = uint64(p) * 4
		require.NoError(t, w.Add(Key{1, tids[i]}, Spec{After: 1 + uint64(i%5000)}))
	}
	require.NoError(t, w.Add(Key{2, 1}, Spec{After: 3})) // another receiver
	slices.Sort(tids)

	var seen []uint64
	var gone, added uint64
	from, total, worst := uint64(0), 0, 0
	for pages := 0; ; pages++ {
		switch pages {
		case 100: // changes between pages
			gone, added = from+3, from+5
			require.NoError(t, w.Cancel(Key{1, gone}))               // ahead: not seen
			require.NoError(t, w.Add(Key{1, added}, Spec{After: 9})) // ahead: seen
			require.NoError(t, w.Add(Key{1, 1}, Spec{After: 9}))     // behind: not seen
		case 200:
			w.ListPage(2, 0, 10, nil) // another receiver paged in between
		}
		page := w.ListPage(1, from, n, nil)
		seen = append(seen, tidsOf(page)...)
		total += w.ListWork()
		if pages > 1 && pages != 100 && pages != 101 && pages != 200 && pages != 201 {
			worst = max(worst, w.ListWork())
		}
		if len(page) < n {
			break
		}
		from = page[n-1].Tid + 1
	}
	assert.True(t, slices.IsSorted(seen) && len(slices.Compact(slices.Clone(seen))) == len(seen), "ascending, no tid twice")
	assert.Len(t, seen, m)
	assert.NotContains(t, seen, gone)
	assert.NotContains(t, seen, uint64(1))
	assert.Contains(t, seen, added)
	assert.LessOrEqual(t, worst, 2*n+20, "a page walks about its own timers")
	assert.Less(t, total, m*m/n/10, "the whole paging walks a few times m log m timers, not m per page (%d pages)", m/n)
}
