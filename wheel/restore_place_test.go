package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// slotsOf returns the list (a sentinel's index) each armed timer of w is
// linked in, by key, walking every slot's list and the overflow list, and
// each list's keys in their order.
func slotsOf(w *Wheel) (map[Key]uint32, map[uint32][]Key) {
	where, lists := map[Key]uint32{}, map[uint32][]Key{}
	for s := uint32(0); s <= w.overflow; s++ {
		for i := w.nodes.get(s).wnext; i != s; i = w.nodes.get(i).wnext {
			n := w.nodes.get(i)
			k := Key{n.receiver, n.tid}
			where[k] = s
			lists[s] = append(lists[s], k)
		}
	}
	return where, lists
}

// TestRestorePlaceSlots: a restore links each armed timer into the slot
// Wheel.place would (Restorer.place reuses the previous timer's slot of
// level 1 or higher while the due ticks stay in its range): in a small
// geometry (4 levels of 4 slots, now not on a slot's edge, the overflow
// list past 256 ticks), timers due on every tick around every slot's edge
// of every level, added in due order (each slot's run cached, ending on
// its edge), in reverse order and shuffled, restore into the same slots,
// in the same order in each, as the wheel they were added to; and fire
// the same. It failed with the cached range one tick too long.
func TestRestorePlaceSlots(t *testing.T) {
	cfg := Config{Levels: 4, Slots: 4}
	const now = 1000 + 3
	var dues []uint64
	for d := uint64(now + 1); d < now+600; d++ {
		dues = append(dues, d)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, order := range []string{"due", "reverse", "shuffled"} {
		t.Run(order, func(t *testing.T) {
			ds := slices.Clone(dues)
			switch order {
			case "reverse":
				slices.Reverse(ds)
			case "shuffled":
				rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			}
			w := newWheel(t, now, cfg)
			for j, d := range ds {
				require.NoError(t, w.Add(Key{uint64(j % 3), uint64(j)}, Spec{At: d, Repeat: 2, Every: 1 + uint64(j%70)}))
			}
			got := restoreOf(t, cfg, snapshotOf(t, w, 1<<20), rng)
			wantWhere, wantLists := slotsOf(w)
			gotWhere, gotLists := slotsOf(got)
			require.Len(t, gotWhere, len(ds))
			require.Equal(t, wantWhere, gotWhere, "each timer's slot")
			require.Equal(t, wantLists, gotLists, "each slot's order")
			requireSameWheels(t, w, got, []uint64{0, 1, 2})
			require.Equal(t, collect(w, now+2000), collect(got, now+2000), "firings")
		})
	}
}
