package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/cluster"
	"github.com/tickwheel/tickwheel/session"
)

// Cluster membership at run time (issue 25, "Operating it";
// docs/OPERATIONS.md, "Clusters"): the admin cluster op (status, add,
// remove), answered by the leader (a follower answers it not_leader, as
// every request), and a joining node's request to be added (cluster.join).

// membershipTimeout bounds how long a membership change may wait to be
// enqueued in raft; the op's reply leaves once the change is committed.
const membershipTimeout = 10 * time.Second

// clusterOp takes an admin session's cluster op (session.Core's cluster
// hook), on the loop. A bad sub-command or argument is refused at once
// (its code and message); otherwise the change runs on its own goroutine
// (it waits for raft to commit it) and the reply is given to the session
// on the loop, unless the session is gone by then (the connection closed,
// or leadership changed: the clients were closed). The session's next
// requests are not read until then: replies keep request order.
func (s *Server) clusterOp(sess *session.Session, req protocol.Request) (protocol.Code, string) {
	if code, msg := checkClusterOp(&req); code != 0 {
		return code, msg
	}
	r := s.replica
	if r == nil || r.node == nil || !r.leading {
		return protocol.CodeUnavailable, "this node is not serving as the cluster's leader now: retry"
	}
	c, _ := sess.Conn.(gnet.Conn)
	l := connLink(c)
	if l == nil {
		return protocol.CodeInternal, "cluster: the session has no connection"
	}
	l.clusterOp = true // its next requests wait for the reply (mayRead)
	core := s.core
	go func() {
		reply := r.membership(&req)
		_ = s.onLoop(r.ctx, func() {
			l.clusterOp = false
			if s.core != core || !core.Answer(sess, reply) {
				return
			}
			s.commit() // the reply is recorded by its length
			s.flush()
			if c.InboundBuffered() > 0 {
				_ = c.Wake(nil) // the requests that waited are read
			}
		})
	}()
	return 0, ""
}

// connLink returns c's link, or nil when c is not a client connection.
func connLink(c gnet.Conn) *link {
	if c == nil {
		return nil
	}
	l, _ := c.Context().(*link)
	return l
}

// checkClusterOp checks a cluster op's sub-command and arguments.
func checkClusterOp(req *protocol.Request) (protocol.Code, string) {
	switch req.Command {
	case protocol.ClusterStatus, protocol.ClusterCheck:
		return 0, ""
	case protocol.ClusterAdd, protocol.ClusterAddNonvoter:
		if req.Node == "" || len(req.Node) > 255 {
			return protocol.CodeInvalidArgument, fmt.Sprintf("cluster %s: the node id must be 1 to 255 bytes", req.Command)
		}
		if _, _, err := net.SplitHostPort(req.Addr); err != nil || req.Addr == "" {
			return protocol.CodeInvalidArgument, fmt.Sprintf("cluster %s: raft address %q: want host:port", req.Command, req.Addr)
		}
		return 0, ""
	case protocol.ClusterPromote, protocol.ClusterRemove:
		if req.Node == "" || len(req.Node) > 255 {
			return protocol.CodeInvalidArgument, fmt.Sprintf("cluster %s: the node id must be 1 to 255 bytes", req.Command)
		}
		return 0, ""
	}
	return protocol.CodeInvalidArgument, fmt.Sprintf("cluster: unknown sub-command %q: want status, add, add_nonvoter, promote, remove or check", req.Command)
}

// membership makes the change req asks for, waits for it to be committed,
// and returns the reply frame: the cluster's state after it, not_leader
// when this node lost leadership meanwhile, unavailable when raft refused
// the change or the node had not caught up within cluster.catch_up_timeout
// (it then stays a non-voter), bad_state for a promote of a node not in
// the cluster or an add_nonvoter of a voter. Runs on its own goroutine (it
// blocks on raft, and add and promote wait for the node to catch up).
func (r *replica) membership(req *protocol.Request) []byte {
	k := &r.s.cfg.Cluster
	ctx, cancel := context.WithTimeout(r.ctx, k.CatchUpTimeout)
	defer cancel()
	var err, cerr error
	var check uint64
	switch req.Command {
	case protocol.ClusterAdd:
		err = r.node.AddCaughtUp(ctx, req.Node, req.Addr, k.CatchUpEntries, membershipTimeout)
	case protocol.ClusterAddNonvoter:
		if m, ok := r.node.Member(req.Node); ok && m.Voter {
			return protocol.AppendError(nil, req.ID, protocol.CodeBadState, fmt.Sprintf(
				"cluster add_nonvoter: %s is a voter: it stays one (remove it first to add it back as a non-voter)", req.Node))
		}
		err = r.node.AddNonvoter(req.Node, req.Addr, membershipTimeout)
	case protocol.ClusterPromote:
		err = r.node.Promote(ctx, req.Node, k.CatchUpEntries, membershipTimeout)
	case protocol.ClusterRemove:
		err = r.node.RemoveServer(req.Node, membershipTimeout)
	case protocol.ClusterCheck:
		check, cerr = r.check(ctx)
		if cerr != nil {
			return protocol.AppendError(nil, req.ID, protocol.CodeUnavailable, fmt.Sprintf("cluster check: %v", cerr))
		}
	}
	var c protocol.Cluster
	if err == nil {
		c, err = r.clusterState()
		c.Check = check
	}
	var (
		nl *cluster.NotLeaderError
		nc *cluster.NotCaughtUpError
	)
	switch {
	case errors.As(err, &nl):
		return protocol.AppendNotLeader(nil, req.ID, "this node stopped leading the cluster: ask the leader", nl.LeaderClientAddr)
	case errors.As(err, &nc):
		return protocol.AppendError(nil, req.ID, protocol.CodeUnavailable, fmt.Sprintf(
			"cluster %s: %v within %v (cluster.catch_up_timeout): it stays a non-voter for now; "+
				"run `tickwheel cluster promote %s` once it has caught up", req.Command, err, k.CatchUpTimeout, req.Node))
	case errors.Is(err, cluster.ErrNotMember):
		return protocol.AppendError(nil, req.ID, protocol.CodeBadState, fmt.Sprintf("cluster %s: %v", req.Command, err))
	case err != nil:
		return protocol.AppendError(nil, req.ID, protocol.CodeUnavailable, fmt.Sprintf("cluster %s: %v", req.Command, err))
	}
	return protocol.AppendClusterOK(nil, req.ID, &c)
}

// clusterState is the node's raft state and the latest configuration's
// members. Safe from any goroutine; it waits for raft's main loop.
func (r *replica) clusterState() (protocol.Cluster, error) {
	st := r.node.Status()
	ms, err := r.node.Members()
	if err != nil {
		return protocol.Cluster{}, err
	}
	c := protocol.Cluster{Role: st.Role, Leader: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex}
	for _, m := range ms {
		c.Members = append(c.Members, protocol.ClusterMember{ID: m.ID, RaftAddr: m.Addr, Voter: m.Voter})
	}
	return c, nil
}

// ClusterMembers returns the members of the latest raft configuration, or
// nil on a single server or before the node started. Safe from any
// goroutine (the status page reads it); it waits for raft's main loop.
func (s *Server) ClusterMembers() []protocol.ClusterMember {
	r := s.replica
	if r == nil || r.node == nil {
		return nil
	}
	c, err := r.clusterState()
	if err != nil {
		return nil
	}
	return c.Members
}

// joinRetry is the pause between a joining node's attempts.
const joinRetry = time.Second

// join asks the cluster, through the client addresses of cluster.join, to
// add this node (a cluster op add with the admin token), until one answers
// it is a member or the server stops. The leader is found by following
// not_leader. A node whose own raft state lists it as a member (a
// restart) asks nothing.
func (s *Server) join() {
	k := &s.cfg.Cluster
	addrs := strings.Split(k.Join, ",")
	raftAddr := s.replica.node.RaftAddr()
	if ms, err := s.replica.node.Members(); err == nil {
		for _, m := range ms {
			if m.ID == k.NodeID {
				s.log.Info("cluster: a member already (its raft state says so): not asking to join", "node", k.NodeID)
				return
			}
		}
	}
	cmd := protocol.ClusterAdd
	if k.JoinNonvoter {
		cmd = protocol.ClusterAddNonvoter
	}
	// The leader answers once this node has caught up (add), or once the
	// change is committed (add_nonvoter).
	wait := k.CatchUpTimeout + 2*membershipTimeout + 5*time.Second
	for attempt := 0; ; attempt++ {
		addr := strings.TrimSpace(addrs[attempt%len(addrs)])
		for hop := 0; hop < 3 && addr != ""; hop++ {
			leader, err := askJoin(s.replica.ctx, addr, s.cfg.AdminToken, k.NodeID, raftAddr, cmd, wait)
			if err == nil {
				s.log.Info("cluster: joined: the leader added this node", "via", addr, "raft_addr", raftAddr)
				return
			}
			s.log.Warn("cluster: joining: not added yet; retrying", "via", addr, "err", err)
			addr = leader
		}
		select {
		case <-s.replica.ctx.Done():
			return
		case <-time.After(joinRetry):
		}
	}
}

// askJoin sends hello and a cluster add (cmd: add or add_nonvoter) of
// node id at raftAddr to the server at addr and waits for the answer, at
// most wait: nil once added, or the error, with the leader's client
// address when the node answered not_leader.
func askJoin(ctx context.Context, addr, token, id, raftAddr, cmd string, wait time.Duration) (leader string, err error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	b := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version,
		Name: "tickwheel-join", Token: token})
	b = protocol.AppendRequest(b, &protocol.Request{Op: protocol.OpCluster, ID: 2, Command: cmd, Node: id, Addr: raftAddr})
	if _, err := conn.Write(b); err != nil {
		return "", err
	}
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		for {
			payload, n, err := protocol.SplitFrame(buf, protocol.DefaultMaxFrame)
			if errors.Is(err, protocol.ErrIncomplete) {
				break
			}
			if err != nil {
				return "", err
			}
			buf = buf[n:]
			var m protocol.Message
			if err := protocol.DecodeMessage(payload, &m); err != nil {
				return "", err
			}
			switch {
			case m.Kind == protocol.KindError && m.Code == protocol.CodeNotLeader:
				return m.Leader, fmt.Errorf("%s is not the leader (the leader is at %q)", addr, m.Leader)
			case m.Kind == protocol.KindError:
				return "", fmt.Errorf("%s: %s", m.Code, m.Text)
			case m.Kind == protocol.KindOK && m.ID == 2:
				return "", nil
			}
		}
		n, err := conn.Read(chunk)
		if err != nil {
			return "", err
		}
		buf = append(buf, chunk[:n]...)
	}
}
