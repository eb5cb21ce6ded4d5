//go:build linux

// Command wakefloor measures what this machine alone adds to a timer
// firing at a 1 ms tick, with no timer service in the way: the floor under
// any server's lateness here.
//
// A sender thread pinned to -sender-cpu sleeps on a periodic timerfd (a
// tick every -tick, on the wall clock) and, at each expiry, writes the
// tick's boundary (8 bytes, ns) to a loopback TCP connection. A receiver
// thread pinned to -receiver-cpu reads the connection with recvmsg and the
// kernel's receive stamps (SO_TIMESTAMPNS). For each tick it reports how
// long after the boundary the bytes reached the receiving socket (the
// sender's wake-up and write) and the receiver's read (its wake-up too).
// Both threads are locked OS threads making blocking system calls: no Go
// scheduler, netpoller or allocation between the kernel and the
// measurement. The topology is the loadtest's (server on CPU 0, generator
// on CPU 1), so its figures compare with the loadtest's "lateness at the
// socket" minus the tick's quantisation.
//
//	wakefloor -ticks 5000 -runs 3
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	ticks := flag.Int("ticks", 5000, "ticks per run")
	tick := flag.Duration("tick", time.Millisecond, "tick length")
	runs := flag.Int("runs", 1, "runs, one line each")
	sendCPU := flag.Int("sender-cpu", 0, "CPU the sender (the server's stand-in) is pinned to")
	recvCPU := flag.Int("receiver-cpu", 1, "CPU the receiver (the generator's stand-in) is pinned to")
	flag.Parse()
	log.SetFlags(0)
	if *ticks < 1 || *tick <= 0 {
		log.Fatal("wakefloor: -ticks and -tick must be positive")
	}
	for range *runs {
		sock, read, err := run(*ticks, *tick, *sendCPU, *recvCPU)
		if err != nil {
			log.Fatalf("wakefloor: %v", err)
		}
		fmt.Printf("tick %v, %d ticks: boundary → socket %s | boundary → read %s\n", *tick, *ticks, summary(sock), summary(read))
	}
}

// summary gives the percentiles of ds (sorted here), in ms.
func summary(ds []int64) string {
	slices.Sort(ds)
	q := func(p float64) float64 { return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / 1e6 }
	return fmt.Sprintf("p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms", q(0.5), q(0.99), q(0.999), float64(ds[len(ds)-1])/1e6)
}

// run measures one run of n ticks: for each, socket stamp − boundary and
// read − boundary, in ns.
func run(n int, tick time.Duration, sendCPU, recvCPU int) (sock, read []int64, err error) {
	ln, port, err := listen()
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(ln)
	done := make(chan error, 1)
	go func() { done <- send(port, n, tick, sendCPU) }()
	sock, read, err = receive(ln, n, recvCPU)
	if serr := <-done; err == nil {
		err = serr
	}
	return sock, read, err
}

// pin locks the calling goroutine to its thread and the thread to cpu.
func pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

func listen() (fd, port int, err error) {
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	if err = unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err == nil {
		err = unix.Listen(fd, 1)
	}
	var sa unix.Sockaddr
	if err == nil {
		sa, err = unix.Getsockname(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("listen: %w", err)
	}
	return fd, sa.(*unix.SockaddrInet4).Port, nil
}

// send is the stand-in server: one blocking timerfd read per tick, then
// one write of the tick's boundary per expired tick.
func send(port, n int, tick time.Duration, cpu int) error {
	defer runtime.UnlockOSThread()
	if err := pin(cpu); err != nil {
		return err
	}
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(c)
	if err := unix.Connect(c, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := unix.SetsockoptInt(c, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return err
	}
	tf, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("timerfd_create: %w", err)
	}
	defer unix.Close(tf)
	first := (time.Now().UnixNano()/int64(time.Second) + 1) * int64(time.Second) // a whole second: a clean start
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(first), Interval: unix.NsecToTimespec(int64(tick))}
	if err := unix.TimerfdSettime(tf, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	var cnt, rec [8]byte
	b := first
	for sent := 0; sent < n; {
		if _, err := unix.Read(tf, cnt[:]); err != nil {
			return fmt.Errorf("timerfd read: %w", err)
		}
		for k := binary.NativeEndian.Uint64(cnt[:]); k > 0 && sent < n; k-- {
			binary.NativeEndian.PutUint64(rec[:], uint64(b))
			if _, err := unix.Write(c, rec[:]); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			b += int64(tick)
			sent++
		}
	}
	return nil
}

// receive is the stand-in generator: blocking recvmsg with the kernel's
// receive stamp; a read's stamp is its newest segment's, so a read
// holding several ticks credits the earlier ones with the later stamp
// (never less lateness than they had).
func receive(ln, n, cpu int) (sock, read []int64, err error) {
	defer runtime.UnlockOSThread()
	if err := pin(cpu); err != nil {
		return nil, nil, err
	}
	c, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("accept: %w", err)
	}
	defer unix.Close(c)
	if err := unix.SetsockoptInt(c, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return nil, nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	have := 0
	sock, read = make([]int64, 0, n), make([]int64, 0, n)
	for len(sock) < n {
		k, oobn, _, _, err := unix.Recvmsg(c, buf[have:], oob, 0)
		now := time.Now().UnixNano()
		if err != nil || k == 0 {
			return nil, nil, fmt.Errorf("recvmsg after %d ticks: %v", len(sock), err)
		}
		stamp, err := stampOf(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		have += k
		p := buf[:have]
		for len(p) >= 8 && len(sock) < n {
			b := int64(binary.NativeEndian.Uint64(p))
			sock, read = append(sock, stamp-b), append(read, now-b)
			p = p[8:]
		}
		have = copy(buf, p)
	}
	return sock, read, nil
}

func stampOf(oob []byte) (int64, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano(), nil
		}
	}
	return 0, fmt.Errorf("a read carried no SO_TIMESTAMPNS stamp")
}
