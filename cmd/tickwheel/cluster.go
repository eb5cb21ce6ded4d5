package main

import (
	"fmt"
	"strings"

	"github.com/tickwheel/tickwheel/protocol"
)

const clusterHelp = `status prints the leader's view of the cluster: its raft state and the members.
add ID RAFTADDR adds node ID, listening for raft at RAFTADDR (host:port), as a voter;
the node must run already, started with the same -cluster-id and cluster token and
without -peers (or with -join, which asks for this itself). It catches up from a
snapshot and the log; its client address is the one it publishes when it leads.
remove ID removes a node (stop it afterwards); removing the leader makes it step down,
and the reply may not arrive (run status again). Each prints the state after the
change, once it is committed. Give -addr the nodes' client addresses: the command
goes to the leader.
`

// clusterCmd runs cluster status, add or remove.
func clusterCmd(e *env) error {
	var (
		k   protocol.Cluster
		err error
	)
	switch sub, n := e.args[0], len(e.args)-1; {
	case sub == protocol.ClusterStatus && n == 0:
		k, err = e.c.ClusterStatus(e.ctx)
	case sub == protocol.ClusterAdd && n == 2:
		k, err = e.c.ClusterAdd(e.ctx, e.args[1], e.args[2])
	case sub == protocol.ClusterRemove && n == 1:
		k, err = e.c.ClusterRemove(e.ctx, e.args[1])
	default:
		return usageError{fmt.Errorf("want status, add ID RAFTADDR, or remove ID (got %q)", strings.Join(e.args, " "))}
	}
	if err != nil {
		return err
	}
	if e.json {
		e.print(clusterJSON(k), "")
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster     %s\n", raftText(k.Role, k.Leader, k.Term, k.CommitIndex, k.AppliedIndex))
	fmt.Fprintf(&b, "members     %d\n", len(k.Members))
	for _, m := range k.Members {
		role := "voter"
		if !m.Voter {
			role = "non-voter"
		}
		if m.ID == k.Leader {
			role += ", leader"
		}
		fmt.Fprintf(&b, "  %-10s %s (%s)\n", m.ID, m.RaftAddr, role)
	}
	fmt.Fprint(e.stdout, b.String())
	return nil
}

type memberJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
}

// clusterJSON is cluster -json's object, with docs/PROTOCOL.md's keys.
func clusterJSON(k protocol.Cluster) any {
	ms := make([]memberJSON, 0, len(k.Members))
	for _, m := range k.Members {
		ms = append(ms, memberJSON{m.ID, m.RaftAddr, m.Voter})
	}
	return struct {
		Role         string       `json:"role"`
		Leader       string       `json:"leader"`
		Term         uint64       `json:"term"`
		CommitIndex  uint64       `json:"commit_index"`
		AppliedIndex uint64       `json:"applied_index"`
		Members      []memberJSON `json:"members"`
	}{k.Role, k.Leader, k.Term, k.CommitIndex, k.AppliedIndex, ms}
}
