package protocol

import "encoding/binary"

// SplitFrame returns the payload of the first frame in b and the number of
// bytes the frame occupies, header included; the next frame starts at b[n:].
// The payload aliases b (capped so appending to it cannot overwrite b).
//
// It returns ErrIncomplete, with n == 0, when b holds less than one whole
// frame: read more bytes and call again. It returns ErrEmptyFrame for a
// header declaring length 0 and ErrFrameTooLarge for one declaring more than
// maxFrame bytes; both are decided from the 4-byte header alone, before the
// payload arrives, and mean the stream cannot continue. maxFrame <= 0 means
// DefaultMaxFrame.
func SplitFrame(b []byte, maxFrame int) (payload []byte, n int, err error) {
	if len(b) < HeaderSize {
		return nil, 0, ErrIncomplete
	}
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	l := uint64(binary.BigEndian.Uint32(b))
	switch {
	case l == 0:
		return nil, 0, ErrEmptyFrame
	case l > uint64(maxFrame):
		return nil, 0, ErrFrameTooLarge
	case l > uint64(len(b)-HeaderSize):
		return nil, 0, ErrIncomplete
	}
	n = HeaderSize + int(l)
	return b[HeaderSize:n:n], n, nil
}
