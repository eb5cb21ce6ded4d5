package main

import "fmt"

// count says n of a thing in English: "1 timer", "0 timers", "2 timers".
// one is the singular; the plural adds "s" (every noun the CLI counts
// takes one).
func count[N ~int | ~int64 | ~uint64 | ~uint32](n N, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
