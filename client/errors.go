package client

import (
	"errors"
	"fmt"

	"github.com/tickwheel/tickwheel/protocol"
)

// Sentinel errors, one per protocol error code. A call that the server
// answers with an error reply returns an *Error whose Unwrap gives the
// sentinel of its code, so both of these work:
//
//	errors.Is(err, client.ErrNotFound)
//	var e *client.Error; errors.As(err, &e) // e.Code, e.Message
//
// The client itself returns an *Error for arguments it rejects before
// sending (ErrInvalidArgument: a duration for a server that reported no
// tick length; ErrLimitExceeded: a request larger than the server's
// max_frame).
var (
	ErrMalformed          = errors.New("tickwheel: malformed request")    // CodeMalformed: the server closes the connection after it
	ErrUnknownOp          = errors.New("tickwheel: unknown op")           // CodeUnknownOp
	ErrUnauthorized       = errors.New("tickwheel: unauthorized")         // CodeUnauthorized: admin op without admin rights, or a bad token
	ErrHelloRequired      = errors.New("tickwheel: hello required")       // CodeHelloRequired
	ErrNotFound           = errors.New("tickwheel: not found")            // CodeNotFound: no such timer, or receiver not bound
	ErrExists             = errors.New("tickwheel: timer exists")         // CodeExists: add without Replace of an existing timer
	ErrInvalidArgument    = errors.New("tickwheel: invalid argument")     // CodeInvalidArgument: overflow, bad repeat, schedule or speed, ...
	ErrLimitExceeded      = errors.New("tickwheel: limit exceeded")       // CodeLimitExceeded: the message names the limit
	ErrBadState           = errors.New("tickwheel: bad state")            // CodeBadState: pause of a paused timer, resume of a running one
	ErrUnsupportedVersion = errors.New("tickwheel: unsupported version")  // CodeUnsupportedVersion
	ErrInternal           = errors.New("tickwheel: internal error")       // CodeInternal: a server bug
	ErrTimeout            = errors.New("tickwheel: connection timed out") // CodeTimeout: the server closed an idle or silent connection
	ErrUnavailable        = errors.New("tickwheel: unavailable")          // CodeUnavailable: the server cannot make changes durable now (disk full); retry later
	// ErrNotLeader (CodeNotLeader): the node is a cluster follower (or a
	// leader that stepped down), which serves no clients; the *Error's
	// Leader names the leader's client address when the node knows it.
	// The Client follows it by itself on connecting, and retries reads
	// (Get, List, Ping, Stats) on the next leader; a change (Add, Cancel,
	// ...) answered so returns it, because a node that was the leader may
	// have proposed the change before it stepped down, and the next leader
	// may commit it: retrying may apply it twice (the server does not
	// deduplicate retried requests yet).
	ErrNotLeader = errors.New("tickwheel: not the leader")
)

var (
	// ErrClosed is returned by calls made after Close, and by calls that
	// were in flight or waiting for a connection when Close was called.
	ErrClosed = errors.New("tickwheel: client closed")
	// ErrDisconnected is returned (wrapped, with the network error that
	// caused it) by a call whose connection dropped while it was in flight:
	// the server may or may not have applied it. With reconnection disabled
	// (WithReconnect(0, 0)) every call after the loss returns it too.
	ErrDisconnected = errors.New("tickwheel: disconnected")
)

var codeErrs = [...]error{
	protocol.CodeMalformed:          ErrMalformed,
	protocol.CodeUnknownOp:          ErrUnknownOp,
	protocol.CodeUnauthorized:       ErrUnauthorized,
	protocol.CodeHelloRequired:      ErrHelloRequired,
	protocol.CodeNotFound:           ErrNotFound,
	protocol.CodeExists:             ErrExists,
	protocol.CodeInvalidArgument:    ErrInvalidArgument,
	protocol.CodeLimitExceeded:      ErrLimitExceeded,
	protocol.CodeBadState:           ErrBadState,
	protocol.CodeUnsupportedVersion: ErrUnsupportedVersion,
	protocol.CodeInternal:           ErrInternal,
	protocol.CodeTimeout:            ErrTimeout,
	protocol.CodeUnavailable:        ErrUnavailable,
	protocol.CodeNotLeader:          ErrNotLeader,
}

// Error is an error reply from the server (or an argument the client
// rejected before sending, with the code the server would have used).
type Error struct {
	Op      protocol.Op   // the request's op
	Code    protocol.Code // the protocol error code
	Message string        // human-readable detail from the server
	// Leader is, for CodeNotLeader, the leader's client address the node
	// named ("" when it knows none).
	Leader string
}

// Error returns "tickwheel: <op>: <code>: <message>".
func (e *Error) Error() string {
	s := "tickwheel: " + e.Code.String()
	if e.Op != 0 { // 0: the server's message as it closed the connection
		s = "tickwheel: " + e.Op.String() + ": " + e.Code.String()
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Code == protocol.CodeNotLeader {
		if e.Leader != "" {
			s += " (leader " + e.Leader + ")"
		} else {
			s += " (leader unknown)"
		}
	}
	return s
}

// Unwrap returns the sentinel of e.Code (ErrNotFound, ...), or nil for a
// code this version does not define.
func (e *Error) Unwrap() error {
	if int(e.Code) < len(codeErrs) {
		return codeErrs[e.Code]
	}
	return nil
}

// disconnected wraps cause (the network error) with ErrDisconnected.
func disconnected(cause error) error {
	if cause == nil {
		return ErrDisconnected
	}
	return fmt.Errorf("%w: %w", ErrDisconnected, cause)
}

// badReply reports a reply whose result does not have the shape op needs.
func badReply(op protocol.Op, err error) error {
	return fmt.Errorf("tickwheel: %s: bad reply: %w", op, err)
}
