package server_test

import (
	"fmt"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/journal"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// turnRecord returns the record of a real turn: a recording Core applies
// adds adds (no data) from one session and the record is taken, as the
// server's commit does.
func turnRecord(b *testing.B, adds int) []byte {
	b.Helper()
	w, err := wheel.New(1000, wheel.Config{})
	if err != nil {
		b.Fatal(err)
	}
	c := session.New(session.Config{AdminToken: "bench", TickNs: 10_000_000}, session.Limits{}, w, nil, nil)
	c.Record(true)
	s := c.Open()
	c.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "bench", Token: "bench"})[4:])
	c.TakeRecord()
	var frame []byte
	for i := range uint64(adds) {
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 7, Tid: i, After: 100_000, Repeat: 1})
		c.Apply(s, frame[4:])
	}
	rec, _ := c.TakeRecord()
	return append([]byte(nil), rec...)
}

// BenchmarkJournalAppendTurn is journal.Append of one turn's record (a turn
// of 1 add, and one of 64 adds), as the server's commit does it, with each
// fsync policy: no and everysec (whose goroutine fsyncs meanwhile) append
// only; always also calls Sync, once per turn (group commit). The add path
// must not allocate: 0 allocs/op is the target.
func BenchmarkJournalAppendTurn(b *testing.B) {
	for _, adds := range []int{1, 64} {
		rec := turnRecord(b, adds)
		for _, pol := range []journal.SyncPolicy{journal.SyncNo, journal.SyncEverySec, journal.SyncAlways} {
			b.Run(fmt.Sprintf("adds=%d/fsync=%s", adds, pol), func(b *testing.B) {
				j, err := journal.Open(journal.Options{Dir: b.TempDir(), Sync: pol})
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close()
				turn := func() {
					if _, err := j.Append(rec); err != nil {
						b.Fatal(err)
					}
					if pol == journal.SyncAlways {
						if err := j.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
				// Warm the journal's and the library's buffers (with
				// everysec, through two background fsyncs: written records
				// are kept until fsynced).
				for k := 0; k < 1000 || pol == journal.SyncEverySec && j.Stats().Syncs < 2; k++ {
					turn()
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(rec)))
				b.ResetTimer()
				for b.Loop() {
					turn()
				}
				b.ReportMetric(float64(len(rec)), "record-bytes")
			})
		}
	}
}
