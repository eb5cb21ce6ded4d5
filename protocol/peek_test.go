package protocol

import (
	"testing"
)

// checkPeekAdd checks PeekAdd against DecodeRequest's result for data (r
// and err): it reads nothing out of payload (no panic, any bytes), and of
// an add that decodes it gives, when ok, the id, receiver and tid
// DecodeRequest does; of any add as AppendRequest encodes it, the client id too when it
// takes 8 bytes (above 2^32: the clients' random ids) or 0.
func checkPeekAdd(t *testing.T, data []byte, r *Request, err error) {
	t.Helper()
	id, receiver, tid, client, ok := PeekAdd(data)
	if err != nil || r.Op != OpAdd {
		return
	}
	if ok && (id != r.ID || receiver != r.Receiver || tid != r.Tid) { // (not ok: an add of fewer than 4 elements)
		t.Fatalf("PeekAdd(%x) = %d %d %d %v, DecodeRequest: id %d receiver %d tid %d", data, id, receiver, tid, ok, r.ID, r.Receiver, r.Tid)
	}
	enc := AppendRequest(nil, r)
	id, receiver, tid, client, ok = PeekAdd(enc[HeaderSize:])
	want := uint64(0)
	if r.Client >= 1<<32 {
		want = r.Client
	}
	if !ok || id != r.ID || receiver != r.Receiver || tid != r.Tid || (client != want && r.Client >= 1<<32) {
		t.Fatalf("PeekAdd of %+v encoded = %d %d %d client %d %v", r, id, receiver, tid, client, ok)
	}
}

// TestPeekAdd: the adds a client sends, with and without a client id,
// give their keys and client id; other ops and short or broken payloads
// give ok false; every prefix of an add is read without a panic.
func TestPeekAdd(t *testing.T) {
	adds := []Request{
		{Op: OpAdd, ID: 7, Receiver: 3, Tid: 99, After: 1000},
		{Op: OpAdd, ID: 1 << 40, Receiver: 1 << 50, Tid: 1<<64 - 1, After: 5, Client: 0x9e3779b97f4a7c15},
		{Op: OpAdd, ID: 300, Receiver: 0, Tid: 1, Data: []byte("x"), Client: 0xcfcfcfcfcfcfcfcf},
		{Op: OpAdd, ID: 1, Receiver: 2, Tid: 3, Client: 77}, // a small client id: not read (0)
	}
	for _, r := range adds {
		enc := AppendRequest(nil, &r)
		p := enc[HeaderSize:]
		var d Request
		err := DecodeRequest(p, &d)
		if err != nil {
			t.Fatal(err)
		}
		checkPeekAdd(t, p, &d, err)
		id, receiver, tid, client, ok := PeekAdd(p)
		want := r.Client
		if want < 1<<32 {
			want = 0
		}
		if !ok || id != r.ID || receiver != r.Receiver || tid != r.Tid || client != want {
			t.Errorf("PeekAdd(%+v) = id %d receiver %d tid %d client %d ok %v", r, id, receiver, tid, client, ok)
		}
		for k := range len(p) {
			if _, _, _, _, ok := PeekAdd(p[:k]); ok && k < 4 {
				t.Errorf("PeekAdd of %d bytes of an add: ok", k)
			}
		}
	}
	for _, r := range []Request{{Op: OpCancel, ID: 1, Receiver: 2, Tid: 3}, {Op: OpGet, ID: 1, Receiver: 2, Tid: 3}, {Op: OpPing, ID: 9}} {
		enc := AppendRequest(nil, &r)
		if _, _, _, _, ok := PeekAdd(enc[HeaderSize:]); ok {
			t.Errorf("PeekAdd(%v): ok", r.Op)
		}
	}
	for _, p := range [][]byte{nil, {0x94}, {0x94, 0x04}, {0x94, 0x04, 0x01, 0x02}, {0xc1}, {0x94, 0x04, 0xff, 0x01, 0x02}} {
		if _, _, _, _, ok := PeekAdd(p); ok {
			t.Errorf("PeekAdd(%x): ok", p)
		}
	}
}
