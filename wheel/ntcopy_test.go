package wheel

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestCopyMem: copyMem copies exactly n bytes, whatever the size and the
// alignment of either side, on both sides of ntMin.
func TestCopyMem(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 3*ntMin)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 63, 64, 65, ntMin - 1, ntMin, ntMin + 1, ntMin + 63, 2*ntMin + 17} {
		for _, off := range []int{0, 1, 8, 16} {
			dst := make([]byte, n+off+32)
			copyMem(unsafe.Pointer(unsafe.SliceData(dst[off:])), unsafe.Pointer(&src[3]), uintptr(n))
			if !bytes.Equal(dst[off:off+n], src[3:3+n]) {
				t.Fatalf("n %d off %d: copy differs", n, off)
			}
			if bytes.ContainsFunc(dst[:off], func(r rune) bool { return r != 0 }) || bytes.ContainsFunc(dst[off+n:], func(r rune) bool { return r != 0 }) {
				t.Fatalf("n %d off %d: wrote outside", n, off)
			}
		}
	}
}
