package protocol

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Benchmarks of the hot paths against the reflective msgpack library on the
// same messages (for docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench . -benchmem ./protocol/

var benchAdd = Request{Op: OpAdd, ID: 12345, Receiver: 1 << 20, Tid: 77, After: 300, Every: 300, Repeat: 10, Data: []byte("0123456789abcdef")}

func BenchmarkDecodeRequestAdd(b *testing.B) {
	p := AppendRequest(nil, &benchAdd)[HeaderSize:]
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if err := DecodeRequest(p, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMsgpackUnmarshalAdd decodes the same payload into []any.
func BenchmarkMsgpackUnmarshalAdd(b *testing.B) {
	p := AppendRequest(nil, &benchAdd)[HeaderSize:]
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		var v []any
		if err := msgpack.Unmarshal(p, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMsgpackDecoderAdd decodes the same payload field by field with a
// reused msgpack.Decoder, the fastest safe way with the library.
func BenchmarkMsgpackDecoderAdd(b *testing.B) {
	p := AppendRequest(nil, &benchAdd)[HeaderSize:]
	rd := bytes.NewReader(p)
	d := msgpack.NewDecoder(rd)
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		rd.Reset(p)
		d.ResetReader(rd)
		n, err := d.DecodeArrayLen()
		if err != nil || n != 10 {
			b.Fatal(n, err)
		}
		op, _ := d.DecodeUint64()
		r.Op = Op(op)
		r.ID, _ = d.DecodeUint64()
		r.Receiver, _ = d.DecodeUint64()
		r.Tid, _ = d.DecodeUint64()
		r.After, _ = d.DecodeUint64()
		r.At, _ = d.DecodeUint64()
		r.Every, _ = d.DecodeUint64()
		r.Repeat, _ = d.DecodeUint64()
		r.Data, _ = d.DecodeBytes()
		r.Replace, err = d.DecodeBool()
		if err != nil {
			b.Fatal(err)
		}
	}
}

var benchFire = Fire{Receiver: 1 << 20, Tid: 77, Tick: 123456789, Fired: 3, Repeat: 10, Data: []byte("0123456789abcdef"), Seq: 1000}

func BenchmarkAppendFire(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFire(buf[:0], &benchFire)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkMsgpackMarshalFire encodes the same event as []any.
func BenchmarkMsgpackMarshalFire(b *testing.B) {
	f := &benchFire
	b.ReportAllocs()
	for b.Loop() {
		v := []any{2, f.Receiver, f.Tid, f.Tick, f.Fired, f.Repeat, f.Last, f.Data, f.Seq}
		if _, err := msgpack.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendOK(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendOK(buf[:0], 12345, 123456789)
	}
}

func BenchmarkDecodeMessageFire(b *testing.B) {
	p := AppendFire(nil, &benchFire)[HeaderSize:]
	var m Message
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if err := DecodeMessage(p, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMsgpackUnmarshalFire decodes the same event into []any.
func BenchmarkMsgpackUnmarshalFire(b *testing.B) {
	p := AppendFire(nil, &benchFire)[HeaderSize:]
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		var v []any
		if err := msgpack.Unmarshal(p, &v); err != nil {
			b.Fatal(err)
		}
	}
}
