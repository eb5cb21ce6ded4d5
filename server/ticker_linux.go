package server

import (
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The ticker on Linux is a timerfd: the loop sets it to the instant of the
// wheel's next event, and a goroutine blocked reading it in the Go runtime's
// netpoller rings the doorbell when it expires. The kernel times it in
// nanoseconds (a Go timer on an idle process wakes up to a millisecond
// late: the runtime's epoll_wait timeout is in whole milliseconds), and
// nothing sleeps in a system call: a thread blocked in nanosleep(2) has the
// runtime hand its processor to another thread and back on every tick.

// tickerState is the timerfd and, on the loop, the instant it is set to
// expire at (ns since origin; 0 when it is not set, or may have expired).
type tickerState struct {
	f     *os.File
	fd    int
	armed int64
}

// startTicker creates the timerfd and the goroutine that waits on it; both
// end with the server.
func (s *Server) startTicker() error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("server: ticker: timerfd_create: %w", err)
	}
	// A non-blocking descriptor: reads park the goroutine in the netpoller.
	s.tk.f, s.tk.fd = os.NewFile(uintptr(fd), "tickwheel-ticker"), fd
	go s.runTicker(s.tk.f)
	go func() {
		<-s.done
		s.tk.f.Close() // ends the read, and the ticker
	}()
	return nil
}

func (s *Server) runTicker(f *os.File) {
	var buf [8]byte // the expiry count
	for {
		if _, err := f.Read(buf[:]); err != nil {
			return
		}
		s.ring()
	}
}

// setWake sets the timerfd to expire at wake (ns since origin), unless it
// is set to expire no later already; math.MaxInt64 (nothing to wake for:
// no timer, or frozen) sets nothing. An idle server is woken by nothing
// but its next event. On the loop.
func (s *Server) setWake(wake int64) {
	switch {
	case s.tk.f == nil:
		return // not started: Start rings, and that turn sets it
	case wake == math.MaxInt64 || (s.tk.armed != 0 && s.tk.armed <= wake):
		return // an earlier expiry rings first; the turn it starts sets the next
	}
	now := int64(time.Since(s.origin))
	d := max(wake-now, 1) // 0 would disarm it
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d)}
	if err := unix.TimerfdSettime(s.tk.fd, 0, &spec, nil); err != nil {
		if !s.stopping.Load() {
			s.rlog.Warn("ticker: timerfd_settime failed; the wheel advances only when requests come", "err", err)
		}
		return
	}
	s.tk.armed = wake
}

// chainDone is called on the loop after the retime that ends a chain of
// advance turns. The ring that began the chain may have been the timerfd's
// expiry, so the next retime must set it again.
func (s *Server) chainDone() {
	s.tk.armed = 0
	s.retime()
}
