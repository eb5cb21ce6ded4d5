package protocol

import (
	"encoding/binary"
	"math"
)

// Hand-written msgpack appenders. Each picks the smallest encoding, so the
// output is canonical: equal values give equal bytes.

// beginFrame appends a placeholder header and returns where it starts.
func beginFrame(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0), len(b)
}

// endFrame writes the length of the payload appended since start into the
// header at start. A payload over 2^32-1 bytes cannot be framed and panics;
// callers keep payloads within the maximum frame size.
func endFrame(b []byte, start int) []byte {
	n := len(b) - start - HeaderSize
	if uint64(n) > math.MaxUint32 {
		panic("protocol: frame payload exceeds 2^32-1 bytes")
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b
}

func appendArray(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	default:
		return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendMap(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	default:
		return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
	}
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendNil(b []byte) []byte { return append(b, 0xc0) }

func appendFloat(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(v))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= 31:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// appendData appends v as bin, or nil when v is empty: the protocol's
// "data bin|nil" fields never carry an empty bin.
func appendData(b []byte, v []byte) []byte {
	n := len(v)
	switch {
	case n == 0:
		return append(b, 0xc0)
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// uintSize is the length of appendUint(nil, v).
func uintSize(v uint64) int {
	switch {
	case v <= 0x7f:
		return 1
	case v <= math.MaxUint8:
		return 2
	case v <= math.MaxUint16:
		return 3
	case v <= math.MaxUint32:
		return 5
	default:
		return 9
	}
}

// dataSize is the length of appendData(nil, v).
func dataSize(v []byte) int {
	n := len(v)
	switch {
	case n == 0:
		return 1
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	default:
		return 5 + n
	}
}

// strSize returns the bytes appendStr takes for s.
func strSize(s string) int {
	n := len(s)
	switch {
	case n <= 31:
		return 1 + n
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	default:
		return 5 + n
	}
}
