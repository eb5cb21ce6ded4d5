package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/tickwheel/tickwheel/protocol"
)

// The retry rules shared by single calls (Client.do) and Pipes (Pipe.exec):
// which request is sent again after not_leader or a lost connection, with
// which ids, and how the sender waits for the next connection.

// prepareAttempt readies req (its ID already set, the same on every
// attempt) for an attempt on cn and reports whether a not_leader or
// connection-loss answer to it may be sent again (see retryAfter).
//
// A change (isChange) carries the Client's id in req.Client when cn's
// server remembers request ids (its hello's request_id_ticks): then it may
// be sent again, with the same ids. A change sent with an id before and
// now headed to a server that does not remember ids is not sent: the
// returned error wraps ErrDisconnected and says the change may have been
// applied. Reads (safeToRetry) may always be sent again; other ops never.
func (c *Client) prepareAttempt(cn *conn, req *protocol.Request) (retry bool, err error) {
	if !isChange(req.Op) {
		return safeToRetry(req.Op), nil
	}
	return c.prepareWith(req, cn.remembersIDs(), cn.addr)
}

// prepareWith is prepareAttempt for an attempt on a connection to addr
// whose server remembers request ids when ids (conn.remembersIDs, which
// a Pipe reads once for a batch rather than under the connection's lock
// for each of its requests).
func (c *Client) prepareWith(req *protocol.Request, ids bool, addr string) (retry bool, err error) {
	retry = safeToRetry(req.Op)
	if !isChange(req.Op) {
		return retry, nil
	}
	if req.Client != 0 && !ids {
		// Sent with an id before, to a server that remembered ids; this
		// one would apply it again.
		return false, fmt.Errorf("%w: the change may have been applied, and %s does not deduplicate a retry", ErrDisconnected, addr)
	}
	if ids {
		req.Client, retry = c.clientID, true
	}
	return retry, nil
}

// remembersIDs reports whether cn's server remembers request ids (set
// once after hello: conn.requestIDs).
func (cn *conn) remembersIDs() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.requestIDs
}

// retryAfter reports whether a request of op, prepared with retry (see
// prepareAttempt), that got err is to be sent again on the next
// connection: after not_leader, and, for a change, after its connection
// was lost before the reply.
func retryAfter(op protocol.Op, retry bool, err error) bool {
	return retry && (errors.Is(err, ErrNotLeader) || isChange(op) && errors.Is(err, ErrDisconnected))
}

// awaitConnEnd waits until cn is gone (a node that answered not_leader
// closes the connection; a lost one is already closed), so that the next
// waitConn returns the next connection. It returns ctx's error or
// ErrClosed when those come first.
func (c *Client) awaitConnEnd(ctx context.Context, cn *conn) error {
	select {
	case <-cn.quit:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}
