package server

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// helloFrame is a valid hello request frame with id 1.
func helloFrame() []byte {
	return protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version})
}

// TestHostileFrames sends malformed and hostile input, each case on its own
// connection (after a hello or not). A malformed frame gets a malformed error
// reply and the connection is closed; the server does not crash, does not
// allocate in proportion to declared lengths, and other sessions and their
// timers are unaffected.
func TestHostileFrames(t *testing.T) {
	srv := startServer(t, func(c *Config) { c.Limits.MaxFrame = 1024; c.Limits.MaxData = 512 })

	// A bystander session with a timer that must keep firing throughout.
	guard := helloClient(t, srv, "guard")
	guard.bind(7, false)
	guard.add(protocol.Request{Receiver: 7, Tid: 1, After: 1, Data: []byte("alive")})
	guard.add(protocol.Request{Receiver: 8, Tid: 1, After: 1000}) // unbound receiver's timer
	fired := uint64(0)
	checkGuard := func(t *testing.T) {
		t.Helper()
		guard.ping()
		guard.ff(1)
		fs := guard.fires()
		require.Len(t, fs, 1, "the guard's timer still fires")
		fired++
		assert.Equal(t, fired, fs[0].Fired)
		assert.Equal(t, []byte("alive"), fs[0].Data)
		assert.Equal(t, uint64(2), guard.stats().Timers, "no timer was lost")
	}

	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	// malformed cases: bytes sent after an optional hello; the server must
	// reply malformed and close.
	cases := []struct {
		name  string
		hello bool
		send  []byte
	}{
		{"length 0", true, u32(0)},
		{"length 0 before hello", false, u32(0)},
		{"declared length max_frame+1", true, u32(1025)},
		{"declared length 4 GiB", false, cat(u32(0xffffffff), []byte{0x92, 11, 1})},
		{"not an array: int", true, frame([]byte{0x05})},
		{"not an array: map", true, frame([]byte{0x82, 0, 11, 1, 1})},
		{"not an array: str", false, frame([]byte{0xa4, 'p', 'i', 'n', 'g'})},
		{"empty array", true, frame([]byte{0x90})},
		{"array of one", true, frame([]byte{0x91, 11})},
		{"array32 claiming 4G elements", true, frame(cat([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, []byte{11, 1}))},
		{"array16 claiming 65535 elements", true, frame([]byte{0xdc, 0xff, 0xff, 11, 1})},
		{"map32 claiming 4G entries", true, frame([]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 11, 1})},
		{"bin32 data claiming 4 GiB", true, frame(cat([]byte{0x99, 4, 2, 1, 1, 1, 0, 0, 0, 0xc6}, u32(0xffffffff), []byte("xx")))},
		{"str32 name claiming 4 GiB", false, frame(cat([]byte{0x94, 1, 1, 1, 0xdb}, u32(0xffffffff), []byte("x")))},
		{"str32 token claiming 2 GiB", false, frame(cat([]byte{0x95, 1, 1, 1, 0xa1, 'n', 0xdb}, u32(0x7fffffff)))},
		{"array32 trailing arg claiming 4G elements", true, frame(cat([]byte{0x93, 11, 1, 0xdd}, u32(0xffffffff)))},
		{"ext32 trailing arg claiming 4 GiB", true, frame(cat([]byte{0x93, 11, 1, 0xc9}, u32(0xffffffff), []byte{1}))},
		{"deeply nested trailing arg", true, frame(cat([]byte{0x93, 11, 1}, repeat(0x91, 100), []byte{0}))},
		{"op is a string", true, frame([]byte{0x92, 0xa4, 'p', 'i', 'n', 'g', 1})},
		{"id is negative", true, frame([]byte{0x92, 11, 0xff})},
		{"id is nil", true, frame([]byte{0x92, 11, 0xc0})},
		{"receiver is a string", true, frame([]byte{0x93, 2, 3, 0xa1, '1'})},
		{"after is a bool", true, frame([]byte{0x95, 4, 3, 1, 1, 0xc3})},
		{"after is a float", true, frame([]byte{0x95, 4, 3, 1, 1, 0xca, 0x3f, 0x80, 0, 0})},
		{"after is negative", true, frame([]byte{0x95, 4, 3, 1, 1, 0xd0, 0xfe})},
		{"replace is an int", true, frame([]byte{0x9a, 4, 3, 1, 1, 1, 0, 0, 0, 0xc0, 1})},
		{"data is an int", true, frame([]byte{0x99, 4, 3, 1, 1, 1, 0, 0, 0, 5})},
		{"speed is a string", true, frame([]byte{0x93, 23, 3, 0xa1, '2'})},
		{"version is a string", false, frame([]byte{0x93, 1, 1, 0xa1, '1'})},
		{"invalid byte 0xc1", true, frame([]byte{0x93, 11, 1, 0xc1})},
		{"truncated inside the frame", true, frame([]byte{0x93, 4, 1, 0xcf, 0, 0})},
		{"trailing garbage after a ping", true, frame([]byte{0x92, 11, 1, 0xff, 0xff, 0xff})},
		{"trailing garbage after a hello", false, frame(cat(helloFrame()[4:], []byte{0}))},
		{"two values in one frame", true, frame([]byte{0x92, 11, 1, 0x92, 11, 2})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv)
			if tc.hello {
				c.sayHello("hostile", "")
			}
			c.write(tc.send)
			ms := c.readUntilClosed()
			require.Len(t, ms, 1, "one error reply, then the close")
			assert.Equal(t, protocol.KindError, ms[0].Kind)
			assert.Equal(t, protocol.CodeMalformed, ms[0].Code, ms[0].Text)
			if len(tc.send) >= 4 && binary.BigEndian.Uint32(tc.send) > 1024 {
				assert.Contains(t, ms[0].Text, "max_frame", "the error names the limit")
			}
			checkGuard(t)
		})
	}

	// Frames cut short, then the client closes: nothing to reply, no crash.
	for _, cut := range [][]byte{
		{0},
		{0, 0, 0},
		cat(u32(100), make([]byte, 10)),
		protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: 7, Tid: 99, After: 1})[:9],
	} {
		t.Run("truncated then close", func(t *testing.T) {
			c := dial(t, srv)
			c.sayHello("cut", "")
			c.write(cut)
			c.conn.(*net.TCPConn).CloseWrite()
			assert.Empty(t, c.readUntilClosed())
			checkGuard(t)
		})
	}

	// Random garbage, raw (its first bytes are a random frame header), then a
	// half-close so the server sees the end. Whatever the bytes, the server
	// answers at most with errors and closes.
	for seed := range uint64(20) {
		t.Run("random garbage", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			b := make([]byte, 16+rng.IntN(2048))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			c := dial(t, srv)
			if seed%2 == 0 {
				c.sayHello("garbage", "")
			}
			c.write(b)
			c.conn.(*net.TCPConn).CloseWrite()
			for _, m := range c.readUntilClosed() {
				assert.Equal(t, protocol.KindError, m.Kind)
			}
			checkGuard(t)
		})
	}

	// A framed random payload (below max_frame) is malformed or an error.
	for seed := range uint64(20) {
		t.Run("random framed payload", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			b := make([]byte, 1+rng.IntN(1000))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			c := dial(t, srv)
			c.sayHello("garbage", "")
			c.write(frame(b))
			c.conn.(*net.TCPConn).CloseWrite()
			for _, m := range c.readUntilClosed() {
				assert.Equal(t, protocol.KindError, m.Kind)
			}
			checkGuard(t)
		})
	}
}

// TestHostileLengthsDoNotAllocate: frames whose msgpack headers declare
// gigabytes cost the server nothing in proportion.
func TestHostileLengthsDoNotAllocate(t *testing.T) {
	srv := startServer(t, nil)
	guard := helloClient(t, srv, "guard")
	bodies := [][]byte{
		{0xdd, 0xff, 0xff, 0xff, 0xff, 11, 1},                                     // array32
		{0x99, 4, 2, 1, 1, 1, 0, 0, 0, 0xc6, 0xff, 0xff, 0xff, 0xff, 'x'},         // bin32 data
		{0x94, 1, 1, 1, 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},                        // str32 name
		{0x93, 11, 1, 0xdf, 0xff, 0xff, 0xff, 0xff, 1, 1},                         // map32 trailing
		{0x93, 11, 1, 0xdd, 0x7f, 0xff, 0xff, 0xff, 0xdd, 0x7f, 0xff, 0xff, 0xff}, // nested array32
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		for _, b := range bodies {
			c := dial(t, srv)
			c.write(frame(b))
			ms := c.readUntilClosed()
			require.Len(t, ms, 1)
			require.Equal(t, protocol.CodeMalformed, ms[0].Code, ms[0].Text)
			c.conn.Close()
		}
	}
	guard.ping()
	runtime.ReadMemStats(&after)
	// 50 hostile frames declaring GiBs each: a decoder that trusted one
	// length would allocate hundreds of MB. Connections and the test's own
	// buffers cost a few MB at most.
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB during 50 hostile frames", allocated/1024)
	assert.Less(t, allocated, uint64(16<<20))
}

func repeat(b byte, n int) []byte {
	s := make([]byte, n)
	for i := range s {
		s[i] = b
	}
	return s
}
