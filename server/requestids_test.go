package server

import (
	"context"
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

// TestRequestIDsDefaultOverOldState: a single server restarted with the
// new default (no limits.max_request_ids) over a data directory whose
// state remembers request ids (written by an older build, or with the key
// set) starts, forgets them (stats: none), and applies a retry of an old
// change afresh; a reload that sets the key turns the memory on (a retry
// gets its first reply), and one that omits it again turns it off.
func TestRequestIDsDefaultOverOldState(t *testing.T) {
	dir := t.TempDir()
	persist := func(ids int) func(*Config) {
		return func(c *Config) {
			c.DataDir, c.Persistence, c.Fsync = dir, "on", "always"
			c.Limits.MaxRequestIDs = ids
		}
	}
	add := protocol.Request{Op: protocol.OpAdd, ID: 7, Receiver: 1, Tid: 1, After: 100, Client: 0x5eed}
	retry := func(c *rawClient) protocol.Message {
		c.write(protocol.AppendRequest(nil, &add))
		return c.reply(add.ID)
	}
	old := newServer(t, persist(100))
	c := helloClient(t, old, "old")
	first := retry(c)
	require.Equal(t, protocol.KindOK, first.Kind, "%s", first.Text)
	require.Equal(t, first, retry(c), "remembered")
	require.Equal(t, uint64(1), c.stats().RequestIDs)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	require.NoError(t, old.Stop(ctx))

	srv := startServer(t, persist(0))
	c = helloClient(t, srv, "new")
	assert.Zero(t, c.hello.Limits.MaxRequestIDs)
	assert.Zero(t, c.stats().RequestIDs, "forgotten at start")
	assert.Equal(t, protocol.CodeExists, retry(c).Code, "applied afresh")

	cfg := srv.base
	cfg.Limits.MaxRequestIDs = 100
	_, err := srv.Reload(ctx, cfg)
	require.NoError(t, err)
	c = helloClient(t, srv, "on")
	assert.Equal(t, uint64(100), c.hello.Limits.MaxRequestIDs)
	add.ID, add.Tid = 8, 2
	first = retry(c)
	require.Equal(t, protocol.KindOK, first.Kind, "%s", first.Text)
	assert.Equal(t, first, retry(c), "remembered after the reload")

	cfg.Limits.MaxRequestIDs = 0 // the key omitted
	_, err = srv.Reload(ctx, cfg)
	require.NoError(t, err)
	c = helloClient(t, srv, "off")
	assert.Zero(t, c.hello.Limits.MaxRequestIDs)
	assert.Zero(t, c.stats().RequestIDs, "forgotten by the reload")
	assert.Equal(t, protocol.CodeExists, retry(c).Code, "applied afresh")
}
