package protocol

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitFrame(t *testing.T) {
	tests := []struct {
		name    string
		hex     string
		max     int
		payload string // hex
		n       int
		err     error
	}{
		{"empty buffer", "", 0, "", 0, ErrIncomplete},
		{"truncated header", "00 00 00", 0, "", 0, ErrIncomplete},
		{"truncated payload", "00 00 00 03 92 0b", 0, "", 0, ErrIncomplete},
		{"header only", "00 00 00 03", 0, "", 0, ErrIncomplete},
		{"whole frame", "00 00 00 03 92 0b 01", 0, "92 0b 01", 7, nil},
		{"frame and more", "00 00 00 03 92 0b 01 00 00", 0, "92 0b 01", 7, nil},
		{"length 0", "00 00 00 00 92 0b 01", 0, "", 0, ErrEmptyFrame},
		{"at max", "00 00 00 03 92 0b 01", 3, "92 0b 01", 7, nil},
		{"over max, payload not arrived", "00 00 00 04", 3, "", 0, ErrFrameTooLarge},
		{"over default max", "00 01 00 01", 0, "", 0, ErrFrameTooLarge},
		{"at default max, incomplete", "00 01 00 00", 0, "", 0, ErrIncomplete},
		{"4 GB", "ff ff ff ff 00", -1, "", 0, ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, n, err := SplitFrame(unhex(t, tt.hex), tt.max)
			assert.Equal(t, tt.err, err)
			assert.Equal(t, tt.n, n)
			if tt.err == nil {
				assert.Equal(t, unhex(t, tt.payload), p)
				assert.Equal(t, len(p), cap(p))
			} else {
				assert.Nil(t, p)
			}
		})
	}
}

// streamDecoder is what a server does with a connection: append what
// arrives, split off whole frames, decode them, keep the rest.
type streamDecoder struct {
	buf []byte
	max int
}

// feed appends chunk and calls fn with every whole frame's payload, which is
// valid only during the call. It returns the first frame error.
func (s *streamDecoder) feed(chunk []byte, fn func(payload []byte)) error {
	s.buf = append(s.buf, chunk...)
	off := 0
	defer func() { s.buf = s.buf[:copy(s.buf, s.buf[off:])] }()
	for {
		p, n, err := SplitFrame(s.buf[off:], s.max)
		if err == ErrIncomplete {
			return nil
		}
		if err != nil {
			return err
		}
		fn(p)
		off += n
	}
}

// TestSplitInput: a random pipeline of requests, cut into random chunks (one
// byte, a few bytes, many frames at once), decodes to the same requests.
func TestSplitInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var want []Request
		var stream []byte
		for range 1 + rng.IntN(50) {
			r := randRequest(rng)
			want = append(want, r)
			stream = AppendRequest(stream, &r)
		}
		s := streamDecoder{max: DefaultMaxFrame}
		var got []Request
		for rest := stream; len(rest) > 0; {
			var k int
			switch rng.IntN(3) {
			case 0:
				k = 1
			case 1:
				k = 1 + rng.IntN(8)
			default:
				k = 1 + rng.IntN(len(rest))
			}
			k = min(k, len(rest))
			require.NoError(t, s.feed(rest[:k], func(p []byte) {
				var r Request
				require.NoError(t, DecodeRequest(p, &r))
				r.Data = append([]byte(nil), r.Data...) // the buffer is reused
				if len(r.Data) == 0 {
					r.Data = nil
				}
				got = append(got, r)
			}))
			rest = rest[k:]
		}
		require.Empty(t, s.buf, "round %d", round)
		require.Equal(t, len(want), len(got), "round %d", round)
		for i := range want {
			requireSameRequest(t, want[i], got[i])
		}
	}
}

// TestSplitInputServerMessages: the same for a stream of server messages.
func TestSplitInputServerMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var stream []byte
	var want []Message
	for i := range 500 {
		switch i % 3 {
		case 0:
			f := Fire{Receiver: randUint(rng), Tid: randUint(rng), Tick: randUint(rng), Seq: uint64(i)}
			if rng.IntN(2) == 0 {
				f.Data = []byte("payload")
			}
			stream = AppendFire(stream, &f)
			want = append(want, Message{Kind: KindFire, Fire: f})
		case 1:
			stream = AppendTakeover(stream, uint64(i), 7)
			want = append(want, Message{Kind: KindTakeover, Receiver: uint64(i), Session: 7})
		default:
			stream = AppendError(stream, uint64(i), CodeBadState, "timer not paused")
			want = append(want, Message{Kind: KindError, ID: uint64(i), Code: CodeBadState, Text: "timer not paused"})
		}
	}
	s := streamDecoder{max: DefaultMaxFrame}
	var got []Message
	for rest := stream; len(rest) > 0; {
		k := min(1+rng.IntN(40), len(rest))
		require.NoError(t, s.feed(rest[:k], func(p []byte) {
			var m Message
			require.NoError(t, DecodeMessage(p, &m))
			m.Fire.Data = append([]byte(nil), m.Fire.Data...)
			if len(m.Fire.Data) == 0 {
				m.Fire.Data = nil
			}
			got = append(got, m)
		}))
		rest = rest[k:]
	}
	assert.Equal(t, want, got)
}

func TestStreamFrameErrors(t *testing.T) {
	s := streamDecoder{max: 16}
	// An oversize header is reported as soon as the header is complete.
	assert.NoError(t, s.feed([]byte{0, 0}, func([]byte) {}))
	assert.Equal(t, ErrFrameTooLarge, s.feed([]byte{0, 17}, func([]byte) {}))
	s = streamDecoder{max: 16}
	assert.Equal(t, ErrEmptyFrame, s.feed(unhex(t, "00 00 00 03 92 0b 01 00 00 00 00"), func([]byte) {}))
}
