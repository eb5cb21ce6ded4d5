package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/operator"
)

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
	got := make([]operator.StateCheck, len(c.nodes))
	hc := &http.Client{Timeout: 2 * time.Second}
	seen := make([]string, len(c.nodes)) // what a node that has not reported showed
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := 0
		for i, n := range c.nodes {
			if got[i].ID == id {
				continue
			}
			k, err := operator.FetchStateCheck(ctx, hc, n.http)
			if err == nil && k.ID == id {
				got[i] = k
				continue
			}
			missing++
			seen[i] = fmt.Sprintf("%s: %s, applied index %d of %d committed, last check %d", n.id, k.Role, k.AppliedIndex, k.CommitIndex, k.ID)
			if err != nil {
				seen[i] += fmt.Sprintf(" (%v)", err)
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var why []string
			for i := range got {
				if got[i].ID != id {
					why = append(why, seen[i])
				}
			}
			return fmt.Sprintf("check %d: %d node(s) did not report it within 30 s: %s; %s", id, missing, checkList(c, got),
				strings.Join(why, "; ")), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range got[1:] {
		if !k.Agrees(got[0]) {
			return fmt.Sprintf("check %d: the nodes' states DIFFER: %s", id, checkList(c, got)), true
		}
	}
	return fmt.Sprintf("check %d: the 3 nodes' states agree (digest %016x, %d timers)", id, got[0].Digest, got[0].Timers), false
}

func checkList(c *nemCluster, got []operator.StateCheck) string {
	var b strings.Builder
	for i, k := range got {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %016x/%d", c.nodes[i].id, k.Digest, k.Timers)
	}
	return b.String()
}
