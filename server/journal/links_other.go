//go:build !unix

package journal

import "os"

// onlyLink reports false: without a link count to check, a file is never
// cut before its unlink (see remove).
func onlyLink(os.FileInfo) bool { return false }
