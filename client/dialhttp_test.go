package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDialHTTPPort: dialled by mistake, an HTTP server (the operator
// port) answers the hello in HTTP once its header timeout ends; Dial then
// says so, naming the address, instead of "frame too large".
func TestDialHTTPPort(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.NotFoundHandler())
	hs.Config.ReadHeaderTimeout = 50 * time.Millisecond
	hs.Start()
	defer hs.Close()
	addr := hs.Listener.Addr().String()
	_, err := Dial(tctx(t), addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr+" answered in HTTP")
	assert.Contains(t, err.Error(), "7420")
	assert.NotContains(t, err.Error(), "frame too large")
}

// TestDialSilentServer: a server that accepts but never answers fails a
// Dial without a deadline after WithDialTimeout's bound, naming the
// address; a ctx deadline, when there is one, is the bound instead.
func TestDialSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	addr := ln.Addr().String()

	start := time.Now()
	_, err = Dial(context.Background(), addr, WithDialTimeout(100*time.Millisecond))
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), addr+": no hello reply within 100ms")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = Dial(ctx, addr, WithDialTimeout(time.Hour))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the ctx's deadline bounds it")
}
