package operator

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tickwheel/tickwheel/server"
)

// readOnlySource is a server whose log cannot be written: it accepts
// clients but refuses changes (server.Server.ReadOnly), as the server
// reports it (TestLogFaultsReadOnly in server/ drives the real one).
type readOnlySource struct{ why string }

func (s readOnlySource) ReadMetrics(context.Context, int) (server.Metrics, error) {
	return server.Metrics{Ready: true, Persist: server.PersistMetrics{On: true, ReadOnly: s.why != "", FsyncFailures: 3}}, nil
}
func (readOnlySource) Ready() bool        { return true }
func (s readOnlySource) ReadOnly() string { return s.why }
func (readOnlySource) AdminToken() string { return "" }

// TestReadyzReadOnly (issue 24, item 3): while the log cannot be written
// or fsynced, /readyz answers 503 with the reason, and the metrics show
// tickwheel_log_read_only 1 and the failed fsyncs; once it can, 200 and 0.
func TestReadyzReadOnly(t *testing.T) {
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(op.Handler())
	defer hs.Close()
	readyz := func() (int, string) {
		resp, err := http.Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	op.Attach(readOnlySource{why: "the server cannot write its log (fdatasync: input/output error)"})
	if code, body := readyz(); code != 503 || !strings.Contains(body, "read-only: the server cannot write its log") {
		t.Fatalf("/readyz while read-only: %d %q", code, body)
	}
	fams := scrape(t, hs.URL, "")
	if v := value(t, fams, "tickwheel_log_read_only"); v != 1 {
		t.Fatalf("tickwheel_log_read_only = %v while read-only", v)
	}
	if v := value(t, fams, "tickwheel_log_fsync_failures_total"); v != 3 {
		t.Fatalf("tickwheel_log_fsync_failures_total = %v", v)
	}
	op.Attach(readOnlySource{})
	if code, body := readyz(); code != 200 {
		t.Fatalf("/readyz once writable: %d %q", code, body)
	}
	if v := value(t, scrape(t, hs.URL, ""), "tickwheel_log_read_only"); v != 0 {
		t.Fatalf("tickwheel_log_read_only = %v once writable", v)
	}
}
