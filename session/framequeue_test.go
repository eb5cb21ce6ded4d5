package session

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFrameQueue: pushes, pops, cursor reads and rewinds, interleaved at
// random over frames of many sizes (small ones sharing chunks, large ones
// with chunks of their own), against a slice and an index.
func TestFrameQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var q frameQueue
	var model [][]byte
	sent := 0
	mk := func(i int) []byte {
		n := rng.IntN(40)
		if rng.IntN(50) == 0 {
			n = maxChunk + rng.IntN(1000) // larger than a chunk
		}
		f := make([]byte, 4+n)
		binary.BigEndian.PutUint32(f, uint32(n))
		for j := 4; j < len(f); j++ {
			f[j] = byte(i + j)
		}
		return f
	}
	var handed [][]byte // frames handed out must stay intact
	var handedWant [][]byte
	for i := range 20000 {
		switch op := rng.IntN(10); {
		case op < 5:
			f := mk(i)
			q.push(f)
			model = append(model, f)
		case op < 7 && len(model) > 0:
			got := q.pop()
			require.Equal(t, model[0], got, "step %d: pop", i)
			handed, handedWant = append(handed, got), append(handedWant, model[0])
			model = model[1:]
			sent = max(sent-1, 0)
		case op < 9 && sent < len(model):
			got := q.next()
			require.Equal(t, model[sent], got, "step %d: next", i)
			handed, handedWant = append(handed, got), append(handedWant, model[sent])
			sent++
		case op == 9:
			q.rewind()
			sent = 0
		}
		if i%1000 == 0 {
			all := q.frames(len(model))
			require.Len(t, all, len(model))
			for j := range all {
				require.Equal(t, model[j], all[j])
			}
		}
	}
	for j := range handed {
		require.Equal(t, handedWant[j], handed[j], "a frame handed out was overwritten")
	}
	for len(model) > 0 {
		require.Equal(t, model[0], q.pop())
		model = model[1:]
	}
	require.Nil(t, q.chunks, "an emptied queue keeps no memory")
}
