//go:build !unix

package journal

import (
	"fmt"
	"os"
)

// lockDir opens path as a marker; without flock(2) it does not exclude a
// second process.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) { _ = f.Close() }
