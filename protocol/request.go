package protocol

// Request is a decoded client request. Which fields are meaningful depends on
// Op; the others are zero. Arguments the client omitted, or sent as nil, hold
// their default (0, false, "", nil).
type Request struct {
	Op Op
	ID uint64 // chosen by the client, echoed in the reply

	Version uint64 // hello: protocol version, must equal Version
	Name    string // hello: client name, free-form (for logs and stats)
	Token   string // hello: auth / admin token

	Receiver uint64 // bind, unbind, add, cancel, get, list, cancel_all, pause, resume, ack, pause_all, resume_all
	Tid      uint64 // add, cancel, get, pause, resume

	// FromTid is list's cursor: the page holds the receiver's timers with
	// tid >= FromTid (0, the default, starts at the first). Pass the
	// previous reply's next to get the following page.
	FromTid uint64
	// Limit is the most timers list may return in one page; 0 (the
	// default), or more than the server's max_list_page, means
	// max_list_page. The server also stops a page at max_list_bytes.
	Limit uint64

	After  uint64 // add: first firing after this many ticks (when At is 0)
	At     uint64 // add: first firing at this absolute tick (wins over After when non-zero)
	Every  uint64 // add: interval between firings; 0 means the first delay
	Repeat uint64 // add: number of firings, 0 = forever; as sent: the server validates <= 2^32-1

	// Data is the add's opaque payload. It aliases the decoded payload (no
	// copy): copy it before the payload buffer is reused. It is nil when
	// absent, nil or empty.
	Data []byte

	Replace   bool // add: replace an existing timer instead of failing with exists
	Ephemeral bool // bind: cancel the receiver's timers when this session closes
	// Ack binds in acknowledged mode: the server keeps each event of the
	// receiver in its outbox until an ack covers its sequence number, and
	// delivers it again on the next bind if none did.
	Ack bool
	// Seq is ack's sequence number: every event of the receiver up to and
	// including it has been handled.
	Seq uint64

	// AfterNs, when non-zero, is the add's first delay as a duration of
	// tw-time in nanoseconds, counted from the instant the server applies
	// the request (inside the current tick, not from its start): the
	// timer is due at the first tick boundary at or after that instant
	// plus AfterNs, so at speed 1 it never fires before AfterNs of real
	// time has passed since the server read the request. It wins over
	// After and is ignored when At is non-zero. Every, when 0, then means
	// the first delay rounded up to whole ticks.
	AfterNs uint64
	// Schedule is the add's calendar schedule: a cron expression (5
	// fields, or a descriptor such as @daily or @every 90s) evaluated on
	// tw-time's calendar in Zone. Empty means none.
	Schedule string
	// Zone is the IANA time zone name Schedule is evaluated in ("" means
	// UTC).
	Zone string
	// Missed is the add's policy for firings that fell in a downtime the
	// server catches up after: MissedAll, MissedOnce or MissedSkip; as
	// sent: the server validates it.
	Missed uint64

	// Group is add's group (0, the default: none), kept with the timer; for
	// pause_all and resume_all, non-zero selects the group's timers
	// instead of the receiver's (Receiver must then be 0); for
	// cancel_group and list_group, the group.
	Group uint64
	// FromReceiver and FromTid are list_group's cursor: the page holds
	// the group's timers whose (receiver, tid) is at least (FromReceiver,
	// FromTid), in that order. Pass the previous reply's next_receiver and
	// next_tid to get the following page.
	FromReceiver uint64

	Ticks uint64  // fast_forward
	Speed float64 // set_speed: as sent, NaN and infinities included; the server validates

	// Command is the cluster op's sub-command (ClusterStatus, ClusterAdd,
	// ClusterAddNonvoter, ClusterPromote, ClusterRemove), as sent: the
	// server validates it. Node is the node id they name (not status),
	// Addr the raft address the adds give it.
	Command, Node, Addr string

	// Client, when non-zero, makes a change request (add, cancel, pause,
	// resume, and the bulk ops cancel_all, pause_all, resume_all and
	// cancel_group) idempotent: it names the client, and with
	// ID identifies the request, so that the server, which remembers the
	// outcome of recent identified changes, answers a retry of one it
	// applied with the first reply instead of applying it again (see
	// PROTOCOL.md, "Retrying changes"). A client that sets it must not use
	// one ID for two different change requests. It is the op's last
	// argument; 0 (the default) is left out on the wire.
	Client uint64
}

// opArgs lists each op's arguments, in wire order after op and id.
var opArgs = [len(opNames)][]field{
	OpHello:       {fVersion, fName, fToken},
	OpBind:        {fReceiver, fEphemeral, fAck},
	OpUnbind:      {fReceiver},
	OpAdd:         {fReceiver, fTid, fAfter, fAt, fEvery, fRepeat, fData, fReplace, fAfterNs, fSchedule, fZone, fMissed, fGroup, fClient},
	OpCancel:      {fReceiver, fTid, fClient},
	OpGet:         {fReceiver, fTid},
	OpList:        {fReceiver, fFromTid, fLimit},
	OpCancelAll:   {fReceiver, fClient},
	OpCancelGroup: {fGroup, fClient},
	OpPauseAll:    {fReceiver, fGroup, fClient},
	OpResumeAll:   {fReceiver, fGroup, fClient},
	OpListGroup:   {fGroup, fFromReceiver, fFromTid, fLimit},
	OpPause:       {fReceiver, fTid, fClient},
	OpResume:      {fReceiver, fTid, fClient},
	OpAck:         {fReceiver, fSeq},
	OpFastForward: {fTicks},
	OpSetSpeed:    {fSpeed},
	OpCluster:     {fCommand, fNode, fAddr},
	// ping, freeze, resume_sync and stats take no arguments.
}

// baseArgs is, for an op whose later arguments were added after version
// 1 first shipped, how many arguments AppendRequest always encodes; the
// later ones are encoded only up to the last that is not at its default,
// so a request that uses none of them has the bytes it always had.
var baseArgs = [len(opNames)]int{
	OpAdd:         8,
	OpCancel:      2,
	OpCancelAll:   1,
	OpCancelGroup: 1,
	OpPause:       2,
	OpResume:      2,
	OpPauseAll:    2,
	OpResumeAll:   2,
}

// Missed-firing policies of an add (Request.Missed): what a repeating
// timer does with the firings that fell in a downtime the server caught
// up after.
const (
	MissedAll  = 0 // deliver every missed firing, in order, each marked late (the default)
	MissedOnce = 1 // deliver one late firing, then continue on schedule
	MissedSkip = 2 // deliver none; the next firing is the next on schedule
)

func (r *Request) uintField(f field) *uint64 {
	switch f {
	case fVersion:
		return &r.Version
	case fReceiver:
		return &r.Receiver
	case fTid:
		return &r.Tid
	case fAfter:
		return &r.After
	case fAt:
		return &r.At
	case fEvery:
		return &r.Every
	case fRepeat:
		return &r.Repeat
	case fTicks:
		return &r.Ticks
	case fFromTid:
		return &r.FromTid
	case fLimit:
		return &r.Limit
	case fSeq:
		return &r.Seq
	case fAfterNs:
		return &r.AfterNs
	case fMissed:
		return &r.Missed
	case fGroup:
		return &r.Group
	case fFromReceiver:
		return &r.FromReceiver
	case fClient:
		return &r.Client
	}
	return nil
}

// DecodeRequest decodes one request payload (as returned by SplitFrame) into
// r, which is reset first.
//
// The payload must be exactly one msgpack array [op, id, args...]. Integers
// may use any msgpack integer encoding, signed ones included, but must not be
// negative; nil stands for an omitted argument; omitted trailing arguments
// take their defaults; elements after the op's arguments are skipped (they
// must still be valid msgpack, nested at most 32 deep). Every declared length
// is checked against the bytes left before it is used, so hostile input costs
// time linear in its size and no memory.
//
// It returns an error wrapping ErrMalformed for anything else, or one
// wrapping ErrUnknownOp when the request is well-formed but its op is not
// defined (r.Op then holds the op if it fits in a uint8, else 0). On error
// r.ID holds the request id if it was decoded, else 0, and the other fields
// are unspecified. Errors are static values: decoding never allocates,
// except the Name and Token strings of a hello, the Schedule and Zone
// strings of an add that has them, and a cluster op's strings.
func DecodeRequest(payload []byte, r *Request) error {
	*r = Request{}
	rd := reader{b: payload}
	n, p := rd.arrayLen()
	if p != pOK {
		return reqErr(0, fMessage, p)
	}
	if n < 2 {
		return reqErr(0, fMessage, pTooShort)
	}
	op, p := rd.uint(false)
	if p != pOK {
		return reqErr(0, fOp, p)
	}
	if op <= 255 {
		r.Op = Op(op)
	}
	if r.ID, p = rd.uint(false); p != pOK {
		return reqErr(0, fID, p)
	}
	n -= 2
	if op > 255 || !Op(op).Valid() {
		if p = rd.skipValues(uint64(n), 0); p != pOK {
			return reqErr(0, fTrailing, p)
		}
		if rd.left() != 0 {
			return reqErr(0, fMessage, pTrailing)
		}
		return unknownOpErr(op)
	}
	o := Op(op)
	var f field
	if o == OpAdd {
		n, f, p = decodeAddArgs(&rd, n, r)
	} else {
		n, f, p = decodeArgs(&rd, o, n, r)
	}
	if p != pOK {
		return reqErr(o, f, p)
	}
	return decodeRest(&rd, o, n)
}

// decodeArgs decodes op o's arguments (opArgs) into r, in wire order, from
// rd, where n elements are left after op and id, and returns the elements
// left after them, or the field that failed and why.
func decodeArgs(rd *reader, o Op, n int, r *Request) (int, field, problem) {
	var p problem
	for _, f := range opArgs[o] {
		if n == 0 {
			break
		}
		n--
		switch f {
		case fName, fToken, fSchedule, fZone, fCommand, fNode, fAddr:
			var v []byte
			if v, p = rd.bytes(true); p == pOK && len(v) > 0 {
				*r.strField(f) = string(v)
			}
		case fData:
			if r.Data, p = rd.bytes(true); len(r.Data) == 0 {
				r.Data = nil
			}
		case fReplace:
			r.Replace, p = rd.boolean()
		case fEphemeral:
			r.Ephemeral, p = rd.boolean()
		case fAck:
			r.Ack, p = rd.boolean()
		case fSpeed:
			r.Speed, p = rd.float()
		default:
			*r.uintField(f), p = rd.uint(true)
		}
		if p != pOK {
			return n, f, p
		}
	}
	return n, 0, pOK
}

// decodeRest ends DecodeRequest of op o: the n elements left after its
// arguments are skipped, and nothing may follow them.
func decodeRest(rd *reader, o Op, n int) error {
	if p := rd.skipValues(uint64(n), 0); p != pOK {
		return reqErr(o, fTrailing, p)
	}
	if rd.left() != 0 {
		return reqErr(o, fMessage, pTrailing)
	}
	return nil
}

// AppendRequest appends r to b as one whole frame (header and payload) and
// returns the extended buffer. It encodes op, id and every argument r.Op
// takes, in wire order, and nothing else: an undefined op gives [op, id].
// Empty Data is encoded as nil. It does not check r.Repeat, r.Speed or the
// frame size against any server limit.
func AppendRequest(b []byte, r *Request) []byte {
	b, start := beginFrame(b)
	var args []field
	if r.Op.Valid() {
		args = opArgs[r.Op]
		for len(args) > baseArgs[r.Op] && baseArgs[r.Op] > 0 && r.isDefault(args[len(args)-1]) {
			args = args[:len(args)-1]
		}
	}
	b = appendArray(b, 2+len(args))
	b = appendUint(b, uint64(r.Op))
	b = appendUint(b, r.ID)
	if r.Op == OpAdd {
		b = appendAddArgs(b, r, len(args))
	} else {
		b = appendArgs(b, r, args)
	}
	return endFrame(b, start)
}

// appendArgs appends r's arguments args (a prefix of opArgs[r.Op]) in order.
func appendArgs(b []byte, r *Request, args []field) []byte {
	for _, f := range args {
		switch f {
		case fName, fToken, fSchedule, fZone, fCommand, fNode, fAddr:
			b = appendStr(b, *r.strField(f))
		case fData:
			b = appendData(b, r.Data)
		case fReplace:
			b = appendBool(b, r.Replace)
		case fEphemeral:
			b = appendBool(b, r.Ephemeral)
		case fAck:
			b = appendBool(b, r.Ack)
		case fSpeed:
			b = appendFloat(b, r.Speed)
		default:
			b = appendUint(b, *r.uintField(f))
		}
	}
	return b
}

func (r *Request) strField(f field) *string {
	switch f {
	case fName:
		return &r.Name
	case fToken:
		return &r.Token
	case fSchedule:
		return &r.Schedule
	case fCommand:
		return &r.Command
	case fNode:
		return &r.Node
	case fAddr:
		return &r.Addr
	}
	return &r.Zone
}

// isDefault reports whether argument f of r holds its default, so
// AppendRequest may leave it out when nothing after it is set. Only the
// arguments past baseArgs are asked.
func (r *Request) isDefault(f field) bool {
	switch f {
	case fSchedule, fZone:
		return *r.strField(f) == ""
	}
	return *r.uintField(f) == 0
}
