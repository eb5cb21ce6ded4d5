// Package client is the Go client of tickwheel, the timer service.
//
// Dial connects and says hello; the returned Client is safe for concurrent
// use, pipelines calls on one connection, and reconnects by itself:
//
//	c, err := client.Dial(ctx, "127.0.0.1:7420", client.WithName("zone-7"))
//	if err != nil { ... }
//	defer c.Close()
//
//	c.Bind(ctx, 42, nil) // events of receiver 42 come here
//	c.AddAfter(ctx, 42, 1, 5*time.Second, &client.AddOptions{Repeat: 1}) // once, in 5s
//	c.Add(ctx, 42, 2, 10, &client.AddOptions{Repeat: 3, Data: []byte("regen")}) // 3 times, 10 ticks apart
//	c.Add(ctx, 42, 3, 100, nil) // once, 100 ticks from now
//	c.Add(ctx, 42, 4, 100, &client.AddOptions{Repeat: client.Forever}) // every 100 ticks until cancelled
//	c.AddSchedule(ctx, 42, 5, "0 4 * * *", &client.AddOptions{Zone: "Europe/Paris", Missed: client.MissedOnce}) // daily at 04:00 Paris time
//
//	for ev := range c.Events() { // closed by Close
//		fmt.Println(ev.Receiver, ev.Tid, ev.Tick, ev.Fired, ev.Last, ev.Data)
//	}
//
// Times are in ticks of tw-time, the server's clock (TickDuration says how
// long one is). Add counts whole ticks from the current tick, which began
// up to a tick before the server read the request, so in real time it may
// fire up to a tick sooner than after ticks; AddAfter takes a duration the
// server counts from the moment it reads the request, so its timer never
// fires early. Ticks converts a duration to ticks, rounding up.
//
// Pipeline queues many requests and sends them in one write (see Pipe):
// the way to schedule thousands of timers at once.
//
// tw-time is also a calendar: tick t is the instant t × TickDuration after
// the Unix epoch. AddSchedule adds a timer on a cron schedule in a time zone
// (see its doc for the expressions and the daylight-saving rules), so a
// test that fast-forwards tw-time by a day sees a daily timer fire once.
// AddOptions.Missed says what a repeating timer does with the firings that
// fall in a server's downtime (MissedAll, MissedOnce, MissedSkip).
//
// Get returns one timer. List returns all of a receiver's timers in tid
// order, fetched from the server a page at a time (ListPage fetches one
// page, for receivers with very many timers); it is not a snapshot.
//
// # Errors
//
// An error reply is an *Error that wraps the sentinel of its code:
// errors.Is(err, client.ErrNotFound), ErrExists, ErrInvalidArgument,
// ErrBadState, ErrLimitExceeded, ErrUnauthorized, ... Every call takes a
// context; when it ends the call returns ctx.Err() at once (the request may
// still be applied). ErrClosed means the Client was closed; ErrDisconnected
// that the connection dropped while the call was in flight, so the server
// may or may not have applied it.
//
// # Events and backpressure
//
// Fires, takeover notices and Dropped reports (below) are delivered in the
// order the server sent them, either on the Events channel or, with
// WithHandler, by calling a function from one goroutine. Between the socket
// and the consumer there is one bounded buffer (WithEventBuffer, 1024
// events by default). When the consumer falls behind and the buffer is
// full, the Client stops reading its connection: replies wait too, so
// calls stall, and the server queues its output. Once that queue reaches the
// server's max_outbound limit the server stops writing to the connection and
// keeps the receivers' next events in their per-receiver backlogs (bounded
// by max_backlog and max_backlog_bytes, the oldest dropped — Event.Seq shows
// the gap and the Client reports it as Dropped); it sends them, in order, as
// soon as the Client reads again. The connection is not closed for being
// slow. So: consume events promptly, and give calls made from the consumer a
// deadline.
//
// # Lost events
//
// Events the server gives up on are never lost silently. Each bind reply
// says how many of the receiver's events the server dropped since it was
// last bound; the Client delivers that count as an event of kind Dropped
// (Receiver, Count) ahead of the backlog events that follow, for Bind and
// for the automatic re-binds after a reconnect alike (Bind also returns
// it). When the server drops events of a receiver bound here (its backlog
// overflowed while the connection was held back), it says so at once with
// the range of seqs dropped, which comes as a Dropped event too, ahead of
// the later events. The Client also follows each bound receiver's sequence
// numbers (Event.Seq): a fire whose seq jumps past the last one plus one
// comes after a Dropped event for the missing count. Client.Dropped totals
// every reported count. The sources do not double count: a bind's dropped
// count, and a notice's range, move the expected seq on past the events
// reported. The seq is forgotten on Unbind and Takeover, and a seq of 1
// (the server forgot the receiver, or restarted) starts it again without a
// drop. In acknowledged mode (below) events are not lost with a
// connection; if the server ever drops some (see its outbox limits in
// PROTOCOL.md), they are reported the same way.
//
// # Acknowledged mode
//
// Without it, an event the server wrote to a connection that then died is
// gone. A receiver bound with BindOptions.Ack set is in acknowledged mode:
// the server keeps each of its events in the receiver's outbox until an
// ack covers its seq, and at the next bind of the receiver — the Client's
// re-bind after a reconnect, or another client taking it over — it
// delivers them again, from BindResult.FirstSeq, before any newer event.
// Every event is delivered at least once, in seq order.
//
// Acks are cumulative: an ack of seq covers every event of the receiver up
// to it. With AckAuto the Client sends them: an event counts as done once
// the handler (WithHandler) has returned for it, or once the Events
// consumer has received it from the channel — events still in the channel
// are not acked. Acks are batched, one per receiver for many events: they
// go with whatever else the Client writes, at the latest about 2 ms after
// they are due, and at once every 256 events; their replies are checked
// (failures are logged) and never reach the user. With AckManual the user
// calls Client.Ack after its own work for the event is done — after its
// result is stored, say — which makes a crash in between deliver the event
// again rather than lose it. Ack may also be used in AckAuto mode, to ack
// ahead. Unbind and Close send the acks due first.
//
// A duplicate is an event delivered again: the same Receiver and Seq (and
// timer, tick and firing) as one delivered before. After a reconnect the
// Client removes them itself: it remembers, per receiver, the events it
// delivered that the server has not confirmed as acked, and drops a
// redelivered event that is one of them (Client.Redelivered counts them).
// So within one Client, every event reaches the user exactly once. The
// user sees a duplicate only when the redelivery goes to another Client
// than the one that delivered the event: a new process after a crash or a
// restart (or after Close, for events not yet taken), or another game
// server taking the receiver over. To drop those, keep the seq of the last
// event handled per receiver in your own durable state, updated with the
// work's result, and skip events with Seq at or below it (see the Ack
// example). The seqs of a receiver increase by one per event and never go
// back while the server keeps its state; they may jump forward at a bind
// (a receiver the server forgot starts above its old seqs), and FirstSeq
// then says where they go on, with no Dropped event. A server restarted
// without its state (no persistence) numbers the receiver's events from 1
// again; the Client then sees that the redelivered seqs are other events,
// and delivers them.
//
// # Reconnection
//
// When the connection drops (not by Close), calls in flight fail with
// ErrDisconnected and the Client redials with exponential backoff and
// jitter (WithReconnect; 100ms to 5s by default), says hello again — the
// session id changes — and binds again every receiver it had bound, with
// the same BindOptions, before any other call; the server then delivers
// the events kept meanwhile (in acknowledged mode, every event not acked). Calls made while reconnecting wait for the new
// connection, bounded by their context. Timers live in the server and
// survive the loss, except those of receivers bound as ephemeral.
// WithConnectionHooks tells the program of each loss and reconnection
// (the CLI's watch says "reconnecting…" and "reconnected").
//
// When the server reports an idle timeout (Limits().IdleTimeoutMs), the
// Client sends a ping whenever it has sent nothing for a third of it, so a
// connected but quiet Client is never closed as idle.
//
// # Clusters
//
// Give Dial every node of a cluster, comma-separated (or through
// WithAddrs): only the leader serves clients, and a follower answers with
// ErrNotLeader naming the leader's address. The Client follows it, on
// Dial and on every reconnection, so that after a failover it re-binds its
// receivers on the new leader and gets its unacknowledged events from
// there:
//
//	c, err := client.Dial(ctx, "10.0.0.1:7420,10.0.0.2:7420,10.0.0.3:7420")
//
// Reads (Get, List, Ping, Stats) that a node answers with not_leader, as it
// steps down, are sent again to the next leader. So are changes (Add,
// Cancel, Pause, Resume, and the bulk CancelAll, PauseAll, ResumeAll,
// PauseGroup, ResumeGroup, CancelGroup), and also when the connection dropped
// with the call in flight, on a server that remembers request ids (its
// hello reports request_id_ticks): each
// change carries the Client's random id and a request id that stays the
// same on every attempt, and the server applies it at most once, answering
// a retry of one it applied with the first reply (docs/PROTOCOL.md,
// "Retrying changes"). The caller sees one answer, as if nothing had
// happened, provided the retry reaches a server within its
// request_id_ticks (5 minutes by default) and the call's context allows.
// A cluster node remembers request ids by default; a single server only
// when configured to (limits.max_request_ids, -max-request-ids).
// On a server that does not remember request ids, a change returns an
// error wrapping ErrNotLeader (an *Error whose Leader names the leader) or
// ErrDisconnected instead: it may have been applied, and a retry could
// apply it twice (an add with Replace, a cancel that tolerates
// ErrNotFound, are safe to retry). A Pipeline's changes follow the same
// rules: Exec sends again, with their ids and in order, those whose replies
// did not arrive, and only those.
// DefaultLeaderHops says in which order the addresses are tried.
//
// Close stops everything: pending calls get ErrClosed, and every goroutine
// of the Client has exited when it returns.
package client
