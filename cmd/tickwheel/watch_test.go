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
		"1970-01-01 00:00:10.01 UTC  9/1  fired 1/5\n"+
		"1970-01-01 00:00:10.02 UTC  9/1  fired 2/5\n", wout.String())

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

// TestWatchLate: an event that fired late says by how much, in human
// units: "late 3.52s" in the text when it is, "late" in ticks always in
// -json; its tick is printed as the moment it stands for.
func TestWatchLate(t *testing.T) {
	ev := client.Event{Kind: client.Fire, Receiver: 7, Tid: 1, Tick: 1000, Fired: 1, Repeat: 1, Last: true, Seq: 1}
	clk := clock{tick: 10 * time.Millisecond, zone: time.UTC}
	for _, tc := range []struct {
		late       uint64
		text, json string
	}{
		{0, "1970-01-01 00:00:10 UTC  7/1  fired 1/1  last\n", `"late":0`},
		{352, "1970-01-01 00:00:10 UTC  7/1  fired 1/1  late 3.52s  last\n", `"late":352`},
	} {
		ev.Late = tc.late
		var out strings.Builder
		(&env{stdout: &out, clk: clk}).printEvent(ev)
		assert.Equal(t, tc.text, out.String())
		out.Reset()
		(&env{stdout: &out, json: true, clk: clk}).printEvent(ev)
		assert.Contains(t, out.String(), tc.json)
		assert.Contains(t, out.String(), `"tick":1000`)
	}
}

// TestWatchTakeover: watch says so and exits 1 when another session takes
// its receiver over, since it gets none of its events any more.
func TestWatchTakeover(t *testing.T) {
	code, wout, werr := watchTakenOver(t, "9")
	assert.Equal(t, 1, code)
	assert.Contains(t, wout, "receiver 9 was taken over by session ")
	assert.Equal(t, "tickwheel watch: receiver 9 was taken over by another session: no receiver left to watch\n", werr)
}

// TestWatchDuplicateReceiverTakeover: watch given the same receiver twice
// binds it once, so a takeover leaves it with nothing to watch: it must
// exit 1, as with "watch 9".
func TestWatchDuplicateReceiverTakeover(t *testing.T) {
	code, wout, _ := watchTakenOver(t, "9", "9")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(wout, "watching receiver 9"))
}

// watchTakenOver runs watch with receivers (receiver 9 among them), binds
// receiver 9 from another session once watch is watching, and returns
// watch's exit code and output; it fails the test if watch goes on.
func watchTakenOver(t *testing.T, receivers ...string) (code int, stdout, stderr string) {
	t.Helper()
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	var wout, werr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"watch", "-addr", addr}, receivers...), &wout, &werr) }()
	require.Eventually(t, func() bool { return strings.Contains(wout.String(), "watching receiver 9") }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 9, nil)
	require.NoError(t, err)
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("watch %v went on after its receiver was taken over; stdout:\n%s", receivers, wout.String())
	}
	return code, wout.String(), werr.String()
}

// TestWatchReconnects: watch outlives a server restart: it says so on
// stderr, binds its receiver again and goes on printing its events; in
// acknowledged mode none is lost or printed twice.
func TestWatchReconnects(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000), servertest.WithDataDir(t.TempDir()))
	addr := srv.Addr()
	var wout, werr syncBuffer
	done := make(chan int, 1)
	// -token "": the server keeps its admin token in its own data
	// directory, not in the default one another test's server may have
	// left an admin.token in; a client needs none.
	go func() {
		done <- run([]string{"watch", "-addr", addr, "-token", "", "-ack", "-n", "3", "9"}, &wout, &werr)
	}()
	require.Eventually(t, func() bool { return strings.Contains(wout.String(), "watching receiver 9") }, 5*time.Second, time.Millisecond,
		"stderr: %s", &werr)
	code, _, errOut := cli(t, addr, "add", "-token", "", "9", "1", "1", "-repeat", "3")
	require.Equal(t, 0, code, errOut)
	srv.AdvanceTicks(1)
	require.Eventually(t, func() bool { return strings.Contains(wout.String(), "fired 1/3") }, 5*time.Second, time.Millisecond)

	srv.Restart()
	require.Eventually(t, func() bool { return strings.Contains(werr.String(), "reconnected\n") }, 10*time.Second, 5*time.Millisecond)
	assert.Contains(t, werr.String(), "reconnecting…")
	srv.AdvanceTicks(2)
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("watch did not go on after the restart; stdout:\n%s\nstderr:\n%s", wout.String(), werr.String())
	}
	require.Equal(t, 0, code, werr.String())
	assert.Equal(t, "watching receiver 9, acknowledged (0 unacknowledged events from seq 1, 0 dropped)\n"+
		"1970-01-01 00:00:10.01 UTC  9/1  fired 1/3\n"+
		"1970-01-01 00:00:10.02 UTC  9/1  fired 2/3\n"+
		"1970-01-01 00:00:10.03 UTC  9/1  fired 3/3  last\n", wout.String())
	assert.Regexp(t, `^tickwheel watch: connection lost \(.+\); reconnecting…\ntickwheel watch: reconnected\n$`, werr.String())
}
