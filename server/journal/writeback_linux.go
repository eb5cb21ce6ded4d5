package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the file's dirty pages
// before offset end to the disk, without waiting (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE; pages already clean or under writeback are
// skipped). It is only a hint: durability still comes from the fsync at
// the end, which then has less to wait for, so errors are ignored.
func startWriteback(f *os.File, end int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), 0, end, unix.SYNC_FILE_RANGE_WRITE)
	})
}
