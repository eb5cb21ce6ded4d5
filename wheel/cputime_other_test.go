//go:build !unix

package wheel

import "time"

// cpuTime is not measured here: cpu-ns/timer reads 0.
func cpuTime() time.Duration { return 0 }

// userCPUTime is not measured here either.
func userCPUTime() time.Duration { return 0 }
