package protocol

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, want := range sampleRequests {
		t.Run(want.Op.String(), func(t *testing.T) {
			b := AppendRequest([]byte("prefix"), &want)
			require.Equal(t, "prefix", string(b[:6]))
			p, n, err := SplitFrame(b[6:], DefaultMaxFrame)
			require.NoError(t, err)
			require.Equal(t, len(b)-6, n)
			var got Request
			require.NoError(t, DecodeRequest(p, &got))
			requireSameRequest(t, want, got)
			// Stable: re-encoding the decoded request gives the same bytes.
			require.Equal(t, b[6:], AppendRequest(nil, &got))
		})
	}
}

// TestRequestFromStockLibrary: requests built by a reflective msgpack library
// decode, whatever integer encodings it picks.
func TestRequestFromStockLibrary(t *testing.T) {
	tests := []struct {
		name string
		msg  []any
		want Request
	}{
		{"hello", []any{1, 1, 1, "game", "tok"}, Request{Op: OpHello, ID: 1, Version: 1, Name: "game", Token: "tok"}},
		{"hello name as bin", []any{1, 1, 1, []byte("game")}, Request{Op: OpHello, ID: 1, Version: 1, Name: "game"}},
		{"add all fields", []any{4, 7, 42, 11, 3, 0, 3, 4, []byte("hi"), true},
			Request{Op: OpAdd, ID: 7, Receiver: 42, Tid: 11, After: 3, Every: 3, Repeat: 4, Data: []byte("hi"), Replace: true}},
		{"add data as str", []any{4, 7, 42, 11, 3, nil, nil, nil, "hi"},
			Request{Op: OpAdd, ID: 7, Receiver: 42, Tid: 11, After: 3, Data: []byte("hi")}},
		{"add signed fixed-size ints", []any{int8(4), int16(7), int32(42), int64(11), int64(300), int8(0), int16(0), int32(5)},
			Request{Op: OpAdd, ID: 7, Receiver: 42, Tid: 11, After: 300, Repeat: 5}},
		{"add unsigned fixed-size ints", []any{uint8(4), uint16(7), uint32(42), uint64(11), uint64(math.MaxUint64)},
			Request{Op: OpAdd, ID: 7, Receiver: 42, Tid: 11, After: math.MaxUint64}},
		{"add max int64", []any{4, 7, int64(math.MaxInt64)}, Request{Op: OpAdd, ID: 7, Receiver: math.MaxInt64}},
		{"nil args are defaults", []any{4, 7, nil, nil, nil, nil, nil, nil, nil, nil},
			Request{Op: OpAdd, ID: 7}},
		{"bind ephemeral", []any{2, 1, 9, true}, Request{Op: OpBind, ID: 1, Receiver: 9, Ephemeral: true}},
		{"bind ephemeral nil", []any{2, 1, 9, nil}, Request{Op: OpBind, ID: 1, Receiver: 9}},
		{"extra elements ignored", []any{11, 3, "future", map[string]any{"x": []any{1, 2.5, nil}}, -7},
			Request{Op: OpPing, ID: 3}},
		{"set_speed float64", []any{23, 1, 0.5}, Request{Op: OpSetSpeed, ID: 1, Speed: 0.5}},
		{"set_speed float32", []any{23, 1, float32(0.25)}, Request{Op: OpSetSpeed, ID: 1, Speed: 0.25}},
		{"set_speed int", []any{23, 1, 3}, Request{Op: OpSetSpeed, ID: 1, Speed: 3}},
		{"set_speed negative int", []any{23, 1, int16(-300)}, Request{Op: OpSetSpeed, ID: 1, Speed: -300}},
		{"set_speed uint64", []any{23, 1, uint64(1 << 40)}, Request{Op: OpSetSpeed, ID: 1, Speed: 1 << 40}},
		{"fast_forward", []any{20, 1, uint32(86400)}, Request{Op: OpFastForward, ID: 1, Ticks: 86400}},
		{"list before paging", []any{7, 1, 42}, Request{Op: OpList, ID: 1, Receiver: 42}},
		{"list page", []any{7, 1, 42, uint64(math.MaxUint64), int16(300)}, Request{Op: OpList, ID: 1, Receiver: 42, FromTid: math.MaxUint64, Limit: 300}},
		{"list nil cursor", []any{7, 1, 42, nil, 5}, Request{Op: OpList, ID: 1, Receiver: 42, Limit: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := msgpack.Marshal(tt.msg)
			require.NoError(t, err)
			var got Request
			require.NoError(t, DecodeRequest(p, &got))
			requireSameRequest(t, tt.want, got)
		})
	}
}

// TestRequestToStockLibrary: AppendRequest's payload reads back with a
// reflective library as the documented positional array.
func TestRequestToStockLibrary(t *testing.T) {
	r := Request{Op: OpAdd, ID: 7, Receiver: 42, Tid: 11, After: 3, Repeat: 4, Data: []byte("hi"), Replace: true}
	var v []any
	require.NoError(t, msgpack.Unmarshal(payloadOf(t, AppendRequest(nil, &r)), &v))
	require.Len(t, v, 10)
	var got struct {
		_msgpack                                        struct{} `msgpack:",as_array"`
		Op, ID, Receiver, Tid, After, At, Every, Repeat uint64
		Data                                            []byte
		Replace                                         bool
	}
	require.NoError(t, msgpack.Unmarshal(payloadOf(t, AppendRequest(nil, &r)), &got))
	assert.Equal(t, uint64(4), got.Op)
	assert.Equal(t, uint64(42), got.Receiver)
	assert.Equal(t, uint64(4), got.Repeat)
	assert.Equal(t, []byte("hi"), got.Data)
	assert.True(t, got.Replace)

	h := Request{Op: OpHello, ID: 1, Version: 1, Name: "n", Token: "t"}
	var hv []any
	require.NoError(t, msgpack.Unmarshal(payloadOf(t, AppendRequest(nil, &h)), &hv))
	assert.Equal(t, []any{int8(1), int8(1), int8(1), "n", "t"}, hv)
}

func TestRequestOmittedArgs(t *testing.T) {
	var r Request
	// The signed-int ping quoted in docs/PROTOCOL.md.
	p, _, err := SplitFrame(unhex(t, "00 00 00 05 92 d0 0b d0 0c"), 0)
	require.NoError(t, err)
	require.NoError(t, DecodeRequest(p, &r))
	assert.Equal(t, Request{Op: OpPing, ID: 12}, r)
	require.NoError(t, DecodeRequest([]byte{0x93, 0x04, 0x07, 0x2a}, &r))
	assert.Equal(t, Request{Op: OpAdd, ID: 7, Receiver: 42}, r)
	// r is reset by the next decode.
	require.NoError(t, DecodeRequest([]byte{0x92, 0x0b, 0x01}, &r))
	assert.Equal(t, Request{Op: OpPing, ID: 1}, r)
	// empty data is nil
	require.NoError(t, DecodeRequest([]byte{0x99, 0x04, 0x07, 0x2a, 1, 1, 0, 0, 0, 0xc4, 0x00}, &r))
	assert.Nil(t, r.Data)
	require.NoError(t, DecodeRequest([]byte{0x99, 0x04, 0x07, 0x2a, 1, 1, 0, 0, 0, 0xa0}, &r))
	assert.Nil(t, r.Data)
}

func TestRequestDataAliasesPayload(t *testing.T) {
	r := Request{Op: OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 1, Data: []byte("abc")}
	p := payloadOf(t, AppendRequest(nil, &r))
	var got Request
	require.NoError(t, DecodeRequest(p, &got))
	require.Equal(t, 3, cap(got.Data), "capped so appends cannot clobber the payload")
	p[bytes.Index(p, []byte("abc"))] = 'X'
	assert.Equal(t, "Xbc", string(got.Data))
}

func TestRequestSpecialSpeeds(t *testing.T) {
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 0, math.Copysign(0, -1), math.MaxFloat64} {
		r := Request{Op: OpSetSpeed, ID: 1, Speed: s}
		var got Request
		require.NoError(t, DecodeRequest(payloadOf(t, AppendRequest(nil, &r)), &got))
		assert.Equal(t, math.Float64bits(s), math.Float64bits(got.Speed))
	}
	// float32 NaN and Inf too.
	var got Request
	require.NoError(t, DecodeRequest(unhex(t, "93 17 01 ca 7f c0 00 00"), &got))
	assert.True(t, math.IsNaN(got.Speed))
	require.NoError(t, DecodeRequest(unhex(t, "93 17 01 ca ff 80 00 00"), &got))
	assert.True(t, math.IsInf(got.Speed, -1))
}

func nested(depth int) string {
	return strings.Repeat("91 ", depth) + "90"
}

// malformedRequests is the table of bad request payloads (hex).
var malformedRequests = []struct {
	name    string
	hex     string
	want    error  // ErrMalformed or ErrUnknownOp
	id      uint64 // r.ID after the error
	op      Op     // r.Op after the error, for unknown ops
	message string // substring of the error text
}{
	{"empty payload", "", ErrMalformed, 0, 0, "malformed message: truncated"},
	{"not an array: int", "01", ErrMalformed, 0, 0, "message: wrong type, want an array"},
	{"not an array: map", "81 01 02", ErrMalformed, 0, 0, "want an array"},
	{"not an array: str", "a3 61 64 64", ErrMalformed, 0, 0, "want an array"},
	{"empty array", "90", ErrMalformed, 0, 0, "array too short"},
	{"array too short", "91 0b", ErrMalformed, 0, 0, "array too short"},
	{"array16 truncated header", "dc 00", ErrMalformed, 0, 0, "truncated"},
	{"array longer than payload", "93 0b 01", ErrMalformed, 0, 0, "declared length"},
	{"array32 4 GB in small frame", "dd ff ff ff ff 0b 01 00 00 00 00 00 00 00 00 00 00 00 00 00", ErrMalformed, 0, 0, "declared length"},
	{"array16 longer than payload", "dc ff ff 0b 01", ErrMalformed, 0, 0, "declared length"},
	{"op negative fixint", "92 ff 01", ErrMalformed, 0, 0, "op: negative"},
	{"op negative int8", "92 d0 fe 01", ErrMalformed, 0, 0, "op: negative"},
	{"op str", "92 a1 78 01", ErrMalformed, 0, 0, "op: wrong type"},
	{"op nil", "92 c0 01", ErrMalformed, 0, 0, "op: wrong type"},
	{"op float", "92 cb 3f f0 00 00 00 00 00 00 01", ErrMalformed, 0, 0, "op: wrong type"},
	{"id nil", "92 0b c0", ErrMalformed, 0, 11, "id: wrong type"},
	{"id negative int64", "92 0b d3 ff ff ff ff ff ff ff ff", ErrMalformed, 0, 11, "id: negative"},
	{"id truncated uint64", "92 0b cf 00 00 01", ErrMalformed, 0, 11, "id: truncated"},
	{"uint field str", "94 05 07 a1 78 01", ErrMalformed, 7, 5, "cancel: receiver: wrong type"},
	{"uint field negative fixint", "94 05 07 01 e0", ErrMalformed, 7, 5, "cancel: tid: negative"},
	{"uint field negative int16", "93 05 07 d1 80 00", ErrMalformed, 7, 5, "cancel: receiver: negative"},
	{"uint field negative int32", "93 05 07 d2 ff ff ff ff", ErrMalformed, 7, 5, "cancel: receiver: negative"},
	{"uint field float", "95 04 07 01 01 ca 3f 80 00 00", ErrMalformed, 7, 4, "add: after: wrong type"},
	{"uint field bool", "95 04 07 01 01 c3", ErrMalformed, 7, 4, "add: after: wrong type"},
	{"uint field truncated", "93 05 07 ce 00", ErrMalformed, 7, 5, "cancel: receiver: truncated"},
	{"repeat array", "98 04 07 01 01 01 00 00 90", ErrMalformed, 7, 4, "add: repeat: wrong type"},
	{"version str", "93 01 01 a1 31", ErrMalformed, 1, 1, "hello: version: wrong type"},
	{"fast_forward ticks negative", "93 14 01 ff", ErrMalformed, 1, 20, "fast_forward: ticks: negative"},
	{"list from_tid str", "94 07 01 2a a1 31", ErrMalformed, 1, 7, "list: from_tid: wrong type"},
	{"list limit negative", "95 07 01 2a 00 ff", ErrMalformed, 1, 7, "list: limit: negative"},
	{"bool field int", "94 02 07 01 01", ErrMalformed, 7, 2, "bind: ephemeral: wrong type"},
	{"bool field str", "94 02 07 01 a4 74 72 75 65", ErrMalformed, 7, 2, "bind: ephemeral: wrong type"},
	{"replace int", "9a 04 07 01 01 01 00 00 00 c0 01", ErrMalformed, 7, 4, "add: replace: wrong type"},
	{"data int", "99 04 07 01 01 01 00 00 00 05", ErrMalformed, 7, 4, "add: data: wrong type"},
	{"data array", "99 04 07 01 01 01 00 00 00 90", ErrMalformed, 7, 4, "add: data: wrong type"},
	{"data bin8 truncated", "99 04 07 01 01 01 00 00 00 c4", ErrMalformed, 7, 4, "add: data: truncated"},
	{"data bin8 too long", "99 04 07 01 01 01 00 00 00 c4 05 00", ErrMalformed, 7, 4, "add: data: declared length"},
	{"data bin32 4 GB", "99 04 07 01 01 01 00 00 00 c6 ff ff ff ff 00 00 00", ErrMalformed, 7, 4, "add: data: declared length"},
	{"data str32 4 GB", "99 04 07 01 01 01 00 00 00 db ff ff ff ff 00 00 00", ErrMalformed, 7, 4, "add: data: declared length"},
	{"name str32 4 GB", "94 01 01 01 db ff ff ff ff 00 00 00 00 00 00 00 00 00 00", ErrMalformed, 1, 1, "hello: name: declared length"},
	{"name int", "94 01 01 01 05", ErrMalformed, 1, 1, "hello: name: wrong type"},
	{"token fixstr too long", "95 01 01 01 c0 a5 61", ErrMalformed, 1, 1, "hello: token: declared length"},
	{"speed str", "93 17 01 a1 31", ErrMalformed, 1, 23, "set_speed: speed: wrong type"},
	{"speed truncated float64", "93 17 01 cb 3f f0", ErrMalformed, 1, 23, "set_speed: speed: truncated"},
	{"speed bool", "93 17 01 c3", ErrMalformed, 1, 23, "set_speed: speed: wrong type"},
	{"trailing garbage", "92 0b 01 00", ErrMalformed, 1, 11, "trailing bytes"},
	{"two messages in one frame", "92 0b 01 92 0b 02", ErrMalformed, 1, 11, "trailing bytes"},
	{"map32 4 GB in ignored element", "93 0b 01 df ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00", ErrMalformed, 1, 11, "ping: ignored trailing element: declared length"},
	{"array32 4 GB in ignored element", "93 0b 01 dd ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00", ErrMalformed, 1, 11, "declared length"},
	{"bin32 4 GB in ignored element", "93 0b 01 c6 ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00", ErrMalformed, 1, 11, "declared length"},
	{"ext32 4 GB in ignored element", "93 0b 01 c9 ff ff ff ff 01 00 00 00 00 00 00 00 00 00 00", ErrMalformed, 1, 11, "declared length"},
	{"ignored element truncated", "93 0b 01 cd 00", ErrMalformed, 1, 11, "truncated"},
	{"ignored element 0xc1", "93 0b 01 c1", ErrMalformed, 1, 11, "invalid byte 0xc1"},
	{"ignored element nested too deep", "93 0b 01 " + nested(40), ErrMalformed, 1, 11, "nested deeper than 32"},
	{"ignored map nested too deep", "93 0b 01 " + strings.Repeat("81 c0 ", 33) + "c0", ErrMalformed, 1, 11, "nested deeper than 32"},
	{"unknown op", "92 12 07", ErrUnknownOp, 7, 18, "unknown op: 18"},
	{"unknown op 0", "92 00 07", ErrUnknownOp, 7, 0, "unknown op: 0"},
	{"unknown op 255 with args", "94 cc ff 07 a1 78 90", ErrUnknownOp, 7, 255, "unknown op: 255"},
	{"unknown op uint16", "92 cd 01 00 07", ErrUnknownOp, 7, 0, "unknown op: op > 255"},
	{"unknown op, signed encoding", "92 d1 00 13 07", ErrUnknownOp, 7, 19, "unknown op: 19"},
	{"unknown op, bad trailing element", "93 12 07 dc", ErrMalformed, 7, 18, "truncated"},
	{"unknown op, trailing bytes", "92 12 07 00", ErrMalformed, 7, 18, "trailing bytes"},
}

func TestDecodeRequestMalformed(t *testing.T) {
	for _, tt := range malformedRequests {
		t.Run(tt.name, func(t *testing.T) {
			p := unhex(t, tt.hex)
			r := Request{Receiver: 99, Name: "stale"}
			err := DecodeRequest(p, &r)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
			if tt.want == ErrMalformed {
				assert.False(t, errors.Is(err, ErrUnknownOp))
			}
			assert.Contains(t, err.Error(), tt.message)
			assert.True(t, strings.HasPrefix(err.Error(), tt.want.Error()+": "), err.Error())
			assert.Equal(t, tt.id, r.ID, "id")
			assert.Equal(t, tt.op, r.Op, "op")
			if !raceEnabled {
				allocs := testing.AllocsPerRun(100, func() { _ = DecodeRequest(p, &r) })
				assert.Zero(t, allocs, "a bad request must not allocate")
			}
		})
	}
}

// TestDecodeRequestNesting: ignored elements may nest up to 32 levels.
func TestDecodeRequestNesting(t *testing.T) {
	var r Request
	// The request array is level 0; nested(31) adds levels 1..32, the
	// innermost empty.
	require.NoError(t, DecodeRequest(unhex(t, "93 0b 01 "+nested(31)), &r))
	require.ErrorIs(t, DecodeRequest(unhex(t, "93 0b 01 "+nested(32)), &r), ErrMalformed)
	// ext, float and every other type are skipped fine.
	require.NoError(t, DecodeRequest(unhex(t, "9c 0b 01 d4 01 00 c7 02 05 00 00 ca 00 00 00 00 cb 00 00 00 00 00 00 00 00 c2 c3 80 a0 c4 00 d8 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"), &r))
}

func TestDecodeRequestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, want := range sampleRequests {
		if want.Op == OpHello {
			continue // strings are allocated
		}
		p := payloadOf(t, AppendRequest(nil, &want))
		var r Request
		allocs := testing.AllocsPerRun(100, func() {
			if err := DecodeRequest(p, &r); err != nil {
				panic(err)
			}
		})
		assert.Zero(t, allocs, want.Op.String())
	}
	// A hello allocates only its two strings.
	p := payloadOf(t, AppendRequest(nil, &sampleRequests[0]))
	var r Request
	assert.Equal(t, 2.0, testing.AllocsPerRun(100, func() { _ = DecodeRequest(p, &r) }))
}

func TestAppendRequestUndefinedOp(t *testing.T) {
	b := AppendRequest(nil, &Request{Op: 18, ID: 7, Receiver: 5})
	assert.Equal(t, unhex(t, "00 00 00 03 92 12 07"), b)
}

func TestOpCodeKindStrings(t *testing.T) {
	assert.Equal(t, "fast_forward", OpFastForward.String())
	assert.Equal(t, "cancel_all", OpCancelAll.String())
	assert.Equal(t, "op(18)", Op(18).String())
	assert.Equal(t, "op(0)", Op(0).String())
	assert.True(t, OpStats.Admin())
	assert.False(t, OpPing.Admin())
	assert.True(t, OpAdd.Valid())
	assert.False(t, Op(19).Valid())
	names := map[string]bool{}
	for c := CodeMalformed; c <= CodeTimeout; c++ {
		s := c.String()
		assert.NotContains(t, s, "code(")
		assert.False(t, names[s])
		names[s] = true
	}
	assert.Equal(t, "limit_exceeded", CodeLimitExceeded.String())
	assert.Equal(t, "code(0)", Code(0).String())
	assert.Equal(t, "takeover", KindTakeover.String())
	assert.Equal(t, "kind(9)", Kind(9).String())
}

// An add encodes the arguments added after version 1 only up to the last
// one set, so an add that uses none of them keeps its old bytes, and each
// round-trips.
func TestAddLaterArgsOnlyWhenSet(t *testing.T) {
	base := Request{Op: OpAdd, ID: 1, Receiver: 2, Tid: 3, After: 4}
	cases := []struct {
		name string
		mod  func(*Request)
		args int
	}{
		{"none", func(*Request) {}, 8},
		{"after_ns", func(r *Request) { r.AfterNs = 1_500_000 }, 9},
		{"schedule", func(r *Request) { r.Schedule = "@daily" }, 10},
		{"zone", func(r *Request) { r.Zone = "Europe/Paris" }, 11},
		{"missed", func(r *Request) { r.Missed = MissedSkip }, 12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.mod(&r)
			p := payloadOf(t, AppendRequest(nil, &r))
			rd := reader{b: p}
			n, st := rd.arrayLen()
			require.Equal(t, pOK, st)
			require.Equal(t, 2+tc.args, int(n))
			var got Request
			require.NoError(t, DecodeRequest(p, &got))
			requireSameRequest(t, r, got)
		})
	}
}
