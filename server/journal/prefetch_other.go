//go:build !linux

package journal

import "os"

// prefetch does nothing here: the restore reads the snapshot as it goes.
func prefetch(*os.File, int64) {}
