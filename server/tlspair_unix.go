//go:build unix

package server

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// unixPair makes a connected pair of Unix stream sockets, close-on-exec:
// the plaintext path between a TLS connection's goroutines and the event
// loop (enrollPair).
func unixPair() (ours, theirs *net.UnixConn, err error) {
	fds, err := socketPair()
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	ours, err = fileConn(fds[0])
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	theirs, err = fileConn(fds[1])
	if err != nil {
		ours.Close()
		return nil, nil, err
	}
	return ours, theirs, nil
}

// fileConn makes a *net.UnixConn of a socket descriptor, which it takes
// over (closes).
func fileConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "tls-pair")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	return c.(*net.UnixConn), nil
}
