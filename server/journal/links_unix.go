//go:build unix

package journal

import (
	"os"
	"syscall"
)

// onlyLink reports whether fi, of a regular file, is its file's only name:
// cutting a file with another name (a hard-linked backup: cp -al, rsync
// --link-dest) would cut that copy too.
func onlyLink(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1
}
