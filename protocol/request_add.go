package protocol

// decodeAddArgs is DecodeRequest's loop over opArgs[OpAdd] written out: n
// elements are left after op and id; it decodes up to the add's 14
// arguments into r, in wire order, and returns the elements left after
// them, or the field that failed and why. Each argument is decoded as the
// loop's case for its field does (TestDecodeAddArgsIsTheLoop and
// FuzzDecodeRequest compare the two on every input they make). Written
// out, with a positive fixint (the defaults, 0) read inline, an add's
// request as the Go client sends it with a client id (14 arguments)
// decodes in 1,017 instructions instead of 1,409 (BenchmarkDecodeRequestAddClient
// under cachegrind).
func decodeAddArgs(rd *reader, n int, r *Request) (int, field, problem) {
	var p problem
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Receiver, p = rd.uintOrNil(); p != pOK {
		return n, fReceiver, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Tid, p = rd.uintOrNil(); p != pOK {
		return n, fTid, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.After, p = rd.uintOrNil(); p != pOK {
		return n, fAfter, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.At, p = rd.uintOrNil(); p != pOK {
		return n, fAt, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Every, p = rd.uintOrNil(); p != pOK {
		return n, fEvery, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Repeat, p = rd.uintOrNil(); p != pOK {
		return n, fRepeat, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Data, p = rd.bytes(true); len(r.Data) == 0 {
		r.Data = nil
	}
	if p != pOK {
		return n, fData, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Replace, p = rd.boolean(); p != pOK {
		return n, fReplace, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.AfterNs, p = rd.uintOrNil(); p != pOK {
		return n, fAfterNs, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if v, p := rd.bytes(true); p != pOK {
		return n, fSchedule, p
	} else if len(v) > 0 {
		r.Schedule = string(v)
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if v, p := rd.bytes(true); p != pOK {
		return n, fZone, p
	} else if len(v) > 0 {
		r.Zone = string(v)
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Missed, p = rd.uintOrNil(); p != pOK {
		return n, fMissed, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Group, p = rd.uintOrNil(); p != pOK {
		return n, fGroup, p
	}
	if n == 0 {
		return 0, 0, pOK
	}
	n--
	if r.Client, p = rd.uintOrNil(); p != pOK {
		return n, fClient, p
	}
	return n, 0, pOK
}

// uintOrNil is uint(true) with a positive fixint, what most of an add's
// arguments are, read without the call.
func (r *reader) uintOrNil() (uint64, problem) {
	if r.i < len(r.b) && r.b[r.i] <= 0x7f {
		c := r.b[r.i]
		r.i++
		return uint64(c), pOK
	}
	return r.uint(true)
}

// appendAddArgs is AppendRequest's loop over the first n of
// opArgs[OpAdd] (8 to 14: the trailing defaults after the first 8 left
// out) written out, as decodeAddArgs is DecodeRequest's; with a client id
// every argument is encoded (TestAppendAddArgsIsTheLoop compares the two).
// An add with a client id as the Go client sends it: 445 instructions,
// 1,167 through the loop (BenchmarkAppendRequestAddClient under cachegrind).
func appendAddArgs(b []byte, r *Request, n int) []byte {
	b = appendUint(b, r.Receiver)
	b = appendUint(b, r.Tid)
	b = appendUint(b, r.After)
	b = appendUint(b, r.At)
	b = appendUint(b, r.Every)
	b = appendUint(b, r.Repeat)
	b = appendData(b, r.Data)
	b = appendBool(b, r.Replace)
	if n > 8 {
		b = appendUint(b, r.AfterNs)
	}
	if n > 9 {
		b = appendStr(b, r.Schedule)
	}
	if n > 10 {
		b = appendStr(b, r.Zone)
	}
	if n > 11 {
		b = appendUint(b, r.Missed)
	}
	if n > 12 {
		b = appendUint(b, r.Group)
	}
	if n > 13 {
		b = appendUint(b, r.Client)
	}
	return b
}
