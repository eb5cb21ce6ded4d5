package server

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMemReturnerDue: memory is returned once a quarter of the
// connections (and at least memReturnConns) have closed, with a heap over
// memReturnHeap, at most every memReturnGap; counting starts again there.
func TestMemReturnerDue(t *testing.T) {
	var m memReturner
	t0 := time.Unix(1000, 0)
	big := memReturnHeap
	require.False(t, m.due(t0, 1000, 0, big), "none closed")
	require.False(t, m.due(t0.Add(time.Second), 800, 200, big), "a fifth of them")
	require.False(t, m.due(t0.Add(2*time.Second), 700, 300, big-1), "a small heap")
	require.True(t, m.due(t0.Add(3*time.Second), 700, 300, big))
	require.False(t, m.due(t0.Add(4*time.Second), 0, 1000, big), "within the gap")
	require.True(t, m.due(t0.Add(9*time.Second), 0, 1000, big), "700 more closed, none open")
	require.False(t, m.due(t0.Add(20*time.Second), 0, 1000, big), "counted from the last return")
	require.False(t, m.due(t0.Add(21*time.Second), 100, 1040, big), "40 closed: under memReturnConns")
	require.True(t, m.due(t0.Add(22*time.Second), 0, 1100, big), "100 opened and closed between two looks")
}

// TestMemoryReturnedAfterPartialFrames: 400 sessions each holding a
// partial frame of nearly max_frame (64 KiB) make the heap grow; once
// they have closed, the heap the process holds goes back near where it
// was within a few seconds, without any other traffic. Before, nothing
// ran a collection on an idle server and gnet's pools kept the buffers:
// the memory stayed held (RSS +352 MiB for 60 s after 5,000 such
// connections, docs/RELIABILITY.md 2b).
func TestMemoryReturnedAfterPartialFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("holds about 50 MiB and waits for the return")
	}
	old := memReturnHeap
	memReturnHeap = 16 << 20 // the 400 connections hold about 26 MiB (the server's default: 64 MiB)
	t.Cleanup(func() { memReturnHeap = old })
	srv := startServer(t, nil)
	samples := heapSamples()
	before := heapSpan(samples)
	const n = 400
	payload := make([]byte, 64<<10-100)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)+50)) // never completed
	conns := make([]net.Conn, 0, n)
	for range n {
		c := helloToken(t, srv, "partial", "")
		c.write(hdr[:])
		c.write(payload)
		conns = append(conns, c.conn)
	}
	waitUntil(t, "the partial frames to be held", func() bool { return heapSpan(samples) > before+n*48<<10 })
	held := heapSpan(samples)
	for _, c := range conns {
		c.Close()
	}
	waitUntil(t, "the connections to close", func() bool { return srv.conns.Load() == 0 })
	deadline := time.Now().Add(15 * time.Second)
	for heapSpan(samples) > before+(held-before)/4 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	after := heapSpan(samples)
	t.Logf("heap: %d MiB before, %d MiB holding %d partial frames, %d MiB after they closed", before>>20, held>>20, n, after>>20)
	require.LessOrEqual(t, after, before+(held-before)/4, "the memory of the closed connections is held on")
}
