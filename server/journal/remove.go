package journal

import (
	"errors"
	"os"
	"path/filepath"
)

// Deleting a big file in steps.
//
// ext4 frees a file's blocks when its last name goes, in one go: the
// unlink of a 1.4 GB snapshot (each commit at 100M timers deletes the one
// before) took 230–260 ms, and a writer on the same file system, as the
// event loop's log is, saw its pwrite or fdatasync wait 34–58 ms meanwhile.
// Cut in removeStep steps first, the same deletion held that writer 1.8–2.4
// ms (docs/BENCHMARKS.md, "Deleting the old snapshot in steps"). The
// steps are RocksDB's rate-limited deletion without the rate.
//
// Only a regular file that is its file's only name is cut: a symlink's
// target, or a file hard-linked into a backup (cp -al, rsync --link-dest),
// is unlinked at once as before, so the other name keeps its bytes. A
// reader that has the file open (a live copy made with cp or tar while a
// snapshot commits) sees it cut short, where an unlink left it whole
// until closed: docs/OPERATIONS.md says how to copy a live data directory.
//
// A file cut in part must never be read as the journal's: a snapshot cut
// short would be set aside as corrupt, a covered segment cut short would
// look torn. So a big file is first renamed removingPrefix + its name,
// which no journal name matches, and Open finishes such a file's deletion
// (listDir). The rename is not fsynced: a journaling file system commits
// its metadata in order, so a cut that survives a crash comes with the
// rename before it.

const (
	removeStep     = 4 << 20
	removingPrefix = "removing-"
)

// removeStepHook, when set (by tests), is called after each step with the
// file's path and the size it was cut to.
var removeStepHook func(path string, size int64)

// remove deletes a file of the journal's, in steps when it is bigger than
// removeStep. Off the event loop: a big file takes a few hundred
// milliseconds. A file already gone is not an error; others are logged.
func (j *Journal) remove(path string) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return
	case err != nil || !fi.Mode().IsRegular() || fi.Size() <= removeStep || !onlyLink(fi):
		j.unlink(path)
		return
	}
	gone := filepath.Join(filepath.Dir(path), removingPrefix+filepath.Base(path))
	if err := os.Rename(path, gone); err != nil {
		j.log.Warn("journal: cannot rename a file to delete it in steps; deleting it at once", "file", path, "err", err)
		j.unlink(path)
		return
	}
	j.removeNamed(gone)
}

// removeNamed cuts a file named for deletion (removingPrefix) to nothing in
// removeStep steps, from its end, then unlinks it; a file with another
// name, or not a regular file, it only unlinks (checked on the open file).
func (j *Journal) removeNamed(path string) {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		j.unlink(path) // a symlink: its target is not the journal's to cut
		return
	}
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && onlyLink(fi) {
			for size := fi.Size(); size > 0; {
				size = max(size-removeStep, 0)
				if err := f.Truncate(size); err != nil {
					break // the unlink frees the rest
				}
				if removeStepHook != nil {
					removeStepHook(path, size)
				}
			}
		}
		_ = f.Close()
	}
	j.unlink(path)
}

func (j *Journal) unlink(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		j.log.Warn("journal: cannot delete file", "file", path, "err", err)
	}
}
