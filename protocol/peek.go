package protocol

import "encoding/binary"

// PeekAdd reads, from a request payload that may be an add, what a server
// can fetch ahead of applying it: its request id, receiver and tid, and
// the client id when the payload ends with one as the Go, TypeScript, Java
// and C++ clients encode it (the add's last argument, a msgpack uint64:
// 0xcf and 8 bytes); client is 0 otherwise. ok is false when payload does
// not start as an add with receiver and tid ([4, id, receiver, tid, ...],
// a fixarray or array 16, the integers unsigned or nil, as clients send
// them; DecodeRequest takes more forms, which PeekAdd leaves).
//
// It is a hint, not a decoding: it checks nothing after the tid (a payload
// it accepts may still be malformed, and one whose last 9 bytes merely
// look like a uint64 gives a client id that is not one), reads only
// payload, and never allocates. DecodeRequest decides what the request is.
// It is written out rather than through reader, which cost a pipelined add
// about 40 ns where this costs a few.
func PeekAdd(payload []byte) (id, receiver, tid, client uint64, ok bool) {
	if len(payload) < 5 {
		return 0, 0, 0, 0, false
	}
	i := 1
	switch c := payload[0]; {
	case c >= 0x94 && c <= 0x9f: // fixarray of at least 4
	case c == 0xdc && payload[1] == 0 && payload[2] >= 4: // array 16 of 4 to 255
		i = 3
	default:
		return 0, 0, 0, 0, false
	}
	if i >= len(payload) || payload[i] != byte(OpAdd) {
		return 0, 0, 0, 0, false
	}
	i++
	var ok1, ok2, ok3 bool
	id, i, ok1 = peekUint(payload, i, false)
	receiver, i, ok2 = peekUint(payload, i, true)
	tid, i, ok3 = peekUint(payload, i, true)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, 0, 0, false
	}
	if n := len(payload); n >= i+9 && payload[n-9] == 0xcf {
		client = binary.BigEndian.Uint64(payload[n-8:])
	}
	return id, receiver, tid, client, true
}

// peekUint reads the msgpack unsigned integer (or nil, as 0, when nilOK)
// at b[i], and returns it and the index after it.
func peekUint(b []byte, i int, nilOK bool) (uint64, int, bool) {
	if i >= len(b) {
		return 0, i, false
	}
	c := b[i]
	switch {
	case c <= 0x7f:
		return uint64(c), i + 1, true
	case c == 0xc0:
		return 0, i + 1, nilOK
	case c < 0xcc || c > 0xcf:
		return 0, i, false
	}
	n := 1 << (c - 0xcc)
	if i+1+n > len(b) {
		return 0, i, false
	}
	p := b[i+1 : i+1+n]
	switch n {
	case 1:
		return uint64(p[0]), i + 2, true
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), i + 3, true
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), i + 5, true
	}
	return binary.BigEndian.Uint64(p), i + 9, true
}
