package protocol

import (
	"fmt"
	"strconv"
)

// field names a part of a request, for error messages.
type field uint8

const (
	fMessage  field = iota // the request array itself
	fOp                    // element 0
	fID                    // element 1
	fTrailing              // an element past the defined ones (ignored, but must be valid msgpack)
	fVersion
	fName
	fToken
	fReceiver
	fTid
	fAfter
	fAt
	fEvery
	fRepeat
	fData
	fReplace
	fEphemeral
	fTicks
	fSpeed
	fFromTid
	fLimit
	fAck
	fSeq
	fAfterNs
	fSchedule
	fZone
	fMissed
	fCommand
	fNode
	fAddr
	fGroup
	fFromReceiver
	fClient
	numFields
)

var fieldNames = [numFields]string{
	fMessage:      "message",
	fOp:           "op",
	fID:           "id",
	fTrailing:     "ignored trailing element",
	fVersion:      "version",
	fName:         "name",
	fToken:        "token",
	fReceiver:     "receiver",
	fTid:          "tid",
	fAfter:        "after",
	fAt:           "at",
	fEvery:        "every",
	fRepeat:       "repeat",
	fData:         "data",
	fReplace:      "replace",
	fEphemeral:    "ephemeral",
	fTicks:        "ticks",
	fSpeed:        "speed",
	fFromTid:      "from_tid",
	fLimit:        "limit",
	fAck:          "ack",
	fSeq:          "seq",
	fAfterNs:      "after_ns",
	fSchedule:     "schedule",
	fZone:         "zone",
	fMissed:       "missed",
	fCommand:      "command",
	fNode:         "node",
	fAddr:         "addr",
	fGroup:        "group",
	fFromReceiver: "from_receiver",
	fClient:       "client",
}

// The want* texts say what a field of each kind accepts, for wrong-type
// messages.
const (
	wantArray = "want an array"
	wantUint  = "want a non-negative integer"
	wantStr   = "want str"
	wantData  = "want bin, str or nil"
	wantBool  = "want true, false or nil"
	wantFloat = "want a number (float or integer)"
	wantAny   = "want any msgpack value"
	wantMap   = "want a map"
)

func (f field) want() string {
	switch f {
	case fMessage:
		return wantArray
	case fTrailing:
		return wantAny
	case fName, fToken, fSchedule, fZone, fCommand, fNode, fAddr:
		return wantStr
	case fData:
		return wantData
	case fReplace, fEphemeral, fAck:
		return wantBool
	case fSpeed:
		return wantFloat
	}
	return wantUint
}

// text describes p for a value of which want says what is accepted.
func (p problem) text(want string) string {
	switch p {
	case pTruncated:
		return "truncated"
	case pTooLong:
		return "declared length exceeds the bytes left in the frame"
	case pNegative:
		return "negative integer, " + wantUint
	case pWrongType:
		return "wrong type, " + want
	case pTooDeep:
		return "nested deeper than " + strconv.Itoa(maxDepth) + " levels"
	case pInvalid:
		return "invalid byte 0xc1"
	case pTooShort:
		return "array too short"
	case pTrailing:
		return "trailing bytes after the message"
	case pRange:
		return "out of range"
	}
	return "problem(" + strconv.Itoa(int(p)) + ")"
}

// decodeError is a malformed-request error. The decoder returns pointers into
// the static table reqErrs, so reporting an error allocates nothing and the
// error stays valid forever; the text is built only when Error is called.
type decodeError struct {
	op Op // 0 when the op is not known
	f  field
	p  problem
}

var reqErrs [len(opNames)][numFields][numProblems]decodeError

func init() {
	for op := range reqErrs {
		for f := range reqErrs[op] {
			for p := range reqErrs[op][f] {
				reqErrs[op][f][p] = decodeError{Op(op), field(f), problem(p)}
			}
		}
	}
	for i := range unknownOps {
		unknownOps[i] = unknownOpError(i)
	}
}

// reqErr returns the error for problem p in field f of a request with op op
// (0 if not known yet).
func reqErr(op Op, f field, p problem) error {
	if !op.Valid() {
		op = 0
	}
	return &reqErrs[op][f][p]
}

func (e *decodeError) Error() string {
	s := ErrMalformed.Error() + ": "
	if e.op != 0 {
		s += e.op.String() + ": "
	}
	if e.f != fMessage {
		s += fieldNames[e.f] + ": "
	}
	return s + e.p.text(e.f.want())
}

func (e *decodeError) Unwrap() error { return ErrMalformed }

// unknownOpError is the error for a well-formed request with an undefined
// op; the value is the op, or 256 for any op above 255.
type unknownOpError uint16

var unknownOps [257]unknownOpError

func unknownOpErr(op uint64) error {
	if op > 255 {
		op = 256
	}
	return &unknownOps[op]
}

func (e *unknownOpError) Error() string {
	if *e > 255 {
		return ErrUnknownOp.Error() + ": op > 255"
	}
	return ErrUnknownOp.Error() + ": " + strconv.Itoa(int(*e))
}

func (e *unknownOpError) Unwrap() error { return ErrUnknownOp }

// msgErr builds a malformed-message error for the client-side decoders,
// which may allocate.
func msgErr(what, part string, p problem, want string) error {
	return fmt.Errorf("%w: %s: %s: %s", ErrMalformed, what, part, p.text(want))
}
