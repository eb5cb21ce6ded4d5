package session

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel"
)

// TestGroupIndexModel joins and leaves random timers of a few groups and
// checks the table against a map after every change: every member found
// at its node, every other key not found, the count right. Keys crowd few
// receivers and tids, so that probe runs collide and wrap round the table
// and the back-shifts of deletions are exercised.
func TestGroupIndexModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 26))
		var gt groupTable
		model := map[wheel.Key]uint32{}
		for step := range 3000 {
			k := wheel.Key{Receiver: uint64(rng.IntN(4)), Tid: uint64(rng.IntN(200))}
			if i := model[k]; i != 0 {
				gt.leave(i)
				delete(model, k)
			} else {
				model[k] = gt.join(k, 1+uint64(rng.IntN(3)))
			}
			require.Equal(t, len(model), gt.of.count, "seed %d step %d", seed, step)
			if step%50 == 0 || len(model) < 8 {
				for r := range uint64(4) {
					for tid := range uint64(200) {
						k := wheel.Key{Receiver: r, Tid: tid}
						require.Equal(t, model[k], gt.member(k), "seed %d step %d key %v", seed, step, k)
					}
				}
			}
		}
	}
}
