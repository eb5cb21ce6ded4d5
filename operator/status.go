package operator

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/session"
)

// The status page: assets/index.html with its script and uPlot 1.6.32
// (MIT, assets/uPlot.LICENSE), embedded, so the page needs nothing but
// this listener. It polls /status.json once a second.

//go:embed assets
var embedded embed.FS

// assetsFS is the assets directory, served under /assets/.
var assetsFS = func() fs.FS {
	f, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return f
}()

// statusPage serves the page itself.
func (o *Operator) statusPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.ServeFileFS(w, r, assetsFS, "index.html")
}

// status is what /status.json returns.
type status struct {
	Version     string  `json:"version"`  // tickwheel version (server.Build)
	Revision    string  `json:"revision"` // VCS revision, "" when not recorded
	Ready       bool    `json:"ready"`
	Sampled     bool    `json:"sampled"` // more receivers than the top lists' walk covers
	Taken       int64   `json:"taken_ms"`
	Now         string  `json:"now"` // tw-time, ticks (a string: uint64)
	TickSeconds float64 `json:"tick_seconds"`
	TwSeconds   float64 `json:"tw_seconds"` // tw-time × tick
	Speed       float64 `json:"speed"`
	Frozen      bool    `json:"frozen"`
	Lag         float64 `json:"lag_seconds"`
	Timers      uint64  `json:"timers"`
	Receivers   int     `json:"receivers"`
	Sessions    uint64  `json:"sessions"`
	Connections int64   `json:"connections"`
	Backlog     uint64  `json:"backlog"`
	Stalled     int     `json:"stalled"`
	Fired       uint64  `json:"fired_total"`
	Dropped     uint64  `json:"dropped_total"`
	Refused     uint64  `json:"refused_total"`
	// Cluster is a cluster node's raft state; absent on a single server.
	Cluster    *clusterStatus `json:"cluster,omitempty"`
	TopTimers  []recv         `json:"top_timers"`
	TopBacklog []recv         `json:"top_backlog"`
	History    []sample       `json:"history"`
}

// clusterStatus is a cluster node's raft state in /status.json.
type clusterStatus struct {
	Role         string   `json:"role"`        // leader, follower, candidate or shutdown
	Suffrage     string   `json:"suffrage"`    // this node's: voter or nonvoter, "" when not a member
	Leader       string   `json:"leader"`      // the leader's node id, "" unknown
	LeaderAddr   string   `json:"leader_addr"` // its client address, "" unknown
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	Members      []member `json:"members"` // the latest raft configuration ([] when it cannot be read)
	// StateCheck is this node's latest state check (absent: none since it
	// started): every node's digest for one check id must be the same.
	StateCheck *stateCheck `json:"state_check,omitempty"`
}

// stateCheck is a node's hash of its state at a cluster check's mark; the
// id and the digest are strings (uint64; the digest in hex).
type stateCheck struct {
	ID     string `json:"id"`
	Digest string `json:"digest"`
	Timers int    `json:"timers"`
}

type member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
}

// memberSource is a Source that can list a cluster's members (a
// *server.Server).
type memberSource interface {
	ClusterMembers() []protocol.ClusterMember
}

// clusterOf is the sample's raft state and the source's members, or nil
// on a single server.
func clusterOf(k *server.ClusterMetrics, src Source) *clusterStatus {
	if !k.On {
		return nil
	}
	c := &clusterStatus{Role: k.Role, Suffrage: k.Suffrage, Leader: k.Leader, LeaderAddr: k.LeaderAddr, Term: k.Term,
		CommitIndex: k.CommitIndex, AppliedIndex: k.AppliedIndex, Members: []member{}}
	if ch := k.Check; ch.ID != 0 {
		c.StateCheck = &stateCheck{ID: strconv.FormatUint(ch.ID, 10), Digest: fmt.Sprintf("%016x", ch.Digest), Timers: ch.Timers}
	}
	if ms, ok := src.(memberSource); ok {
		for _, m := range ms.ClusterMembers() {
			c.Members = append(c.Members, member{ID: m.ID, RaftAddr: m.RaftAddr, Voter: m.Voter})
		}
	}
	return c
}

// recv is a row of the page's receiver tables; ids are strings (uint64).
type recv struct {
	Receiver string `json:"receiver"`
	Timers   int    `json:"timers"`
	Backlog  int    `json:"backlog"`
	Bound    bool   `json:"bound"`
}

func recvs(in []session.ReceiverLoad) []recv {
	out := make([]recv, len(in))
	for i, r := range in {
		out[i] = recv{Receiver: strconv.FormatUint(r.Receiver, 10), Timers: r.Timers, Backlog: r.Backlog, Bound: r.Bound}
	}
	return out
}

// statusJSON serves the page's data: the last sample's counters and the
// history ring. Before the first sample it serves an empty history.
func (o *Operator) statusJSON(w http.ResponseWriter, _ *http.Request) {
	hist, _, _ := o.hist.samples()
	m, ok := o.hist.current(o.src.Load())
	b := server.Build()
	st := status{Version: b.Version, Revision: b.Revision, History: hist, TopTimers: []recv{}, TopBacklog: []recv{}}
	if ok {
		s := &m.Stats
		st.Ready, st.Sampled, st.Taken = m.Ready, m.Load.Sampled, m.Taken.UnixMilli()
		now := max(m.Clock, s.Now) // the wheel trails the clock while idle
		st.Now, st.TickSeconds = strconv.FormatUint(now, 10), m.Tick.Seconds()
		st.TwSeconds, st.Speed, st.Frozen = float64(now)*m.Tick.Seconds(), s.Speed, s.Frozen
		st.Lag = float64(s.Lag) * m.Tick.Seconds()
		st.Timers, st.Receivers, st.Sessions, st.Connections = s.Timers, m.Load.TimerReceivers, s.Sessions, m.Connections
		st.Backlog, st.Stalled, st.Fired, st.Dropped, st.Refused = s.BacklogEvents, m.Load.Stalled, s.FiredTotal, m.Counters.Dropped, m.Refused
		st.TopTimers, st.TopBacklog = recvs(m.Load.TopTimers), recvs(m.Load.TopBacklog)
		st.Cluster = clusterOf(&m.Cluster, o.source())
	}
	if st.History == nil {
		st.History = []sample{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(&st)
}
