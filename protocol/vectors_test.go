package protocol

import (
	"encoding/hex"
	"math"
	"strconv"
)

// The protocol test vectors (testdata/vectors.json): for every request,
// reply shape, event kind and error code, its exact bytes and what they
// mean, made by the real appenders from the values below. Clients in
// other languages check their encoders and decoders against the file;
// vectors_check_test.go checks it against this package, and the examples
// in docs/PROTOCOL.md against it. Regenerate with
//
//	go test ./protocol/ -run TestVectors -update
//
// vectorsVersion numbers the file's layout; it changes when the layout
// changes, not when vectors are added.
const vectorsVersion = 1

// meaning is a vector's meaning as JSON: integers above 2^53-1 are
// decimal strings (JSON numbers lose them in many languages), data is hex
// or null.
type meaning = map[string]any

// juint renders a uint for a meaning.
func juint(v uint64) any {
	if v <= 1<<53-1 {
		return v
	}
	return strconv.FormatUint(v, 10)
}

// jdata renders data for a meaning: hex, or nil when there is none.
func jdata(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return hex.EncodeToString(b)
}

// requestMeaning is a request's meaning: op name and number, id, and
// every argument its op takes, omitted ones at their default.
func requestMeaning(r *Request) meaning {
	args := meaning{}
	for _, f := range opArgs[r.Op] {
		var v any
		switch f {
		case fName, fToken, fSchedule, fZone, fCommand, fNode, fAddr:
			v = *r.strField(f)
		case fData:
			v = jdata(r.Data)
		case fReplace:
			v = r.Replace
		case fEphemeral:
			v = r.Ephemeral
		case fAck:
			v = r.Ack
		case fSpeed:
			v = r.Speed
		default:
			v = juint(*r.uintField(f))
		}
		args[fieldNames[f]] = v
	}
	return meaning{"op": r.Op.String(), "op_code": int(r.Op), "id": juint(r.ID), "args": args}
}

// uintResults names the elements of the ok results that are arrays of
// uints, by op.
var uintResults = map[Op][]string{
	OpBind:        {"delivered", "dropped", "first_seq"},
	OpUnbind:      {},
	OpAdd:         {"due"},
	OpCancel:      {},
	OpCancelAll:   {"count"},
	OpPauseAll:    {"count"},
	OpCancelGroup: {"count"},
	OpResumeAll:   {"count"},
	OpPause:       {},
	OpResume:      {},
	OpPing:        {"now"},
	OpAck:         {},
	OpFastForward: {"now", "fired"},
	OpFreeze:      {"now"},
	OpResumeSync:  {"now"},
	OpSetSpeed:    {"now"},
}

func limitsMeaning(l *Limits) meaning {
	m := meaning{}
	for _, f := range l.fields() {
		if *f.v != 0 {
			m[f.key] = juint(*f.v)
		}
	}
	return m
}

func timerMeaning(t *Timer) meaning {
	return meaning{"receiver": juint(t.Receiver), "tid": juint(t.Tid), "due": juint(t.Due),
		"remaining": juint(t.Remaining), "every": juint(t.Every), "fired": juint(t.Fired),
		"repeat": juint(t.Repeat), "paused": t.Paused, "data": jdata(t.Data),
		"schedule": t.Schedule, "zone": t.Zone, "missed": juint(t.Missed), "group": juint(t.Group)}
}

func statsMeaning(s *Stats) meaning {
	return meaning{"now": juint(s.Now), "target": juint(s.Target), "lag": juint(s.Lag),
		"timers": juint(s.Timers), "sessions": juint(s.Sessions), "connections": juint(s.Connections),
		"receivers": juint(s.Receivers), "backlog_events": juint(s.BacklogEvents),
		"outbox_events": juint(s.OutboxEvents), "waiting_firings": juint(s.WaitingFirings),
		"fired_total": juint(s.FiredTotal), "dropped_total": juint(s.DroppedTotal),
		"receiver_bytes": juint(s.ReceiverBytes), "retained_receivers": juint(s.RetainedReceivers),
		"tick_ns": juint(s.TickNs), "speed": s.Speed, "frozen": s.Frozen}
}

func clusterMeaning(c *Cluster) meaning {
	members := []any{}
	for _, m := range c.Members {
		members = append(members, meaning{"id": m.ID, "raft_addr": m.RaftAddr, "voter": m.Voter})
	}
	return meaning{"role": c.Role, "leader": c.Leader, "term": juint(c.Term), "commit_index": juint(c.CommitIndex),
		"applied_index": juint(c.AppliedIndex), "members": members}
}

func fireMeaning(f *Fire) meaning {
	return meaning{"kind": "fire", "receiver": juint(f.Receiver), "tid": juint(f.Tid), "tick": juint(f.Tick),
		"fired": juint(f.Fired), "repeat": juint(f.Repeat), "last": f.Last, "data": jdata(f.Data),
		"seq": juint(f.Seq), "late": juint(f.Late)}
}

// okMeaning is an ok reply's meaning; op says how to read its result.
func okMeaning(id uint64, op Op, result meaning) meaning {
	return meaning{"kind": "ok", "id": juint(id), "op": op.String(), "result": result}
}

// errorMeaning is an error reply's meaning; a not_leader error's has its
// leader too (the fifth element, "" when absent).
func errorMeaning(id uint64, code Code, text, leader string) meaning {
	m := meaning{"kind": "error", "id": juint(id), "code": int(code), "code_name": code.String(), "message": text}
	if code == CodeNotLeader {
		m["leader"] = leader
	}
	return m
}

// reqVector is a request vector: the request is encoded by AppendRequest.
type reqVector struct {
	name, note string
	r          Request
}

var vecHello = Hello{Session: 5, Now: 1000, TickNs: 10_000_000, ServerVersion: "0.1.0", Limits: defaultLimitsForDocs}

// defaultLimitsForDocs are the server's default limits (session.Limits'
// defaults, as a server sends them; the session package's tests check the
// two agree), with max_connections at its cap, 100,000, as on a machine
// whose file descriptor limit is 131,072 or more (docs/OPERATIONS.md).
var defaultLimitsForDocs = Limits{MaxFrame: 64 << 10, MaxData: 4096, MaxTimersPerReceiver: 100_000,
	MaxTimers: 10_000_000, MaxReceiversPerSession: 100_000, MaxBacklog: 10_000, MaxOutbound: 8 << 20,
	MaxBacklogBytes: 16 << 20, MaxBacklogTotal: 1_000_000, MaxBacklogBytesTotal: 512 << 20,
	MaxDataTotal: 1 << 30, MaxInbound: 4 << 20, MaxConnections: 100_000,
	MaxName: 256, MaxListPage: 1000, MaxListBytes: 1 << 20,
	HandshakeTimeoutMs: 10_000, IdleTimeoutMs: 120_000, FrameTimeoutMs: 10_000,
	MaxOutbox: 100_000, MaxOutboxBytes: 16 << 20, MaxOutboxTotal: 10_000_000, MaxOutboxBytesTotal: 512 << 20,
	MaxRequestIDs: 100_000, RequestIDTicks: 30_000}

var vecTimer = Timer{Receiver: 42, Tid: 7, Due: 1030, Remaining: 30, Every: 30, Fired: 0, Repeat: 3, Data: []byte("hi")}
var vecTimerCron = Timer{Receiver: 42, Tid: 11, Due: 177760800000, Remaining: 86400000, Fired: 1, Repeat: 0,
	Schedule: "0 4 * * *", Zone: "Europe/Paris", Missed: MissedOnce}
var vecTimerGroup = Timer{Receiver: 42, Tid: 8, Due: 1050, Remaining: 50, Every: 50, Repeat: 1, Group: 77}
var vecTimerPaused = Timer{Receiver: 42, Tid: 9, Due: 1500, Remaining: 500, Every: 500, Fired: 2, Paused: true}
var vecStats = Stats{Now: 1000, Target: 1000, Timers: 1, Sessions: 1, Connections: 1, Receivers: 1, FiredTotal: 12, ReceiverBytes: 264, TickNs: 10_000_000, Speed: 1}
var vecCluster = Cluster{Role: "leader", Leader: "n1", Term: 3, CommitIndex: 1200, AppliedIndex: 1200,
	Members: []ClusterMember{{ID: "n1", RaftAddr: "10.0.0.1:7520", Voter: true}, {ID: "n2", RaftAddr: "10.0.0.2:7520", Voter: true},
		{ID: "n4", RaftAddr: "10.0.0.4:7520"}}}
var vecFire = Fire{Receiver: 42, Tid: 7, Tick: 1030, Fired: 1, Repeat: 3, Data: []byte("hi"), Seq: 1}

func requestVectors() []reqVector {
	big := uint64(math.MaxUint64)
	return []reqVector{
		{"hello", "", Request{Op: OpHello, ID: 1, Version: 1, Name: "game-1", Token: "secret"}},
		{"hello-no-token", "an empty token is sent as an empty str", Request{Op: OpHello, ID: 1, Version: 1, Name: "game-1"}},
		{"bind", "", Request{Op: OpBind, ID: 2, Receiver: 42}},
		{"bind-ephemeral", "", Request{Op: OpBind, ID: 2, Receiver: 42, Ephemeral: true}},
		{"bind-ack", "", Request{Op: OpBind, ID: 18, Receiver: 42, Ack: true}},
		{"unbind", "", Request{Op: OpUnbind, ID: 3, Receiver: 42}},
		{"add", "", Request{Op: OpAdd, ID: 4, Receiver: 42, Tid: 7, After: 30, Repeat: 3, Data: []byte("hi")}},
		{"add-at", "uint16/uint32 encodings", Request{Op: OpAdd, ID: 5, Receiver: 42, Tid: 8, At: 100000, Every: 500, Replace: true}},
		{"add-after_ns", "later optional args are sent only up to the last one set", Request{Op: OpAdd, ID: 20, Receiver: 42, Tid: 9, AfterNs: 1_500_000_000, Repeat: 1}},
		{"add-schedule", "", Request{Op: OpAdd, ID: 21, Receiver: 42, Tid: 10, Schedule: "*/5 * * * *", Zone: "Europe/Paris", Missed: MissedOnce}},
		{"add-group", "group is the add's last argument: sent only when set, the ones before it as their defaults", Request{Op: OpAdd, ID: 22, Receiver: 42, Tid: 11, After: 50, Group: 77}},
		{"add-uint64", "ids and receivers are uint64: the largest", Request{Op: OpAdd, ID: big, Receiver: big, Tid: big - 1, After: 1, Data: make([]byte, 300)}},
		{"cancel", "", Request{Op: OpCancel, ID: 6, Receiver: 42, Tid: 7}},
		{"add-client", "a request id for retries: client is add's last argument, the ones before it at their defaults", Request{Op: OpAdd, ID: 24, Receiver: 42, Tid: 11, After: 30, Client: 0x5eed5eed5eed5eed}},
		{"cancel-client", "a request id for retries: client after tid", Request{Op: OpCancel, ID: 25, Receiver: 42, Tid: 7, Client: 0x5eed5eed5eed5eed}},
		{"cancel_all-client", "", Request{Op: OpCancelAll, ID: 26, Receiver: 42, Client: 7}},
		{"get", "", Request{Op: OpGet, ID: 7, Receiver: 42, Tid: 7}},
		{"list", "", Request{Op: OpList, ID: 8, Receiver: 42, FromTid: 0, Limit: 1}},
		{"list-from", "", Request{Op: OpList, ID: 8, Receiver: 42, FromTid: 8}},
		{"cancel_all", "", Request{Op: OpCancelAll, ID: 9, Receiver: 42}},
		{"cancel_group", "", Request{Op: OpCancelGroup, ID: 28, Group: 77}},
		{"cancel_group-client", "a request id for retries: client after group", Request{Op: OpCancelGroup, ID: 31, Group: 77, Client: 7}},
		{"pause_all", "", Request{Op: OpPauseAll, ID: 25, Receiver: 42}},
		{"pause_all-group", "", Request{Op: OpPauseAll, ID: 25, Group: 77}},
		{"pause_all-client", "a request id for retries: client after receiver and group", Request{Op: OpPauseAll, ID: 29, Receiver: 42, Client: 7}},
		{"resume_all", "", Request{Op: OpResumeAll, ID: 26, Receiver: 42}},
		{"resume_all-group", "", Request{Op: OpResumeAll, ID: 26, Group: 77}},
		{"resume_all-client", "a request id for retries: client after receiver and group", Request{Op: OpResumeAll, ID: 30, Group: 77, Client: 0x5eed5eed5eed5eed}},
		{"list_group", "", Request{Op: OpListGroup, ID: 27, Group: 77, FromReceiver: 42, FromTid: 8, Limit: 100}},
		{"pause", "", Request{Op: OpPause, ID: 10, Receiver: 42, Tid: 7}},
		{"resume", "", Request{Op: OpResume, ID: 11, Receiver: 42, Tid: 7}},
		{"ping", "", Request{Op: OpPing, ID: 12}},
		{"ack", "", Request{Op: OpAck, ID: 19, Receiver: 42, Seq: 5}},
		{"fast_forward", "", Request{Op: OpFastForward, ID: 13, Ticks: 8640000}},
		{"freeze", "", Request{Op: OpFreeze, ID: 14}},
		{"resume_sync", "", Request{Op: OpResumeSync, ID: 15}},
		{"set_speed", "always float64", Request{Op: OpSetSpeed, ID: 16, Speed: 2.5}},
		{"set_speed-integral", "an integral speed is still sent as float64", Request{Op: OpSetSpeed, ID: 16, Speed: 2}},
		{"stats", "", Request{Op: OpStats, ID: 17}},
		{"cluster-status", "node and addr are sent empty when the sub-command takes none", Request{Op: OpCluster, ID: 22, Command: ClusterStatus}},
		{"cluster-add", "", Request{Op: OpCluster, ID: 23, Command: ClusterAdd, Node: "n4", Addr: "10.0.0.4:7520"}},
		{"cluster-add-nonvoter", "the node stays a non-voter", Request{Op: OpCluster, ID: 25, Command: ClusterAddNonvoter, Node: "r1", Addr: "10.0.1.1:7520"}},
		{"cluster-promote", "", Request{Op: OpCluster, ID: 26, Command: ClusterPromote, Node: "r1"}},
		{"cluster-remove", "", Request{Op: OpCluster, ID: 24, Command: ClusterRemove, Node: "n2"}},
	}
}

// msgVector is a server message vector: frame made by an appender,
// meaning from the values it was made of.
type msgVector struct {
	name, note string
	frame      []byte
	meaning    meaning
}

func uintsOK(name string, id uint64, op Op, vals ...uint64) msgVector {
	res := meaning{}
	for i, n := range uintResults[op] {
		res[n] = juint(vals[i])
	}
	return msgVector{name: name, frame: AppendOK(nil, id, vals...), meaning: okMeaning(id, op, res)}
}

func replyVectors() []msgVector {
	list := []Timer{vecTimer, vecTimerPaused}
	return []msgVector{
		{name: "ok-hello", note: "limits: the server's defaults", frame: AppendHelloOK(nil, 1, &vecHello),
			meaning: okMeaning(1, OpHello, meaning{"session": juint(vecHello.Session), "now": juint(vecHello.Now),
				"tick_ns": juint(vecHello.TickNs), "server_version": vecHello.ServerVersion, "limits": limitsMeaning(&vecHello.Limits)})},
		uintsOK("ok-bind", 2, OpBind, 0, 0, 1),
		uintsOK("ok-bind-ack", 18, OpBind, 3, 0, 4),
		uintsOK("ok-add", 4, OpAdd, 1030),
		uintsOK("ok-add-uint64", math.MaxUint64, OpAdd, math.MaxUint64),
		uintsOK("ok-empty", 6, OpCancel),
		uintsOK("ok-cancel_all", 9, OpCancelAll, 2),
		uintsOK("ok-pause_all", 25, OpPauseAll, 3),
		uintsOK("ok-cancel_group", 28, OpCancelGroup, 3),
		uintsOK("ok-resume_all", 26, OpResumeAll, 3),
		uintsOK("ok-ping", 12, OpPing, 1000),
		uintsOK("ok-ack", 19, OpAck),
		uintsOK("ok-fast_forward", 13, OpFastForward, 8641000, 0),
		uintsOK("ok-freeze", 14, OpFreeze, 1000),
		uintsOK("ok-set_speed", 16, OpSetSpeed, 1000),
		{name: "ok-get", frame: AppendTimerOK(nil, 7, &vecTimer),
			meaning: okMeaning(7, OpGet, meaning{"timer": timerMeaning(&vecTimer)})},
		{name: "ok-get-schedule", note: "a timer on a calendar schedule: three more elements (schedule, zone, missed), sent only when one is set",
			frame: AppendTimerOK(nil, 7, &vecTimerCron), meaning: okMeaning(7, OpGet, meaning{"timer": timerMeaning(&vecTimerCron)})},
		{name: "ok-list", note: "one timer, more from tid 8", frame: AppendListOK(nil, 8, []Timer{vecTimer}, 8),
			meaning: okMeaning(8, OpList, meaning{"timers": []any{timerMeaning(&vecTimer)}, "next": juint(8)})},
		{name: "ok-list-last", note: "two timers, one paused without data; next 0: no more", frame: AppendListOK(nil, 8, list, 0),
			meaning: okMeaning(8, OpList, meaning{"timers": []any{timerMeaning(&list[0]), timerMeaning(&list[1])}, "next": juint(0)})},
		{name: "ok-get-group", note: "a timer in a group: schedule, zone and missed (as their defaults when unset) and then group",
			frame: AppendTimerOK(nil, 7, &vecTimerGroup), meaning: okMeaning(7, OpGet, meaning{"timer": timerMeaning(&vecTimerGroup)})},
		{name: "ok-list_group", note: "one timer of group 77, more from receiver 42 tid 9", frame: AppendListGroupOK(nil, 27, []Timer{vecTimerGroup}, 42, 9),
			meaning: okMeaning(27, OpListGroup, meaning{"timers": []any{timerMeaning(&vecTimerGroup)}, "next_receiver": juint(42), "next_tid": juint(9)})},
		{name: "ok-list_group-last", note: "next (0, 0): no more", frame: AppendListGroupOK(nil, 27, []Timer{vecTimerGroup}, 0, 0),
			meaning: okMeaning(27, OpListGroup, meaning{"timers": []any{timerMeaning(&vecTimerGroup)}, "next_receiver": juint(0), "next_tid": juint(0)})},
		{name: "ok-stats", frame: AppendStatsOK(nil, 17, &vecStats),
			meaning: okMeaning(17, OpStats, meaning{"stats": statsMeaning(&vecStats)})},
		{name: "ok-cluster", note: "the answer to every cluster sub-command: the state after the change", frame: AppendClusterOK(nil, 23, &vecCluster),
			meaning: okMeaning(23, OpCluster, meaning{"cluster": clusterMeaning(&vecCluster)})},
	}
}

// errorTexts are example messages per code, as the server words them
// (messages are for humans: clients match on the code, never the text;
// they carry no Go package prefixes such as "wheel: ").
var errorTexts = map[Code]string{
	CodeMalformed:          "malformed message: add: tid: wrong type, want a non-negative integer",
	CodeUnknownOp:          "unknown op: 13",
	CodeUnauthorized:       "bad or missing token: say hello with the client token, or the admin token",
	CodeHelloRequired:      "the first request must be hello",
	CodeNotFound:           "timer not found",
	CodeExists:             "timer already exists",
	CodeInvalidArgument:    "repeat 4294967296 exceeds 2^32-1",
	CodeLimitExceeded:      "limit max_timers_per_receiver (100000) reached",
	CodeBadState:           "timer already paused",
	CodeUnsupportedVersion: "protocol version 2 is not supported; this server speaks 1",
	CodeInternal:           "op stats is not handled",
	CodeTimeout:            "no request for 2m0s (timeouts.idle): a client pings while it has nothing else to send",
	CodeUnavailable:        "the server cannot write its log (write: no space left on device): changes are refused until it can; retry later",
	CodeNotLeader:          "this node is a follower: connect to the leader",
	CodeRequestIDReused:    "request id 25 of client 7 was used for another request 3 ticks ago: a client numbers each change it sends apart",
}

// vecLeader is the leader address of the not_leader vector.
const vecLeader = "10.0.0.2:7420"

func errorVectors() []msgVector {
	var out []msgVector
	for c := CodeMalformed; int(c) < len(codeNames); c++ {
		if codeNames[c] == "" {
			continue // a code of another version
		}
		id := uint64(6)
		if c == CodeTimeout {
			id = 0
		}
		name := "error-" + c.String()
		if c == CodeNotFound {
			name = "error"
		}
		if c == CodeNotLeader {
			out = append(out, msgVector{name: name, note: "a follower's answer to hello (id 1) or any request; a fifth element names the leader's client address; the follower then closes the connection",
				frame: AppendNotLeader(nil, 1, errorTexts[c], vecLeader), meaning: errorMeaning(1, c, errorTexts[c], vecLeader)})
			continue
		}
		out = append(out, msgVector{name: name, frame: AppendError(nil, id, c, errorTexts[c]), meaning: errorMeaning(id, c, errorTexts[c], "")})
	}
	return out
}

func eventVectors() []msgVector {
	last := Fire{Receiver: 42, Tid: 7, Tick: 1090, Fired: 3, Repeat: 3, Last: true, Data: []byte("hi"), Seq: 3}
	late := Fire{Receiver: 1, Tid: 12, Tick: 5000, Fired: 1, Repeat: 0, Seq: 70000, Late: 300}
	return []msgVector{
		{name: "fire", frame: AppendFire(nil, &vecFire), meaning: fireMeaning(&vecFire)},
		{name: "fire-last", note: "the last firing of a timer", frame: AppendFire(nil, &last), meaning: fireMeaning(&last)},
		{name: "fire-late", note: "no data (nil), forever, late", frame: AppendFire(nil, &late), meaning: fireMeaning(&late)},
		{name: "takeover", frame: AppendTakeover(nil, 42, 9), meaning: meaning{"kind": "takeover", "receiver": juint(42), "session": juint(9)}},
		{name: "dropped", frame: AppendDropped(nil, 42, 11, 17), meaning: meaning{"kind": "dropped", "receiver": juint(42), "first_seq": juint(11), "last_seq": juint(17)}},
	}
}

// acceptVectors are server messages a client must accept although this
// server does not send them so: from older servers, with elements a newer
// server may add, or of a kind it does not know. Frames written by hand.
func acceptVectors() []msgVector {
	frame := func(h string) []byte {
		p, _ := hex.DecodeString(h)
		return append(beginFrameOf(len(p)), p...)
	}
	return []msgVector{
		{name: "fire-no-late", note: "an older server's fire event, without late: read late as 0",
			frame: frame("9902" + "2a07cd04060103c2c4026869" + "01"), meaning: fireMeaning(&vecFire)},
		{name: "fire-extra", note: "a newer server's fire event with one more element: ignore it",
			frame: frame("9b02" + "2a07cd04060103c2c4026869" + "0100" + "a178"), meaning: fireMeaning(&vecFire)},
		{name: "fire-str-data", note: "data as str is accepted too",
			frame: frame("9a02" + "2a07cd04060103c2a26869" + "0100"), meaning: fireMeaning(&vecFire)},
		{name: "ok-bind-old", note: "a server before acknowledged mode: no first_seq (read as 0)",
			frame: frame("930002" + "92" + "0000"), meaning: okMeaning(2, OpBind, meaning{"delivered": juint(0), "dropped": juint(0), "first_seq": juint(0)})},
		{name: "ok-list-old", note: "a server before paging: no next (read as 0)",
			frame: frame("930008" + "91" + "90"), meaning: okMeaning(8, OpList, meaning{"timers": []any{}, "next": juint(0)})},
		{name: "error-not_leader-unknown", note: "a follower that knows no leader: the fifth element is empty",
			frame: AppendNotLeader(nil, 1, "no leader elected", ""), meaning: errorMeaning(1, CodeNotLeader, "no leader elected", "")},
		{name: "error-not_leader-4", note: "a not_leader error without the fifth element: read leader as \"\" (unknown)",
			frame: frame("94" + "01" + "01" + "0e" + "a0"), meaning: errorMeaning(1, CodeNotLeader, "", "")},
		{name: "error-extra", note: "an error of another code with a fifth element a newer server may add: ignore it",
			frame: frame("95" + "01" + "06" + "05" + "a0" + "a178"), meaning: errorMeaning(6, CodeNotFound, "", "")},
		{name: "unknown-kind", note: "a kind this version does not define: ignore the message",
			frame: frame("93" + "09" + "01" + "02"), meaning: meaning{"kind": "unknown", "kind_code": 9}},
	}
}

func beginFrameOf(n int) []byte {
	return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}
