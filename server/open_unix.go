//go:build unix

package server

import (
	"os"
	"syscall"
)

// openNonBlocking opens path for reading without waiting: opening a FIFO
// for reading otherwise blocks until a writer opens it. (On a regular file
// O_NONBLOCK changes nothing.)
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
