package session

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParkQueue: a FIFO across many blocks, pushes and pops interleaved,
// against a slice.
func TestParkQueue(t *testing.T) {
	var q parkQueue
	var model []uint64
	next := uint64(1)
	for round := range 40 {
		for range (round * 37) % 700 {
			q.push(parked{tid: next})
			model = append(model, next)
			next++
		}
		for range (round * 53) % 600 {
			if len(model) == 0 {
				break
			}
			require.Equal(t, model[0], q.front().tid)
			q.pop()
			model = model[1:]
		}
		require.Equal(t, len(model), q.len())
		all := q.all()
		require.Len(t, all, len(model))
		for i, p := range all {
			require.Equal(t, model[i], p.tid)
		}
	}
	for len(model) > 0 {
		require.Equal(t, model[0], q.front().tid)
		q.pop()
		model = model[1:]
	}
	require.Zero(t, q.len())
	require.Nil(t, q.blocks, "an empty queue keeps no memory")
}
