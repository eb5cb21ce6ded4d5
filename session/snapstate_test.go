package session

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel"
)

// requireSameState fails t unless snapshots want and got decode to the
// same state: the same core section, byte for byte, and wheels that show
// the same timers (wheelState). A wheel's snapshot (format 3) has its
// records in the order its encoder and the loop's write barrier wrote
// them, so equal states need not be equal bytes.
func requireSameState(t *testing.T, cfg Config, want, got []byte, msg string) {
	t.Helper()
	a, err := Restore(cfg, want, nil, nil)
	require.NoError(t, err)
	b, err := Restore(cfg, got, nil, nil)
	require.NoError(t, err)
	require.Equal(t, coreSection(a), coreSection(b), msg+": the core section")
	require.Equal(t, wheelState(a.wheel), wheelState(b.wheel), msg+": the wheel")
}

// coreSection returns the bytes of c's snapshot before the wheel's.
func coreSection(c *Core) []byte {
	s := c.Snapshot()
	defer s.Release()
	var b []byte
	for s.next < 2 {
		b, _ = s.AppendNext(b, 1)
	}
	return b[:len(b)-len("TWSN")-1-len(binaryUvarint(c.wheel.Now()))-len(binaryUvarint(uint64(c.wheel.Len())))]
}

func binaryUvarint(v uint64) []byte {
	var b []byte
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

// wheelState prints a wheel's state through its methods: Now, each
// receiver's timers in List order, and the firings of the next 5000 ticks
// in order (which Advance fires: w is spent).
func wheelState(w *wheel.Wheel) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "now %d len %d data %d\n", w.Now(), w.Len(), w.DataBytes())
	var rs []uint64
	w.EachReceiver(0, func(r uint64, _ int) bool { rs = append(rs, r); return true })
	slices.Sort(rs)
	for _, r := range rs {
		fmt.Fprintf(&sb, "%d: %+v\n", r, w.List(r, nil))
	}
	w.Advance(w.Now()+5000, 0, func(f *wheel.Fire) { fmt.Fprintf(&sb, "fire %+v\n", *f) })
	return sb.String()
}
