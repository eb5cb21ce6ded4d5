package client

import (
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
