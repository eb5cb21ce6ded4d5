//go:build !linux

package wheel

import "time"

// threadCPU is not measured here: the thread metrics read 0.
func threadCPU() time.Duration { return 0 }
