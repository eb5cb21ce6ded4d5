package session

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzRequestIDMemory runs its input as a program over the memory's ring,
// windows and hash index, against a Go map: byte 0 sets max_request_ids
// (1-256); then each step is an op byte — client (bits 0-1), how the id
// moves (bits 2-4), retry or apply again (bit 5) — and, for ids set
// outright, 8 bytes. Ids count up, jump by any amount, go down, wrap past
// 2^64 and land on 0, 1 and the largest uint64. At every step every
// key looked up is found with its own entry if pushed and not forgotten,
// else not at all; every 16 steps and at the end the index holds exactly
// the live entries, each window within its bounds (checkRequestIndex).
func FuzzRequestIDMemory(f *testing.F) {
	f.Add([]byte{8, 0, 0, 0, 1, 1, 1, 4, 4})
	f.Add([]byte{3, 0x0c, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x20, 0})
	f.Add([]byte{40, 0x10, 0, 0x14, 0x18, 0x1c, 0x11, 0x15, 0x19, 0x1d, 0x20, 0x21})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) == 0 {
			return
		}
		limit := 1 + int(prog[0])
		prog = prog[1:]
		var r requestIDs
		model := map[reqKey]uint64{}
		var ids [4]uint64
		for step := uint64(1); len(prog) > 0; step++ {
			op := prog[0]
			prog = prog[1:]
			c := uint64(op & 3)
			switch op >> 2 & 7 {
			case 0, 1:
				ids[c]++
			case 2: // a jump
				ids[c] += 1 << (step % 64)
			case 3: // set outright
				var b [8]byte
				prog = prog[copy(b[:], prog):]
				ids[c] = binary.LittleEndian.Uint64(b[:])
			case 4:
				ids[c] -= 1 + step%40
			case 5:
				ids[c] = [...]uint64{0, 1, ^uint64(0), ^uint64(0) - 1}[step%4]
			case 6:
				ids[c] += 8 // a stride
			case 7: // another client's id
				ids[c] = ids[(c+1)&3]
			}
			k := reqKey{client: c, id: ids[c]}
			pos, ok := r.lookup(k)
			want, live := model[k]
			require.Equal(t, live, ok, "step %d: lookup of %v", step, k)
			if ok {
				require.Equal(t, want, r.at(pos).tick, "step %d: %v found another entry", step, k)
				if op&0x20 == 0 {
					continue // a retry
				}
				r.drop(pos) // expired, applied again
				delete(model, k)
			}
			r.push(k).tick = step
			model[k] = step
			trimModel(&r, model, limit)
			require.Equal(t, len(model), r.live)
			if step%16 == 0 {
				checkRequestIndex(t, &r)
			}
		}
		checkRequestIndex(t, &r)
	})
}
