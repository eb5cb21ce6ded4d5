package protocol

import (
	"encoding/binary"
	"math"
)

// maxDepth is how deeply skip lets ignored values nest. Deeper input is
// malformed, so hostile input cannot exhaust the stack.
const maxDepth = 32

// problem says what a reader method found wrong; pOK is no problem. Problems
// are small values, not errors, so that the decoders can report them without
// allocating.
type problem uint8

const (
	pOK        problem = iota
	pTruncated         // the value runs past the end of the payload
	pTooLong           // a declared length (array, map, str, bin) exceeds the bytes left
	pNegative          // a negative integer where a uint is expected
	pWrongType         // another msgpack type than the field takes
	pTooDeep           // an ignored value nests deeper than maxDepth
	pInvalid           // the byte 0xc1, which msgpack never uses
	pTooShort          // an array with fewer elements than required
	pTrailing          // bytes left after the message's one value
	pRange             // an integer too large for the field
	numProblems
)

// reader is a cursor over one msgpack payload. Every method checks bounds
// before reading and every declared length against the bytes left before
// using it; none allocates. After a problem the cursor position is unspecified.
type reader struct {
	b []byte
	i int
}

func (r *reader) left() int { return len(r.b) - r.i }

// head reads a type byte.
func (r *reader) head() (byte, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	r.i++
	return c, true
}

// fixed reads n bytes as a big-endian unsigned integer, n in {1, 2, 4, 8}.
func (r *reader) fixed(n int) (uint64, bool) {
	if r.left() < n {
		return 0, false
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	switch n {
	case 1:
		return uint64(p[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), true
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), true
	default:
		return binary.BigEndian.Uint64(p), true
	}
}

// containerLen reads an array (wantMap false) or map header and checks that
// the declared elements (2 per map entry), at least one byte each, fit in
// the bytes left.
func (r *reader) containerLen(wantMap bool) (int, problem) {
	c, ok := r.head()
	if !ok {
		return 0, pTruncated
	}
	var n uint64
	switch {
	case !wantMap && c >= 0x90 && c <= 0x9f:
		n = uint64(c & 0x0f)
	case wantMap && c >= 0x80 && c <= 0x8f:
		n = uint64(c & 0x0f)
	case !wantMap && c == 0xdc, wantMap && c == 0xde:
		if n, ok = r.fixed(2); !ok {
			return 0, pTruncated
		}
	case !wantMap && c == 0xdd, wantMap && c == 0xdf:
		if n, ok = r.fixed(4); !ok {
			return 0, pTruncated
		}
	default:
		return 0, pWrongType
	}
	need := n
	if wantMap {
		need *= 2
	}
	if need > uint64(r.left()) {
		return 0, pTooLong
	}
	return int(n), pOK
}

func (r *reader) arrayLen() (int, problem) { return r.containerLen(false) }
func (r *reader) mapLen() (int, problem)   { return r.containerLen(true) }

// uint reads a non-negative integer in any msgpack integer encoding: positive
// fixint, uint8..uint64, or int8..int64 holding a value >= 0. nil reads as 0
// when nilOK.
func (r *reader) uint(nilOK bool) (uint64, problem) {
	c, ok := r.head()
	if !ok {
		return 0, pTruncated
	}
	switch {
	case c <= 0x7f:
		return uint64(c), pOK
	case c >= 0xe0:
		return 0, pNegative
	}
	var v uint64
	switch c {
	case 0xc0:
		if nilOK {
			return 0, pOK
		}
		return 0, pWrongType
	case 0xcc, 0xcd, 0xce, 0xcf:
		if v, ok = r.fixed(1 << (c - 0xcc)); !ok {
			return 0, pTruncated
		}
		return v, pOK
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		if v, ok = r.fixed(n); !ok {
			return 0, pTruncated
		}
		if v>>(8*n-1) != 0 { // sign bit set
			return 0, pNegative
		}
		return v, pOK
	}
	return 0, pWrongType
}

// boolean reads true or false; nil reads as false.
func (r *reader) boolean() (bool, problem) {
	c, ok := r.head()
	if !ok {
		return false, pTruncated
	}
	switch c {
	case 0xc3:
		return true, pOK
	case 0xc2, 0xc0:
		return false, pOK
	}
	return false, pWrongType
}

// bytes reads a bin or str value and returns a view of its contents, capped
// so that appending to it cannot overwrite the payload. nil reads as nil
// when nilOK. An empty bin or str reads as an empty, non-nil slice.
func (r *reader) bytes(nilOK bool) ([]byte, problem) {
	c, ok := r.head()
	if !ok {
		return nil, pTruncated
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xc4 || c == 0xd9:
		n, ok = r.fixed(1)
	case c == 0xc5 || c == 0xda:
		n, ok = r.fixed(2)
	case c == 0xc6 || c == 0xdb:
		n, ok = r.fixed(4)
	case c == 0xc0 && nilOK:
		return nil, pOK
	default:
		return nil, pWrongType
	}
	if !ok {
		return nil, pTruncated
	}
	if n > uint64(r.left()) {
		return nil, pTooLong
	}
	end := r.i + int(n)
	v := r.b[r.i:end:end]
	r.i = end
	return v, pOK
}

// float reads a float32, float64 or any integer as a float64; nil reads as 0.
// NaN and infinities are returned as they are.
func (r *reader) float() (float64, problem) {
	c, ok := r.head()
	if !ok {
		return 0, pTruncated
	}
	switch {
	case c <= 0x7f:
		return float64(c), pOK
	case c >= 0xe0:
		return float64(int8(c)), pOK
	}
	var v uint64
	switch c {
	case 0xc0:
		return 0, pOK
	case 0xca:
		if v, ok = r.fixed(4); !ok {
			return 0, pTruncated
		}
		return float64(math.Float32frombits(uint32(v))), pOK
	case 0xcb:
		if v, ok = r.fixed(8); !ok {
			return 0, pTruncated
		}
		return math.Float64frombits(v), pOK
	case 0xcc, 0xcd, 0xce, 0xcf:
		if v, ok = r.fixed(1 << (c - 0xcc)); !ok {
			return 0, pTruncated
		}
		return float64(v), pOK
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		if v, ok = r.fixed(n); !ok {
			return 0, pTruncated
		}
		shift := 64 - 8*n // sign-extend
		return float64(int64(v<<shift) >> shift), pOK
	}
	return 0, pWrongType
}

// skip skips one value of any type, checking every length against the bytes
// left. depth is the nesting level of the value; elements of a container at
// level maxDepth are too deep. The work done is linear in the bytes skipped.
func (r *reader) skip(depth int) problem {
	c, ok := r.head()
	if !ok {
		return pTruncated
	}
	switch {
	case c <= 0x7f || c >= 0xe0:
		return pOK
	case c <= 0x8f:
		return r.skipValues(2*uint64(c&0x0f), depth)
	case c <= 0x9f:
		return r.skipValues(uint64(c&0x0f), depth)
	case c <= 0xbf:
		return r.skipBytes(uint64(c & 0x1f))
	}
	var n uint64
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return pOK
	case 0xc1:
		return pInvalid
	case 0xc4, 0xd9: // bin8, str8
		n, ok = r.fixed(1)
	case 0xc5, 0xda:
		n, ok = r.fixed(2)
	case 0xc6, 0xdb:
		n, ok = r.fixed(4)
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, type byte, data
		n, ok = r.fixed(1 << (c - 0xc7))
		n++
	case 0xca, 0xce, 0xd2:
		return r.skipFixed(4)
	case 0xcb, 0xcf, 0xd3:
		return r.skipFixed(8)
	case 0xcc, 0xd0:
		return r.skipFixed(1)
	case 0xcd, 0xd1:
		return r.skipFixed(2)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16: type byte and data
		return r.skipFixed(1 + 1<<(c-0xd4))
	case 0xdc, 0xdd, 0xde, 0xdf: // array16/32, map16/32
		if n, ok = r.fixed(2 << ((c - 0xdc) & 1)); !ok {
			return pTruncated
		}
		if c >= 0xde {
			n *= 2
		}
		return r.skipValues(n, depth)
	}
	if !ok {
		return pTruncated
	}
	return r.skipBytes(n)
}

// skipFixed skips the n bytes of a fixed-size value.
func (r *reader) skipFixed(n int) problem {
	if n > r.left() {
		return pTruncated
	}
	r.i += n
	return pOK
}

// skipBytes skips n bytes of declared length.
func (r *reader) skipBytes(n uint64) problem {
	if n > uint64(r.left()) {
		return pTooLong
	}
	r.i += int(n)
	return pOK
}

// skipValues skips n values that are the elements of a container at depth.
func (r *reader) skipValues(n uint64, depth int) problem {
	if n > uint64(r.left()) {
		return pTooLong
	}
	if n > 0 && depth >= maxDepth {
		return pTooDeep
	}
	for ; n > 0; n-- {
		if p := r.skip(depth + 1); p != pOK {
			return p
		}
	}
	return pOK
}
