//go:build !unix

package session

import (
	"testing"
	"time"
)

// cpuTime is 0 where the process's CPU time is not read.
func cpuTime(*testing.B) time.Duration { return 0 }

// CPUTime is cpuTime, for the benchmarks of package session_test.
var CPUTime = cpuTime
