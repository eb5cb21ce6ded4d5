package client

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// Every call below takes a ctx. When ctx ends first the call returns
// ctx.Err() at once; a request already sent may still be applied by the
// server, and its reply is then discarded. A call made while the Client is
// reconnecting waits for the new connection (bounded by ctx). A call whose
// connection drops while it is in flight returns an error wrapping
// ErrDisconnected: it may or may not have been applied. Error replies are
// *Error values wrapping the sentinel of their code (ErrNotFound, ...).

// Timer describes a live timer, as returned by Get and List. Its Data is a
// copy the caller owns. Its Repeat is as in AddOptions: the total number of
// firings, or Forever for a timer that fires until cancelled (the wire's
// repeat 0, which the Client translates); Fired counts the firings so far.
type Timer = protocol.Timer

// AddOptions are the optional parts of a timer. A nil *AddOptions is the
// zero value: a one-shot timer (it fires once, like time.AfterFunc), no
// data, ErrExists if the timer exists. A timer that fires until cancelled
// asks for it by name: &AddOptions{Repeat: Forever}.
type AddOptions struct {
	// Every is the interval between firings in ticks; 0 means the first
	// delay (after, or at minus now). Use Client.Ticks to convert a
	// duration, rounding up.
	Every uint64
	// Repeat is the number of firings: 0 (the default) and 1 mean once,
	// Forever until cancelled. (The wire protocol's repeat 0 means
	// forever; the Client translates, both ways: Timer.Repeat and
	// Event.Repeat read back Forever.) With a Schedule, 0 means at every
	// time the schedule names, until cancelled (see AddSchedule).
	Repeat uint32
	// Data is delivered with every firing (at most Limits().MaxData bytes,
	// else ErrLimitExceeded). It is copied into the request; empty means none.
	Data []byte
	// Replace replaces an existing timer with the same (receiver, tid):
	// new schedule, fired count back to 0. Without it that is ErrExists.
	Replace bool

	// Schedule, Zone and Missed: see schedule.go. Schedule is a calendar
	// schedule (a cron expression: use AddSchedule), Zone its IANA time
	// zone ("" = UTC), Missed the policy for firings that fall in a
	// server's downtime (default MissedAll).
	Schedule string
	Zone     string
	Missed   Missed

	// Group puts the timer in a group (a match id, say; 0, the default:
	// none), which CancelGroup, PauseGroup, ResumeGroup and ListGroup act
	// on; it reads back as Timer.Group. A group may span receivers. Added
	// to a paused group (or a paused receiver), the timer starts paused.
	// A server that predates groups ignores it.
	Group uint64
}

// Forever, as AddOptions.Repeat, makes a timer fire until it is cancelled,
// and every repeat count the Client hands back (Timer.Repeat from Get and
// List, Event.Repeat) is Forever for such a timer, so that
// tm.Repeat == client.Forever tests for it. It is an untyped constant so
// that it compares with those uint64 fields as well as the uint32 of
// AddOptions. A count of exactly 2^32-1 firings cannot be asked for, and a
// timer another client added with that count reads back as Forever too.
const Forever = math.MaxUint32

// wireRepeat returns the protocol's repeat for AddOptions.Repeat.
func wireRepeat(r uint32) uint64 {
	switch r {
	case 0:
		return 1
	case Forever:
		return 0
	}
	return uint64(r)
}

// userRepeat returns the repeat the Client hands back for the protocol's
// repeat r of a timer or event: Forever for the wire's 0 (forever).
func userRepeat(r uint64) uint64 {
	if r == 0 {
		return Forever
	}
	return r
}

func (c *Client) add(ctx context.Context, receiver, tid, after, at uint64, o *AddOptions) (uint64, error) {
	return c.addReq(ctx, &protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, After: after, At: at, Repeat: 1}, o)
}

// apply puts o's settings into add request req; a nil o leaves req's
// defaults.
func (o *AddOptions) apply(req *protocol.Request) {
	if o != nil {
		req.Every, req.Repeat, req.Data, req.Replace, req.Group = o.Every, wireRepeat(o.Repeat), o.Data, o.Replace, o.Group
		o.schedule(req) // schedule.go
	}
}

// afterRequest is AddAfter's add request: after_ns d, and after (d in
// ticks, rounded up) for a server that predates after_ns, which a server
// that knows after_ns ignores. A d <= 0 sends neither: a zero delay, which
// the server fires at its next tick.
func afterRequest(receiver, tid, after uint64, d time.Duration) protocol.Request {
	return protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, After: after, AfterNs: uint64(max(d, 0)), Repeat: 1}
}

// addReq sends an add request with the options o applies to it.
func (c *Client) addReq(ctx context.Context, req *protocol.Request, o *AddOptions) (uint64, error) {
	o.apply(req)
	v, err := c.uints(ctx, req, 1, nil)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// Add schedules timer tid of receiver to fire after the given number of
// ticks from the server's now, and returns the tick it is due at. after 0
// fires at the server's next tick (now+1), as soon as it can; a due tick
// past 2^64-1 is ErrInvalidArgument. (A server older than zero delays
// answers after 0 with ErrInvalidArgument.)
//
// The count starts at the server's current tick, which began up to one
// tick before the server read the request: in real time the timer may
// fire up to one tick sooner than after × the tick length. It is exact in
// tw-time, and the right call for game logic counted in ticks; for "in
// 30 seconds" use AddAfter, which never fires early.
func (c *Client) Add(ctx context.Context, receiver, tid, after uint64, o *AddOptions) (due uint64, err error) {
	return c.add(ctx, receiver, tid, after, 0, o)
}

// AddAt schedules timer tid of receiver to fire at absolute tick at, and
// returns the tick it is due at: at, or, for an at at or before the
// server's now, the next tick (now+1), where it fires as soon as it can,
// its first Event's Late counting the ticks at was in the past (now - at).
// At 0 is the wire's "no at": it is Add with after 0 (Late 0).
func (c *Client) AddAt(ctx context.Context, receiver, tid, at uint64, o *AddOptions) (due uint64, err error) {
	return c.add(ctx, receiver, tid, 0, at, o)
}

// AddAfter schedules timer tid of receiver to fire once d of tw-time has
// passed since the server read the request, and returns the tick it is
// due at: the first tick boundary at or after that moment. At speed 1 it
// never fires early: d after the call at the soonest, and at most one
// tick (plus delivery) later. d <= 0 (a deadline already reached, as
// deadline.Sub(now) gives) fires at the server's next tick, as soon as it
// can, with Late 0: the server is not told how far in the past d was.
//
// With o.Every 0, the timer repeats every d rounded up to whole ticks
// (25ms with 10ms ticks is 3 ticks; 1 tick for d <= 0); o.Every, when
// set, stays in ticks.
func (c *Client) AddAfter(ctx context.Context, receiver, tid uint64, d time.Duration, o *AddOptions) (due uint64, err error) {
	after, err := c.afterTicks(d)
	if err != nil {
		return 0, err
	}
	req := afterRequest(receiver, tid, after, d)
	return c.addReq(ctx, &req, o)
}

// Cancel removes a timer. A timer that is not there (never added, fired
// for the last time, cancelled) is ErrNotFound.
func (c *Client) Cancel(ctx context.Context, receiver, tid uint64) error {
	_, err := c.do(ctx, &protocol.Request{Op: protocol.OpCancel, Receiver: receiver, Tid: tid}, nil)
	return err
}

// Get returns a live timer, or ErrNotFound.
func (c *Client) Get(ctx context.Context, receiver, tid uint64) (Timer, error) {
	var t Timer
	res, err := c.do(ctx, &protocol.Request{Op: protocol.OpGet, Receiver: receiver, Tid: tid}, nil)
	if err != nil {
		return t, err
	}
	if err := protocol.DecodeTimer(res, &t); err != nil {
		return Timer{}, badReply(protocol.OpGet, err)
	}
	t.Repeat = userRepeat(t.Repeat)
	return t, nil
}

// List returns every live timer of receiver in ascending tid order (none:
// an empty slice, no error), fetching them a page at a time with ListPage
// until the last, so that no reply is huge; ctx bounds the whole listing.
//
// The result is not a snapshot: a timer added or removed while List pages
// through may be missing or present, and the others may have fired in
// between. A timer that lives throughout is returned exactly once. For a
// receiver with very many timers, consider ListPage, which holds one page
// at a time.
func (c *Client) List(ctx context.Context, receiver uint64) ([]Timer, error) {
	all := []Timer{}
	var from uint64
	for {
		ts, next, err := c.listPage(ctx, receiver, from, 0, all)
		if err != nil {
			return nil, err
		}
		all = ts
		if next == 0 {
			return all, nil
		}
		from = next
	}
}

// ListPage returns one page of receiver's live timers: those with tid >=
// fromTid, in ascending tid order, at most limit of them — limit <= 0, or
// more than the server's max_list_page (Limits().MaxListPage), means
// max_list_page — and no more than fit in a reply of the server's
// max_list_bytes, but at least one when any is left. next is the fromTid of
// the following page, or 0 when this page is the last; it is always past
// the last tid returned. An empty receiver, or a fromTid past its last tid,
// gives no timers and next 0.
//
// To page through everything: start with fromTid 0 and pass each next back
// until it is 0. Pages never overlap; see List for what changes in between.
func (c *Client) ListPage(ctx context.Context, receiver, fromTid uint64, limit int) (timers []Timer, next uint64, err error) {
	return c.listPage(ctx, receiver, fromTid, limit, []Timer{})
}

// listPage does one list request, appending the page to dst.
func (c *Client) listPage(ctx context.Context, receiver, from uint64, limit int, dst []Timer) ([]Timer, uint64, error) {
	req := protocol.Request{Op: protocol.OpList, Receiver: receiver, FromTid: from, Limit: uint64(max(limit, 0))}
	res, err := c.do(ctx, &req, nil)
	if err != nil {
		return nil, 0, err
	}
	n := len(dst)
	ts, next, err := protocol.DecodeListPage(res, dst)
	if err == nil && next != 0 && (next <= from || len(ts) > n && next <= ts[len(ts)-1].Tid) {
		// A next that does not move on would have List loop forever.
		err = fmt.Errorf("%w: next %d is not past from_tid %d and the page's tids", protocol.ErrMalformed, next, from)
	}
	if err != nil {
		return nil, 0, badReply(protocol.OpList, err)
	}
	for i := n; i < len(ts); i++ {
		ts[i].Repeat = userRepeat(ts[i].Repeat)
	}
	return ts, next, nil
}

// CancelAll removes every timer of receiver and returns how many it removed.
func (c *Client) CancelAll(ctx context.Context, receiver uint64) (int, error) {
	v, err := c.uints(ctx, &protocol.Request{Op: protocol.OpCancelAll, Receiver: receiver}, 1, nil)
	if err != nil {
		return 0, err
	}
	return int(v[0]), nil
}

// Pause stops a timer's countdown, keeping its remaining ticks.
// ErrNotFound, or ErrBadState if it is already paused.
func (c *Client) Pause(ctx context.Context, receiver, tid uint64) error {
	_, err := c.do(ctx, &protocol.Request{Op: protocol.OpPause, Receiver: receiver, Tid: tid}, nil)
	return err
}

// Resume restarts a paused timer with the ticks it had left.
// ErrNotFound, or ErrBadState if it is not paused.
func (c *Client) Resume(ctx context.Context, receiver, tid uint64) error {
	_, err := c.do(ctx, &protocol.Request{Op: protocol.OpResume, Receiver: receiver, Tid: tid}, nil)
	return err
}

// BindOptions are the optional parts of a bind. A nil *BindOptions is the
// zero value: not ephemeral, not acknowledged.
type BindOptions struct {
	// Ephemeral has the server cancel the receiver's timers when this
	// session ends — on a connection loss too, before the re-bind.
	Ephemeral bool
	// Ack binds the receiver in acknowledged mode (AckAuto or AckManual):
	// the server keeps each of its events until an ack covers it, and
	// delivers the unacknowledged ones again at the next bind. See the
	// package doc, "Acknowledged mode". AckNone (the default) binds it
	// without, and turns the mode off for a receiver that had it.
	Ack AckMode
}

// BindResult is what the server answered a bind.
type BindResult struct {
	// Pending is how many events follow the reply, in order, before any
	// newer event of the receiver: those kept while it was unbound, or in
	// acknowledged mode the unacknowledged ones, delivered again from
	// FirstSeq.
	Pending uint64
	// Dropped is how many of the receiver's events the server gave up on
	// since it was last bound (0 in acknowledged mode, normally).
	Dropped uint64
	// FirstSeq, in acknowledged mode only (0 otherwise), is the seq of the
	// next event delivered: the first of the Pending ones, or the
	// receiver's last seq + 1 when none is pending.
	FirstSeq uint64
}

// Bind makes this Client the receiver's destination: its events come to
// Events (or the handler), taking it over from any other session, which is
// sent a Takeover event. o may be nil (see BindOptions). The result's
// Pending events follow at once, before any later reply. A Dropped count
// above 0 also comes as a Dropped event, ahead of them, and adds to
// Client.Dropped.
//
// The Client remembers bound receivers and binds them again, with the same
// options, after each reconnect, where the counts of lost events reach the
// user only as Dropped events, and where redelivered events the user
// already has are dropped (see Redelivered); Unbind and a Takeover make it
// forget.
//
// A server that does not know acknowledged mode binds the receiver without
// it: Bind with Ack then returns an error (the receiver is bound).
func (c *Client) Bind(ctx context.Context, receiver uint64, o *BindOptions) (BindResult, error) {
	var opts BindOptions
	if o != nil {
		opts = *o
	}
	if opts.Ack > AckManual {
		return BindResult{}, &Error{Op: protocol.OpBind, Code: protocol.CodeInvalidArgument, Message: "unknown ack mode " + opts.Ack.String()}
	}
	replied := c.bindReplied(receiver, opts)
	req := protocol.Request{Op: protocol.OpBind, Receiver: receiver, Ephemeral: opts.Ephemeral, Ack: opts.Ack != AckNone}
	v, err := c.uints(ctx, &req, 2, func(cn *conn, res []byte) Event {
		eff := opts
		if _, ok := bindReply(res, opts.Ack); !ok {
			eff.Ack = AckNone // re-bind as the server bound it
		}
		c.mu.Lock()
		c.bound[receiver] = eff
		c.mu.Unlock()
		return replied(cn, res)
	})
	if err != nil {
		return BindResult{}, err
	}
	r := BindResult{Pending: v[0], Dropped: v[1]}
	if opts.Ack != AckNone {
		if len(v) < 3 {
			return r, fmt.Errorf("tickwheel: bind: the server does not support acknowledged mode: receiver %d is bound without it", receiver)
		}
		r.FirstSeq = v[2]
	}
	return r, nil
}

// Unbind stops the receiver's events coming to this Client; the server
// keeps them in its backlog until the next Bind. Its timers stay (even for
// an ephemeral bind). ErrNotFound if this session has not bound it. In
// acknowledged mode the acks due for the receiver are sent first, so that
// the next binder gets only what the user has not taken.
func (c *Client) Unbind(ctx context.Context, receiver uint64) error {
	if cn := c.current(); cn != nil {
		c.acks.flushTo(cn, &receiver)
	}
	_, err := c.do(ctx, &protocol.Request{Op: protocol.OpUnbind, Receiver: receiver}, func(*conn, []byte) Event {
		c.mu.Lock()
		delete(c.bound, receiver)
		c.mu.Unlock()
		c.forgetSeq(receiver)
		c.acks.forget(receiver)
		return Event{}
	})
	return err
}

// Ping returns the server's current tick.
func (c *Client) Ping(ctx context.Context) (now uint64, err error) {
	return c.one(ctx, &protocol.Request{Op: protocol.OpPing})
}

func (c *Client) one(ctx context.Context, req *protocol.Request) (uint64, error) {
	v, err := c.uints(ctx, req, 1, nil)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// Admin ops need admin rights, which only the server's admin token gives
// (WithToken; on the server's machine it is in the server's data directory,
// admin.token, and servertest.Server.AdminToken returns it). Otherwise they
// return ErrUnauthorized.

// FastForward moves tw-time on by ticks and returns once every timer due
// in between has fired: the events of those firings that go to this
// Client are queued to Events (or the handler) before it returns — which
// needs room in the event buffer, or a consumer reading meanwhile. It returns the new now and the
// number of firings (all receivers). The Client's other calls wait behind
// it on the connection. A Freeze from another connection stops a
// fast-forward still firing where it is: now is then that tick, short of
// the tw-time asked for. tw-time may reach at most 2^64-2^62: more is
// ErrInvalidArgument.
func (c *Client) FastForward(ctx context.Context, ticks uint64) (now, fired uint64, err error) {
	v, err := c.uints(ctx, &protocol.Request{Op: protocol.OpFastForward, Ticks: ticks}, 2, nil)
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// Freeze stops tw-time following the wall clock (FastForward still moves
// it) and returns now.
func (c *Client) Freeze(ctx context.Context) (now uint64, err error) {
	return c.one(ctx, &protocol.Request{Op: protocol.OpFreeze})
}

// ResumeSync makes a frozen tw-time follow the wall clock again, without a
// jump, and returns now.
func (c *Client) ResumeSync(ctx context.Context) (now uint64, err error) {
	return c.one(ctx, &protocol.Request{Op: protocol.OpResumeSync})
}

// SetSpeed sets tw-time's speed relative to the wall clock (1 = real time)
// and returns now. A speed that is not finite or out of the server's range
// is ErrInvalidArgument.
func (c *Client) SetSpeed(ctx context.Context, speed float64) (now uint64, err error) {
	return c.one(ctx, &protocol.Request{Op: protocol.OpSetSpeed, Speed: speed})
}

// Stats returns the server's counters.
func (c *Client) Stats(ctx context.Context) (protocol.Stats, error) {
	var s protocol.Stats
	res, err := c.do(ctx, &protocol.Request{Op: protocol.OpStats}, nil)
	if err != nil {
		return s, err
	}
	if err := protocol.DecodeStats(res, &s); err != nil {
		return protocol.Stats{}, badReply(protocol.OpStats, err)
	}
	return s, nil
}

// ClusterStatus returns the cluster's state as its leader sees it: role,
// leader, term, commit and applied index, and the members. Needs the
// admin token; a single server answers ErrBadState.
func (c *Client) ClusterStatus(ctx context.Context) (protocol.Cluster, error) {
	return c.cluster(ctx, &protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterStatus})
}

// ClusterAdd adds node id, listening for raft at raftAddr (host:port), to
// the cluster: as a non-voter first, which gets the log and a snapshot
// but counts in no quorum, promoted to a voter once it has caught up (its
// log within cluster.catch_up_entries of the leader's commit index). It
// returns the cluster's state once the node is a voter. The node must have
// been started without peers (with cluster.join, or waiting to be added)
// and the same cluster id and token. The leader answers only then: give
// ctx time for a big snapshot (the leader gives up after
// cluster.catch_up_timeout with ErrUnavailable, the node staying a
// non-voter: ClusterPromote later). Adding a voter again with the same
// address changes nothing; adding a non-voter again promotes it.
func (c *Client) ClusterAdd(ctx context.Context, id, raftAddr string) (protocol.Cluster, error) {
	return c.cluster(ctx, &protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterAdd, Node: id, Addr: raftAddr})
}

// ClusterAddNonvoter adds node id at raftAddr as a non-voter that stays
// one (a read replica, e.g. at a standby site: it holds the state but
// neither votes nor counts in the quorum, so its failure or distance
// slows no commit), and returns the cluster's state once the change is
// committed, without waiting for the node to catch up. A voter id is
// refused (ErrBadState): remove it first.
func (c *Client) ClusterAddNonvoter(ctx context.Context, id, raftAddr string) (protocol.Cluster, error) {
	return c.cluster(ctx, &protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterAddNonvoter, Node: id, Addr: raftAddr})
}

// ClusterPromote makes non-voter id a voter once it has caught up, as
// ClusterAdd does after adding it, and returns the cluster's state then.
// A voter is left as it is; a node not in the cluster is ErrBadState.
func (c *Client) ClusterPromote(ctx context.Context, id string) (protocol.Cluster, error) {
	return c.cluster(ctx, &protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterPromote, Node: id})
}

// ClusterCheck asks for a state check: the leader marks its replicated
// log, and every node hashes its state at the mark. It returns once the
// mark is committed, with the check's id in Cluster.Check; each node's
// digest for it is on that node's status page (/status.json, cluster
// state_check), and the digests must all be equal. ErrUnavailable when
// leadership changed before the mark committed: ask again.
func (c *Client) ClusterCheck(ctx context.Context) (protocol.Cluster, error) {
	return c.cluster(ctx, &protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterCheck})
}

// ClusterRemove removes node id from the cluster and returns the
// cluster's state once the change is committed. Removing the leader
// makes it step down: the connection may close before the reply.
func (c *Client) ClusterRemove(ctx context.Context, id string) (protocol.Cluster, error) {
	return c.cluster(ctx, &protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterRemove, Node: id})
}

func (c *Client) cluster(ctx context.Context, req *protocol.Request) (protocol.Cluster, error) {
	var k protocol.Cluster
	res, err := c.do(ctx, req, nil)
	if err != nil {
		return k, err
	}
	if err := protocol.DecodeCluster(res, &k); err != nil {
		return protocol.Cluster{}, badReply(protocol.OpCluster, err)
	}
	return k, nil
}
