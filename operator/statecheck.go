package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// StateCheck is a cluster node's latest state check, as its status page
// (/status.json) shows it: every node's Digest for one ID must be equal
// (server.StateCheck; docs/OPERATIONS.md, "Checking that the nodes agree").
type StateCheck struct {
	ID, Digest uint64
	Timers     int
	// Role, AppliedIndex and CommitIndex are the node's raft state when
	// the page was read (also with the error of a node that has no check).
	Role                      string
	AppliedIndex, CommitIndex uint64
}

// Agrees reports whether s and o are the same check with the same result
// (the raft state beside them aside).
func (s StateCheck) Agrees(o StateCheck) bool {
	return s.ID == o.ID && s.Digest == o.Digest && s.Timers == o.Timers
}

// FetchStateCheck reads the latest state check from the status page of
// the operator listener at addr (host:port, http). It fails when the node
// is not a cluster node or has made no check since it started.
func FetchStateCheck(ctx context.Context, hc *http.Client, addr string) (StateCheck, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status.json", nil)
	if err != nil {
		return StateCheck{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return StateCheck{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return StateCheck{}, fmt.Errorf("%s/status.json: %s", addr, resp.Status)
	}
	var st struct {
		Cluster *clusterStatus `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return StateCheck{}, fmt.Errorf("%s/status.json: %w", addr, err)
	}
	if st.Cluster == nil {
		return StateCheck{}, fmt.Errorf("%s: not a cluster node", addr)
	}
	c := st.Cluster
	out := StateCheck{Role: c.Role, AppliedIndex: c.AppliedIndex, CommitIndex: c.CommitIndex}
	k := c.StateCheck
	if k == nil {
		return out, fmt.Errorf("%s: no state check since the node started", addr)
	}
	id, err1 := strconv.ParseUint(k.ID, 10, 64)
	digest, err2 := strconv.ParseUint(k.Digest, 16, 64)
	if err1 != nil || err2 != nil {
		return out, fmt.Errorf("%s: bad state check %+v", addr, *k)
	}
	out.ID, out.Digest, out.Timers = id, digest, k.Timers
	return out, nil
}
