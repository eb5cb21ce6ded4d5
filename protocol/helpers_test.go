package protocol

import (
	"encoding/hex"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleRequests holds one request of every op, with values exercising
// several integer encodings.
var sampleRequests = []Request{
	{Op: OpHello, ID: 1, Version: Version, Name: "game-7", Token: "s3cret"},
	{Op: OpBind, ID: 2, Receiver: 42, Ephemeral: true},
	{Op: OpUnbind, ID: 3, Receiver: 42},
	{Op: OpAdd, ID: 4, Receiver: 42, Tid: 11, After: 3, Every: 3, Repeat: 4, Data: []byte("hi"), Replace: true},
	{Op: OpAdd, ID: math.MaxUint64, Receiver: 1 << 40, Tid: 70000, At: 1 << 33, Repeat: math.MaxUint32 + 1, Data: make([]byte, 300)},
	{Op: OpCancel, ID: 5, Receiver: 42, Tid: 11},
	{Op: OpGet, ID: 6, Receiver: 42, Tid: 12},
	{Op: OpList, ID: 7, Receiver: 42},
	{Op: OpList, ID: 70, Receiver: 42, FromTid: 1 << 40, Limit: 500},
	{Op: OpCancelAll, ID: 8, Receiver: 42},
	{Op: OpPause, ID: 9, Receiver: 42, Tid: 11},
	{Op: OpResume, ID: 10, Receiver: 42, Tid: 11},
	{Op: OpPing, ID: 11},
	{Op: OpFastForward, ID: 12, Ticks: 86400},
	{Op: OpFreeze, ID: 13},
	{Op: OpResumeSync, ID: 14},
	{Op: OpSetSpeed, ID: 15, Speed: 2.5},
	{Op: OpStats, ID: 16},
}

// randRequest returns a random valid request: a random op, and random values
// for the arguments that op takes only.
func randRequest(rng *rand.Rand) Request {
	ops := []Op{OpHello, OpBind, OpUnbind, OpAdd, OpCancel, OpGet, OpList, OpCancelAll,
		OpPause, OpResume, OpPing, OpFastForward, OpFreeze, OpResumeSync, OpSetSpeed, OpStats}
	r := Request{Op: ops[rng.IntN(len(ops))], ID: randUint(rng)}
	for _, f := range opArgs[r.Op] {
		switch f {
		case fName:
			r.Name = strings.Repeat("n", rng.IntN(40))
		case fToken:
			r.Token = strings.Repeat("t", rng.IntN(300))
		case fSchedule, fZone:
			if rng.IntN(4) == 0 {
				*r.strField(f) = strings.Repeat("s", rng.IntN(30))
			}
		case fData:
			if n := rng.IntN(4) * rng.IntN(200); n > 0 {
				r.Data = make([]byte, n)
				for i := range r.Data {
					r.Data[i] = byte(rng.Uint32())
				}
			}
		case fReplace:
			r.Replace = rng.IntN(2) == 1
		case fEphemeral:
			r.Ephemeral = rng.IntN(2) == 1
		case fAck:
			r.Ack = rng.IntN(2) == 1
		case fSpeed:
			r.Speed = rng.Float64() * 100
		case fAfterNs, fMissed:
			if rng.IntN(4) == 0 {
				*r.uintField(f) = randUint(rng)
			}
		default:
			*r.uintField(f) = randUint(rng)
		}
	}
	return r
}

// randUint returns values spread over every integer encoding size.
func randUint(rng *rand.Rand) uint64 {
	return rng.Uint64() >> rng.IntN(64)
}

// payloadOf strips the header of a single frame.
func payloadOf(t testing.TB, frame []byte) []byte {
	t.Helper()
	p, n, err := SplitFrame(frame, math.MaxInt32)
	require.NoError(t, err)
	require.Equal(t, len(frame), n)
	return p
}

// frame wraps a payload in a header.
func frame(payload []byte) []byte {
	b, start := beginFrame(nil)
	return endFrame(append(b, payload...), start)
}

// unhex decodes hex with spaces.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// requireSameRequest compares requests, with Speed compared bitwise (NaN).
func requireSameRequest(t testing.TB, want, got Request) {
	t.Helper()
	require.Equal(t, math.Float64bits(want.Speed), math.Float64bits(got.Speed), "speed")
	want.Speed, got.Speed = 0, 0
	require.Equal(t, want, got)
}
