package server

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestHelloVectorHasDefaults: the ok-hello vector (and so the example in
// docs/PROTOCOL.md) carries the limits a cluster node with the default
// config sends, all but max_connections, which depends on the machine. (A
// single server's default differs in one way: it remembers no request ids,
// so it sends neither max_request_ids nor request_id_ticks.)
func TestHelloVectorHasDefaults(t *testing.T) {
	b, err := os.ReadFile("../protocol/testdata/vectors.json")
	require.NoError(t, err)
	var f struct {
		Replies []struct {
			Name string `json:"name"`
			Hex  string `json:"hex"`
		} `json:"replies"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	var frame []byte
	for _, v := range f.Replies {
		if v.Name == "ok-hello" {
			frame, err = hex.DecodeString(v.Hex)
			require.NoError(t, err)
		}
	}
	require.NotNil(t, frame, "no ok-hello vector")
	p, _, err := protocol.SplitFrame(frame, 1<<20)
	require.NoError(t, err)
	var m protocol.Message
	require.NoError(t, protocol.DecodeMessage(p, &m))
	var h protocol.Hello
	require.NoError(t, protocol.DecodeHello(m.Result, &h))

	cfg, err := Config{AdminToken: testAdminToken, DataDir: t.TempDir(),
		Cluster: ClusterConfig{ID: "c", NodeID: "n1", Peers: "n1=127.0.0.1:7531"}}.withDefaults()
	require.NoError(t, err)
	want := cfg.wireLimits()
	want.MaxConnections = h.Limits.MaxConnections
	assert.Equal(t, want, h.Limits)
	// max_connections: the fd limit less a reserve, at most 100000 (an
	// example of 1,048,000 contradicted OPERATIONS.md).
	assert.Equal(t, uint64(maxConnectionsCap), h.Limits.MaxConnections, "the example shows the cap")
}
