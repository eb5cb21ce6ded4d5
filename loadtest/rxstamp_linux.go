package loadtest

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// stampedReader reads a TCP connection with recvmsg and SO_TIMESTAMPNS, so
// each read also says when the kernel received the last bytes it returned
// (the socket's receive timestamp of its newest segment), on Now's clock.
// Lateness measured from that instant leaves out the generator's own delay
// between the bytes' arrival and its read.
type stampedReader struct {
	rc  syscall.RawConn
	oob []byte
}

// newStampedReader returns nil when nc is not a TCP connection or the
// kernel refuses the option; the caller then reads without stamps.
func newStampedReader(nc net.Conn) *stampedReader {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return nil
	}
	return &stampedReader{rc: rc, oob: make([]byte, syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))))}
}

// Read reads into p. stamp is the kernel's receive instant of the newest
// bytes read, on Now's clock, or 0 when the read carried none (the kernel
// turns stamps on for the machine a moment after the first socket asks:
// bytes received before then have none).
func (s *stampedReader) Read(p []byte) (n int, stamp int64, err error) {
	var oobn int
	rerr := s.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, err = syscall.Recvmsg(int(fd), p, s.oob, 0)
		return !errors.Is(err, syscall.EAGAIN)
	})
	if rerr != nil {
		err = rerr // the connection's own error (closed): not the last attempt's EAGAIN
	}
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, io.EOF
	}
	return n, s.stamp(oobn), nil
}

func (s *stampedReader) stamp(oobn int) int64 {
	msgs, err := syscall.ParseSocketControlMessage(s.oob[:oobn])
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
			// The stamp is on the wall clock: move it to Now's (monotonic)
			// clock through one reading of both, taken now.
			t := time.Now()
			return int64(t.Sub(epoch)) - (t.UnixNano() - ts.Nano())
		}
	}
	return 0
}
