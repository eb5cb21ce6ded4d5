//go:build !linux

package server

// lowerPriority is a no-op outside Linux, where a thread's nice value is
// not its own (see snapnice_linux.go).
func lowerPriority(nice int) error { return nil }
