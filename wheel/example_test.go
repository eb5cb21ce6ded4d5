package wheel_test

import (
	"fmt"

	"github.com/tickwheel/tickwheel/wheel"
)

// The seed's example: tid 11 fires every 3 ticks, 4 times; the README shows
// this code.
func Example() {
	const start = 1000
	w, _ := wheel.New(start, wheel.Config{}) // 10 levels × 100 slots
	w.Add(wheel.Key{Receiver: 1, Tid: 11}, wheel.Spec{After: 3, Repeat: 4})
	w.Advance(start+12, 0, func(f *wheel.Fire) {
		fmt.Println(f.Tid, f.Tick-start, f.Fired, f.Last) // fires at +3, +6, +9, +12 (last)
	})
	// Output:
	// 11 3 1 false
	// 11 6 2 false
	// 11 9 3 false
	// 11 12 4 true
}
