//go:build unix && !linux

package server

import "syscall"

// socketPair makes the pair and marks both ends close-on-exec (these
// systems' socketpair takes no SOCK_CLOEXEC); ForkLock keeps a concurrent
// fork from inheriting them in between.
func socketPair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
