package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestStatusPageClusterInBrowser: on a cluster node (a cluster of one,
// which elects itself) the status page shows the cluster section: the
// node's role, the leader, the term, the commit and applied indexes and
// the members, with no console errors.
func TestStatusPageClusterInBrowser(t *testing.T) {
	chromium := findChromium(t)
	op, raftAddr := clusterOfOne(t, "page")
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	ctx, problems := startBrowser(t, chromium)
	// Raft reports the role before the node's first entries as leader
	// commit (its client address, the commit index): a sample taken in
	// between shows "leader" with a commit index of 0. Wait for the page to
	// show the leader's client address, then check the rest.
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+op.Addr()+"/"),
		chromedp.Poll[chromedp.Void](`document.getElementById("k-role").textContent === "leader" &&
			document.getElementById("k-leader").textContent.startsWith("n1 (")`,
			chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page did not show the node leading, with its client address: %v", err)
	}
	if evalBool(t, ctx, `document.getElementById("cluster").hidden`) {
		t.Errorf("the cluster section is hidden")
	}
	if got := text(t, ctx, "#k-leader"); !strings.HasPrefix(got, "n1 (") {
		t.Errorf("leader %q, want n1 and its client address", got)
	}
	for _, id := range []string{"#k-term", "#k-commit", "#k-applied"} {
		if got := text(t, ctx, id); got == "–" || got == "0" {
			t.Errorf("%s = %q", id, got)
		}
	}
	if got := text(t, ctx, "#k-members"); got != "n1 "+raftAddr {
		t.Errorf("members %q, want %q", got, "n1 "+raftAddr)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}
