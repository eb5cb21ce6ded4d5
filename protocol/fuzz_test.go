package protocol

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Fuzz targets. Their seed corpus (f.Add) runs under plain go test; run
// e.g. go test -fuzz=FuzzDecodeRequest ./protocol/ to explore.

func addRequestSeeds(f *testing.F) {
	for _, r := range sampleRequests {
		f.Add(payloadOf(f, AppendRequest(nil, &r)))
	}
	for _, m := range malformedRequests {
		f.Add(unhex(f, m.hex))
	}
}

func addMessageSeeds(f *testing.F) {
	for _, b := range sampleServerFrames() {
		f.Add(payloadOf(f, b))
	}
	for _, m := range malformedMessages {
		f.Add(unhex(f, m.hex))
	}
}

func sampleServerFrames() [][]byte {
	return [][]byte{
		AppendOK(nil, 1),
		AppendOK(nil, 2, 3, 1<<40),
		AppendHelloOK(nil, 1, &sampleHello),
		AppendTimerOK(nil, 6, &sampleTimer),
		AppendListOK(nil, 7, []Timer{sampleTimer, {Tid: 2}}, 3),
		AppendListOK(nil, 8, nil, 0),
		AppendStatsOK(nil, 16, &sampleStats),
		AppendError(nil, 4, CodeExists, "timer exists"),
		AppendFire(nil, &sampleFire),
		AppendTakeover(nil, 42, 7),
	}
}

// checkRequest decodes data as a request; a valid one must re-encode to a
// request that decodes the same and re-encodes to the same bytes.
func checkRequest(t *testing.T, data []byte) {
	var r Request
	err := DecodeRequest(data, &r)
	checkAddArgs(t, data)
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownOp) {
			t.Fatalf("unexpected error %v", err)
		}
		_ = err.Error()
		return
	}
	if r.Op == OpAdd {
		checkAppendAdd(t, &r)
	}
	enc := AppendRequest(nil, &r)
	p, n, err := SplitFrame(enc, len(enc))
	if err != nil || n != len(enc) {
		t.Fatalf("re-encoded frame: n=%d err=%v", n, err)
	}
	var r2 Request
	if err := DecodeRequest(p, &r2); err != nil {
		t.Fatalf("re-encoded request does not decode: %v", err)
	}
	requireSameRequest(t, r, r2)
	if enc2 := AppendRequest(nil, &r2); !bytes.Equal(enc, enc2) {
		t.Fatalf("re-encoding is not stable:\n%x\n%x", enc, enc2)
	}
}

// checkMessage decodes data as a server message and its result with every
// result decoder; valid fire, error and takeover messages must re-encode
// stably.
func checkMessage(t *testing.T, data []byte) {
	var m Message
	if err := DecodeMessage(data, &m); err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	var enc []byte
	switch m.Kind {
	case KindOK:
		var h Hello
		var tm Timer
		var s Stats
		_ = DecodeHello(m.Result, &h)
		_ = DecodeTimer(m.Result, &tm)
		_ = DecodeStats(m.Result, &s)
		checkListPage(t, m.ID, m.Result)
		if vals, err := DecodeUints(m.Result, nil); err == nil {
			enc = AppendOK(nil, m.ID, vals...)
		}
	case KindError:
		enc = AppendError(nil, m.ID, m.Code, m.Text)
	case KindFire:
		enc = AppendFire(nil, &m.Fire)
	case KindTakeover:
		enc = AppendTakeover(nil, m.Receiver, m.Session)
	}
	if enc == nil {
		return
	}
	var m2 Message
	if err := DecodeMessage(enc[HeaderSize:], &m2); err != nil {
		t.Fatalf("re-encoded message does not decode: %v", err)
	}
	if m.Kind != KindOK {
		requireSameMessage(t, m, m2)
	}
	var enc2 []byte
	switch m2.Kind {
	case KindOK:
		vals, _ := DecodeUints(m2.Result, nil)
		enc2 = AppendOK(nil, m2.ID, vals...)
	case KindError:
		enc2 = AppendError(nil, m2.ID, m2.Code, m2.Text)
	case KindFire:
		enc2 = AppendFire(nil, &m2.Fire)
	case KindTakeover:
		enc2 = AppendTakeover(nil, m2.Receiver, m2.Session)
	}
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("re-encoding is not stable:\n%x\n%x", enc, enc2)
	}
}

// checkListPage decodes result as a list page; a valid one must re-encode
// to a page that decodes the same, within the size TimerSize and
// ListReplyOverhead promise.
func checkListPage(t *testing.T, id uint64, result []byte) {
	ts, next, err := DecodeListPage(result, nil)
	if err != nil {
		return
	}
	enc := AppendListOK(nil, id, ts, next)
	size := ListReplyOverhead
	for i := range ts {
		size += TimerSize(&ts[i])
	}
	if len(enc) > size {
		t.Fatalf("list reply of %d bytes, more than the %d TimerSize and ListReplyOverhead allow", len(enc), size)
	}
	var m Message
	if err := DecodeMessage(enc[HeaderSize:], &m); err != nil {
		t.Fatalf("re-encoded list does not decode: %v", err)
	}
	ts2, next2, err := DecodeListPage(m.Result, nil)
	if err != nil || next2 != next || len(ts2) != len(ts) {
		t.Fatalf("re-encoded list differs: %v, next %d/%d, %d/%d timers", err, next, next2, len(ts), len(ts2))
	}
	require.Equal(t, ts, ts2)
}

func requireSameMessage(t *testing.T, a, b Message) {
	t.Helper()
	if !bytes.Equal(a.Fire.Data, b.Fire.Data) {
		t.Fatalf("data differs: %x %x", a.Fire.Data, b.Fire.Data)
	}
	a.Fire.Data, b.Fire.Data = nil, nil
	require.Equal(t, a, b)
}

func FuzzDecodeRequest(f *testing.F) {
	addRequestSeeds(f)
	f.Fuzz(checkRequest)
}

func FuzzDecodeMessage(f *testing.F) {
	addMessageSeeds(f)
	f.Fuzz(checkMessage)
}

// FuzzSplitFrame feeds a byte stream whole, and as data[:k] then the rest
// (nats FuzzParser style): both must give the same frames and the same first
// frame error, and every payload is decoded as a request and a message.
func FuzzSplitFrame(f *testing.F) {
	var stream []byte
	for _, r := range sampleRequests {
		stream = AppendRequest(stream, &r)
	}
	f.Add(stream, 5)
	f.Add(stream, 0)
	var msgs []byte
	for _, b := range sampleServerFrames() {
		msgs = append(msgs, b...)
	}
	f.Add(msgs, 17)
	f.Add([]byte{0, 0, 0, 0}, 2)
	f.Add([]byte{0, 0, 0, 9, 0x92, 0x0b}, 3)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 1)
	f.Fuzz(func(t *testing.T, data []byte, k int) {
		const max = 1024
		whole, wholeErr := splitAll(data, max)
		if k < 0 {
			k = -k
		}
		if k > len(data) || k < 0 {
			k = len(data) / 2
		}
		s := streamDecoder{max: max}
		var parts [][]byte
		collect := func(p []byte) {
			parts = append(parts, append([]byte(nil), p...))
			checkRequest(t, p)
			checkMessage(t, p)
		}
		err := s.feed(data[:k], collect)
		if err == nil {
			err = s.feed(data[k:], collect)
		}
		if err != wholeErr {
			t.Fatalf("error whole %v, split %v", wholeErr, err)
		}
		if len(parts) != len(whole) {
			t.Fatalf("%d frames whole, %d split", len(whole), len(parts))
		}
		for i := range parts {
			if !bytes.Equal(parts[i], whole[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
	})
}

// splitAll splits a complete buffer into frame payloads, stopping at the
// first error other than ErrIncomplete.
func splitAll(b []byte, max int) ([][]byte, error) {
	var out [][]byte
	for {
		p, n, err := SplitFrame(b, max)
		if err == ErrIncomplete {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, p)
		b = b[n:]
	}
}
