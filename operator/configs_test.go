package operator

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// The Grafana dashboard and the Prometheus alerting rules in configs/
// (docs/OPERATIONS.md, "Dashboards and alerts").
const (
	dashboardFile  = "../configs/grafana-dashboard.json"
	alertsFile     = "../configs/tickwheel-alerts.yml"
	alertsTestFile = "../configs/tickwheel-alerts.test.yml"
)

// metricName finds the names of the server's metrics in a PromQL query:
// tickwheel's own and the Go and process collectors'.
var metricName = regexp.MustCompile(`\b(?:tickwheel|process|go)_[A-Za-z0-9_]+`)

// exportedNames scrapes a real in-process server with persistence on,
// which has failed a request (so tickwheel_errors_total has a series)
// and been restarted (so a snapshot exists), and returns every name a
// query can use: a histogram's _bucket, _sum and _count series, a
// summary's _sum and _count beside its own name.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	ts := servertest.RunT(t, servertest.WithDataDir(t.TempDir()), servertest.WithConfig(func(c *servertest.Config) { c.Metrics = true }))
	ts.Restart()
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(ts.Server())
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.Addr(), client.WithToken(ts.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Cancel(ctx, 1, 1); err == nil {
		t.Fatal("cancel of a timer that does not exist succeeded")
	}
	names := map[string]bool{}
	for name, f := range scrape(t, "http://"+op.Addr(), "") {
		names[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// dashboardQueries returns the dashboard's PromQL: every panel target's
// expr and every template variable's query.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("%s: panel %q has a target without a query", dashboardFile, p.Title)
			}
			qs = append(qs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			qs = append(qs, v.Definition)
		}
	}
	return qs
}

// alertQueries returns the rules' exprs.
func alertQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var qs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Expr == "" {
				t.Errorf("%s: rule %q has no expr", alertsFile, r.Alert)
			}
			qs = append(qs, r.Expr)
		}
	}
	return qs
}

// TestConfigsNameExportedMetrics: every metric the dashboard's and the
// alerting rules' queries name is one a running server exports, so no
// panel stays empty and no alert waits on a series that never comes (a
// renamed metric, a typo, a histogram without its _bucket).
func TestConfigsNameExportedMetrics(t *testing.T) {
	names := exportedNames(t)
	for file, qs := range map[string][]string{dashboardFile: dashboardQueries(t), alertsFile: alertQueries(t)} {
		if len(qs) < 5 {
			t.Errorf("%s: %d queries found, want the file's panels or rules", file, len(qs))
		}
		used := map[string]bool{}
		for _, q := range qs {
			for _, n := range metricName.FindAllString(q, -1) {
				used[n] = true
				if !names[n] {
					t.Errorf("%s: %q names %s, which the server does not export", file, q, n)
				}
			}
		}
		var list []string
		for n := range used {
			list = append(list, n)
		}
		sort.Strings(list)
		t.Logf("%s: %d queries, %d metrics: %v", filepath.Base(file), len(qs), len(list), list)
	}
}

// TestAlertRulesPromtool checks the rules with Prometheus's own tool:
// promtool check rules, and promtool test rules with their unit tests
// (configs/tickwheel-alerts.test.yml). Without promtool the test is
// skipped, unless CI is set (.ci/run installs Debian's prometheus).
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no promtool: .ci/run installs the Debian package prometheus")
		}
		t.Skip("no promtool: install it (apt-get install prometheus) to check the alerting rules")
	}
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertsTestFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
