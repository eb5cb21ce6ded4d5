package protocol

// PeekAdd reads, from a request payload that may be an add, what a server
// can fetch ahead of applying it: its request id, receiver and tid, and
// the client id when the payload ends with one as the Go, TypeScript, Java
// and C++ clients encode it (the add's last argument, a msgpack uint64:
// 0xcf and 8 bytes); client is 0 otherwise. ok is false when payload does
// not start as an add with receiver and tid ([4, id, receiver, tid, ...]).
//
// It is a hint, not a decoding: it checks nothing after the tid (a payload
// it accepts may still be malformed, and one whose last 9 bytes merely
// look like a uint64 gives a client id that is not one), reads only
// payload, and never allocates. DecodeRequest decides what the request is.
func PeekAdd(payload []byte) (id, receiver, tid, client uint64, ok bool) {
	rd := reader{b: payload}
	if n, p := rd.arrayLen(); p != pOK || n < 4 {
		return 0, 0, 0, 0, false
	}
	if op, p := rd.uint(false); p != pOK || op != uint64(OpAdd) {
		return 0, 0, 0, 0, false
	}
	var p1, p2, p3 problem
	id, p1 = rd.uint(false)
	receiver, p2 = rd.uint(true)
	tid, p3 = rd.uint(true)
	if p1 != pOK || p2 != pOK || p3 != pOK {
		return 0, 0, 0, 0, false
	}
	if n := len(payload); n >= rd.i+9 && payload[n-9] == 0xcf {
		r := reader{b: payload[n-8:]}
		client, _ = r.fixed(8)
	}
	return id, receiver, tid, client, true
}
