package client

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// replyCutter is a TCP proxy in front of a server that, for the first
// request of op it sees, lets the request through and then cuts the
// client's connection instead of handing it the reply: the server applied
// the change and the client never heard. Later connections pass through.
type replyCutter struct {
	ln     net.Listener
	target string
	op     protocol.Op
	cut    atomic.Bool // the reply was cut once
	wg     sync.WaitGroup
}

func startReplyCutter(t *testing.T, target string, op protocol.Op) *replyCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &replyCutter{ln: ln, target: target, op: op}
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *replyCutter) addr() string { return p.ln.Addr().String() }

func (p *replyCutter) accept() {
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		var watched atomic.Uint64 // the id of the request whose reply is cut, +1
		p.wg.Go(func() {          // client to server: find the request
			defer sc.Close()
			eachFrame(cc, func(frame, payload []byte) bool {
				var req protocol.Request
				if protocol.DecodeRequest(payload, &req) == nil && req.Op == p.op && !p.cut.Load() {
					watched.Store(req.ID + 1)
				}
				_, err := sc.Write(frame)
				return err == nil
			})
		})
		p.wg.Go(func() { // server to client: cut its reply
			defer cc.Close()
			eachFrame(sc, func(frame, payload []byte) bool {
				var m protocol.Message
				if protocol.DecodeMessage(payload, &m) == nil && m.Kind <= protocol.KindError &&
					m.ID+1 == watched.Load() && p.cut.CompareAndSwap(false, true) {
					return false
				}
				_, err := cc.Write(frame)
				return err == nil
			})
		})
	}
}

// eachFrame reads whole frames from r and calls fn with each (header
// included) and its payload, until fn returns false or r fails.
func eachFrame(r io.Reader, fn func(frame, payload []byte) bool) {
	var buf []byte
	tmp := make([]byte, 64<<10)
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for {
			payload, size, ferr := protocol.SplitFrame(buf, 1<<24)
			if errors.Is(ferr, protocol.ErrIncomplete) {
				break
			}
			if ferr != nil || !fn(buf[:size], payload) {
				return
			}
			buf = buf[size:]
		}
		if err != nil {
			return
		}
	}
}

// TestChangeRetriedAfterLostReply: the server applies a change and the
// connection dies before its reply arrives. The Client reconnects and sends
// it again with the same request id; the server answers with the first
// reply instead of applying it twice. So Add returns the first add's due
// tick (not ErrDisconnected, and not exists), PauseAll, ResumeGroup,
// CancelGroup and CancelAll the count they changed (not 0), and the
// server counts the retries.
func TestChangeRetriedAfterLostReply(t *testing.T) {
	srv := startServer(t, rememberIDs)
	for _, tc := range []struct {
		op   protocol.Op
		call func(c *Client) (uint64, error)
		want uint64
	}{
		{protocol.OpAdd, func(c *Client) (uint64, error) { return c.Add(tctx(t), 1, 1, 50, &AddOptions{Group: 5}) }, start + 50},
		{protocol.OpPauseAll, func(c *Client) (uint64, error) {
			n, err := c.PauseAll(tctx(t), 1)
			return uint64(n), err
		}, 1},
		{protocol.OpResumeAll, func(c *Client) (uint64, error) {
			n, err := c.ResumeGroup(tctx(t), 5)
			return uint64(n), err
		}, 1},
		{protocol.OpCancelGroup, func(c *Client) (uint64, error) {
			n, err := c.CancelGroup(tctx(t), 5)
			return uint64(n), err
		}, 1},
		{protocol.OpAdd, func(c *Client) (uint64, error) { return c.Add(tctx(t), 1, 2, 50, nil) }, start + 50},
		{protocol.OpCancelAll, func(c *Client) (uint64, error) {
			n, err := c.CancelAll(tctx(t), 1)
			return uint64(n), err
		}, 1},
	} {
		p := startReplyCutter(t, srv.Addr(), tc.op)
		c := dial(t, p.addr(), WithReconnect(time.Millisecond, 10*time.Millisecond))
		got, err := tc.call(c)
		require.NoError(t, err, "%s", tc.op)
		require.True(t, p.cut.Load(), "the first reply was cut")
		assert.Equal(t, tc.want, got, "%s: the first reply", tc.op)
	}
	st, err := srv.ReadMetrics(tctx(t), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), st.Counters.Retries)
	assert.Equal(t, uint64(0), st.Stats.Timers, "added once, cancelled once")
}
