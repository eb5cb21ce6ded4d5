package protocol

import (
	"errors"
	"strconv"
)

// Version is the protocol version this package speaks. A hello whose version
// differs is answered with CodeUnsupportedVersion.
const Version = 1

// DefaultMaxFrame is the default largest frame payload, in bytes, that a
// server accepts (64 KiB). Servers may configure another limit and report it
// in the hello reply's limits map as max_frame.
const DefaultMaxFrame = 64 << 10

// HeaderSize is the size of a frame header: a 4-byte big-endian payload length.
const HeaderSize = 4

// Errors. Each is a sentinel usable with errors.Is; DecodeRequest and
// DecodeMessage wrap ErrMalformed and ErrUnknownOp with detail naming the op
// and field.
var (
	// ErrIncomplete is returned by SplitFrame when the buffer holds less than
	// a whole frame. It is not an error condition: read more bytes and retry.
	ErrIncomplete = errors.New("protocol: incomplete frame")
	// ErrFrameTooLarge is returned by SplitFrame when a frame header declares
	// a payload longer than the maximum frame size. It is detected from the
	// header alone; the connection should be closed.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrEmptyFrame is returned by SplitFrame when a frame header declares a
	// zero-length payload. The connection should be closed.
	ErrEmptyFrame = errors.New("protocol: empty frame")
	// ErrMalformed is returned (wrapped) when a payload is not one valid
	// msgpack value of the documented shape. A server answers it with
	// CodeMalformed and closes the connection.
	ErrMalformed = errors.New("protocol: malformed message")
	// ErrUnknownOp is returned (wrapped) by DecodeRequest when the request is
	// well-formed msgpack but its op is not one this version defines. A server
	// answers it with CodeUnknownOp and keeps the connection open.
	ErrUnknownOp = errors.New("protocol: unknown op")
)

// Op is a request operation code, the first element of a request array.
type Op uint8

// Request ops. Ops 20..25 are admin ops (see Op.Admin).
const (
	OpHello     Op = 1
	OpBind      Op = 2
	OpUnbind    Op = 3
	OpAdd       Op = 4
	OpCancel    Op = 5
	OpGet       Op = 6
	OpList      Op = 7
	OpCancelAll Op = 8
	OpPause     Op = 9
	OpResume    Op = 10
	OpPing      Op = 11
	OpAck       Op = 12
	// OpPauseAll and OpResumeAll pause or resume every timer of a
	// receiver, or of a group (Request.Group non-zero); OpListGroup lists
	// a group's timers a page at a time; OpCancelGroup cancels a group's
	// timers (a new op rather than a group argument of cancel_all, which
	// a server that predates groups would take for receiver 0's). Ops
	// 13..19 are the groups ops (issue 27).
	OpPauseAll    Op = 13
	OpResumeAll   Op = 14
	OpListGroup   Op = 15
	OpCancelGroup Op = 16

	OpFastForward Op = 20
	OpFreeze      Op = 21
	OpResumeSync  Op = 22
	OpSetSpeed    Op = 23
	OpStats       Op = 24
	// OpCluster reads or changes a cluster's membership: its first argument
	// is the sub-command (ClusterStatus, ClusterAdd, ClusterRemove).
	OpCluster Op = 25
)

var opNames = [...]string{
	OpHello:       "hello",
	OpBind:        "bind",
	OpUnbind:      "unbind",
	OpAdd:         "add",
	OpCancel:      "cancel",
	OpGet:         "get",
	OpList:        "list",
	OpCancelAll:   "cancel_all",
	OpPause:       "pause",
	OpResume:      "resume",
	OpPing:        "ping",
	OpAck:         "ack",
	OpPauseAll:    "pause_all",
	OpResumeAll:   "resume_all",
	OpListGroup:   "list_group",
	OpCancelGroup: "cancel_group",
	OpFastForward: "fast_forward",
	OpFreeze:      "freeze",
	OpResumeSync:  "resume_sync",
	OpSetSpeed:    "set_speed",
	OpStats:       "stats",
	OpCluster:     "cluster",
}

// String returns the op's protocol name ("add", "fast_forward", ...), or
// "op(N)" for an op this version does not define.
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Valid reports whether o is an op this version defines.
func (o Op) Valid() bool { return int(o) < len(opNames) && opNames[o] != "" }

// Admin reports whether o is an admin op (fast_forward, freeze, resume_sync,
// set_speed, stats, cluster), which needs admin rights on the session.
func (o Op) Admin() bool { return o >= OpFastForward && o <= OpCluster }

// The sub-commands of the cluster op (Request.Command).
const (
	ClusterStatus = "status" // the node's raft state and the members
	// ClusterAdd adds Request.Node at raft address Request.Addr as a
	// non-voter, and promotes it to a voter once it has caught up.
	ClusterAdd = "add"
	// ClusterAddNonvoter adds Request.Node at Request.Addr as a non-voter
	// that stays one (a read replica; ClusterPromote makes it a voter). A
	// sub-command rather than a flag of add: a server that predates it
	// refuses it (invalid_argument) instead of adding a voter.
	ClusterAddNonvoter = "add_nonvoter"
	ClusterPromote     = "promote" // make non-voter Request.Node a voter, once it has caught up
	ClusterRemove      = "remove"  // remove Request.Node from the cluster
	// ClusterCheck marks the replicated log for a state check: every node
	// hashes its state at the mark (Cluster.Check is its id; each node's
	// hash is on its status page, /status.json). The reply leaves once the
	// mark is committed.
	ClusterCheck = "check"
)

// Code is an error code carried by an error reply. Codes are stable.
type Code uint16

// Error codes.
const (
	CodeMalformed          Code = 1  // bad frame or message; the server closes the connection after replying
	CodeUnknownOp          Code = 2  // the op is not defined
	CodeUnauthorized       Code = 3  // admin op without admin rights, or a bad token
	CodeHelloRequired      Code = 4  // the first request of a connection was not hello
	CodeNotFound           Code = 5  // no such timer (or receiver)
	CodeExists             Code = 6  // the timer exists and replace was false
	CodeInvalidArgument    Code = 7  // due tick overflow, bad speed, repeat > 2^32-1, bad schedule, ...
	CodeLimitExceeded      Code = 8  // a server limit was reached; the message names it
	CodeBadState           Code = 9  // pause of a paused timer, resume of a running one, ...
	CodeUnsupportedVersion Code = 10 // hello version is not Version
	CodeInternal           Code = 11 // a server bug
	CodeTimeout            Code = 12 // a connection timeout ran out; the server closes the connection after it
	CodeUnavailable        Code = 13 // the server cannot make the change durable now (its log cannot be written: disk full); retry later
	// CodeNotLeader is a cluster follower's answer to hello and to every
	// other request: it serves no clients. The error reply carries a fifth
	// element, the leader's client address ("" when unknown; see
	// AppendNotLeader and Message.Leader), and the follower closes the
	// connection after it. Nothing was changed: the client should connect
	// to the leader.
	CodeNotLeader Code = 14
	// CodeRequestIDReused answers a change request whose client and id
	// (Request.Client, Request.ID) the server remembers from a different
	// request: a client reused a request id within the deduplication
	// window. Nothing was changed.
	CodeRequestIDReused Code = 17
)

var codeNames = [...]string{
	CodeMalformed:          "malformed",
	CodeUnknownOp:          "unknown_op",
	CodeUnauthorized:       "unauthorized",
	CodeHelloRequired:      "hello_required",
	CodeNotFound:           "not_found",
	CodeExists:             "exists",
	CodeInvalidArgument:    "invalid_argument",
	CodeLimitExceeded:      "limit_exceeded",
	CodeBadState:           "bad_state",
	CodeUnsupportedVersion: "unsupported_version",
	CodeInternal:           "internal",
	CodeTimeout:            "timeout",
	CodeUnavailable:        "unavailable",
	CodeNotLeader:          "not_leader",
	CodeRequestIDReused:    "request_id_reused",
}

// String returns the code's protocol name ("not_found", ...), or "code(N)"
// for a code this version does not define.
func (c Code) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// Kind is the kind of a server message, its first element.
type Kind uint8

// Server message kinds.
const (
	KindOK       Kind = 0 // [0, id, result]
	KindError    Kind = 1 // [1, id, code, message], not_leader: [1, id, 14, message, leader]
	KindFire     Kind = 2 // [2, receiver, tid, tick, fired, repeat, last, data, seq, late]
	KindTakeover Kind = 3 // [3, receiver, session]
	KindDropped  Kind = 4 // [4, receiver, first_seq, last_seq]
)

var kindNames = [...]string{KindOK: "ok", KindError: "error", KindFire: "fire", KindTakeover: "takeover", KindDropped: "dropped"}

// String returns "ok", "error", "fire", "takeover", "dropped", or "kind(N)".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}
