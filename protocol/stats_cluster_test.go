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

// A cluster check's reply carries the check's id, which decodes back; the
// other sub-commands' replies keep their 6 keys.
func TestClusterCheckKey(t *testing.T) {
	for _, in := range []Cluster{
		{Role: "leader", Leader: "n1", Term: 2, CommitIndex: 9, AppliedIndex: 9, Check: 1764201600123456789,
			Members: []ClusterMember{{ID: "n1", RaftAddr: "127.0.0.1:7520", Voter: true}}},
		{Role: "leader", Leader: "n1", Term: 2},
	} {
		var m Message
		frame := AppendClusterOK(nil, 3, &in)
		if err := DecodeMessage(frame[HeaderSize:], &m); err != nil {
			t.Fatal(err)
		}
		if want := byte(0x86); in.Check != 0 && m.Result[1] != want+1 || in.Check == 0 && m.Result[1] != want {
			t.Fatalf("check %d: map header %x", in.Check, m.Result[1])
		}
		var out Cluster
		if err := DecodeCluster(m.Result, &out); err != nil {
			t.Fatal(err)
		}
		if out.Check != in.Check || out.Role != in.Role || len(out.Members) != len(in.Members) {
			t.Fatalf("decoded %+v, want %+v", out, in)
		}
	}
}
