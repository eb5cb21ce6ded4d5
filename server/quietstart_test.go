package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// A server that starts, fires a timer on real time and stops, durable or
// not, logs no warning or error: an operator reads each as a problem.
func TestQuietStart(t *testing.T) {
	for _, persistence := range []string{"on", "off"} {
		t.Run(persistence, func(t *testing.T) {
			var logs lockedBuffer
			cfg := Config{Addr: "127.0.0.1:0", AdminToken: testAdminToken, DataDir: t.TempDir(), Persistence: persistence,
				Tick: time.Millisecond}
			srv, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			require.NoError(t, srv.Start())
			c := helloClient(t, srv, "quiet")
			c.call(protocol.Request{Op: protocol.OpBind, Receiver: 1})
			c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5})
			m, err := c.read()
			require.NoError(t, err)
			require.Equal(t, protocol.KindFire, m.Kind, "the timer fires on real time")
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			require.NoError(t, srv.Stop(ctx))
			require.NotContains(t, logs.String(), "level=WARN")
			require.NotContains(t, logs.String(), "level=ERROR")
		})
	}
}
