package protocol

import (
	"bytes"
	"slices"
	"testing"
)

// checkAddArgs checks that decodeAddArgs decodes data, when it starts as
// an add ([4, id, ...]), exactly as decodeArgs's loop does: the same
// request, elements left, failing field and problem, and bytes read.
func checkAddArgs(t *testing.T, data []byte) {
	t.Helper()
	rd := reader{b: data}
	n, p := rd.arrayLen()
	if p != pOK || n < 2 {
		return
	}
	if op, p := rd.uint(false); p != pOK || op != uint64(OpAdd) {
		return
	}
	if _, p := rd.uint(false); p != pOK {
		return
	}
	loop, fast := rd, rd
	var rl, rf Request
	nl, fl, pl := decodeArgs(&loop, OpAdd, n-2, &rl)
	nf, ff, pf := decodeAddArgs(&fast, n-2, &rf)
	if nl != nf || fl != ff || pl != pf || loop.i != fast.i {
		t.Fatalf("decodeAddArgs(%x) = left %d field %v problem %v at %d, the loop: %d %v %v at %d", data, nf, ff, pf, fast.i, nl, fl, pl, loop.i)
	}
	if !bytes.Equal(rl.Data, rf.Data) || (rl.Data == nil) != (rf.Data == nil) {
		t.Fatalf("decodeAddArgs(%x): data %x, the loop's %x", data, rf.Data, rl.Data)
	}
	requireSameRequest(t, rl, rf)
}

// TestDecodeAddArgsIsTheLoop: the add's written-out decoding reads the
// add's arguments in opArgs's order (a new argument must be added to
// both), and gives what the loop gives on adds of every length, with
// every argument, nil, wrong types and truncations (FuzzDecodeRequest
// checks random inputs the same way).
func TestDecodeAddArgsIsTheLoop(t *testing.T) {
	want := []field{fReceiver, fTid, fAfter, fAt, fEvery, fRepeat, fData, fReplace, fAfterNs, fSchedule, fZone, fMissed, fGroup, fClient}
	if !slices.Equal(opArgs[OpAdd], want) {
		t.Fatalf("opArgs[OpAdd] = %v: decodeAddArgs reads %v", opArgs[OpAdd], want)
	}
	full := Request{Op: OpAdd, ID: 9, Receiver: 1 << 40, Tid: 300, After: 5, At: 7, Every: 1 << 20, Repeat: 3, Data: []byte("d"),
		Replace: true, AfterNs: 9, Schedule: "0 * * * *", Zone: "UTC", Missed: 2, Group: 1 << 33, Client: 0x9e3779b97f4a7c15}
	enc := AppendRequest(nil, &full)[HeaderSize:]
	checkRequest(t, enc)
	for k := range len(enc) {
		checkAddArgs(t, enc[:k])
	}
	// Fewer elements: [4, id, args...] with the array's length cut, each
	// argument in turn replaced by nil, a string, a negative int, and a map.
	rd := reader{b: enc}
	_, _ = rd.arrayLen()
	elems := [][]byte{}
	for rd.left() > 0 {
		start := rd.i
		if p := rd.skip(0); p != pOK {
			t.Fatal(p)
		}
		elems = append(elems, enc[start:rd.i])
	}
	for n := 2; n <= len(elems); n++ {
		for bad := 2; bad < n; bad++ {
			for _, v := range [][]byte{{0xc0}, {0xa1, 'x'}, {0xff}, {0x80}, {0xc3}, {0xcb, 0, 0, 0, 0, 0, 0, 0, 0}} {
				msg := []byte{0xdc, 0, byte(n)}
				for i, e := range elems[:n] {
					if i == bad {
						e = v
					}
					msg = append(msg, e...)
				}
				checkAddArgs(t, msg)
				checkRequest(t, msg)
			}
		}
	}
}

// BenchmarkDecodeRequestAddClient decodes an add as the Go client sends
// it with a client id: every argument encoded (43 bytes).
func BenchmarkDecodeRequestAddClient(b *testing.B) {
	p := AppendRequest(nil, &Request{Op: OpAdd, ID: 123456, Receiver: 77, Tid: 123456, After: 1_000_000, Client: 0x9e3779b97f4a7c15})[HeaderSize:]
	var r Request
	for b.Loop() {
		if err := DecodeRequest(p, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// checkAppendAdd checks that appendAddArgs encodes add r as appendArgs's
// loop does, for every count of arguments AppendRequest may give it.
func checkAppendAdd(t *testing.T, r *Request) {
	t.Helper()
	for n := baseArgs[OpAdd]; n <= len(opArgs[OpAdd]); n++ {
		if got, want := appendAddArgs(nil, r, n), appendArgs(nil, r, opArgs[OpAdd][:n]); !bytes.Equal(got, want) {
			t.Fatalf("appendAddArgs(%+v, %d) = %x, the loop: %x", r, n, got, want)
		}
	}
}

// TestAppendAddArgsIsTheLoop: the add's written-out encoding gives the
// loop's bytes, with every argument set or left at its default
// (FuzzDecodeRequest checks every add it decodes the same way).
func TestAppendAddArgsIsTheLoop(t *testing.T) {
	full := Request{Op: OpAdd, ID: 9, Receiver: 1 << 40, Tid: 300, After: 5, At: 7, Every: 1 << 20, Repeat: 3, Data: []byte("d"),
		Replace: true, AfterNs: 9, Schedule: "0 * * * *", Zone: "UTC", Missed: 2, Group: 1 << 33, Client: 0x9e3779b97f4a7c15}
	checkAppendAdd(t, &full)
	for i := range 16 {
		r := full
		for j, clear := range []func(){
			func() { r.Receiver = 0 }, func() { r.Data = nil }, func() { r.Replace = false }, func() { r.AfterNs = 0 },
			func() { r.Schedule = "" }, func() { r.Zone = "" }, func() { r.Missed = 0 }, func() { r.Group = 0 }, func() { r.Client = 0 },
		} {
			if i&(1<<(j%4)) != 0 || j >= 4 && i >= 8 {
				clear()
			}
		}
		checkAppendAdd(t, &r)
	}
}

// BenchmarkAppendRequestAddClient encodes an add as the Go client does,
// with a client id: every argument encoded (43 bytes).
func BenchmarkAppendRequestAddClient(b *testing.B) {
	r := Request{Op: OpAdd, ID: 123456, Receiver: 77, Tid: 123456, After: 1_000_000, Client: 0x9e3779b97f4a7c15}
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = AppendRequest(buf[:0], &r)
	}
}
