package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/protocol"
)

// A single server answers the cluster op bad_state, and the session goes
// on.
func TestClusterOpSingleServer(t *testing.T) {
	srv := startServer(t, nil)
	c := helloClient(t, srv, "admin")
	text := c.failCode(protocol.CodeBadState, protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterStatus})
	require.Contains(t, text, "not a cluster node")
	c.uints(protocol.Request{Op: protocol.OpPing})
}

// On a cluster's leader the cluster op needs the admin token; a bad
// sub-command or argument is invalid_argument; status answers the members
// and the raft state, and a request pipelined behind it is answered after
// it (replies keep request order while the op waits for raft). The Go
// client's methods give the same.
func TestClusterOpOnLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("elections: long")
	}
	const clientToken = "cluster-op-client-token"
	srvs := startCluster(t, func(c *Config) { c.ClientToken = clientToken })
	lead := waitLeader(t, srvs[:], -1)
	user := helloToken(t, srvs[lead], "user", clientToken)
	user.failCode(protocol.CodeUnauthorized, protocol.Request{Op: protocol.OpCluster, Command: protocol.ClusterStatus})

	c := helloClient(t, srvs[lead], "admin")
	for _, req := range []protocol.Request{
		{Op: protocol.OpCluster, Command: "grow"},
		{Op: protocol.OpCluster, Command: protocol.ClusterAdd, Node: "n4"},
		{Op: protocol.OpCluster, Command: protocol.ClusterAdd, Node: "n4", Addr: "no-port"},
		{Op: protocol.OpCluster, Command: protocol.ClusterAdd, Addr: "127.0.0.1:1"},
		{Op: protocol.OpCluster, Command: protocol.ClusterRemove},
	} {
		c.failCode(protocol.CodeInvalidArgument, req)
	}
	// Both requests in one write: the server reads them in one turn.
	statusID, pingID := c.id+1, c.id+2
	c.id += 2
	b := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpCluster, ID: statusID, Command: protocol.ClusterStatus})
	c.write(protocol.AppendRequest(b, &protocol.Request{Op: protocol.OpPing, ID: pingID}))
	m := c.reply(statusID) // fails unless it comes before the ping's reply
	require.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
	var k protocol.Cluster
	require.NoError(t, protocol.DecodeCluster(m.Result, &k))
	require.Equal(t, "leader", k.Role)
	require.Equal(t, srvs[lead].cfg.Cluster.NodeID, k.Leader)
	require.NotZero(t, k.Term)
	require.Len(t, k.Members, 3)
	for i, mb := range k.Members {
		require.Equal(t, srvs[i].cfg.Cluster.NodeID, mb.ID)
		require.Equal(t, srvs[i].cfg.Cluster.RaftAddr, mb.RaftAddr)
		require.True(t, mb.Voter)
	}
	require.Equal(t, protocol.KindOK, c.reply(pingID).Kind)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var addrs string
	for i, s := range srvs {
		if i > 0 {
			addrs += ","
		}
		addrs += s.Addr()
	}
	gc, err := client.Dial(ctx, addrs, client.WithToken(srvs[lead].AdminToken()))
	require.NoError(t, err)
	defer gc.Close()
	gk, err := gc.ClusterStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, k.Members, gk.Members)
	_, err = gc.ClusterRemove(ctx, "")
	require.True(t, errors.Is(err, client.ErrInvalidArgument), "%v", err)
	require.Len(t, srvs[lead].ClusterMembers(), 3)
}
