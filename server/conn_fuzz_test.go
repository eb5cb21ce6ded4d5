package server

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
)

// guardReceiver is the receiver of FuzzConn's well-behaved session: a
// number the fuzzed sessions have no reason to bind.
const guardReceiver = 0x6a7d_0000_5eed_0001

// FuzzConn writes arbitrary bytes to a real connection of an in-process
// server, after a hello or not, in two writes split at a fuzzed point, then
// half-closes it. The server must not crash, must answer with well-formed
// frames only, and must close the connection (within ioTimeout of each
// read); and a well-behaved session opened before the first input, on the
// same server, must keep working: after each input its add and fast
// forward fire its timer. The seeds are the request and malformed frames of
// protocol/testdata/vectors.json, alone, pipelined, and cut. Run it with
// go test -run '^$' -fuzz FuzzConn ./server/.
func FuzzConn(f *testing.F) {
	addConnSeeds(f)
	srv, err := New(Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken,
		DataDir: f.TempDir(), Persistence: "off"}, testLogger())
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			f.Errorf("stop: %v", err)
		}
	})
	gc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { gc.Close() })
	guard := &rawClient{conn: gc, r: bufio.NewReader(gc)}
	tid := uint64(0)
	f.Fuzz(func(t *testing.T, hello bool, split uint16, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		guard.t = t
		if tid == 0 {
			guard.sayHello("guard", srv.AdminToken())
			guard.bind(guardReceiver, false)
		}

		c := dial(t, srv)
		if hello {
			c.sayHello("fuzz", "")
		}
		k := int(split) % (len(data) + 1)
		c.write(data[:k])
		if k < len(data) {
			c.write(data[k:])
		}
		if err := c.conn.(*net.TCPConn).CloseWrite(); err != nil && !isClosedErr(err) {
			t.Fatalf("half-close: %v", err)
		}
		c.readUntilClosed() // fails on a malformed server frame or a timeout

		tid++
		guard.add(protocol.Request{Receiver: guardReceiver, Tid: tid, After: 1, Data: []byte("alive")})
		guard.ff(1)
		var got bool
		for _, fr := range guard.fires() {
			if fr.Receiver == guardReceiver && fr.Tid == tid && string(fr.Data) == "alive" {
				got = true
			}
		}
		if !got {
			t.Fatalf("the guard's timer %d did not fire after input %x (hello %v, split %d)", tid, data, hello, k)
		}
	})
}

// addConnSeeds adds FuzzConn's seeds from protocol/testdata/vectors.json.
func addConnSeeds(f *testing.F) {
	b, err := os.ReadFile("../protocol/testdata/vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	var v struct {
		Requests  []struct{ Hex string } `json:"requests"`
		Malformed []struct{ Hex string } `json:"malformed"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		f.Fatal(err)
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	var all []byte
	for _, r := range v.Requests {
		fr := unhex(r.Hex)
		all = append(all, fr...)
		f.Add(true, uint16(len(fr)/2), fr)
		f.Add(false, uint16(0), fr)
	}
	f.Add(true, uint16(len(all)/3), all)
	f.Add(false, uint16(7), all)
	for _, m := range v.Malformed {
		fr := unhex(m.Hex)
		f.Add(true, uint16(len(fr)-1), fr)
	}
	f.Add(true, uint16(3), []byte{0, 0, 0})
	f.Add(false, uint16(0), []byte{})
}
