package protocol

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

var (
	sampleHello = Hello{Session: 3, Now: 1000, TickNs: 10_000_000, ServerVersion: "tickwheel 0.1.0",
		Limits: Limits{MaxFrame: DefaultMaxFrame, MaxData: 4096, MaxTimersPerReceiver: 10_000, MaxTimers: 10_000_000,
			MaxReceiversPerSession: 100_000, MaxBacklog: 1024, MaxOutbound: 8 << 20}}
	sampleTimer = Timer{Receiver: 42, Tid: 11, Due: 1003, Remaining: 3, Every: 3, Fired: 1, Repeat: 4, Paused: true, Data: []byte("hi")}
	sampleStats = Stats{Now: 1000, Target: 1002, Lag: 2, Timers: 5, Sessions: 2, Connections: 3, Receivers: 4,
		BacklogEvents: 6, FiredTotal: 1 << 40, DroppedTotal: 7, TickNs: 10_000_000, Speed: 1.5, Frozen: true}
	sampleFire = Fire{Receiver: 42, Tid: 11, Tick: 1003, Fired: 1, Repeat: 4, Data: []byte("hi"), Seq: 1}
)

func decodeMsg(t *testing.T, frame []byte) Message {
	t.Helper()
	var m Message
	require.NoError(t, DecodeMessage(payloadOf(t, frame), &m))
	return m
}

func TestServerMessagesRoundTrip(t *testing.T) {
	t.Run("ok uints", func(t *testing.T) {
		for _, vals := range [][]uint64{nil, {0}, {1, math.MaxUint64}, {5, 6, 7}} {
			m := decodeMsg(t, AppendOK(nil, 9, vals...))
			assert.Equal(t, KindOK, m.Kind)
			assert.Equal(t, uint64(9), m.ID)
			got, err := DecodeUints(m.Result, nil)
			require.NoError(t, err)
			assert.Equal(t, len(vals), len(got))
			if len(vals) > 0 {
				assert.Equal(t, vals, got)
			}
		}
	})
	t.Run("ok many uints", func(t *testing.T) {
		vals := make([]uint64, 70000)
		for i := range vals {
			vals[i] = uint64(i) * 977
		}
		m := decodeMsg(t, AppendOK(nil, 1, vals...))
		got, err := DecodeUints(m.Result, []uint64{99})
		require.NoError(t, err)
		assert.Equal(t, append([]uint64{99}, vals...), got)
	})
	t.Run("hello", func(t *testing.T) {
		m := decodeMsg(t, AppendHelloOK(nil, 1, &sampleHello))
		var h Hello
		require.NoError(t, DecodeHello(m.Result, &h))
		assert.Equal(t, sampleHello, h)
	})
	t.Run("get", func(t *testing.T) {
		m := decodeMsg(t, AppendTimerOK(nil, 6, &sampleTimer))
		var tm Timer
		require.NoError(t, DecodeTimer(m.Result, &tm))
		assert.Equal(t, sampleTimer, tm)
	})
	t.Run("list", func(t *testing.T) {
		ts := []Timer{sampleTimer, {Receiver: 42, Tid: 12, Due: math.MaxUint64, Every: 1 << 33},
			{Receiver: 42, Tid: 13, Due: 99, Schedule: "0 4 * * *", Zone: "Europe/Paris", Missed: MissedOnce},
			{Receiver: 42, Tid: 14, Missed: MissedSkip}}
		for i := range 20 {
			ts = append(ts, Timer{Receiver: 42, Tid: uint64(100 + i), Due: uint64(i)})
		}
		for _, next := range []uint64{0, 7, 1 << 40, math.MaxUint64} {
			m := decodeMsg(t, AppendListOK(nil, 7, ts, next))
			got, gotNext, err := DecodeListPage(m.Result, nil)
			require.NoError(t, err)
			assert.Equal(t, ts, got)
			assert.Equal(t, next, gotNext)
			got, err = DecodeList(m.Result, nil)
			require.NoError(t, err)
			assert.Equal(t, ts, got)
		}
		m := decodeMsg(t, AppendListOK(nil, 7, nil, 0))
		got, next, err := DecodeListPage(m.Result, nil)
		require.NoError(t, err)
		assert.Empty(t, got)
		assert.Zero(t, next)
		// A server from before paging sends [[timer, ...]]: next reads as 0.
		// A later one may add elements after next: they are skipped.
		got, next, err = DecodeListPage(unhex(t, "91 91 99 2a 07 00 00 00 00 00 c2 c0"), nil)
		require.NoError(t, err)
		assert.Equal(t, []Timer{{Receiver: 42, Tid: 7}}, got)
		assert.Zero(t, next)
		got, next, err = DecodeListPage(unhex(t, "93 90 05 a1 78"), nil)
		require.NoError(t, err)
		assert.Empty(t, got)
		assert.Equal(t, uint64(5), next)
	})
	t.Run("stats", func(t *testing.T) {
		m := decodeMsg(t, AppendStatsOK(nil, 16, &sampleStats))
		var s Stats
		require.NoError(t, DecodeStats(m.Result, &s))
		assert.Equal(t, sampleStats, s)
	})
	t.Run("error", func(t *testing.T) {
		m := decodeMsg(t, AppendError(nil, 4, CodeLimitExceeded, "limit max_timers_per_receiver (10000) reached"))
		assert.Equal(t, Message{Kind: KindError, ID: 4, Code: CodeLimitExceeded, Text: "limit max_timers_per_receiver (10000) reached"}, m)
	})
	t.Run("fire", func(t *testing.T) {
		for _, f := range []Fire{sampleFire, {Receiver: math.MaxUint64, Tid: 1, Tick: 2, Fired: 3, Last: true, Seq: 1 << 50}, {Data: make([]byte, 70000)}} {
			m := decodeMsg(t, AppendFire(nil, &f))
			assert.Equal(t, Message{Kind: KindFire, Fire: f}, m)
		}
	})
	t.Run("takeover", func(t *testing.T) {
		m := decodeMsg(t, AppendTakeover(nil, 42, 7))
		assert.Equal(t, Message{Kind: KindTakeover, Receiver: 42, Session: 7}, m)
	})
	t.Run("empty data is nil", func(t *testing.T) {
		f := Fire{Receiver: 1, Data: []byte{}}
		m := decodeMsg(t, AppendFire(nil, &f))
		assert.Nil(t, m.Fire.Data)
	})
}

// TestServerMessagesToStockLibrary: every server message decodes with a
// reflective msgpack library into the documented shape.
func TestServerMessagesToStockLibrary(t *testing.T) {
	unmarshal := func(frame []byte, v any) {
		t.Helper()
		require.NoError(t, msgpack.Unmarshal(payloadOf(t, frame), v))
	}
	type timerT struct {
		_msgpack                                            struct{} `msgpack:",as_array"`
		Receiver, Tid, Due, Remaining, Every, Fired, Repeat uint64
		Paused                                              bool
		Data                                                []byte
	}
	t.Run("ok", func(t *testing.T) {
		var v struct {
			_msgpack struct{} `msgpack:",as_array"`
			Kind, ID uint64
			Result   []uint64
		}
		unmarshal(AppendOK(nil, 300, 1, 2, math.MaxUint64), &v)
		assert.Equal(t, uint64(0), v.Kind)
		assert.Equal(t, uint64(300), v.ID)
		assert.Equal(t, []uint64{1, 2, math.MaxUint64}, v.Result)
		var e []any
		unmarshal(AppendOK(nil, 1), &e)
		assert.Equal(t, []any{int8(0), int8(1), []any{}}, e)
	})
	t.Run("hello", func(t *testing.T) {
		var v struct {
			_msgpack struct{} `msgpack:",as_array"`
			Kind, ID uint64
			Result   struct {
				_msgpack             struct{} `msgpack:",as_array"`
				Session, Now, TickNs uint64
				ServerVersion        string
				Limits               map[string]uint64
			}
		}
		unmarshal(AppendHelloOK(nil, 1, &sampleHello), &v)
		assert.Equal(t, uint64(3), v.Result.Session)
		assert.Equal(t, "tickwheel 0.1.0", v.Result.ServerVersion)
		assert.Equal(t, map[string]uint64{"max_frame": 65536, "max_data": 4096, "max_timers_per_receiver": 10000,
			"max_timers": 10_000_000, "max_receivers_per_session": 100_000, "max_backlog": 1024, "max_outbound": 8 << 20}, v.Result.Limits)
	})
	t.Run("get and list", func(t *testing.T) {
		var g struct {
			_msgpack struct{} `msgpack:",as_array"`
			Kind, ID uint64
			Result   []timerT
		}
		unmarshal(AppendTimerOK(nil, 6, &sampleTimer), &g)
		require.Len(t, g.Result, 1)
		assert.Equal(t, timerT{Receiver: 42, Tid: 11, Due: 1003, Remaining: 3, Every: 3, Fired: 1, Repeat: 4, Paused: true, Data: []byte("hi")}, g.Result[0])
		var l struct {
			_msgpack struct{} `msgpack:",as_array"`
			Kind, ID uint64
			Result   struct {
				_msgpack struct{} `msgpack:",as_array"`
				Timers   []timerT
				Next     uint64
			}
		}
		unmarshal(AppendListOK(nil, 7, []Timer{sampleTimer, {Tid: 2}}, 3), &l)
		require.Len(t, l.Result.Timers, 2)
		assert.Equal(t, uint64(2), l.Result.Timers[1].Tid)
		assert.Nil(t, l.Result.Timers[1].Data)
		assert.Equal(t, uint64(3), l.Result.Next)
	})
	t.Run("stats", func(t *testing.T) {
		var v struct {
			_msgpack struct{} `msgpack:",as_array"`
			Kind, ID uint64
			Result   []map[string]any
		}
		unmarshal(AppendStatsOK(nil, 16, &sampleStats), &v)
		require.Len(t, v.Result, 1)
		s := v.Result[0]
		assert.Len(t, s, 17)
		assert.EqualValues(t, 1000, s["now"])
		assert.EqualValues(t, uint64(1<<40), s["fired_total"])
		assert.Equal(t, 1.5, s["speed"])
		assert.Equal(t, true, s["frozen"])
	})
	t.Run("error", func(t *testing.T) {
		var v struct {
			_msgpack struct{} `msgpack:",as_array"`
			Kind, ID uint64
			Code     uint16
			Message  string
		}
		unmarshal(AppendError(nil, 4, CodeNotFound, "no such timer"), &v)
		assert.Equal(t, uint64(1), v.Kind)
		assert.Equal(t, uint16(5), v.Code)
		assert.Equal(t, "no such timer", v.Message)
	})
	t.Run("fire", func(t *testing.T) {
		var v struct {
			_msgpack                                 struct{} `msgpack:",as_array"`
			Kind, Receiver, Tid, Tick, Fired, Repeat uint64
			Last                                     bool
			Data                                     []byte
			Seq, Late                                uint64
		}
		f := sampleFire
		f.Last = true
		unmarshal(AppendFire(nil, &f), &v)
		assert.Equal(t, uint64(2), v.Kind)
		assert.Equal(t, uint64(42), v.Receiver)
		assert.Equal(t, uint64(1003), v.Tick)
		assert.True(t, v.Last)
		assert.Equal(t, []byte("hi"), v.Data)
		assert.Equal(t, uint64(1), v.Seq)
	})
	t.Run("takeover", func(t *testing.T) {
		var v []uint64
		unmarshal(AppendTakeover(nil, 42, 7), &v)
		assert.Equal(t, []uint64{3, 42, 7}, v)
	})
}

// TestDecodeMessageFromStockLibrary: messages a reflective library encodes
// (signed integers, str data, extra elements, extra map keys) decode.
func TestDecodeMessageFromStockLibrary(t *testing.T) {
	p, err := msgpack.Marshal([]any{int64(2), int32(42), int16(11), uint64(1003), 1, 4, true, "hi", int8(1), int8(3), "future"})
	require.NoError(t, err)
	var m Message
	require.NoError(t, DecodeMessage(p, &m))
	assert.Equal(t, Fire{Receiver: 42, Tid: 11, Tick: 1003, Fired: 1, Repeat: 4, Last: true, Data: []byte("hi"), Seq: 1, Late: 3}, m.Fire)

	p, err = msgpack.Marshal([]any{0, 1, []any{map[string]any{"now": 5, "speed": 2, "frozen": nil, "new_key": []any{1, 2}, "lag": int64(3)}}})
	require.NoError(t, err)
	require.NoError(t, DecodeMessage(p, &m))
	var s Stats
	require.NoError(t, DecodeStats(m.Result, &s))
	assert.Equal(t, Stats{Now: 5, Speed: 2, Lag: 3}, s)

	p, err = msgpack.Marshal([]any{0, 1, []any{1, 2, 3, "v", map[any]any{"max_frame": 100, 7: "x", "other": 1.5}, "extra"}})
	require.NoError(t, err)
	require.NoError(t, DecodeMessage(p, &m))
	var h Hello
	require.NoError(t, DecodeHello(m.Result, &h))
	assert.Equal(t, Hello{Session: 1, Now: 2, TickNs: 3, ServerVersion: "v", Limits: Limits{MaxFrame: 100}}, h)
}

func TestDecodeMessageUnknownKind(t *testing.T) {
	var m Message
	require.NoError(t, DecodeMessage(unhex(t, "93 07 01 90"), &m))
	assert.Equal(t, Message{Kind: 7}, m)
	require.ErrorIs(t, DecodeMessage(unhex(t, "93 07 01"), &m), ErrMalformed)
	require.ErrorIs(t, DecodeMessage(unhex(t, "91 cd 01 00"), &m), ErrMalformed)
}

var malformedMessages = []struct{ name, hex, message string }{
	{"empty", "", "truncated"},
	{"not an array", "00", "want an array"},
	{"empty array", "90", "too short"},
	{"kind negative", "91 ff", "kind: negative"},
	{"ok too short", "92 00 01", "too short"},
	{"ok result not an array", "93 00 01 05", "result: wrong type"},
	{"ok result array32 4 GB", "93 00 01 dd ff ff ff ff 00 00 00 00 00 00 00 00", "result: declared length"},
	{"ok id negative", "93 00 ff 90", "id: negative"},
	{"error code too big", "94 01 01 ce 00 01 00 00 a0", "code: out of range"},
	{"error message str32 4 GB", "94 01 01 01 db ff ff ff ff 00 00", "message: declared length"},
	{"error message int", "94 01 01 01 01", "message: wrong type"},
	{"fire too short", "98 02 01 01 01 01 01 c2 c0", "too short"},
	{"fire data bin32 4 GB", "99 02 01 01 01 01 01 c2 c6 ff ff ff ff 01 00 00", "data: declared length"},
	{"fire last int", "99 02 01 01 01 01 01 01 c0 01", "last: wrong type"},
	{"fire seq truncated", "99 02 01 01 01 01 01 c2 c0 cf 00", "seq: truncated"},
	{"takeover session str", "93 03 01 a1 31", "session: wrong type"},
	{"trailing bytes", "93 03 01 01 00", "trailing bytes"},
	{"deep ignored element", "94 03 01 01 " + nested(40), "nested deeper"},
	{"map32 4 GB in ignored element", "94 03 01 01 df ff ff ff ff 00 00 00 00", "declared length"},
}

func TestDecodeMessageMalformed(t *testing.T) {
	for _, tt := range malformedMessages {
		t.Run(tt.name, func(t *testing.T) {
			var m Message
			err := DecodeMessage(unhex(t, tt.hex), &m)
			require.ErrorIs(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), tt.message)
		})
	}
}

func TestDecodeResultsMalformed(t *testing.T) {
	tests := []struct {
		name, hex string
		decode    func([]byte) error
	}{
		{"uints not an array", "05", func(b []byte) error { _, err := DecodeUints(b, nil); return err }},
		{"uints str element", "91 a1 31", func(b []byte) error { _, err := DecodeUints(b, nil); return err }},
		{"uints array32 4 GB", "dd ff ff ff ff 00 00", func(b []byte) error { _, err := DecodeUints(b, nil); return err }},
		{"uints trailing", "91 01 01", func(b []byte) error { _, err := DecodeUints(b, nil); return err }},
		{"hello too short", "94 01 01 01 a0", func(b []byte) error { return DecodeHello(b, &Hello{}) }},
		{"hello limits not a map", "95 01 01 01 a0 90", func(b []byte) error { return DecodeHello(b, &Hello{}) }},
		{"hello limits map32 4 GB", "95 01 01 01 a0 df ff ff ff ff 00 00", func(b []byte) error { return DecodeHello(b, &Hello{}) }},
		{"hello limit value str", "95 01 01 01 a0 81 a9 6d 61 78 5f 66 72 61 6d 65 a0", func(b []byte) error { return DecodeHello(b, &Hello{}) }},
		{"timer too short", "91 98 01 01 01 01 01 01 01 c2", func(b []byte) error { return DecodeTimer(b, &Timer{}) }},
		{"timer empty result", "90", func(b []byte) error { return DecodeTimer(b, &Timer{}) }},
		{"list element not a timer", "91 91 01", func(b []byte) error { _, err := DecodeList(b, nil); return err }},
		{"list array32 4 GB", "91 dd ff ff ff ff 00", func(b []byte) error { _, err := DecodeList(b, nil); return err }},
		{"list next str", "92 90 a1 31", func(b []byte) error { _, _, err := DecodeListPage(b, nil); return err }},
		{"list next negative", "92 90 ff", func(b []byte) error { _, _, err := DecodeListPage(b, nil); return err }},
		{"list empty result", "90", func(b []byte) error { _, _, err := DecodeListPage(b, nil); return err }},
		{"stats speed str", "91 81 a5 73 70 65 65 64 a0", func(b []byte) error { return DecodeStats(b, &Stats{}) }},
		{"stats frozen int", "91 81 a6 66 72 6f 7a 65 6e 01", func(b []byte) error { return DecodeStats(b, &Stats{}) }},
		{"stats key 0xc1", "91 81 c1 00", func(b []byte) error { return DecodeStats(b, &Stats{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.decode(unhex(t, tt.hex)), ErrMalformed)
		})
	}
}

func TestServerAppendersZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	buf := make([]byte, 0, 1<<16)
	ts := []Timer{sampleTimer, sampleTimer}
	for name, fn := range map[string]func(){
		"AppendFire":     func() { buf = AppendFire(buf[:0], &sampleFire) },
		"AppendOK()":     func() { buf = AppendOK(buf[:0], 1) },
		"AppendOK(1)":    func() { buf = AppendOK(buf[:0], 1, 5) },
		"AppendOK(2)":    func() { buf = AppendOK(buf[:0], 1, 5, 1<<40) },
		"AppendHelloOK":  func() { buf = AppendHelloOK(buf[:0], 1, &sampleHello) },
		"AppendTimerOK":  func() { buf = AppendTimerOK(buf[:0], 1, &sampleTimer) },
		"AppendListOK":   func() { buf = AppendListOK(buf[:0], 1, ts, 1<<40) },
		"AppendStatsOK":  func() { buf = AppendStatsOK(buf[:0], 1, &sampleStats) },
		"AppendError":    func() { buf = AppendError(buf[:0], 1, CodeNotFound, "no such timer") },
		"AppendTakeover": func() { buf = AppendTakeover(buf[:0], 1, 2) },
		"AppendRequest":  func() { buf = AppendRequest(buf[:0], &sampleRequests[3]) },
	} {
		assert.Zero(t, testing.AllocsPerRun(100, fn), name)
	}
	var m Message
	p := payloadOf(t, AppendFire(nil, &sampleFire))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = DecodeMessage(p, &m) }), "DecodeMessage(fire)")
}

// TestListReplySize: TimerSize is exact, and a list reply is at most
// ListReplyOverhead plus its timers' sizes, reached with the largest id,
// next and timer count encodings.
func TestListReplySize(t *testing.T) {
	timers := []Timer{
		{},
		sampleTimer,
		{Receiver: math.MaxUint64, Tid: math.MaxUint64, Due: math.MaxUint64, Remaining: math.MaxUint64, Every: math.MaxUint64,
			Fired: math.MaxUint64, Repeat: math.MaxUint32, Paused: true, Data: make([]byte, 70000)},
		{Tid: 200, Due: 300, Remaining: 70000, Data: make([]byte, 255)},
		{Tid: 1 << 33, Data: make([]byte, 256)},
		{Tid: 5, Schedule: "*/15 * * * *", Zone: "America/New_York"},
		{Tid: 6, Schedule: string(make([]byte, 40)), Missed: MissedSkip},
	}
	for _, tm := range timers {
		assert.Equal(t, len(appendTimer(nil, &tm)), TimerSize(&tm), "%+v", tm.Tid)
	}
	sum := func(ts []Timer) int {
		n := 0
		for i := range ts {
			n += TimerSize(&ts[i])
		}
		return n
	}
	assert.Equal(t, ListReplyOverhead-8-8-4+sum(timers[:1]), len(AppendListOK(nil, 1, timers[:1], 0)), "small id, count and next")
	many := make([]Timer, 70000)
	assert.Equal(t, ListReplyOverhead+sum(many), len(AppendListOK(nil, math.MaxUint64, many, math.MaxUint64)), "the largest encodings")
}
