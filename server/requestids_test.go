package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestRequestIDsOff: limits.max_request_ids -1 is accepted (-2 is not) and
// turns the memory of request ids off: hello reports max_request_ids and
// request_id_ticks 0 (so clients send no ids and do not retry changes
// themselves), and a change sent twice with the same client id applies
// twice. Before it, the config refused -1 like any negative limit.
func TestRequestIDsOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("limits:\n  max_request_ids: -1\n"), 0o600))
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	require.NoError(t, cfg.Check())
	require.Equal(t, -1, cfg.Limits.MaxRequestIDs)
	require.NoError(t, os.WriteFile(path, []byte("limits:\n  max_request_ids: -2\n"), 0o600))
	cfg, err = LoadConfig(path)
	require.NoError(t, err)
	require.EqualError(t, cfg.Check(), "config: limits.max_request_ids: -2: limits must not be negative")

	srv := startServer(t, func(c *Config) { c.Limits.MaxRequestIDs = -1 })
	c := helloClient(t, srv, "off")
	assert.Zero(t, c.hello.Limits.MaxRequestIDs)
	assert.Zero(t, c.hello.Limits.RequestIDTicks)
	add := protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 100, Client: 0x5eed}
	add.ID = c.send(add) // (send numbers it)
	m := c.reply(add.ID)
	require.Equal(t, protocol.KindOK, m.Kind, "%s", m.Text)
	c.write(protocol.AppendRequest(nil, &add)) // the same bytes again
	assert.Equal(t, protocol.CodeExists, c.reply(add.ID).Code, "applied again")
}

// TestRequestIDsDefaultByMode: a single server remembers no request ids
// unless its config says how many (so its add path is the one it had
// before clusters, and clients do not retry changes against it); a cluster
// node remembers 100,000, since a failover cuts every connection with
// changes in flight. An explicit value holds in both.
func TestRequestIDsDefaultByMode(t *testing.T) {
	cluster := ClusterConfig{ID: "c", NodeID: "n1", Peers: "n1=127.0.0.1:7531"}
	for _, tc := range []struct {
		name    string
		cfg     Config
		ids     int
		helloID uint64
	}{
		{"single", Config{}, -1, 0},
		{"single, asked", Config{Limits: Limits{MaxRequestIDs: 5000}}, 5000, 5000},
		{"cluster", Config{DataDir: t.TempDir(), Cluster: cluster}, 100_000, 100_000},
		{"cluster, off", Config{DataDir: t.TempDir(), Cluster: cluster, Limits: Limits{MaxRequestIDs: -1}}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.cfg.withDefaults()
			require.NoError(t, err)
			assert.Equal(t, tc.ids, c.Limits.MaxRequestIDs)
			assert.Equal(t, tc.helloID, c.wireLimits().MaxRequestIDs)
		})
	}
}
