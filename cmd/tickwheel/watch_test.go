package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestWatchAck: watch -ack acknowledges the events it prints, and only
// those: the next watch -ack gets the others again, from their first seq,
// and after it nothing is left unacknowledged.
func TestWatchAck(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	var wout, werr syncBuffer
	done := make(chan int)
	go func() { done <- run([]string{"watch", "-addr", addr, "-ack", "-n", "2", "9"}, &wout, &werr) }()
	require.Eventually(t, func() bool { return strings.Contains(wout.String(), "watching receiver 9") }, 5*time.Second, time.Millisecond)
	code, _, errOut := cli(t, addr, "add", "9", "1", "1", "-repeat", "5")
	require.Equal(t, 0, code, errOut)
	srv.AdvanceTicks(5)
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not exit after 2 events")
	}
	require.Equal(t, 0, code, werr.String())
	assert.Equal(t, "watching receiver 9, acknowledged (0 unacknowledged events from seq 1, 0 dropped)\n"+
		"tick 1001  9/1  fired 1/5\n"+
		"tick 1002  9/1  fired 2/5\n", wout.String())

	// stats shows the 3 events the outbox keeps for the next watch.
	require.Eventually(t, func() bool {
		_, out, _ := cli(t, addr, "stats")
		return strings.Contains(out, "outboxes    3 events not acknowledged, 0 firings waiting for room\n")
	}, 5*time.Second, 10*time.Millisecond)

	code, out, errOut := cli(t, addr, "watch", "-ack", "-json", "-n", "3", "9")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	assert.JSONEq(t, `{"bound": 9, "ack": true, "backlog": 3, "first_seq": 3, "dropped": 0}`, lines[0])
	for i, line := range lines[1:] {
		var ev struct{ Seq, Fired uint64 }
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		assert.Equal(t, uint64(i+3), ev.Seq, line)
		assert.Equal(t, uint64(i+3), ev.Fired, line)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Bind(ctx, 9, &client.BindOptions{Ack: client.AckManual})
	require.NoError(t, err)
	assert.Equal(t, client.BindResult{FirstSeq: 6}, r, "everything watched was acknowledged")
}
