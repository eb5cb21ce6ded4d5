package loadtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// hostileCounts are what the soak's hostile clients did and how the server
// answered. Safe for concurrent use.
type hostileCounts struct {
	garbage, garbageClosed, garbageNotClosed atomic.Int64
	partial, partialClosed                   atomic.Int64
	hellos, helloErrors                      atomic.Int64
	slowSessions, slowRefused                atomic.Int64
	zoneAdds                                 atomic.Int64
	httpReqs, httpErrs, http2xx, http4xx     atomic.Int64
	http5xx, httpIdle, httpIdleClosed        atomic.Int64

	mu        sync.Mutex
	notClosed []time.Time // when each garbage connection not closed in time was opened
}

// runGarbage opens connections that write random bytes (after a hello or
// not) and half-close: the server must answer with errors at most, and
// close. Rate: about every 20 ms.
func (h *hostileCounts) runGarbage(ctx context.Context, addr string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	hello := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version, Name: "garbage"})
	for ctx.Err() == nil {
		sleepCtx(ctx, 20*time.Millisecond)
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		h.garbage.Add(1)
		opened := time.Now()
		var b []byte
		if rng.IntN(2) == 0 {
			b = append(b, hello...)
		}
		junk := make([]byte, rng.IntN(4096))
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 && len(junk) > 8 { // a plausible frame header
			binary.BigEndian.PutUint32(junk, uint32(len(junk)-4))
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = nc.Write(append(b, junk...))
		_ = nc.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, nc); err == nil || !isTimeout(err) {
			h.garbageClosed.Add(1)
		} else {
			h.garbageNotClosed.Add(1)
			h.mu.Lock()
			h.notClosed = append(h.notClosed, opened)
			h.mu.Unlock()
		}
		nc.Close()
	}
}

// runPartial keeps up to n connections that sent a frame header declaring
// 60000 bytes and a few of them, each held 1–4 s, then closed.
func (h *hostileCounts) runPartial(ctx context.Context, addr string, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 4))
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					sleepCtx(ctx, 100*time.Millisecond)
					continue
				}
				h.partial.Add(1)
				var b []byte
				if i%2 == 0 { // after a hello, or not
					b = protocol.AppendRequest(b, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version, Name: "partial"})
				}
				b = binary.BigEndian.AppendUint32(b, 60000)
				_, _ = nc.Write(append(b, make([]byte, 1+rng.IntN(1000))...))
				_ = nc.SetReadDeadline(time.Now().Add(time.Duration(1000+rng.IntN(3000)) * time.Millisecond))
				if _, err := io.Copy(io.Discard, nc); err == nil || !isTimeout(err) {
					h.partialClosed.Add(1) // the server closed it (a frame timeout)
				}
				nc.Close()
			}
		}()
	}
	wg.Wait()
}

// runHellos floods hellos with a wrong admin token, pipelined on fresh
// connections.
func (h *hostileCounts) runHellos(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		sleepCtx(ctx, 10*time.Millisecond)
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		var b []byte
		for i := range 20 {
			b = protocol.AppendRequest(b, &protocol.Request{Op: protocol.OpHello, ID: uint64(i + 1), Version: protocol.Version, Name: "flood", Token: "not-the-token"})
		}
		_ = nc.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = nc.Write(b)
		r := bufio.NewReader(nc)
		for range 20 {
			var hdr [4]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				break
			}
			p := make([]byte, binary.BigEndian.Uint32(hdr[:]))
			if _, err := io.ReadFull(r, p); err != nil {
				break
			}
			h.hellos.Add(1)
			var m protocol.Message
			if protocol.DecodeMessage(p, &m) == nil && m.Kind == protocol.KindError {
				h.helloErrors.Add(1)
			}
		}
		nc.Close()
	}
}

// runSlowReader binds a receiver whose timers fire every tick with 1 KiB of
// data and never reads, for 5–15 s, then resets the connection and starts
// again (the receiver's timers are ephemeral: they go with the session).
func (h *hostileCounts) runSlowReader(ctx context.Context, addr string, receiver uint64) {
	rng := rand.New(rand.NewPCG(receiver, 5))
	data := make([]byte, 1024)
	for ctx.Err() == nil {
		c, err := dialSoak(addr, "soak-slow", "", nil)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		h.slowSessions.Add(1)
		// Pipelined and never read: the replies and events pile up.
		_ = c.send(protocol.Request{Op: protocol.OpBind, Receiver: receiver, Ephemeral: true})
		for tid := range uint64(20) {
			_ = c.send(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid + 1, After: 1, Every: 1, Data: data})
		}
		c.nc.(*net.TCPConn).SetReadBuffer(4096)
		sleepCtx(ctx, time.Duration(5000+rng.IntN(10000))*time.Millisecond)
		if tc, ok := c.nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.close()
	}
}

// runZoneAdds adds schedule timers in time zones that do not exist, about 100
// a second: each is refused, after the server looked the name up.
func (h *hostileCounts) runZoneAdds(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		c, err := dialSoak(addr, "soak-zones", "", nil)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		for i := 0; ctx.Err() == nil; i++ {
			sleepCtx(ctx, 10*time.Millisecond)
			_, err := c.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1<<50 | 3, Tid: 1, Schedule: "* * * * *",
				Zone: fmt.Sprintf("Nowhere/Zone%d", i)}, 5*time.Second)
			if err != nil {
				break
			}
			h.zoneAdds.Add(1)
		}
		c.close()
	}
}

// runHTTPFlood sends requests to the operator listener without a token, over
// keep-alive connections: metrics, health, status and pprof.
func (h *hostileCounts) runHTTPFlood(ctx context.Context, base string, workers int) {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	paths := []string{"/metrics", "/healthz", "/readyz", "/status.json", "/debug/pprof/cmdline", "/debug/pprof/", "/nope"}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; ctx.Err() == nil; j++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+paths[j%len(paths)], nil)
				req.Header.Set("Authorization", "Bearer guess-"+fmt.Sprint(j))
				resp, err := cl.Do(req)
				h.httpReqs.Add(1)
				if err != nil {
					h.httpErrs.Add(1)
					sleepCtx(ctx, 20*time.Millisecond)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode >= 500:
					h.http5xx.Add(1)
				case resp.StatusCode >= 400:
					h.http4xx.Add(1)
				default:
					h.http2xx.Add(1)
				}
				sleepCtx(ctx, 2*time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

// runHTTPIdle keeps n keep-alive connections to the operator listener open
// after one request each, reopening those the server closes.
func (h *hostileCounts) runHTTPIdle(ctx context.Context, hostport string, n int) {
	var wg sync.WaitGroup
	req := []byte("GET /healthz HTTP/1.1\r\nHost: " + hostport + "\r\n\r\n")
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", hostport, time.Second)
				if err != nil {
					sleepCtx(ctx, 200*time.Millisecond)
					continue
				}
				h.httpIdle.Add(1)
				_, _ = nc.Write(req)
				stop := context.AfterFunc(ctx, func() { nc.Close() })
				_, err = io.Copy(io.Discard, nc) // until the server (or the end) closes it
				stop()
				if ctx.Err() == nil && (err == nil || !isTimeout(err)) {
					h.httpIdleClosed.Add(1)
				}
				nc.Close()
				sleepCtx(ctx, 100*time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
