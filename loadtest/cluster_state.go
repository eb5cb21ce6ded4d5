package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/client"
)

// nodeCheck is the state_check of a node's /status.json.
type nodeCheck struct {
	ID     string `json:"id"`
	Digest string `json:"digest"`
	Timers int    `json:"timers"`
}

// stateCheck asks the cluster for a state check through cl (once the
// faults are over: every node runs) and waits, at most 30 s, until every
// node's status page shows its digest for it. It returns a line for the
// report and whether the nodes disagree (or one never reported).
func (c *nemCluster) stateCheck(ctx context.Context, cl *client.Client) (string, bool) {
	var id uint64
	for try := 0; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := cl.ClusterCheck(cctx)
		cancel()
		if err == nil {
			id = r.Check
			break
		}
		if try == 5 || ctx.Err() != nil {
			return fmt.Sprintf("could not run one: %v", err), true
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := strconv.FormatUint(id, 10)
	got := make([]nodeCheck, len(c.nodes))
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := 0
		for i, n := range c.nodes {
			if got[i].ID == want {
				continue
			}
			if k, err := readNodeCheck(ctx, hc, n.http); err == nil && k.ID == want {
				got[i] = k
			} else {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("check %s: %d node(s) did not report it within 30 s: %s", want, missing, checkList(c, got)), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range got[1:] {
		if k != got[0] {
			return fmt.Sprintf("check %s: the nodes' states DIFFER: %s", want, checkList(c, got)), true
		}
	}
	return fmt.Sprintf("check %s: the 3 nodes' states agree (digest %s, %d timers)", want, got[0].Digest, got[0].Timers), false
}

func checkList(c *nemCluster, got []nodeCheck) string {
	var b strings.Builder
	for i, k := range got {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s/%d", c.nodes[i].id, k.Digest, k.Timers)
	}
	return b.String()
}

// readNodeCheck reads the state check on the status page of the node whose
// operator listener is at addr.
func readNodeCheck(ctx context.Context, hc *http.Client, addr string) (nodeCheck, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status.json", nil)
	if err != nil {
		return nodeCheck{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nodeCheck{}, err
	}
	defer resp.Body.Close()
	var st struct {
		Cluster *struct {
			StateCheck *nodeCheck `json:"state_check"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nodeCheck{}, err
	}
	if st.Cluster == nil || st.Cluster.StateCheck == nil {
		return nodeCheck{}, fmt.Errorf("%s: no state check", addr)
	}
	return *st.Cluster.StateCheck, nil
}
