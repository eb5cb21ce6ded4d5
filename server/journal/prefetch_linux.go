package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// prefetchChunk is how much of a snapshot file one readahead request asks
// the kernel for.
const prefetchChunk = 32 << 20

// prefetch has the kernel read the file's first n bytes into the page
// cache, in order, a chunk at a time (posix_fadvise(2) POSIX_FADV_WILLNEED,
// which returns once the reads are queued: the queue paces it), on a
// goroutine of its own. A restore decodes the snapshot as it reads it, in
// order; from a cold page cache (after a reboot, or once the kernel dropped
// the file's pages) each read would wait for the disk in turn, the disk's
// time added to the decoding's. With the file read ahead the two overlap.
// It is only a hint: an error (the file closed) ends it.
func prefetch(f *os.File, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	go func() {
		for off := int64(0); off < n; off += prefetchChunk {
			var ferr error
			err := rc.Control(func(fd uintptr) {
				ferr = unix.Fadvise(int(fd), off, min(prefetchChunk, n-off), unix.FADV_WILLNEED)
			})
			if err != nil || ferr != nil {
				return
			}
		}
	}()
}
