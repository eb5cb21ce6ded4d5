package wheel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFairRoundsAsGiven: a tick's timers fire in rounds by receiver (each
// receiver's first, then each one's second, in order of first appearance),
// whether the list is in rounds already (inRounds leaves it: one
// receiver's timers, a burst added round-robin, its last round short) or
// not (fairOrder relinks it: a receiver twice in the first round, a
// round out of step, no second round, random). Checked against the rounds
// computed from the add order.
func TestFairRoundsAsGiven(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	periodic := func(m, n int) []uint64 {
		rs := make([]uint64, n)
		for i := range rs {
			rs[i] = uint64(100 + i%m)
		}
		return rs
	}
	cases := map[string][]uint64{
		"one receiver":              periodic(1, 50),
		"round-robin, whole rounds": periodic(7, 70),
		"round-robin, last short":   periodic(7, 68),
		"two rounds exactly":        periodic(30, 60),
	}
	dup := periodic(5, 40)
	dup[3] = dup[1] // a receiver twice in the first round, periodic all the same
	dup[8], dup[13], dup[18], dup[23], dup[28], dup[33], dup[38] = dup[1], dup[1], dup[1], dup[1], dup[1], dup[1], dup[1]
	cases["periodic, a receiver twice a round"] = dup
	broken := periodic(6, 60)
	broken[40], broken[41] = broken[41], broken[40]
	cases["a round out of step"] = broken
	cases["no second round of the first"] = append([]uint64{1}, periodic(4, 40)...)
	for k := range 20 {
		rs := make([]uint64, 1+rng.IntN(300))
		m := 1 + rng.IntN(12)
		for i := range rs {
			rs[i] = uint64(rng.IntN(m))
		}
		cases["random "+string(rune('a'+k))] = rs
	}
	for name, rs := range cases {
		w := newWheel(t, 0, Config{})
		for i, r := range rs {
			require.NoError(t, w.Add(Key{r, uint64(i)}, Spec{After: 5}), name)
			if i%3 == 0 { // some receivers hold timers beyond the tick too
				require.NoError(t, w.Add(Key{r, uint64(1_000_000 + i)}, Spec{After: 500}), name)
			}
		}
		var got []Key
		w.Advance(5, 0, func(f *Fire) { got = append(got, f.Key) })
		require.Equal(t, roundsOf(rs), got, name)
	}
}

// roundsOf returns the keys {rs[i], i} in rounds by receiver, receivers in
// order of first appearance, each receiver's in add order.
func roundsOf(rs []uint64) []Key {
	var order []uint64
	chains := map[uint64][]Key{}
	for i, r := range rs {
		if _, ok := chains[r]; !ok {
			order = append(order, r)
		}
		chains[r] = append(chains[r], Key{r, uint64(i)})
	}
	var out []Key
	for len(out) < len(rs) {
		for _, r := range order {
			if c := chains[r]; len(c) > 0 {
				out = append(out, c[0])
				chains[r] = c[1:]
			}
		}
	}
	return out
}
