//go:build unix

package server

import "syscall"

// raiseFdLimit raises the soft RLIMIT_NOFILE to the hard limit and returns
// the resulting soft limit.
func raiseFdLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			rl = raised
		}
	}
	return uint64(rl.Cur), uint64(rl.Max), nil
}
