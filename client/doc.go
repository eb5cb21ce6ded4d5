// Package client is the Go client of tickwheel, the timer service.
//
// Dial connects and says hello; the returned Client is safe for concurrent
// use, pipelines calls on one connection, and reconnects by itself:
//
//	c, err := client.Dial(ctx, "127.0.0.1:7420", client.WithName("zone-7"))
//	if err != nil { ... }
//	defer c.Close()
//
//	c.Bind(ctx, 42, false) // events of receiver 42 come here
//	c.AddAfter(ctx, 42, 1, 5*time.Second, &client.AddOptions{Repeat: 1}) // once, in 5s
//	c.Add(ctx, 42, 2, 10, &client.AddOptions{Repeat: 3, Data: []byte("regen")}) // 3 times, 10 ticks apart
//	c.Add(ctx, 42, 3, 100, nil) // every 100 ticks, forever (Repeat 0)
//
//	for ev := range c.Events() { // closed by Close
//		fmt.Println(ev.Receiver, ev.Tid, ev.Tick, ev.Fired, ev.Last, ev.Data)
//	}
//
// Times are in ticks of tw-time, the server's clock (TickDuration says how
// long one is); AddAfter and Ticks convert a duration, rounding up so a
// timer never fires early.
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
// it). The Client also follows each bound receiver's sequence numbers
// (Event.Seq): a fire whose seq jumps past the last one plus one comes
// after a Dropped event for the missing count. Client.Dropped totals every
// reported count. The two sources do not double count: a bind's dropped
// count moves the expected seq on by as much. The seq is forgotten on
// Unbind and Takeover, and a seq of 1 (the server forgot the receiver, or
// restarted) starts it again without a drop.
//
// # Reconnection
//
// When the connection drops (not by Close), calls in flight fail with
// ErrDisconnected and the Client redials with exponential backoff and
// jitter (WithReconnect; 100ms to 5s by default), says hello again — the
// session id changes — and binds again every receiver it had bound, with
// the same ephemeral flag, before any other call; the server then delivers
// the events kept meanwhile. Calls made while reconnecting wait for the new
// connection, bounded by their context. Timers live in the server and
// survive the loss, except those of receivers bound as ephemeral.
//
// When the server reports an idle timeout (Limits().IdleTimeoutMs), the
// Client sends a ping whenever it has sent nothing for a third of it, so a
// connected but quiet Client is never closed as idle.
//
// Close stops everything: pending calls get ErrClosed, and every goroutine
// of the Client has exited when it returns.
package client
