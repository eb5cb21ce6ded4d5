package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// A Pipe's adds of every kind are applied in order, each Cmd carries its
// own due tick, and their timers fire.
func TestPipeAdds(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)

	p := c.Pipeline()
	var cmds []*Cmd
	for i := range uint64(3000) {
		switch i % 3 {
		case 0:
			cmds = append(cmds, p.Add(1, i, 1+i%7, nil))
		case 1:
			cmds = append(cmds, p.AddAt(1, i, start+1+i%7, nil))
		default:
			cmds = append(cmds, p.AddAfter(1, i, time.Duration(1+i%7)*10*time.Millisecond, nil))
		}
	}
	require.Equal(t, 3000, p.Len())
	require.NoError(t, p.Exec(ctx))
	require.Zero(t, p.Len(), "Exec empties the Pipe")
	for i, cmd := range cmds {
		require.NoError(t, cmd.Err())
		assert.Equal(t, uint64(start)+1+uint64(i)%7, cmd.Due(), "cmd %d", i)
		assert.Equal(t, "add", cmd.Op())
	}
	_, fired, err := srv.FastForward(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, uint64(3000), fired)
}

// Each request of a Pipe succeeds or fails on its own; Exec returns the
// first error in queue order; a request the client refuses itself (a
// frame over max_frame) is not sent, and the connection survives. A zero
// duration is sent: the server fires it at its next tick.
func TestPipeErrors(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c.Add(ctx, 1, 1, 5, nil)
	require.NoError(t, err)

	cmds, err := c.Pipelined(ctx, func(p *Pipe) error {
		p.Add(1, 2, 5, nil)
		p.AddAfter(1, 3, 0, nil)
		p.Add(1, 1, 5, nil) // exists
		p.Add(1, 4, 5, &AddOptions{Data: bytes.Repeat([]byte{'x'}, protocol.DefaultMaxFrame+1)})
		p.Cancel(1, 99) // not found
		p.Pause(1, 2)
		p.Resume(1, 2)
		p.Cancel(1, 2)
		p.AddSchedule(1, 5, "@daily", &AddOptions{Zone: "Europe/Paris", Missed: MissedSkip})
		p.AddSchedule(1, 6, "0 25 * * *", nil)
		return nil
	})
	require.Len(t, cmds, 10)
	requireCode(t, err, ErrExists, protocol.OpAdd, protocol.CodeExists)
	require.NoError(t, cmds[0].Err())
	assert.Equal(t, uint64(start+5), cmds[0].Due())
	require.NoError(t, cmds[1].Err(), "a zero duration fires at the next tick")
	assert.Equal(t, uint64(start+1), cmds[1].Due())
	requireCode(t, cmds[2].Err(), ErrExists, protocol.OpAdd, protocol.CodeExists)
	requireCode(t, cmds[3].Err(), ErrLimitExceeded, protocol.OpAdd, protocol.CodeLimitExceeded)
	requireCode(t, cmds[4].Err(), ErrNotFound, protocol.OpCancel, protocol.CodeNotFound)
	for _, cmd := range cmds[5:9] {
		require.NoError(t, cmd.Err(), cmd.Op())
	}
	requireCode(t, cmds[9].Err(), ErrInvalidArgument, protocol.OpAdd, protocol.CodeInvalidArgument)
	tm, err := c.Get(ctx, 1, 5)
	require.NoError(t, err)
	assert.Equal(t, "@daily", tm.Schedule)
	assert.Equal(t, "Europe/Paris", tm.Zone)
	assert.Equal(t, cmds[8].Due(), tm.Due)
	_, err = c.Get(ctx, 1, 2)
	require.ErrorIs(t, err, ErrNotFound, "paused, resumed and cancelled, in order")
	_, err = c.Get(ctx, 1, 4)
	require.ErrorIs(t, err, ErrNotFound, "the oversize add was not sent")
	_, err = c.Ping(ctx)
	require.NoError(t, err)

	_, err = c.Pipelined(ctx, func(*Pipe) error { return io.ErrUnexpectedEOF })
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "fn's error, nothing sent")
	require.NoError(t, c.Pipeline().Exec(ctx), "an empty Pipe")
}

// A Pipe whose context ends, or whose connection is lost, before the
// replies come gives every waiting Cmd that error; the Client goes on.
func TestPipeNoReply(t *testing.T) {
	release := make(chan struct{})
	f := startFake(t, func(w io.Writer, req protocol.Request) bool {
		if req.Op == protocol.OpCancel { // a cancel of tid 1 cuts the connection
			return req.Tid != 1
		}
		<-release // adds are never answered until the test ends
		return false
	})
	t.Cleanup(func() { close(release) })
	c := dial(t, f.addr(), WithReconnect(0, 0))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p := c.Pipeline()
	a, b := p.Add(1, 1, 5, nil), p.Add(1, 2, 5, nil)
	require.ErrorIs(t, p.Exec(ctx), context.DeadlineExceeded)
	require.ErrorIs(t, a.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, b.Err(), context.DeadlineExceeded)

	c2 := dial(t, startFake(t, func(w io.Writer, req protocol.Request) bool { return false }).addr(), WithReconnect(0, 0))
	p = c2.Pipeline()
	a = p.Add(1, 1, 5, nil)
	err := p.Exec(tctx(t))
	require.True(t, errors.Is(err, ErrDisconnected), "%v", err)
	require.ErrorIs(t, a.Err(), ErrDisconnected)
}
