package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGCRestsWhileTheHeapDoes: with a pace set, the collector is turned
// off after restAfter seconds in a row with under restAlloc bytes
// allocated each (an idle server: the runtime's forced collection every
// two minutes marked the whole heap, most of the idle CPU at 100M
// timers), and on again at that pace at the first busy second, or once
// restBudget bytes were allocated during the rest; never without a pace of
// the server's (GOGC set by the operator, or off), and a busy second in
// between starts the count again.
func TestGCRestsWhileTheHeapDoes(t *testing.T) {
	var alloc uint64
	var set []int
	r := gcRest{alloc: func() uint64 { return alloc }, setPercent: func(p int) int { set = append(set, p); return 0 }}
	second := func(bytes uint64, pace int) bool {
		alloc += bytes
		return r.step(pace)
	}
	second(5<<20, 20) // (the first reading)
	for i := range restAfter - 1 {
		assert.False(t, second(restAlloc-1, 20), "second %d", i)
	}
	assert.False(t, second(restAlloc, 20), "a busy second: the count starts again")
	for range restAfter - 1 {
		second(100, 20)
	}
	assert.Empty(t, set)
	assert.True(t, second(100, 20), "restAfter quiet seconds")
	assert.Equal(t, []int{-1}, set, "the collector off")
	assert.True(t, second(0, 20))
	assert.False(t, second(restAlloc, 25), "a busy second wakes it")
	assert.Equal(t, []int{-1, 25}, set, "at the pace set now")

	set = nil
	for range restAfter {
		second(0, 20)
	}
	assert.True(t, r.resting)
	for alloc0 := alloc; alloc-alloc0 < restBudget-restAlloc; {
		assert.True(t, second(restAlloc-1, 20))
	}
	assert.False(t, second(restAlloc-1, 20), "restBudget allocated during the rest")
	assert.Equal(t, []int{-1, 20}, set)

	set = nil
	var o gcRest
	o.alloc, o.setPercent = r.alloc, r.setPercent
	for range 3 * restAfter {
		assert.False(t, o.step(0), "no pace of the server's: the runtime's own")
	}
	assert.Empty(t, set)
}
