package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// TestListGroupPagesUnderChurn pages a group while timers are added to it
// (before and after the cursor), cancelled, moved to another group by a
// replace and fired between pages, and checks every page against a model
// of the group's members at that moment: exactly the members from the
// cursor on in (receiver, tid) order, as many as the limit allows, and the
// key of the next member as the next cursor ((0, 0) when none is). So no
// timer is listed twice, and none present throughout the paging is
// skipped, which is checked too. It runs over the group's walk and over its
// ordered keys (a low groupOrderMin), which the churn drops and builds
// again as the group shrinks and grows.
func TestListGroupPagesUnderChurn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		orderMin int
	}{{"walk", 1 << 30}, {"ordered", 48}} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				listGroupChurn(t, tc.orderMin, seed)
			})
		}
	}
}

func listGroupChurn(t *testing.T, orderMin int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 12))
	h := newHarness(t, nil)
	h.c.groups.orderMin = orderMin
	a := h.client("a")
	const g = 7
	members := map[wheel.Key]bool{} // group g's timers now
	randKey := func() wheel.Key {
		return wheel.Key{Receiver: 1 + uint64(rng.IntN(5)), Tid: uint64(rng.IntN(400))}
	}
	add := func(k wheel.Key, group uint64, after uint64) { // a one-shot timer
		a.add(protocol.Request{Receiver: k.Receiver, Tid: k.Tid, After: after, Repeat: 1, Replace: true, Group: group})
		delete(members, k)
		if group == g {
			members[k] = true
		}
	}
	for range 300 {
		add(randKey(), g, 1000)
	}
	for range 50 {
		add(randKey(), 8, 1000) // another group's, and replaces moving some out of g
	}
	sortedMembers := func() []wheel.Key {
		ks := make([]wheel.Key, 0, len(members))
		for k := range members {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, keyCmp)
		return ks
	}

	ordered := map[bool]bool{} // whether pages were served from ordered keys, and from a walk
	for pass := range 4 {
		throughout := map[wheel.Key]bool{} // present at the start and never removed since
		for k := range members {
			throughout[k] = true
		}
		seen := map[wheel.Key]bool{}
		var from wheel.Key
		for page := 0; ; page++ {
			require.Less(t, page, 10_000)
			limit := 1 + rng.IntN(25)
			m := a.call(protocol.Request{Op: protocol.OpListGroup, Group: g, FromReceiver: from.Receiver, FromTid: from.Tid, Limit: uint64(limit)})
			require.Equal(t, protocol.KindOK, m.Kind, "list_group: %s %s", m.Code, m.Text)
			ts, nr, nt, err := protocol.DecodeListGroupPage(m.Result, nil)
			require.NoError(t, err)

			all := sortedMembers()
			at, _ := slices.BinarySearchFunc(all, from, keyCmp)
			want := all[at:min(len(all), at+limit)]
			var wantNext wheel.Key
			if at+limit < len(all) {
				wantNext = all[at+limit]
			}
			got := make([]wheel.Key, len(ts))
			for i, tm := range ts {
				got[i] = wheel.Key{Receiver: tm.Receiver, Tid: tm.Tid}
				require.Equal(t, uint64(g), tm.Group)
				require.False(t, seen[got[i]], "pass %d page %d: %v listed twice", pass, page, got[i])
				seen[got[i]] = true
			}
			require.Equal(t, append([]wheel.Key{}, want...), got, "pass %d page %d from %v limit %d", pass, page, from, limit)
			require.Equal(t, wantNext, wheel.Key{Receiver: nr, Tid: nt}, "pass %d page %d: next", pass, page)
			if gr := h.c.groups.get(g); gr != nil {
				ordered[gr.ord != nil] = true
			}
			if nr == 0 && nt == 0 {
				break
			}
			from = wheel.Key{Receiver: nr, Tid: nt}

			// Churn between pages. The first passes grow the group, the
			// later ones shrink it below a quarter of orderMin and back.
			for range rng.IntN(8) {
				k := randKey()
				switch op := rng.IntN(10); {
				case op < 4 && (pass%2 == 0 || op < 2):
					add(k, g, 1000)
				case op < 7:
					if a.call(protocol.Request{Op: protocol.OpCancel, Receiver: k.Receiver, Tid: k.Tid}).Kind == protocol.KindOK {
						delete(members, k)
					}
					delete(throughout, k)
				case op < 8:
					add(k, 8, 1000)
					delete(throughout, k)
				default: // one due next tick: it fires and leaves the group
					add(k, g, 1)
					delete(throughout, k)
					a.ff(1)
					h.catchUp()
					delete(members, k)
				}
			}
			if pass == 3 && len(members) > 5 { // well below any quarter of orderMin
				for _, k := range sortedMembers()[:len(members)-5] {
					a.call(protocol.Request{Op: protocol.OpCancel, Receiver: k.Receiver, Tid: k.Tid})
					delete(members, k)
					delete(throughout, k)
				}
			}
		}
		for k := range throughout {
			require.True(t, seen[k], "pass %d: %v, present throughout, skipped", pass, k)
		}
		for range 200 { // and grow it again for the next pass
			add(randKey(), g, 1000)
		}
	}
	if orderMin < 1000 {
		require.Equal(t, map[bool]bool{true: true, false: true}, ordered, "pages served both ways: the ordered keys dropped and built again")
	}
}

// TestListGroupPageWork: a list_group page of a large group costs its
// page and a few binary-search steps, not a walk of the group: the work
// the Core counts for one page (what the server's read budget charges) is
// bounded by the page size, from the start, the middle and past the end,
// and after members are added and cancelled between pages.
func TestListGroupPageWork(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	const members, page = 20_000, 100
	var frame []byte
	for i := range uint64(members) {
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 1 + i%10, Tid: i, After: 1000, Group: 9})
		h.c.Apply(s, frame[4:])
	}
	h.take(s)
	pageWork := func(fr, ft uint64) int {
		start := h.c.Work()
		h.send(s, protocol.Request{Op: protocol.OpListGroup, ID: 1, Group: 9, FromReceiver: fr, FromTid: ft, Limit: page})
		ms := h.take(s)
		require.Len(t, ms, 1)
		ts, _, _, err := protocol.DecodeListGroupPage(ms[0].Result, nil)
		require.NoError(t, err)
		require.NotEmpty(t, ts)
		return h.c.Work() - start
	}
	bound := page + 1 + 1 + 64 // the page and the key after it, the request, the searches
	for _, from := range [][2]uint64{{0, 0}, {5, 10_005}, {10, 19_999}} {
		require.LessOrEqual(t, pageWork(from[0], from[1]), bound, "from %v", from)
	}
	for i := uint64(0); i < 2000; i += 2 { // churn: cancel some, add others
		h.send(s, protocol.Request{Op: protocol.OpCancel, ID: 2, Receiver: 1 + i%10, Tid: i})
		h.send(s, protocol.Request{Op: protocol.OpAdd, ID: 3, Receiver: 1 + i%7, Tid: 50_000 + i, After: 1000, Group: 9})
	}
	h.take(s)
	require.LessOrEqual(t, pageWork(3, 0), bound)
	require.LessOrEqual(t, pageWork(0, 0), bound)
}
