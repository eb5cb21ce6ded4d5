//go:build linux

package loadtest

import "golang.org/x/sys/unix"

// setFileSizeLimit sets the soft RLIMIT_FSIZE of the running process pid
// (prlimit(2): a process of the same user) to cur, at most its hard limit,
// and returns the soft limit before. A write past the limit fails with
// EFBIG (the process must ignore SIGXFSZ, as Go programs do): a full disk
// without a mount.
func setFileSizeLimit(pid int, cur uint64) (old uint64, err error) {
	var o unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &o); err != nil {
		return 0, err
	}
	n := unix.Rlimit{Cur: min(cur, o.Max), Max: o.Max}
	return o.Cur, unix.Prlimit(pid, unix.RLIMIT_FSIZE, &n, nil)
}
