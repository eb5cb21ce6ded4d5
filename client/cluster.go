package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// A Client may be given several addresses: the nodes of a tickwheel
// cluster, of which only the leader serves clients. A follower answers
// hello (and every other request) with code not_leader, naming the
// leader's client address when it knows it, and closes the connection
// (docs/PROTOCOL.md, "Clusters"). The Client connects to the first node
// that accepts its hello:
//
//   - a pass tries the addresses once each, in the order given on the first
//     connection and round-robin from the one after the last node it was
//     connected to on each reconnection; a reconnection caused by a
//     not_leader reply tries the leader that reply named first;
//   - a not_leader reply naming a leader is followed to that address, at
//     most WithLeaderHops times per address of the list (two nodes naming
//     each other end there, with an error naming the chain); one naming no
//     leader (an election is under way) moves on to the next address;
//   - a network error or a timeout moves on to the next address; any other
//     error reply to hello (a bad token, an unsupported version) is the
//     cluster's answer and ends the pass;
//   - Dial makes further passes, with WithReconnect's backoff, while the
//     nodes answer that they know no leader (until its ctx ends); a
//     reconnection makes passes until one succeeds or the Client is closed.

// DefaultLeaderHops is how many not_leader redirections the Client follows
// from one address of its list before it tries the next one.
const DefaultLeaderHops = 3

// splitAddrs returns the addresses of addr (one host:port, or several
// separated by commas) followed by extra, without blanks and duplicates,
// in order.
func splitAddrs(addr string, extra []string) []string {
	var out []string
	seen := make(map[string]bool)
	add := func(a string) {
		a = strings.TrimSpace(a)
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for a := range strings.SplitSeq(addr, ",") {
		add(a)
	}
	for _, a := range extra {
		for b := range strings.SplitSeq(a, ",") {
			add(b)
		}
	}
	return out
}

// passError is why a pass over the addresses connected to none: each
// address with its error. noLeader is set when a node answered not_leader
// without naming a leader (an election may be under way: try again).
type passError struct {
	addrs    []string
	errs     []error
	noLeader bool
}

func (p *passError) add(addr string, err error) {
	p.addrs = append(p.addrs, addr)
	p.errs = append(p.errs, err)
}

func (p *passError) Error() string {
	var b strings.Builder
	b.WriteString("tickwheel: no server accepted the connection:")
	for i, a := range p.addrs {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s: %v", a, p.errs[i])
	}
	return b.String()
}

// Unwrap returns each address's error, for errors.Is and errors.As
// (ErrNotLeader, ...).
func (p *passError) Unwrap() []error { return p.errs }

// result is the pass's error: the only address's own error when the list
// has one address (as a Client of one server always said), else p.
func (p *passError) result() error {
	if len(p.errs) == 1 {
		return p.errs[0]
	}
	return p
}

// pass tries to connect once to each address (and first to the leader
// named when the last connection ended, if any), following not_leader
// replies. It returns nil once connected; retry reports that another pass
// may succeed where this one failed (a node knew no leader yet).
func (c *Client) pass(ctx context.Context) (err error, retry bool) {
	c.mu.Lock()
	start, hint := c.cursor, c.hint
	c.hint = ""
	c.mu.Unlock()
	var pe passError
	if hint != "" {
		if err, done := c.follow(ctx, hint, -1, &pe); done {
			return err, false
		}
	}
	for k := range c.addrs {
		i := (start + k) % len(c.addrs)
		if err, done := c.follow(ctx, c.addrs[i], i, &pe); done {
			return err, false
		}
	}
	return pe.result(), pe.noLeader
}

// follow connects to addr, the list's address idx (-1 for a leader hint),
// following not_leader replies to the leader they name at most
// WithLeaderHops times. done reports that the pass is over: connected (err
// nil), or failed in a way another address would not change (the Client
// or ctx ended, or the cluster refused the hello); otherwise the failure
// was added to pe.
func (c *Client) follow(ctx context.Context, addr string, idx int, pe *passError) (err error, done bool) {
	chain := []string{addr}
	for {
		err := c.attempt(ctx, addr)
		switch {
		case err == nil:
			if idx >= 0 {
				c.mu.Lock()
				c.cursor = idx
				c.mu.Unlock()
			}
			return nil, true
		case ctx.Err() != nil:
			return ctx.Err(), true
		case c.ctx.Err() != nil || errors.Is(err, ErrClosed):
			return ErrClosed, true
		}
		var e *Error
		if !errors.As(err, &e) {
			pe.add(addr, err) // the network, a timeout, an HTTP port: the next one may do
			return nil, false
		}
		if e.Code != protocol.CodeNotLeader {
			return err, true // the cluster's answer (a bad token, a bad version)
		}
		if e.Leader == "" {
			pe.add(addr, err)
			pe.noLeader = true
			return nil, false
		}
		if len(chain) > c.o.leaderHops {
			pe.add(chain[0], fmt.Errorf("tickwheel: followed not_leader %d times (%s, which names %s) without reaching the leader (WithLeaderHops): %w",
				c.o.leaderHops, strings.Join(chain, " -> "), e.Leader, err))
			return nil, false
		}
		c.o.log.Info("tickwheel: not the leader; following", "addr", addr, "leader", e.Leader)
		addr = e.Leader
		chain = append(chain, addr)
	}
}

// attempt connects to addr, bounded by WithDialTimeout's duration when it
// is set and ends before ctx's deadline. A timeout of its own names addr.
func (c *Client) attempt(ctx context.Context, addr string) error {
	d := c.o.dialTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		d = 0 // ctx ends first: its error, not ours
	}
	if d <= 0 {
		return c.connect(ctx, addr)
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := c.connect(actx, addr)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = &dialTimeoutError{addr: addr, d: d}
	}
	return err
}

// dialTimeoutError is an attempt that WithDialTimeout's duration ended.
type dialTimeoutError struct {
	addr string
	d    time.Duration
}

func (e *dialTimeoutError) Error() string {
	return fmt.Sprintf("tickwheel: %s: no hello reply within %v (WithDialTimeout): %v", e.addr, e.d, context.DeadlineExceeded)
}

func (e *dialTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// dialPasses makes passes over the addresses until one connects, with
// backoff between them while the nodes know no leader, for Dial.
func (c *Client) dialPasses(ctx context.Context) error {
	d := c.o.reconnectMin
	if d <= 0 {
		d = DefaultReconnectMin
	}
	var last error // the last failed pass's error
	for {
		err, retry := c.pass(ctx)
		if err != nil && ctx.Err() != nil && last != nil {
			// ctx ended during a pass: say why the earlier ones failed.
			return fmt.Errorf("%w (%w)", ctx.Err(), last)
		}
		if err == nil || !retry {
			return err
		}
		last = err
		c.o.log.Warn("tickwheel: no leader yet; retrying", "err", err)
		if !sleepJitter(ctx, d) {
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		d = min(2*d, max(c.o.reconnectMax, d))
	}
}

// sleepJitter waits a random duration in [d/2, d]; false when ctx ended
// first.
func sleepJitter(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaderHint is the leader address a not_leader error names, "" if err is
// none or names none.
func leaderHint(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code == protocol.CodeNotLeader {
		return e.Leader
	}
	return ""
}

// isChange reports whether op changes timers: the ops a request id makes
// safe to send again (see Client.do).
func isChange(op protocol.Op) bool {
	switch op {
	case protocol.OpAdd, protocol.OpCancel, protocol.OpCancelAll, protocol.OpPause, protocol.OpResume,
		protocol.OpPauseAll, protocol.OpResumeAll, protocol.OpCancelGroup:
		return true
	}
	return false
}

// newClientID returns a random non-zero client id.
func newClientID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// safeToRetry reports whether a request of op that a node refused with
// not_leader may be sent again on the next connection without asking the
// caller: the reads, which change nothing. A change (add, cancel, ...)
// answered not_leader by a node that was the leader may still be
// committed by the next one: it is sent again only with a request id
// (Client.do), else the caller gets ErrNotLeader and decides.
// A cluster op is retried too: its status changes nothing, and adding or
// removing a member again leaves the same configuration.
func safeToRetry(op protocol.Op) bool {
	switch op {
	case protocol.OpGet, protocol.OpList, protocol.OpPing, protocol.OpStats, protocol.OpCluster:
		return true
	}
	return false
}
