package wheel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stateOf returns the decoded state of snapshot b (see dumpState): a
// snapshot's bytes depend on the slab's layout and on what the wheel's
// owner encoded while it was written (format 3), its state does not.
func stateOf(t testing.TB, b []byte) string {
	t.Helper()
	return dumpState(restoreOf(t, Config{}, b, nil))
}

// requireSameState fails t unless snapshots a and b decode to the same state.
func requireSameState(t testing.TB, a, b []byte, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, stateOf(t, a), stateOf(t, b), msgAndArgs...)
}

// dumpState prints what a wheel's state is, independent of its layout:
// Now, each live timer in add order (its place in that order, not its seq
// number) with all Get shows, the due timers in firing order, and each
// receiver's List order.
func dumpState(w *Wheel) string {
	var live []uint64
	recvs := map[uint64]bool{}
	for i := w.nodes.nsent; i < w.nodes.n; i++ {
		if n := w.nodes.get(i); n.wprev != markFree {
			live = append(live, uint64(n.order())<<32|uint64(i))
			recvs[n.receiver] = true
		}
	}
	slices.Sort(live)
	var b strings.Builder
	fmt.Fprintf(&b, "now %d len %d data %d\n", w.Now(), w.Len(), w.DataBytes())
	for j, e := range live {
		fmt.Fprintf(&b, "%d %+v\n", j, w.info(uint32(e)))
	}
	for i := w.nodes.get(w.due).wnext; i != w.due; i = w.nodes.get(i).wnext {
		n := w.nodes.get(i)
		fmt.Fprintf(&b, "due %d/%d\n", n.receiver, n.tid)
	}
	rs := make([]uint64, 0, len(recvs))
	for r := range recvs {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	for _, r := range rs {
		fmt.Fprintf(&b, "list %d:", r)
		for _, in := range w.List(r, nil) {
			fmt.Fprintf(&b, " %d", in.Tid)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
