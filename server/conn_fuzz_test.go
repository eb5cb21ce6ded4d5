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
// forward fire its timer. Two servers take the inputs (tight picks): one
// with the default limits, one with limits a few frames reach (max_frame
// 1 KiB, 4 KiB of output, 8 timers per receiver, ...). The seeds are the
// request and malformed frames of protocol/testdata/vectors.json, alone,
// pipelined, and cut. Run it with
// go test -run '^$' -fuzz FuzzConn ./server/.
func FuzzConn(f *testing.F) {
	addConnSeeds(f)
	servers := [2]*fuzzServer{newFuzzServer(f, nil), newFuzzServer(f, func(l *Limits) {
		l.MaxFrame, l.MaxData, l.MaxName = 1024, 256, 32
		l.MaxOutbound, l.MaxInbound = 4096, 4096
		l.MaxTimersPerReceiver, l.MaxReceiversPerSession, l.MaxBacklog, l.MaxListPage = 8, 8, 4, 2
	})}
	f.Fuzz(func(t *testing.T, hello, tight bool, split uint16, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		fs := servers[0]
		if tight {
			fs = servers[1]
		}
		c := dial(t, fs.srv)
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
		if !fs.guardFires(t) {
			t.Fatalf("the guard's timer %d did not fire after input %x (hello %v, split %d)", fs.tid, data, hello, k)
		}
	})
}

// fuzzServer is one of FuzzConn's servers and its well-behaved session.
type fuzzServer struct {
	srv   *Server
	guard *rawClient
	tid   uint64 // the guard's last timer
}

// newFuzzServer starts a server in memory, frozen, with the limits mutate
// sets, stopped when f ends, and dials its guard session.
func newFuzzServer(f *testing.F, mutate func(*Limits)) *fuzzServer {
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken,
		DataDir: f.TempDir(), Persistence: "off"}
	if mutate != nil {
		mutate(&cfg.Limits)
	}
	srv, err := New(cfg, testLogger())
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
	return &fuzzServer{srv: srv, guard: &rawClient{conn: gc, r: bufio.NewReader(gc)}}
}

// guardFires adds a one-shot timer on the guard's receiver, fast-forwards
// one tick and reports whether it fired (saying hello and binding first,
// the first time). Failures of the guard's requests fail t.
func (fs *fuzzServer) guardFires(t *testing.T) bool {
	g := fs.guard
	g.t = t
	if fs.tid == 0 {
		g.sayHello("guard", fs.srv.AdminToken())
		g.bind(guardReceiver, false)
	}
	fs.tid++
	g.add(protocol.Request{Receiver: guardReceiver, Tid: fs.tid, After: 1, Repeat: 1, Data: []byte("alive")})
	g.ff(1)
	for _, fr := range g.fires() {
		if fr.Receiver == guardReceiver && fr.Tid == fs.tid && string(fr.Data) == "alive" {
			return true
		}
	}
	return false
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
		f.Add(true, false, uint16(len(fr)/2), fr)
		f.Add(false, true, uint16(0), fr)
	}
	f.Add(true, false, uint16(len(all)/3), all)
	f.Add(true, true, uint16(len(all)/3), all)
	f.Add(false, false, uint16(7), all)
	for _, m := range v.Malformed {
		fr := unhex(m.Hex)
		f.Add(true, len(fr)%2 == 0, uint16(len(fr)-1), fr)
	}
	f.Add(true, true, uint16(3), []byte{0, 0, 0})
	f.Add(false, false, uint16(0), []byte{})
}
