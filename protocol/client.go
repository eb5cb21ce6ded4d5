package protocol

import "math"

// Client-side decoding of server messages. Like DecodeRequest these treat
// their input as hostile: every length is checked against the bytes left
// before it is used and nothing is allocated in proportion to a declared
// length. Unlike DecodeRequest they may allocate (error values, Text,
// ServerVersion, the DecodeListPage result). Forward compatibility: elements
// after the documented ones and unknown map keys are skipped.

// Message is a decoded server message. Which fields are meaningful depends
// on Kind.
type Message struct {
	Kind Kind
	ID   uint64 // ok, error: the request id

	// Result is the raw msgpack of an ok reply's result array. It aliases the
	// payload; decode it with DecodeUints, DecodeHello, DecodeTimer,
	// DecodeListPage or DecodeStats according to the request's op.
	Result []byte

	Code Code   // error
	Text string // error: human-readable message
	// Leader is a not_leader error's fifth element: the client address
	// (host:port) of the cluster's leader, "" when the follower knows none
	// or the element is absent (a 4-element error frame). It is read only
	// for code CodeNotLeader: a fifth element of another code is a later
	// addition this version skips.
	Leader string

	Fire Fire // fire; Fire.Data aliases the payload

	Receiver, Session uint64 // takeover: receiver is now bound to session; dropped: Receiver

	// First and Last are a dropped notice's range of sequence numbers,
	// inclusive.
	First, Last uint64
}

// dec wraps a reader with a sticky first error, for the client-side decoders.
type dec struct {
	rd   reader
	what string // the message or result being decoded, for errors
	err  error
}

func (d *dec) fail(part string, p problem, want string) {
	if d.err == nil {
		d.err = msgErr(d.what, part, p, want)
	}
}

func (d *dec) array(part string, min int) int {
	if d.err != nil {
		return 0
	}
	n, p := d.rd.arrayLen()
	if p == pOK && n < min {
		p = pTooShort
	}
	if p != pOK {
		d.fail(part, p, wantArray)
		return 0
	}
	return n
}

func (d *dec) mapLen(part string) int {
	if d.err != nil {
		return 0
	}
	n, p := d.rd.mapLen()
	if p != pOK {
		d.fail(part, p, wantMap)
	}
	return n
}

func (d *dec) uint(part string) uint64 {
	if d.err != nil {
		return 0
	}
	v, p := d.rd.uint(true)
	if p != pOK {
		d.fail(part, p, wantUint)
	}
	return v
}

func (d *dec) boolean(part string) bool {
	if d.err != nil {
		return false
	}
	v, p := d.rd.boolean()
	if p != pOK {
		d.fail(part, p, wantBool)
	}
	return v
}

func (d *dec) float(part string) float64 {
	if d.err != nil {
		return 0
	}
	v, p := d.rd.float()
	if p != pOK {
		d.fail(part, p, wantFloat)
	}
	return v
}

// data reads bin, str or nil; empty reads as nil.
func (d *dec) data(part string) []byte {
	if d.err != nil {
		return nil
	}
	v, p := d.rd.bytes(true)
	if p != pOK {
		d.fail(part, p, wantData)
	}
	if len(v) == 0 {
		return nil
	}
	return v
}

func (d *dec) str(part string) string {
	if d.err != nil {
		return ""
	}
	v, p := d.rd.bytes(true)
	if p != pOK {
		d.fail(part, p, wantStr)
	}
	return string(v)
}

// skip skips n values, elements of a container at depth.
func (d *dec) skip(n int, depth int) {
	if d.err != nil || n == 0 {
		return
	}
	if p := d.rd.skipValues(uint64(n), depth); p != pOK {
		d.fail("ignored trailing element", p, wantAny)
	}
}

// end checks that the input was consumed exactly.
func (d *dec) end() error {
	if d.err == nil && d.rd.left() != 0 {
		d.fail("message", pTrailing, "")
	}
	return d.err
}

// DecodeMessage decodes one server message payload (as returned by
// SplitFrame) into m, which is reset first. It returns an error wrapping
// ErrMalformed when the payload is not one well-formed message.
//
// A message whose kind this version does not define (0..255 other than the
// five kinds) is not an error: m.Kind holds it and nothing else is set;
// clients should ignore such messages.
func DecodeMessage(payload []byte, m *Message) error {
	*m = Message{}
	d := dec{rd: reader{b: payload}, what: "message"}
	n := d.array("message", 1)
	k := d.uint("kind")
	if d.err == nil && k > math.MaxUint8 {
		d.fail("kind", pRange, "")
	}
	if d.err != nil {
		return d.err
	}
	m.Kind = Kind(k)
	var min int
	switch m.Kind {
	case KindOK:
		min, d.what = 3, "ok"
	case KindError:
		min, d.what = 4, "error"
	case KindFire:
		min, d.what = 9, "fire"
	case KindTakeover:
		min, d.what = 3, "takeover"
	case KindDropped:
		min, d.what = 4, "dropped"
	default:
		d.skip(n-1, 0)
		return d.end()
	}
	if n < min {
		d.fail("message", pTooShort, "")
		return d.err
	}
	switch m.Kind {
	case KindOK:
		m.ID = d.uint("id")
		start := d.rd.i
		if d.array("result", 0); d.err == nil {
			d.rd.i = start
			if p := d.rd.skip(1); p != pOK {
				d.fail("result", p, wantArray)
			}
			m.Result = payload[start:d.rd.i:d.rd.i]
		}
	case KindError:
		m.ID = d.uint("id")
		c := d.uint("code")
		if d.err == nil && c > math.MaxUint16 {
			d.fail("code", pRange, "")
		}
		m.Code = Code(c)
		m.Text = d.str("message")
		if m.Code == CodeNotLeader && n > 4 {
			m.Leader = d.str("leader")
			min = 5
		}
	case KindFire:
		f := &m.Fire
		f.Receiver = d.uint("receiver")
		f.Tid = d.uint("tid")
		f.Tick = d.uint("tick")
		f.Fired = d.uint("fired")
		f.Repeat = d.uint("repeat")
		f.Last = d.boolean("last")
		f.Data = d.data("data")
		f.Seq = d.uint("seq")
		if n > 9 {
			f.Late = d.uint("late")
			min = 10
		}
	case KindTakeover:
		m.Receiver = d.uint("receiver")
		m.Session = d.uint("session")
	case KindDropped:
		m.Receiver = d.uint("receiver")
		m.First = d.uint("first_seq")
		m.Last = d.uint("last_seq")
	}
	d.skip(n-min, 0)
	if err := d.end(); err != nil {
		*m = Message{Kind: m.Kind, ID: m.ID}
		return err
	}
	return nil
}

// DecodeUints decodes an ok result that is an array of uints (bind, add,
// cancel_all, ping, ...) and appends the values to dst. nil elements read as
// 0; any other non-integer is an error.
func DecodeUints(result []byte, dst []uint64) ([]uint64, error) {
	d := dec{rd: reader{b: result}, what: "result"}
	n := d.array("result", 0)
	for range n {
		v := d.uint("element")
		if d.err != nil {
			break
		}
		dst = append(dst, v)
	}
	return dst, d.end()
}

// DecodeHello decodes the result of a hello into h, which is reset first.
// Unknown limits keys are ignored; missing ones read as 0.
func DecodeHello(result []byte, h *Hello) error {
	*h = Hello{}
	d := dec{rd: reader{b: result}, what: "hello result"}
	n := d.array("result", 5)
	h.Session = d.uint("session")
	h.Now = d.uint("now")
	h.TickNs = d.uint("tick_ns")
	h.ServerVersion = d.str("server_version")
	fields := h.Limits.fields()
	d.mapEntries("limits", func(key []byte) bool {
		for _, f := range fields {
			if f.key == string(key) {
				*f.v = d.uint(f.key)
				return true
			}
		}
		return false
	})
	d.skip(n-5, 0)
	return d.end()
}

// mapEntries reads a map (at depth 1). For each entry whose key is a str it
// calls value with the key, which reads the value and returns true, or
// returns false to have it skipped. Entries with other keys are skipped.
func (d *dec) mapEntries(part string, value func(key []byte) bool) {
	n := d.mapLen(part)
	for range n {
		if d.err != nil {
			return
		}
		key, p := d.rd.bytes(false)
		if p == pWrongType {
			d.rd.i-- // not a str: skip the key as any value
			p = d.rd.skip(2)
			key = nil
		}
		if p != pOK {
			d.fail(part+" key", p, wantStr)
			return
		}
		if key == nil || !value(key) {
			if p = d.rd.skip(2); p != pOK {
				d.fail(part+" value", p, wantAny)
			}
		}
	}
}

func (d *dec) timer(t *Timer) {
	n := d.array("timer", 9)
	t.Receiver = d.uint("receiver")
	t.Tid = d.uint("tid")
	t.Due = d.uint("due")
	t.Remaining = d.uint("remaining")
	t.Every = d.uint("every")
	t.Fired = d.uint("fired")
	t.Repeat = d.uint("repeat")
	t.Paused = d.boolean("paused")
	t.Data = d.data("data")
	if n >= 12 {
		t.Schedule = d.str("schedule")
		t.Zone = d.str("zone")
		t.Missed = d.uint("missed")
		n -= 3
		if n >= 10 {
			t.Group = d.uint("group")
			n--
		}
	}
	d.skip(n-9, 1)
}

// DecodeTimer decodes the result of a get, [timer], into t, which is reset
// first. t.Data aliases result.
func DecodeTimer(result []byte, t *Timer) error {
	*t = Timer{}
	d := dec{rd: reader{b: result}, what: "get result"}
	n := d.array("result", 1)
	d.timer(t)
	d.skip(n-1, 0)
	return d.end()
}

// DecodeListPage decodes the result of a list, one page of timers,
// [[timer, ...], next], appending the timers to dst; their Data alias
// result. next is the from_tid of the following page, or 0 when there is
// none; a result without next (a server that predates paging, which sends
// every timer at once) reads as 0.
func DecodeListPage(result []byte, dst []Timer) (ts []Timer, next uint64, err error) {
	d := dec{rd: reader{b: result}, what: "list result"}
	n := d.array("result", 1)
	dst = d.timers(dst)
	if n >= 2 {
		next = d.uint("next")
		n--
	}
	d.skip(n-1, 0)
	return dst, next, d.end()
}

// timers reads an array of timers, appending them to dst.
func (d *dec) timers(dst []Timer) []Timer {
	m := d.array("timers", 0)
	for range m {
		var t Timer
		d.timer(&t)
		if d.err != nil {
			break
		}
		dst = append(dst, t)
	}
	return dst
}

// DecodeListGroupPage decodes the result of a list_group, one page of a
// group's timers, [[timer, ...], next_receiver, next_tid], appending the
// timers to dst; their Data alias result. The next pair is the cursor of
// the following page, (0, 0) when there is none.
func DecodeListGroupPage(result []byte, dst []Timer) (ts []Timer, nextReceiver, nextTid uint64, err error) {
	d := dec{rd: reader{b: result}, what: "list_group result"}
	n := d.array("result", 3)
	dst = d.timers(dst)
	nextReceiver = d.uint("next_receiver")
	nextTid = d.uint("next_tid")
	d.skip(n-3, 0)
	return dst, nextReceiver, nextTid, d.end()
}

// DecodeList is DecodeListPage without next: it decodes the timers of one
// list page, appending them to dst. Use DecodeListPage to page on.
func DecodeList(result []byte, dst []Timer) ([]Timer, error) {
	ts, _, err := DecodeListPage(result, dst)
	return ts, err
}

// DecodeStats decodes the result of a stats, [stats], into s, which is reset
// first. Unknown keys are ignored; missing ones read as zero.
func DecodeStats(result []byte, s *Stats) error {
	*s = Stats{}
	d := dec{rd: reader{b: result}, what: "stats result"}
	n := d.array("result", 1)
	d.mapEntries("stats", func(key []byte) bool {
		var p *uint64
		switch string(key) {
		case "now":
			p = &s.Now
		case "target":
			p = &s.Target
		case "lag":
			p = &s.Lag
		case "timers":
			p = &s.Timers
		case "sessions":
			p = &s.Sessions
		case "connections":
			p = &s.Connections
		case "receivers":
			p = &s.Receivers
		case "backlog_events":
			p = &s.BacklogEvents
		case "outbox_events":
			p = &s.OutboxEvents
		case "waiting_firings":
			p = &s.WaitingFirings
		case "fired_total":
			p = &s.FiredTotal
		case "dropped_total":
			p = &s.DroppedTotal
		case "receiver_bytes":
			p = &s.ReceiverBytes
		case "retained_receivers":
			p = &s.RetainedReceivers
		case "request_ids":
			p = &s.RequestIDs
		case "request_id_bytes":
			p = &s.RequestIDBytes
		case "tick_ns":
			p = &s.TickNs
		case "speed":
			s.Speed = d.float("speed")
			return true
		case "frozen":
			s.Frozen = d.boolean("frozen")
			return true
		case "role":
			s.Role = d.str("role")
			return true
		case "leader":
			s.Leader = d.str("leader")
			return true
		case "term":
			p = &s.Term
		case "commit_index":
			p = &s.CommitIndex
		case "applied_index":
			p = &s.AppliedIndex
		case "suffrage":
			s.Suffrage = d.str("suffrage")
			return true
		case "voters":
			p = &s.Voters
		case "nonvoters":
			p = &s.Nonvoters
		default:
			return false
		}
		*p = d.uint(string(key))
		return true
	})
	d.skip(n-1, 0)
	return d.end()
}
