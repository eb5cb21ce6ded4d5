package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// logFault is a disk fault the log's file layer (vfs.Faulty) injects.
type logFault struct {
	name  string
	op    vfs.Op
	err   error
	short bool // a write stores half its bytes first
}

var logFaults = []logFault{
	{"enospc", vfs.OpWrite, syscall.ENOSPC, false},
	{"eio-write", vfs.OpWrite, syscall.EIO, false},
	{"short-write", vfs.OpWrite, syscall.ENOSPC, true},
	{"eio-fsync", vfs.OpSync, syscall.EIO, false},
}

// TestLogFaultsReadOnly (issue 24, items 3 and 4): the log's file layer
// fails writes (ENOSPC, EIO, a short write) or fsyncs (EIO) from a point
// on. The server goes read-only: adds are refused with unavailable, or the
// one whose record failed waits; a new connection's hello, a bind and
// reads are answered at once; ReadOnly (and so /readyz) and the metrics
// say so. Once the fault clears it accepts changes again, the held reply
// arrives, and after a simulated power cut (vfs.Faulty.Crash: what was not
// fsynced is dropped or torn) a restart has every acknowledged add and no
// refused one. With everysec, before issue 24 a failing background fsync
// went unnoticed and adds kept being acknowledged.
func TestLogFaultsReadOnly(t *testing.T) {
	for _, policy := range []string{"always", "everysec"} {
		for _, f := range logFaults {
			t.Run(policy+"/"+f.name, func(t *testing.T) { testLogFault(t, policy, f) })
		}
	}
}

func testLogFault(t *testing.T, policy string, f logFault) {
	dir := t.TempDir()
	fs := vfs.NewFaulty()
	var on atomic.Bool
	fs.SetInject(func(op vfs.Op, _ string, _ int64, size int) (int, error) {
		if !on.Load() || op != f.op {
			return 0, nil
		}
		if f.short {
			return size / 2, f.err
		}
		return 0, f.err
	})
	srv := newServer(t, func(c *Config) {
		durable(dir, policy)(c)
		c.logFS = fs
	})
	probe := helloClient(t, srv, "probe")
	var acked []uint64
	tid := uint64(0)
	for range 5 {
		tid++
		probe.add(protocol.Request{Receiver: 1, Tid: tid, After: 1_000_000})
		acked = append(acked, tid)
	}

	on.Store(true)
	var held []pendingAdd
	deadline := time.Now().Add(10 * time.Second)
	for refused := false; !refused || srv.ReadOnly() == ""; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "still accepting changes 10 s into the fault")
		tid++
		switch p := tryAdd(t, srv, tid); {
		case p.held:
			held = append(held, p)
		case p.reply.Kind == protocol.KindOK:
			acked = append(acked, tid)
		default:
			require.Equal(t, protocol.CodeUnavailable, p.reply.Code, p.reply.Text)
			refused = true
		}
	}
	assert.Contains(t, srv.ReadOnly(), "cannot write its log")

	// Read-only: hello (tryAdd's), bind and reads answered at once.
	c := helloClient(t, srv, "late")
	c.conn.SetReadDeadline(time.Now().Add(time.Second))
	m := c.call(protocol.Request{Op: protocol.OpBind, Receiver: 7})
	assert.Equal(t, protocol.KindOK, m.Kind, "a bind while read-only: %s %s", m.Code, m.Text)
	assert.Len(t, probe.list(1), len(acked)+len(held))
	probe.ping()
	mt, err := srv.ReadMetrics(context.Background(), 1)
	require.NoError(t, err)
	assert.True(t, mt.Persist.ReadOnly)
	if f.op == vfs.OpSync {
		assert.NotZero(t, mt.Persist.FsyncFailures)
	}

	on.Store(false) // the fault clears
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "adds still refused 10 s after the fault cleared")
		tid++
		p := tryAdd(t, srv, tid)
		if p.held {
			held = append(held, p)
			continue
		}
		if p.reply.Kind == protocol.KindOK {
			acked = append(acked, tid)
			break
		}
		require.Equal(t, protocol.CodeUnavailable, p.reply.Code, p.reply.Text)
	}
	for _, p := range held {
		m := p.c.reply(p.id)
		if m.Kind == protocol.KindOK { // the add whose record waited for the log
			acked = append(acked, p.tid)
			continue
		}
		// A reply that was only slow (a loaded machine): a refusal.
		require.Equal(t, protocol.CodeUnavailable, m.Code, "the held add %d: %s", p.tid, m.Text)
	}
	assert.Empty(t, srv.ReadOnly())

	// The power is cut (everysec: after its fsync has run).
	if policy == "everysec" {
		time.Sleep(1500 * time.Millisecond)
	}
	require.NoError(t, fs.Crash(rand.New(rand.NewPCG(uint64(len(acked)), 7))))
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	_ = srv.Stop(ctx) // its last writes fail: the machine is off

	srv = startServer(t, durable(dir, policy))
	var got []uint64
	for _, tm := range helloClient(t, srv, "check").list(1) {
		got = append(got, tm.Tid)
	}
	slices.Sort(acked)
	assert.Equal(t, acked, got, "every acknowledged add, and no refused one")
}

// pendingAdd is an add sent on a connection of its own: its reply, or
// held if none came within a second (its record waits for the log).
type pendingAdd struct {
	c     *rawClient
	id    uint64
	tid   uint64
	held  bool
	reply protocol.Message
}

// tryAdd says hello on a new connection (answered at once even while the
// log fails) and adds timer tid of receiver 1.
func tryAdd(t *testing.T, srv *Server, tid uint64) pendingAdd {
	t.Helper()
	c := dial(t, srv)
	c.sayHello("adder", srv.AdminToken())
	p := pendingAdd{c: c, tid: tid}
	p.id = c.send(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 1_000_000})
	m, err := readWithin(c, time.Second)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		p.held = true
		return p
	}
	require.NoError(t, err)
	require.Equal(t, p.id, m.ID)
	p.reply = m
	return p
}

// readWithin reads one message, waiting at most d for its first byte.
func readWithin(c *rawClient, d time.Duration) (protocol.Message, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	if _, err := c.r.Peek(4); err != nil {
		return protocol.Message{}, err
	}
	hdr, _ := c.r.Peek(4)
	c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	payload := make([]byte, 4+binary.BigEndian.Uint32(hdr))
	if _, err := io.ReadFull(c.r, payload); err != nil {
		return protocol.Message{}, err
	}
	var m protocol.Message
	return m, protocol.DecodeMessage(payload[4:], &m)
}
