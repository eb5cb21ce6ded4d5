package server

import (
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
)

// BenchmarkCommitTurn is the server's end-of-turn commit (Server.commit:
// the turn's record taken and appended to the log, fsync no, the
// snapshot's bookkeeping) after a turn of one add, on a server that is not
// started (no event loop: nothing else runs). It guards the single-node
// fast path against the cost of the commit seam: compare before/after
// with -count 10 and benchstat.
func BenchmarkCommitTurn(b *testing.B) {
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: b.TempDir(),
		Persistence: "on", Fsync: "no"}
	cfg.Snapshot.EveryRecords = 1 << 40 // one snapshot, the first
	srv, err := New(cfg, testLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer srv.closeLog()
	c := srv.core
	sess := c.Open()
	c.Apply(sess, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version,
		Name: "bench", Token: testAdminToken})[4:])
	srv.commit()
	var frame []byte
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 7, Tid: i % 1024,
			After: 100_000, Repeat: 1})
		c.Apply(sess, frame[4:])
		srv.commit()
	}
}
