package protocol

import "testing"

// A cluster node's stats carry the raft keys, which decode back; a single
// server's stats frame has 17 keys and none of them.
func TestStatsClusterKeys(t *testing.T) {
	in := Stats{Now: 5, Speed: 1, Role: "follower", Leader: "n2", Term: 3, CommitIndex: 40, AppliedIndex: 39}
	var m Message
	frame := AppendStatsOK(nil, 7, &in)
	if err := DecodeMessage(frame[HeaderSize:], &m); err != nil {
		t.Fatal(err)
	}
	var out Stats
	if err := DecodeStats(m.Result, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	single := AppendStatsOK(nil, 7, &Stats{Now: 5, Speed: 1})
	if err := DecodeMessage(single[HeaderSize:], &m); err != nil {
		t.Fatal(err)
	}
	if r := m.Result; r[1] != 0xde || r[2] != 0 || r[3] != 17 { // [ map16 of 17 keys ]
		t.Fatalf("single server's stats map header % x, want 17 keys", r[1:4])
	}
}

// A server that remembers changes with a request id reports how many and
// their bytes, which decode back; with none remembered the keys are absent.
func TestStatsRequestIDKeys(t *testing.T) {
	in := Stats{Now: 5, Speed: 1, RequestIDs: 3, RequestIDBytes: 372}
	var m Message
	frame := AppendStatsOK(nil, 7, &in)
	if err := DecodeMessage(frame[HeaderSize:], &m); err != nil {
		t.Fatal(err)
	}
	if r := m.Result; r[3] != 19 {
		t.Fatalf("stats map header % x, want 19 keys", r[1:4])
	}
	var out Stats
	if err := DecodeStats(m.Result, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}
