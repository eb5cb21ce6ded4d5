package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/tickwheel/tickwheel/protocol"
)

const clusterHelp = `status prints the leader's view of the cluster: its raft state and the members.
add ID RAFTADDR adds node ID, listening for raft at RAFTADDR (host:port); the node must
run already, started with the same -cluster-id and cluster token and without -peers (or
with -join, which asks for this itself). It joins as a non-voter, which counts in no
quorum while it catches up from a snapshot and the log, and is promoted to a voter once
its log is within cluster.catch_up_entries of the leader's: add waits for that (up to
the leader's cluster.catch_up_timeout, not -timeout; if it runs out the node stays a
non-voter: run promote later). Its client address is the one it publishes when it leads.
add -nonvoter ID RAFTADDR adds it as a non-voter that stays one (a read replica, e.g.
at a standby site: its failure or distance slows no commit), without waiting.
promote ID makes a non-voter a voter once it has caught up (waiting as add does).
remove ID removes a node (stop it afterwards); removing the leader makes it step down,
and the reply may not arrive (run status again). Each prints the state after the
change, once it is committed. Give -addr the nodes' client addresses: the command
goes to the leader.
check marks the replicated log for a state check: every node hashes its state at the
mark (its status page, /status.json, shows the digest) and all digests must be equal;
a node that differs has diverged (docs/OPERATIONS.md, "Checking that the nodes agree").
It prints the check's id; with -http and the nodes' operator addresses it waits (up to
-timeout) for each node's digest, prints them, and fails unless they are all equal.
`

// clusterFlags takes cluster's -nonvoter (for add) and -http (for check).
func clusterFlags(fs *flag.FlagSet) func(*env) error {
	nonvoter := fs.Bool("nonvoter", false, "add: keep the node a non-voter (a read replica), without waiting for it to catch up")
	http := fs.String("http", "", "check: the nodes' operator addresses (host:port,...): wait for each one's digest and compare them")
	return func(e *env) error {
		if *http != "" && e.args[0] != protocol.ClusterCheck {
			return usageError{fmt.Errorf("-http goes with check only (got %q)", strings.Join(e.args, " "))}
		}
		if e.args[0] == protocol.ClusterCheck {
			if len(e.args) != 1 {
				return usageError{fmt.Errorf("check takes no argument (got %q)", strings.Join(e.args, " "))}
			}
			return clusterCheck(e, *http)
		}
		return clusterCmd(e, *nonvoter)
	}
}

// clusterCmd runs cluster status, add, promote or remove.
func clusterCmd(e *env, nonvoter bool) error {
	var (
		k   protocol.Cluster
		err error
	)
	args := e.args[1:]
	if nonvoter && e.args[0] != protocol.ClusterAdd {
		return usageError{fmt.Errorf("-nonvoter goes with add only (got %q)", strings.Join(e.args, " "))}
	}
	if (e.args[0] == protocol.ClusterAdd && !nonvoter) || e.args[0] == protocol.ClusterPromote {
		// They wait until the node has caught up, which the leader bounds
		// (cluster.catch_up_timeout), not -timeout.
		e.ctx = context.Background()
	}
	switch sub, n := e.args[0], len(args); {
	case sub == protocol.ClusterStatus && n == 0:
		k, err = e.c.ClusterStatus(e.ctx)
	case sub == protocol.ClusterAdd && n == 2 && nonvoter:
		k, err = e.c.ClusterAddNonvoter(e.ctx, args[0], args[1])
	case sub == protocol.ClusterAdd && n == 2:
		k, err = e.c.ClusterAdd(e.ctx, args[0], args[1])
	case sub == protocol.ClusterPromote && n == 1:
		k, err = e.c.ClusterPromote(e.ctx, args[0])
	case sub == protocol.ClusterRemove && n == 1:
		k, err = e.c.ClusterRemove(e.ctx, args[0])
	default:
		return usageError{fmt.Errorf("want status, add [-nonvoter] ID RAFTADDR, promote ID, remove ID or check [-http ADDRS] (got %q)", strings.Join(e.args, " "))}
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
