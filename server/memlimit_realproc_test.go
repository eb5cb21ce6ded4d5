//go:build linux

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tickwheel/tickwheel/protocol"
)

// vmRSS returns the resident set of process pid in bytes (VmRSS).
func vmRSS(t *testing.T, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := bytes.Fields(sc.Bytes()); len(f) >= 2 && string(f[0]) == "VmRSS:" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestNeverReadingSessionsRSSWithinBudgets is issue 24's "100 sessions
// that never read" at a smaller scale, in the real binary: 32 sessions
// bound to receivers firing 100 KB a tick each never read, so the
// backlogs fill max_backlog_bytes_total and the connections
// max_outbound_total. The process's peak RSS must stay within 1.3× the
// byte budgets (backlogs, outboxes, outbound) and a fixed 64 MiB. Before
// the memory limit and max_outbound_total, the connections held 32 ×
// max_outbound and the collector let the heap reach twice what was live:
// 2.2× the budgets in the full-size run.
func TestNeverReadingSessionsRSSWithinBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 256 MiB of budgets in a real process")
	}
	const (
		sessions               = 32
		backlogs, outbox, outb = 128 << 20, 8 << 20, 120 << 20
		budgets                = backlogs + outbox + outb
		base                   = 64 << 20
	)
	conf := filepath.Join(t.TempDir(), "tickwheel.yaml")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "limits:\n  max_backlog_bytes_total: %d\n"+
		"  max_outbox_bytes_total: %d\n  max_outbound_total: %d\n", backlogs, outbox, outb), 0o600))
	p := startProc(t, "-data-dir", t.TempDir(), "-config", conf)
	pid := p.cmd.Process.Pid

	adm, err := dialWire(p.addr, "admin", procToken)
	require.NoError(t, err)
	defer adm.close()
	for k := range sessions {
		w, err := dialWire(p.addr, "noreader", procToken)
		require.NoError(t, err)
		defer w.close()
		require.NoError(t, w.c.(*net.TCPConn).SetReadBuffer(4096)) // the kernel takes little of it
		rid := uint64(100 + k)
		m, err := w.call(protocol.Request{Op: protocol.OpBind, Receiver: rid})
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind, "bind: %s %s", m.Code, m.Text)
		for tid := range 25 {
			m, err := adm.call(protocol.Request{Op: protocol.OpAdd, Receiver: rid, Tid: uint64(tid + 1), After: 1, Every: 1,
				Data: make([]byte, 4000)})
			require.NoError(t, err)
			require.Equal(t, protocol.KindOK, m.Kind, "add: %s %s", m.Code, m.Text)
		}
	}
	var peak uint64
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		peak = max(peak, vmRSS(t, pid))
	}
	st, err := adm.stats()
	require.NoError(t, err)
	require.Positive(t, st.DroppedTotal, "the backlogs did not fill their budget")
	t.Logf("peak RSS %d MiB for %d MiB of budgets (%.2fx); %d events dropped", peak>>20, budgets>>20,
		float64(peak)/budgets, st.DroppedTotal)
	require.LessOrEqual(t, peak, uint64(budgets)*13/10+base, "RSS past 1.3x the budgets + 64 MiB")
}
