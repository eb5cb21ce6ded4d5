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
)

// String returns "fire", "takeover" or "kind(N)".
func (k EventKind) String() string {
	switch k {
	case Fire:
		return "fire"
	case Takeover:
		return "takeover"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a message the server pushes: a timer firing or a takeover
// notice. Events of one receiver arrive in the order the server sent them.
type Event struct {
	Kind     EventKind
	Receiver uint64

	// Fire only.
	Tid    uint64
	Tick   uint64 // the tick the timer was due at
	Fired  uint64 // 1-based count of this timer's firings, this one included
	Repeat uint64 // total firings, 0 = forever
	Last   bool   // this firing removed the timer
	Data   []byte // the timer's data, nil if none; a copy the caller owns
	// Seq is the receiver's event sequence number, from 1, increasing by
	// one per event: a gap means the server dropped events (its backlog for
	// an unbound receiver is bounded, and events already sent on a
	// connection that was lost are gone with it). The server keeps the count
	// while the receiver is bound, has a backlog or has timers; it restarts
	// at 1 after the receiver had none of these, and when the server restarts.
	Seq uint64

	// Takeover only: the session that now has the receiver.
	NewSession uint64
}
