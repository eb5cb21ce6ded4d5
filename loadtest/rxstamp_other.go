//go:build !linux

package loadtest

import "net"

// stampedReader is Linux-only; elsewhere connections are read without the
// kernel's receive stamps.
type stampedReader struct{}

func newStampedReader(net.Conn) *stampedReader { return nil }

func (*stampedReader) Read([]byte) (int, int64, error) { panic("unreachable") }
