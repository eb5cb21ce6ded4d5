package protocol

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The edge vectors (testdata/vectors-edge.json): the same layout as
// vectors.json, for the edge values a client must get right — the largest
// uint64s and 2^32-1 repeats, empty and max_data-sized data, every form
// of a cron schedule and every descriptor, zero and past delays, the
// smallest and largest speeds, long strings (str8/str16 encodings) — made
// by the same appenders. A separate file, so that branches adding ops
// (vectors.json) and edge cases merge apart. Regenerate with
//
//	go test ./protocol/ -run TestEdgeVectors -update
//
// The TypeScript client's tests check both files.

const edgeVectorsPath = "testdata/vectors-edge.json"

// maxDataForDocs is the default max_data: the largest data an add or an
// event carries.
const maxDataForDocs = 4096

// cronForms are the schedules of the add-schedule-* vectors: every field
// form and every descriptor of docs/PROTOCOL.md, each accepted by the
// server (session's TestEdgeVectorsAccepted applies them).
var cronForms = []struct{ name, expr string }{
	{"star", "* * * * *"},
	{"question", "0 0 ? * ?"},
	{"value", "30 4 * * *"},
	{"range", "0 9-17 * * *"},
	{"step", "*/15 * * * *"},
	{"range-step", "0-30/10 * * * *"},
	{"value-step", "5/15 * * * *"},
	{"list", "0,30 * * * *"},
	{"list-of-ranges", "0 9-12,14-17/2 * * *"},
	{"month-names", "0 0 1 jan,JUL *"},
	{"weekday-names", "0 18 * * mon-fri"},
	{"sunday-7", "0 0 * * 7"},
	{"both-days", "0 0 1,15 * mon"},
	{"yearly", "@yearly"},
	{"annually", "@annually"},
	{"monthly", "@monthly"},
	{"weekly", "@weekly"},
	{"daily", "@daily"},
	{"midnight", "@midnight"},
	{"hourly", "@hourly"},
	{"every", "@every 90s"},
	{"every-compound", "@every 1h30m"},
	{"longest", longestSchedule()},
}

// longestSchedule is a valid cron expression of exactly 100 bytes, the
// longest a schedule may be: minutes 0 to 33, at hour 00.
func longestSchedule() string {
	var b strings.Builder
	for m := 0; m <= 33; m++ {
		if m > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(m))
	}
	return b.String() + " 00 * * *"
}

func edgeRequestVectors() []reqVector {
	u := uint64(math.MaxUint64)
	full := make([]byte, maxDataForDocs)
	for i := range full {
		full[i] = byte(i)
	}
	name := strings.Repeat("n", 256)
	vs := []reqVector{
		{"hello-longest", "name of max_name (256) bytes (str16), a 64-hex-digit token as the server makes", Request{Op: OpHello, ID: u, Version: 1, Name: name, Token: strings.Repeat("0f", 32)}},
		{"bind-ephemeral-ack", "", Request{Op: OpBind, ID: u, Receiver: u, Ephemeral: true, Ack: true}},
		{"unbind-max", "", Request{Op: OpUnbind, ID: u, Receiver: u}},
		{"add-zero", "after 0: due at the next tick (servers before protocol 1.0 answered invalid_argument)", Request{Op: OpAdd, ID: 30, Receiver: 1, Tid: 1, Repeat: 1}},
		{"add-past-at", "an at already passed: due at the next tick, late by how far in the past", Request{Op: OpAdd, ID: 31, Receiver: 1, Tid: 2, At: 1, Repeat: 1}},
		{"add-max", "every uint at its largest, repeat 2^32-1, data of max_data bytes (bin16), every later arg set",
			Request{Op: OpAdd, ID: u, Receiver: u, Tid: u, After: u, At: u, Every: u, Repeat: math.MaxUint32, Data: full, Replace: true,
				AfterNs: u, Schedule: "@daily", Zone: "America/Argentina/ComodRivadavia", Missed: MissedSkip}},
		{"add-data-1", "one byte of data (bin8)", Request{Op: OpAdd, ID: 32, Receiver: 1, Tid: 3, After: 1, Repeat: 1, Data: []byte{0}}},
		{"add-missed-once", "missed without a schedule", Request{Op: OpAdd, ID: 33, Receiver: 1, Tid: 4, After: 10, Missed: MissedOnce}},
		{"cancel-max", "", Request{Op: OpCancel, ID: u, Receiver: u, Tid: u}},
		{"get-max", "", Request{Op: OpGet, ID: u, Receiver: u, Tid: u}},
		{"list-max", "", Request{Op: OpList, ID: u, Receiver: u, FromTid: u, Limit: u}},
		{"cancel_all-max", "", Request{Op: OpCancelAll, ID: u, Receiver: u}},
		{"pause-max", "", Request{Op: OpPause, ID: u, Receiver: u, Tid: u}},
		{"resume-max", "", Request{Op: OpResume, ID: u, Receiver: u, Tid: u}},
		{"ping-max", "", Request{Op: OpPing, ID: u}},
		{"ping-0", "id 0 is an id like any other", Request{Op: OpPing, ID: 0}},
		{"ack-max", "", Request{Op: OpAck, ID: u, Receiver: u, Seq: u}},
		{"fast_forward-max", "the server refuses it (invalid_argument): tw-time may reach 2^64-2^62", Request{Op: OpFastForward, ID: u, Ticks: u}},
		{"set_speed-min", "", Request{Op: OpSetSpeed, ID: 34, Speed: 0.001}},
		{"set_speed-max", "", Request{Op: OpSetSpeed, ID: 35, Speed: 1e6}},
	}
	for i, f := range cronForms {
		vs = append(vs, reqVector{"add-schedule-" + f.name, "", Request{Op: OpAdd, ID: uint64(40 + i), Receiver: 2, Tid: uint64(1 + i), Schedule: f.expr}})
	}
	vs = append(vs,
		reqVector{"add-schedule-zone", "", Request{Op: OpAdd, ID: 70, Receiver: 2, Tid: 100, Schedule: "0 2 * * *", Zone: "America/New_York", Repeat: 3}},
		reqVector{"add-schedule-missed-skip", "", Request{Op: OpAdd, ID: 71, Receiver: 2, Tid: 101, Schedule: "@hourly", Missed: MissedSkip}})
	return vs
}

func edgeReplyVectors() []msgVector {
	u := uint64(math.MaxUint64)
	full := make([]byte, maxDataForDocs)
	for i := range full {
		full[i] = byte(255 - i%256)
	}
	maxTimer := Timer{Receiver: u, Tid: u, Due: u, Remaining: u, Every: u, Fired: u, Repeat: math.MaxUint32, Paused: true, Data: full}
	every := Timer{Receiver: 2, Tid: 21, Due: 10_009_000, Remaining: 9000, Every: 9000, Repeat: 0, Schedule: "@every 90s"}
	pausedCron := Timer{Receiver: 2, Tid: 18, Due: 17_280_000, Remaining: 7_280_000, Fired: 1, Paused: true, Schedule: "@daily", Zone: "Europe/Paris"}
	stats := Stats{Now: u, Target: u, Lag: u, Timers: u, Sessions: u, Connections: u, Receivers: u, BacklogEvents: u,
		OutboxEvents: u, WaitingFirings: u, FiredTotal: u, DroppedTotal: u, ReceiverBytes: u, RetainedReceivers: u,
		TickNs: u, Speed: 1e6, Frozen: true}
	few := Hello{Session: 1, Now: 0, TickNs: 1, ServerVersion: "", Limits: Limits{MaxFrame: 64 << 10, MaxData: 4096}}
	return []msgVector{
		uintsOK("ok-add-zero", 30, OpAdd, 1001),
		uintsOK("ok-bind-max", u, OpBind, u, u, u),
		uintsOK("ok-cancel_all-0", u, OpCancelAll, 0),
		uintsOK("ok-fast_forward-max", u, OpFastForward, u, u),
		uintsOK("ok-ping-0", 0, OpPing, 0),
		{name: "ok-hello-few-limits", note: "limits whose value is 0 are left out: here all but two; an empty server_version",
			frame: AppendHelloOK(nil, 1, &few), meaning: okMeaning(1, OpHello, meaning{"session": juint(1), "now": juint(0),
				"tick_ns": juint(1), "server_version": "", "limits": limitsMeaning(&few.Limits)})},
		{name: "ok-get-max", note: "every uint at its largest, repeat 2^32-1, paused, data of max_data bytes (bin16)",
			frame: AppendTimerOK(nil, u, &maxTimer), meaning: okMeaning(u, OpGet, meaning{"timer": timerMeaning(&maxTimer)})},
		{name: "ok-get-every", note: "an @every timer: every is its interval in ticks",
			frame: AppendTimerOK(nil, 7, &every), meaning: okMeaning(7, OpGet, meaning{"timer": timerMeaning(&every)})},
		{name: "ok-get-paused-cron", note: "a paused cron timer: due is its schedule's next time after now, every 0",
			frame: AppendTimerOK(nil, 7, &pausedCron), meaning: okMeaning(7, OpGet, meaning{"timer": timerMeaning(&pausedCron)})},
		{name: "ok-list-empty", note: "an empty receiver: [[], 0]", frame: AppendListOK(nil, 8, nil, 0),
			meaning: okMeaning(8, OpList, meaning{"timers": []any{}, "next": juint(0)})},
		{name: "ok-list-max-next", note: "a page that stops short: next is not 0, so more follow", frame: AppendListOK(nil, 8, []Timer{every}, u),
			meaning: okMeaning(8, OpList, meaning{"timers": []any{timerMeaning(&every)}, "next": juint(u)})},
		{name: "ok-stats-max", frame: AppendStatsOK(nil, u, &stats), meaning: okMeaning(u, OpStats, meaning{"stats": statsMeaning(&stats)})},
	}
}

func edgeEventVectors() []msgVector {
	u := uint64(math.MaxUint64)
	full := make([]byte, maxDataForDocs)
	for i := range full {
		full[i] = byte(i * 7)
	}
	maxFire := Fire{Receiver: u, Tid: u, Tick: u, Fired: u, Repeat: math.MaxUint32, Last: true, Data: full, Seq: u, Late: u}
	overdue := Fire{Receiver: 1, Tid: 2, Tick: 1001, Fired: 1, Repeat: 1, Last: true, Seq: 2, Late: 999}
	waited := Fire{Receiver: 1, Tid: 5, Tick: 1010, Fired: 1, Repeat: 0, Data: []byte{}, Seq: 40, Late: 30}
	return []msgVector{
		{name: "fire-max", note: "every uint at its largest, data of max_data bytes", frame: AppendFire(nil, &maxFire), meaning: fireMeaning(&maxFire)},
		{name: "fire-past-at", note: "an add at tick 1 when tw-time was 1000: due at 1001, late 999 (the ticks it was overdue)",
			frame: AppendFire(nil, &overdue), meaning: fireMeaning(&overdue)},
		{name: "fire-waited", note: "a firing that waited 30 ticks for outbox room; empty data is sent as nil",
			frame: AppendFire(nil, &waited), meaning: fireMeaning(&waited)},
		{name: "takeover-max", frame: AppendTakeover(nil, u, u), meaning: meaning{"kind": "takeover", "receiver": juint(u), "session": juint(u)}},
		{name: "dropped-max", frame: AppendDropped(nil, u, u-1, u), meaning: meaning{"kind": "dropped", "receiver": juint(u), "first_seq": juint(u - 1), "last_seq": juint(u)}},
	}
}

func edgeErrorVectors() []msgVector {
	long := "limit max_data (4096 bytes) exceeded: data has 4097 bytes" + strings.Repeat(".", 250)
	return []msgVector{
		{name: "error-empty-message", frame: AppendError(nil, 6, CodeNotFound, ""), meaning: errorMeaning(6, CodeNotFound, "", "")},
		{name: "error-long-message", note: "a message over 255 bytes (str16)", frame: AppendError(nil, 6, CodeLimitExceeded, long),
			meaning: errorMeaning(6, CodeLimitExceeded, long, "")},
		{name: "error-max-id", frame: AppendError(nil, math.MaxUint64, CodeExists, "timer already exists"),
			meaning: errorMeaning(math.MaxUint64, CodeExists, "timer already exists", "")},
		{name: "error-unsupported_version-no-session", note: "an unsupported version changes nothing: an established session keeps its rights",
			frame:   AppendError(nil, 1, CodeUnsupportedVersion, "protocol version 0 is not supported; this server speaks 1"),
			meaning: errorMeaning(1, CodeUnsupportedVersion, "protocol version 0 is not supported; this server speaks 1", "")},
	}
}

func buildEdgeVectors() vectorFile {
	f := vectorFile{Version: vectorsVersion, Protocol: Version,
		About:   append([]string{"tickwheel protocol edge vectors: the layout of vectors.json, for edge values."}, vectorsAbout[1:]...),
		Replies: msgVectors(edgeReplyVectors()), Events: msgVectors(edgeEventVectors()), Errors: msgVectors(edgeErrorVectors()),
		Accept: []vector{}, Malformed: []badVector{}}
	for _, rv := range edgeRequestVectors() {
		f.Requests = append(f.Requests, toVector(rv.name, rv.note, AppendRequest(nil, &rv.r), requestMeaning(&rv.r)))
	}
	return f
}

// TestEdgeVectors: testdata/vectors-edge.json is what the appenders make
// (with -update it is rewritten), and each vector decodes to its meaning.
func TestEdgeVectors(t *testing.T) {
	want := marshalVectors(t, buildEdgeVectors())
	if *update {
		require.NoError(t, os.WriteFile(edgeVectorsPath, want, 0o644))
	}
	got, err := os.ReadFile(edgeVectorsPath)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "testdata/vectors-edge.json is stale: go test ./protocol/ -run TestEdgeVectors -update")
	var f vectorFile
	require.NoError(t, json.Unmarshal(got, &f))
	for _, v := range f.Requests {
		t.Run("request/"+v.Name, func(t *testing.T) {
			var r Request
			require.NoError(t, DecodeRequest(vectorPayload(t, v.Hex), &r))
			sameJSON(t, v.Meaning, requestMeaning(&r))
		})
	}
	for _, group := range [][]vector{f.Replies, f.Events, f.Errors} {
		for _, v := range group {
			t.Run("message/"+v.Name, func(t *testing.T) {
				op, _ := v.Meaning["op"].(string)
				m, err := messageMeaning(vectorPayload(t, v.Hex), op)
				require.NoError(t, err)
				sameJSON(t, v.Meaning, m)
			})
		}
	}
}

// TestEdgeVectorsCoverage: the two files together hold every request op,
// every error code and message kind (vectors.json: TestVectorsCoverage),
// and the edge file every cron form, descriptor and the edge values.
func TestEdgeVectorsCoverage(t *testing.T) {
	f := buildEdgeVectors()
	names := map[string]bool{}
	for _, group := range [][]vector{f.Requests, f.Replies, f.Events, f.Errors} {
		for _, v := range group {
			names[v.Name] = true
		}
	}
	for _, d := range []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every"} {
		found := false
		for _, c := range cronForms {
			found = found || strings.HasPrefix(c.expr, d)
		}
		assert.True(t, found, "no vector for %s", d)
	}
	assert.Len(t, longestSchedule(), 100, "the longest schedule is max_schedule bytes")
	for _, n := range []string{"add-max", "add-zero", "add-past-at", "ok-get-max", "fire-max", "ok-list-empty", "ok-stats-max",
		"add-schedule-value-step", "add-schedule-both-days", "add-schedule-longest", "set_speed-min", "set_speed-max"} {
		assert.True(t, names[n], "no vector %s", n)
	}
}
