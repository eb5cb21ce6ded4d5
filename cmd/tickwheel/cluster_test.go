package main

import (
	"encoding/json"
	"fmt"
	"github.com/tickwheel/tickwheel/operator"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
)

// fakeFollower listens on 127.0.0.1:0 and answers each connection's first
// request with not_leader naming leader, then closes it, as a cluster
// follower does. It counts the connections it got.
type fakeFollower struct {
	ln    net.Listener
	conns atomic.Int64
}

func startFakeFollower(t *testing.T, leader string) *fakeFollower {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeFollower{ln: ln}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			go func() {
				defer nc.Close()
				var buf []byte
				tmp := make([]byte, 4096)
				for {
					n, err := nc.Read(tmp)
					if err != nil {
						return
					}
					buf = append(buf, tmp[:n]...)
					payload, _, err := protocol.SplitFrame(buf, 0)
					if err != nil {
						continue
					}
					var req protocol.Request
					_ = protocol.DecodeRequest(payload, &req)
					_, _ = nc.Write(protocol.AppendNotLeader(nil, req.ID, "this node is a follower", leader))
					return
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return f
}

// TestCLIAddrList: -addr takes a cluster's nodes, comma-separated; the
// command reaches the leader whichever node it asks first.
func TestCLIAddrList(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(1000))
	f := startFakeFollower(t, srv.Addr())
	for _, addr := range []string{f.ln.Addr().String() + "," + srv.Addr(), f.ln.Addr().String()} {
		code, out, errOut := cli(t, addr, "ping", "-token", srv.AdminToken())
		require.Equal(t, 0, code, "%s: %s", addr, errOut)
		assert.Contains(t, out, "1000", addr)
	}
	assert.Equal(t, int64(2), f.conns.Load())
}

// TestCLIDataDirTokenNotFollowed: the admin token read from the data
// directory goes to the directory's own server only: when that node is a
// follower, the command does not follow it to the leader it names, and
// says which address to give.
func TestCLIDataDirTokenNotFollowed(t *testing.T) {
	leader := startFakeFollower(t, "") // stands for the leader: counts who connects
	f := startFakeFollower(t, leader.ln.Addr().String())
	// The default data directory as a server on f's address would have it.
	require.NoError(t, os.MkdirAll(server.DefaultDataDir, 0o700))
	tokFile := filepath.Join(server.DefaultDataDir, server.AdminTokenFileName)
	old, oldErr := os.ReadFile(tokFile)
	require.NoError(t, os.WriteFile(tokFile, []byte("data-dir-token\n"), 0o600))
	addrFile := filepath.Join(server.DefaultDataDir, server.AddrFileName)
	require.NoError(t, os.WriteFile(addrFile, fmt.Appendf(nil, "%s %d\n", f.ln.Addr(), os.Getpid()), 0o600))
	t.Cleanup(func() {
		os.Remove(addrFile)
		if oldErr == nil {
			os.WriteFile(tokFile, old, 0o600)
		} else {
			os.Remove(tokFile)
		}
	})

	code, _, errOut := cli(t, f.ln.Addr().String(), "stats")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not_leader: this node is a follower (leader "+leader.ln.Addr().String()+")")
	assert.Contains(t, errOut, "give -addr "+leader.ln.Addr().String())
	assert.Equal(t, int64(1), f.conns.Load())
	assert.Zero(t, leader.conns.Load(), "the data directory's token was not taken to the leader")

	// A token given explicitly follows the leader.
	code, _, errOut = cli(t, f.ln.Addr().String(), "stats", "-token", "given", "-timeout", "200ms")
	assert.Equal(t, 1, code)
	assert.Positive(t, leader.conns.Load(), errOut)
}

// TestCLIClusterNode: on a cluster node (here a cluster of one, which
// elects itself), stats prints the raft state and stats -json carries its
// keys; cluster status lists the members, with -json too; a cluster
// command to a single server says it is not a cluster node.
func TestCLIClusterNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	raftAddr := ln.Addr().String()
	ln.Close()
	srv := servertest.RunT(t, servertest.WithDataDir(t.TempDir()), servertest.WithConfig(func(c *server.Config) {
		c.Cluster = server.ClusterConfig{ID: "cli", NodeID: "n1", Peers: "n1=" + raftAddr}
	}))
	tok := srv.AdminToken()
	var out, errOut string
	require.Eventually(t, func() bool {
		var code int
		code, out, errOut = cli(t, srv.Addr(), "stats", "-token", tok)
		return code == 0
	}, 20*time.Second, 50*time.Millisecond, "no leader: %s", errOut)
	assert.Regexp(t, `(?m)^cluster     leader \(leader n1, term [1-9]\d*, commit index [1-9]\d*, applied index \d+\)$`, out)
	assert.Contains(t, out, "\nmembers     1 voter (this node a voter), 0 non-voters\n")

	code, out, errOut := cli(t, srv.Addr(), "stats", "-token", tok, "-json")
	require.Equal(t, 0, code, errOut)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, "leader", st["role"])
	assert.Equal(t, "n1", st["leader"])
	assert.Contains(t, st, "commit_index")
	assert.Contains(t, st, "applied_index")
	assert.Equal(t, "voter", st["suffrage"])
	assert.EqualValues(t, 1, st["voters"])
	assert.EqualValues(t, 0, st["nonvoters"])

	code, out, errOut = cli(t, srv.Addr(), "cluster", "status", "-token", tok)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "members     1\n  n1         "+raftAddr+" (voter, leader)\n")
	code, out, errOut = cli(t, srv.Addr(), "cluster", "status", "-token", tok, "-json")
	require.Equal(t, 0, code, errOut)
	var k struct {
		Role    string
		Members []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(out), &k))
	assert.Equal(t, "leader", k.Role)
	assert.Equal(t, []map[string]any{{"id": "n1", "raft_addr": raftAddr, "voter": true}}, k.Members)

	code, _, errOut = cli(t, srv.Addr(), "cluster", "grow", "-token", tok)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "want status, add [-nonvoter] ID RAFTADDR, promote ID, remove ID or check [-http ADDRS]")
	code, _, errOut = cli(t, srv.Addr(), "cluster", "status", "-http", "127.0.0.1:1", "-token", tok)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-http goes with check only")

	// cluster check: the id; with -http, each node's digest, and whether they agree.
	code, out, errOut = cli(t, srv.Addr(), "cluster", "check", "-token", tok)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `^check       [1-9]\d* \(each node's digest`, out)
	op, err := operator.New(operator.Options{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	op.Attach(srv.Server())
	require.NoError(t, op.Serve()) // its status page is sampled once a second
	defer op.Close()
	httpAddr := op.Addr()
	code, out, errOut = cli(t, srv.Addr(), "cluster", "check", "-token", tok, "-http", httpAddr)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `^check       [1-9]\d*\n  `+regexp.QuoteMeta(httpAddr)+` +[0-9a-f]{16}  0 timers\nagree       yes\n$`, out)
	code, out, errOut = cli(t, srv.Addr(), "cluster", "check", "-token", tok, "-http", httpAddr, "-json")
	require.Equal(t, 0, code, errOut)
	var chk struct {
		Check uint64
		Agree bool
		Nodes []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(out), &chk))
	assert.True(t, chk.Agree)
	assert.NotZero(t, chk.Check)
	assert.Len(t, chk.Nodes, 1)
	code, _, errOut = cli(t, srv.Addr(), "cluster", "remove", "-nonvoter", "n1", "-token", tok)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-nonvoter goes with add only")
	code, _, errOut = cli(t, srv.Addr(), "cluster", "promote", "n9", "-token", tok)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "n9 is not in the cluster's configuration")

	single := servertest.RunT(t)
	code, _, errOut = cli(t, single.Addr(), "cluster", "status", "-token", single.AdminToken())
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not a cluster node")
	code, out, errOut = cli(t, single.Addr(), "stats", "-token", single.AdminToken(), "-json")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "role")
}
