//go:build !linux

package server

// idleSupported: there is no SCHED_IDLE here (snapshot.priority idle
// is the server's own priority).
const idleSupported = false

// apply is a no-op outside Linux, where a thread's priority is not its
// own (see snapnice_linux.go).
func (e encoderSched) apply() error { return nil }
