package wheel

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestZeroAllocs: in steady state add, cancel, firing and re-arming allocate
// nothing, with and without data.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	w := newWheel(t, 0, Config{})
	for i := range 10_000 {
		_ = w.Add(Key{uint64(i % 100), uint64(i)}, Spec{After: 1 + uint64(i*7919)%5000})
	}
	data := []byte("0123456789abcdef0123")
	var tid uint64
	addCancel := func() {
		tid++
		k := Key{7, tid % 64}
		_ = w.Add(k, Spec{After: 1 + tid%3000, Data: data})
		_ = w.Cancel(k)
		k.Receiver = 8
		_ = w.Add(k, Spec{After: 1 + tid%3000})
		_ = w.Cancel(k)
	}
	addCancel() // warm the pools
	assert.Zero(t, testing.AllocsPerRun(1000, addCancel), "add+cancel")

	// 10k repeating timers firing and re-arming, some with data.
	for i := range 1000 {
		_ = w.Add(Key{9, uint64(i)}, Spec{After: 1 + uint64(i)%50, Data: data[:i%len(data)]})
	}
	advance := func() { w.Advance(w.Now()+1, 0, func(*Fire) {}) }
	for range 200 {
		advance()
	}
	assert.Zero(t, testing.AllocsPerRun(1000, advance), "fire and re-arm")
}
