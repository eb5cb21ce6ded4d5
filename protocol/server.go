package protocol

// Server-side appenders. Each appends one whole frame (header and payload)
// to b and returns the extended buffer, allocating nothing beyond growing b.
// They do not check the result against the maximum frame size: the server
// bounds what it sends (a list page by max_list_bytes with TimerSize and
// ListReplyOverhead, data by max_data). Data fields are encoded as bin, or
// nil when empty.

// Limits are the server's limits, sent in the hello reply as a map with
// string keys (max_frame, max_data, ...) and uint values. A key whose value
// is 0 is left out: the limit or timeout is off, or the server predates it.
type Limits struct {
	MaxFrame               uint64 // largest frame payload the server accepts, bytes
	MaxData                uint64 // largest add data, bytes
	MaxTimersPerReceiver   uint64
	MaxTimers              uint64 // timers in the whole server
	MaxReceiversPerSession uint64 // receivers bound by one session
	MaxBacklog             uint64 // events queued per receiver
	MaxOutbound            uint64 // bytes pending to one connection before the server holds events back
	MaxBacklogBytes        uint64 // bytes of events queued per receiver
	MaxBacklogTotal        uint64 // events queued in all receivers together
	MaxBacklogBytesTotal   uint64 // bytes of events queued in all receivers together
	MaxDataTotal           uint64 // bytes of timer data in the whole server
	MaxInbound             uint64 // bytes of requests held unread while replies wait
	MaxConnections         uint64 // open connections
	MaxName                uint64 // bytes of a hello name or token
	MaxListPage            uint64 // timers in one list reply
	MaxListBytes           uint64 // bytes of one list reply
	HandshakeTimeoutMs     uint64 // ms a connection has to say hello
	IdleTimeoutMs          uint64 // ms a session may send nothing before it is closed (ping to stay)
	FrameTimeoutMs         uint64 // ms a started frame has to arrive whole
	MaxOutbox              uint64 // events not yet acknowledged per receiver in acknowledged mode
	MaxOutboxBytes         uint64 // bytes of them per receiver
	MaxOutboxTotal         uint64 // events in all outboxes together
	MaxOutboxBytesTotal    uint64 // bytes in all outboxes together
	// MaxRequestIDs and RequestIDTicks bound the server's memory of
	// changes sent with a request id (Request.Client): how many it
	// remembers and for how many ticks. A server that sends them
	// deduplicates retried changes; one that does not (0) predates
	// request ids and ignores them, so a client must not retry a change
	// on it without asking its caller.
	MaxRequestIDs  uint64
	RequestIDTicks uint64
}

// numLimits is the number of keys in the limits map.
const numLimits = 25

// limitField is one key of the limits map and the field it fills.
type limitField struct {
	key string
	v   *uint64
}

// fields lists l's keys in wire order.
func (l *Limits) fields() [numLimits]limitField {
	return [numLimits]limitField{
		{"max_frame", &l.MaxFrame}, {"max_data", &l.MaxData},
		{"max_timers_per_receiver", &l.MaxTimersPerReceiver}, {"max_timers", &l.MaxTimers},
		{"max_receivers_per_session", &l.MaxReceiversPerSession}, {"max_backlog", &l.MaxBacklog},
		{"max_outbound", &l.MaxOutbound}, {"max_backlog_bytes", &l.MaxBacklogBytes},
		{"max_backlog_total", &l.MaxBacklogTotal}, {"max_backlog_bytes_total", &l.MaxBacklogBytesTotal},
		{"max_data_total", &l.MaxDataTotal}, {"max_inbound", &l.MaxInbound},
		{"max_connections", &l.MaxConnections}, {"max_name", &l.MaxName},
		{"max_list_page", &l.MaxListPage}, {"max_list_bytes", &l.MaxListBytes},
		{"handshake_timeout_ms", &l.HandshakeTimeoutMs}, {"idle_timeout_ms", &l.IdleTimeoutMs},
		{"frame_timeout_ms", &l.FrameTimeoutMs},
		{"max_outbox", &l.MaxOutbox}, {"max_outbox_bytes", &l.MaxOutboxBytes},
		{"max_outbox_total", &l.MaxOutboxTotal}, {"max_outbox_bytes_total", &l.MaxOutboxBytesTotal},
		{"max_request_ids", &l.MaxRequestIDs}, {"request_id_ticks", &l.RequestIDTicks},
	}
}

// Hello is the result of a hello: [session, now, tick_ns, server_version, limits].
type Hello struct {
	Session       uint64 // this session's id, as named in other sessions' takeover notices
	Now           uint64 // current tw-time tick
	TickNs        uint64 // nominal length of a tick in nanoseconds
	ServerVersion string // free-form server build version
	Limits        Limits
}

// Timer describes a live timer, as in get and list replies:
// [receiver, tid, due, remaining, every, fired, repeat, paused, data],
// followed by [schedule, zone, missed] for a timer that has a schedule or
// a missed-firing policy other than MissedAll or a group, and then
// [group] for a timer in a group (older servers never send them;
// decoders skip elements they do not know).
type Timer struct {
	Receiver, Tid uint64
	Due           uint64 // tick of the next firing
	Remaining     uint64 // ticks from now to due; frozen while paused
	Every         uint64 // interval between firings
	Fired         uint64 // firings so far
	Repeat        uint64 // total firings, 0 = forever
	Paused        bool
	Data          []byte // nil when the timer has no data
	Schedule      string // the calendar schedule (a cron expression), or ""
	Zone          string // the schedule's IANA time zone ("" = UTC)
	Missed        uint64 // the missed-firing policy: MissedAll, MissedOnce or MissedSkip
	Group         uint64 // the timer's group, 0 for none
}

// hasPlan reports whether t has the trailing schedule fields to send
// (they come before the group, so a timer in a group has them too).
func (t *Timer) hasPlan() bool {
	return t.Schedule != "" || t.Zone != "" || t.Missed != 0 || t.Group != 0
}

// Stats is the result of the admin stats op, sent as a map with string keys.
type Stats struct {
	Now, Target, Lag                                uint64 // tw-time tick, the clock's target tick, target - now
	Timers, Sessions, Connections, Receivers        uint64
	BacklogEvents, FiredTotal, DroppedTotal, TickNs uint64
	// OutboxEvents are, of BacklogEvents, those in outboxes (acknowledged
	// mode, sent or not); WaitingFirings the firings waiting for room in a
	// full outbox.
	OutboxEvents, WaitingFirings uint64
	// ReceiverBytes estimates the memory of the receiver records, apart
	// from their events; RetainedReceivers are, of Receivers, idle ones in
	// acknowledged mode kept for ack_retention_ticks. Absent (0) from older
	// servers.
	ReceiverBytes, RetainedReceivers uint64
	Speed                            float64 // clock speed factor, 1 = real time
	Frozen                           bool    // clock sync stopped (freeze)
	// A cluster node's raft state (keys role, leader, term, commit_index,
	// applied_index, suffrage, voters, nonvoters); Role is "" and the keys
	// absent on a single server. Role is leader, follower, candidate or
	// shutdown; Leader the leader's node id ("" unknown); Suffrage this
	// node's, voter or nonvoter ("" when not a member); Voters and
	// Nonvoters count the members (the last three absent from servers that
	// predate non-voters).
	Role, Leader                    string
	Term, CommitIndex, AppliedIndex uint64
	Suffrage                        string
	Voters, Nonvoters               uint64
	// RequestIDs is how many changes with a request id the server
	// remembers for retries, RequestIDBytes their bytes (keys request_ids,
	// request_id_bytes; absent while it remembers none, and from older
	// servers).
	RequestIDs, RequestIDBytes uint64
}

// Fire is a fire event: [2, receiver, tid, tick, fired, repeat, last, data, seq, late].
type Fire struct {
	Receiver, Tid uint64
	Tick          uint64 // the tick the timer was due at
	Fired         uint64 // 1-based count of this timer's firings, this one included
	Repeat        uint64 // total firings, 0 = forever
	Last          bool   // this firing removed the timer
	Data          []byte // nil when the timer has no data
	Seq           uint64 // per-receiver event sequence number, from 1; a gap means dropped events
	// Late is how many ticks after its due tick the timer fired: 0 normally,
	// and for ticks a fast-forward jumped over (asked for at once); more in
	// the catch-up after a restart, or when the server fell behind. Absent
	// (0) from older servers.
	Late uint64
}

func appendOKHead(b []byte, id uint64) ([]byte, int) {
	b, start := beginFrame(b)
	b = append(b, 0x93, byte(KindOK))
	return appendUint(b, id), start
}

// AppendOK appends the reply [0, id, [vals...]]: the result of bind, unbind,
// add, cancel, cancel_all, pause, resume, ping, fast_forward, freeze,
// resume_sync and set_speed (no vals for an empty result). Calls with a
// constant number of vals do not allocate.
func AppendOK(b []byte, id uint64, vals ...uint64) []byte {
	b, start := appendOKHead(b, id)
	b = appendArray(b, len(vals))
	for _, v := range vals {
		b = appendUint(b, v)
	}
	return endFrame(b, start)
}

// AppendHelloOK appends the reply to a hello:
// [0, id, [session, now, tick_ns, server_version, limits]].
func AppendHelloOK(b []byte, id uint64, h *Hello) []byte {
	b, start := appendOKHead(b, id)
	b = append(b, 0x95)
	b = appendUint(b, h.Session)
	b = appendUint(b, h.Now)
	b = appendUint(b, h.TickNs)
	b = appendStr(b, h.ServerVersion)
	fields := h.Limits.fields()
	n := 0
	for _, f := range fields {
		if *f.v != 0 {
			n++
		}
	}
	b = appendMap(b, n)
	for _, f := range fields {
		if *f.v != 0 {
			b = appendUint(appendStr(b, f.key), *f.v)
		}
	}
	return endFrame(b, start)
}

func appendTimer(b []byte, t *Timer) []byte {
	switch {
	case t.Group != 0:
		b = append(b, 0x9d)
	case t.hasPlan():
		b = append(b, 0x9c)
	default:
		b = append(b, 0x99)
	}
	b = appendUint(b, t.Receiver)
	b = appendUint(b, t.Tid)
	b = appendUint(b, t.Due)
	b = appendUint(b, t.Remaining)
	b = appendUint(b, t.Every)
	b = appendUint(b, t.Fired)
	b = appendUint(b, t.Repeat)
	b = appendBool(b, t.Paused)
	b = appendData(b, t.Data)
	if t.hasPlan() {
		b = appendStr(appendStr(b, t.Schedule), t.Zone)
		b = appendUint(b, t.Missed)
	}
	if t.Group != 0 {
		b = appendUint(b, t.Group)
	}
	return b
}

// AppendTimerOK appends the reply to a get: [0, id, [timer]].
func AppendTimerOK(b []byte, id uint64, t *Timer) []byte {
	b, start := appendOKHead(b, id)
	b = append(b, 0x91)
	b = appendTimer(b, t)
	return endFrame(b, start)
}

// AppendListOK appends the reply to a list, one page of the receiver's
// timers: [0, id, [[timer, ...], next]]. next is the from_tid of the
// following page, or 0 when this page is the last. The frame is
// ListReplyOverhead bytes at most plus the TimerSize of each timer.
func AppendListOK(b []byte, id uint64, ts []Timer, next uint64) []byte {
	b, start := appendOKHead(b, id)
	b = append(b, 0x92)
	b = appendArray(b, len(ts))
	for i := range ts {
		b = appendTimer(b, &ts[i])
	}
	b = appendUint(b, next)
	return endFrame(b, start)
}

// AppendListGroupOK appends the reply to a list_group, one page of the
// group's timers in (receiver, tid) order: [0, id, [[timer, ...],
// next_receiver, next_tid]]. The next pair is the cursor of the following
// page, or (0, 0) when this page is the last (a following page starts
// after a timer of this one, so its cursor is never (0, 0)). The frame is
// ListReplyOverhead + 9 bytes at most plus the TimerSize of each timer.
func AppendListGroupOK(b []byte, id uint64, ts []Timer, nextReceiver, nextTid uint64) []byte {
	b, start := appendOKHead(b, id)
	b = append(b, 0x93)
	b = appendArray(b, len(ts))
	for i := range ts {
		b = appendTimer(b, &ts[i])
	}
	b = appendUint(b, nextReceiver)
	b = appendUint(b, nextTid)
	return endFrame(b, start)
}

// ListReplyOverhead is the most bytes a list reply frame takes besides its
// timers: the header, [0, id, [[...], next]] with the largest id, array
// length and next.
const ListReplyOverhead = HeaderSize + 1 + 1 + 9 + 1 + 5 + 9

// TimerSize returns the number of bytes t takes in a get or list reply, so
// a server can cut a list page at a byte budget before encoding it.
func TimerSize(t *Timer) int {
	return 1 + uintSize(t.Receiver) + uintSize(t.Tid) + uintSize(t.Due) + uintSize(t.Remaining) +
		uintSize(t.Every) + uintSize(t.Fired) + uintSize(t.Repeat) + 1 + dataSize(t.Data) + planSize(t)
}

func planSize(t *Timer) int {
	if !t.hasPlan() {
		return 0
	}
	n := strSize(t.Schedule) + strSize(t.Zone) + uintSize(t.Missed)
	if t.Group != 0 {
		n += uintSize(t.Group)
	}
	return n
}

// AppendStatsOK appends the reply to a stats: [0, id, [stats]], where stats
// is a map with string keys.
func AppendStatsOK(b []byte, id uint64, s *Stats) []byte {
	b, start := appendOKHead(b, id)
	n := 17
	if s.Role != "" {
		n += 8
	}
	if s.RequestIDs != 0 {
		n += 2
	}
	b = appendMap(append(b, 0x91), n)
	b = appendUint(appendStr(b, "now"), s.Now)
	b = appendUint(appendStr(b, "target"), s.Target)
	b = appendUint(appendStr(b, "lag"), s.Lag)
	b = appendUint(appendStr(b, "timers"), s.Timers)
	b = appendUint(appendStr(b, "sessions"), s.Sessions)
	b = appendUint(appendStr(b, "connections"), s.Connections)
	b = appendUint(appendStr(b, "receivers"), s.Receivers)
	b = appendUint(appendStr(b, "backlog_events"), s.BacklogEvents)
	b = appendUint(appendStr(b, "outbox_events"), s.OutboxEvents)
	b = appendUint(appendStr(b, "waiting_firings"), s.WaitingFirings)
	b = appendUint(appendStr(b, "fired_total"), s.FiredTotal)
	b = appendUint(appendStr(b, "dropped_total"), s.DroppedTotal)
	b = appendUint(appendStr(b, "receiver_bytes"), s.ReceiverBytes)
	b = appendUint(appendStr(b, "retained_receivers"), s.RetainedReceivers)
	b = appendUint(appendStr(b, "tick_ns"), s.TickNs)
	b = appendFloat(appendStr(b, "speed"), s.Speed)
	b = appendBool(appendStr(b, "frozen"), s.Frozen)
	if s.Role != "" {
		b = appendStr(appendStr(b, "role"), s.Role)
		b = appendStr(appendStr(b, "leader"), s.Leader)
		b = appendUint(appendStr(b, "term"), s.Term)
		b = appendUint(appendStr(b, "commit_index"), s.CommitIndex)
		b = appendUint(appendStr(b, "applied_index"), s.AppliedIndex)
		b = appendStr(appendStr(b, "suffrage"), s.Suffrage)
		b = appendUint(appendStr(b, "voters"), s.Voters)
		b = appendUint(appendStr(b, "nonvoters"), s.Nonvoters)
	}
	if s.RequestIDs != 0 {
		b = appendUint(appendStr(b, "request_ids"), s.RequestIDs)
		b = appendUint(appendStr(b, "request_id_bytes"), s.RequestIDBytes)
	}
	return endFrame(b, start)
}

// AppendError appends the error reply [1, id, code, msg]. id is the request's
// id, or 0 when it could not be decoded.
func AppendError(b []byte, id uint64, code Code, msg string) []byte {
	b, start := beginFrame(b)
	b = append(b, 0x94, byte(KindError))
	b = appendUint(b, id)
	b = appendUint(b, uint64(code))
	b = appendStr(b, msg)
	return endFrame(b, start)
}

// AppendNotLeader appends a follower's error reply [1, id, 14, msg, leader]:
// code CodeNotLeader with a fifth element, leader, the client address
// (host:port) of the cluster's leader, or "" when the follower knows none.
// id is the request's id, or 0 when it could not be decoded. A client reads
// leader as Message.Leader.
func AppendNotLeader(b []byte, id uint64, msg, leader string) []byte {
	b, start := beginFrame(b)
	b = append(b, 0x95, byte(KindError))
	b = appendUint(b, id)
	b = appendUint(b, uint64(CodeNotLeader))
	b = appendStr(b, msg)
	b = appendStr(b, leader)
	return endFrame(b, start)
}

// AppendFire appends the fire event [2, receiver, tid, tick, fired, repeat,
// last, data, seq, late].
func AppendFire(b []byte, f *Fire) []byte {
	b, start := beginFrame(b)
	b = append(b, 0x9a, byte(KindFire))
	b = appendUint(b, f.Receiver)
	b = appendUint(b, f.Tid)
	b = appendUint(b, f.Tick)
	b = appendUint(b, f.Fired)
	b = appendUint(b, f.Repeat)
	b = appendBool(b, f.Last)
	b = appendData(b, f.Data)
	b = appendUint(b, f.Seq)
	b = appendUint(b, f.Late)
	return endFrame(b, start)
}

// AppendTakeover appends the takeover notice [3, receiver, session]: receiver
// is now bound to the session with id session.
func AppendTakeover(b []byte, receiver, session uint64) []byte {
	b, start := beginFrame(b)
	b = append(b, 0x93, byte(KindTakeover))
	b = appendUint(b, receiver)
	b = appendUint(b, session)
	return endFrame(b, start)
}

// AppendDropped appends the notice [4, receiver, first_seq, last_seq]: the
// receiver's events first..last (sequence numbers, inclusive) were dropped
// from its backlog and will never be delivered. The server sends it to the
// receiver's session in the same turn as the drop, ahead of the receiver's
// later events.
func AppendDropped(b []byte, receiver, first, last uint64) []byte {
	b, start := beginFrame(b)
	b = append(b, 0x94, byte(KindDropped))
	b = appendUint(b, receiver)
	b = appendUint(b, first)
	b = appendUint(b, last)
	return endFrame(b, start)
}
