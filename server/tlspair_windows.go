package server

import (
	"errors"
	"net"
)

// unixPair: the TLS path hands plaintext to the event loop over a Unix
// socket pair, which this build does not make; TLS on the client port is
// for Linux and the other Unix systems (docs/OPERATIONS.md).
func unixPair() (ours, theirs *net.UnixConn, err error) {
	return nil, nil, errors.New("TLS on the client port is not supported on Windows")
}
