//go:build !linux

package loadtest

import "os/exec"

// dieWithParent does nothing here: only Linux has a parent-death signal.
func dieWithParent(*exec.Cmd) {}
