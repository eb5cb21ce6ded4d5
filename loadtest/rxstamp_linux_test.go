package loadtest

import (
	"errors"
	"net"
	"testing"
	"time"
)

// The stamp is when the bytes reached the socket, not when they were read:
// bytes written, then read 30 ms later, carry a stamp from the write.
func TestStampedReaderStampsArrival(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sr := newStampedReader(r)
	if sr == nil {
		t.Fatal("no stamped reader for a TCP connection")
	}
	buf := make([]byte, 64)
	// The kernel turns receive stamps on for the whole machine a moment
	// after the first socket asks (deferred work): until then reads carry
	// none. Wait for that, as the loadtest does with its lead.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		_, stamp, err := sr.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if stamp != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no receive stamp after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	const slack = int64(time.Millisecond) // the wall clock moved to Now's: two readings
	for range 3 {
		before := Now()
		if _, err := w.Write([]byte("firing")); err != nil {
			t.Fatal(err)
		}
		after := Now()
		time.Sleep(30 * time.Millisecond)
		n, stamp, err := sr.Read(buf)
		read := Now()
		if err != nil || string(buf[:n]) != "firing" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
		if stamp < before-slack || stamp > after+slack {
			t.Fatalf("stamp %d outside the write's [%d, %d]", stamp, before, after)
		}
		if read-stamp < int64(25*time.Millisecond) {
			t.Fatalf("stamp %v before the read: it must be the arrival, 30 ms earlier", time.Duration(read-stamp))
		}
	}
	w.Close()
	if _, _, err := sr.Read(buf); err == nil {
		t.Fatal("no error at the end of the stream")
	}
}

// A Read blocked when its connection is closed returns the closed
// connection's error, not its last attempt's EAGAIN.
func TestStampedReaderClosedWhileBlocked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			time.Sleep(3 * time.Second)
			c.Close()
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sr := newStampedReader(nc)
	if sr == nil {
		t.Skip("no SO_TIMESTAMPNS")
	}
	done := make(chan error, 1)
	go func() { _, _, err := sr.Read(make([]byte, 16)); done <- err }()
	time.Sleep(100 * time.Millisecond)
	nc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a connection closed under it: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
}
