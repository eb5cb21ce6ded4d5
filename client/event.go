package client

import "strconv"

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	// Fire: a timer of a receiver bound by this Client fired.
	Fire EventKind = 1
	// Takeover: another session bound the receiver, so this Client no
	// longer gets its events and will not re-bind it after a reconnect.
	Takeover EventKind = 2
	// Dropped: Count events of the receiver were lost — the server gave up
	// on them (its backlog overflowed, or they went with a closed
	// connection), as a bind reply or the server's dropped notice reports,
	// or the sequence numbers show a gap. It comes in order, ahead of the
	// events that follow the loss. Client.Dropped totals the counts.
	Dropped EventKind = 3
)

// String returns "fire", "takeover", "dropped" or "kind(N)".
func (k EventKind) String() string {
	switch k {
	case Fire:
		return "fire"
	case Takeover:
		return "takeover"
	case Dropped:
		return "dropped"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a message the server pushes — a timer firing or a takeover
// notice — or a report of lost events. Events of one receiver arrive in the
// order the server sent them.
type Event struct {
	Kind     EventKind
	Receiver uint64

	// Fire only.
	Tid    uint64
	Tick   uint64 // the tick the timer was due at
	Fired  uint64 // 1-based count of this timer's firings, this one included
	Repeat uint64 // total firings, or Forever (until cancelled), as in AddOptions
	Last   bool   // this firing removed the timer
	Data   []byte // the timer's data, nil if none; a copy the caller owns
	// Seq is the receiver's event sequence number, from 1, increasing by
	// one per event: a gap means the server dropped events (its backlog for
	// an unbound receiver is bounded, and events already sent on a
	// connection that was lost are gone with it); the Client reports each
	// gap as a Dropped event before the fire. The server keeps the count
	// while the receiver is bound, has a backlog or has timers; it restarts
	// at 1 after the receiver had none of these, and when the server restarts.
	// In acknowledged mode the server keeps the count while it keeps its
	// state, and (Receiver, Seq) identifies the event: a redelivered event
	// has the seq it had (see the package doc on duplicates).
	Seq uint64
	// Late is how many ticks after Tick the timer fired: 0 normally, and
	// for ticks a fast-forward jumped over; more in the catch-up after the
	// server was down (see the server's downtime setting), or when the
	// server fell behind.
	Late uint64

	// Takeover only: the session that now has the receiver.
	NewSession uint64

	// Dropped only: how many of the receiver's events were lost.
	Count uint64
}
