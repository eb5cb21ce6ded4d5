package operator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// findChromium returns a Chromium or Chrome binary: $CHROMIUM, else the
// first of the usual names on PATH. In CI (CI set) a missing browser
// fails the test; elsewhere it is skipped.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium binary (chromium, chromium-browser, google-chrome or $CHROMIUM): .ci/run installs the Debian package chromium")
	}
	t.Skip("no Chromium binary (chromium, chromium-browser, google-chrome or $CHROMIUM): install one (apt-get install chromium) to run the status page test")
	return ""
}

// TestStatusPageInBrowser loads the status page in headless Chromium
// against a live server: no console errors, the plots draw, and the
// numbers move after the test adds timers and they fire. It then renders
// the page 1024, 1400 and 1920 px wide (the browser starts at 1300, so
// each is a resize): every plot fits its grid cell and the page does not
// scroll sideways (checkLayout); it saves a screenshot of each width in
// its artefact directory (go test -artifacts keeps them) and logs the
// paths. Last, the y axes are wide enough for labels of millions
// (checkAxisLabels). With TICKWHEEL_SCREENSHOT=FILE it also runs about a
// minute longer under load and saves a 1920-px screenshot of the page
// there (docs/status-page.png).
func TestStatusPageInBrowser(t *testing.T) {
	chromium := findChromium(t)
	ts := servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) {
		c.Metrics, c.Frozen, c.StartTick = true, false, 0
	}))
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(ts.Server())
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	ctx, problems := startBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+op.Addr()+"/"),
		chromedp.Poll[chromedp.Void](`window.tickwheelStatus && window.tickwheelStatus.polls >= 1`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the page did not load and poll: %v", err)
	}
	firedBefore := text(t, ctx, "#n-fired")
	if hidden := evalBool(t, ctx, `document.getElementById("cluster").hidden`); !hidden {
		t.Errorf("a single server's page shows the cluster section")
	}

	// Timers that fire now and keep firing: the numbers and plots move.
	cl := startFiring(t, ts)
	checkMoving(t, ctx, firedBefore)
	dir := t.ArtifactDir()
	for _, size := range [][2]int64{{1024, 768}, {1400, 1000}, {1920, 1080}} {
		resize(t, ctx, size[0], size[1])
		checkLayout(t, ctx, size[0])
		path := filepath.Join(dir, fmt.Sprintf("status-page-%d.png", size[0]))
		saveScreenshot(t, ctx, path)
		t.Logf("%d×%d: screenshot %s", size[0], size[1], path)
	}
	checkAxisLabels(t, ctx)
	if path := os.Getenv("TICKWHEEL_SCREENSHOT"); path != "" {
		// 20 seconds on, timers of receivers nobody binds: their events
		// queue, and the backlog plot and table show them.
		time.Sleep(20 * time.Second)
		for tid := uint64(1); tid <= 400; tid++ {
			if _, err := cl.Add(context.Background(), 100+tid%7, tid, 1+tid%50, &client.AddOptions{Every: 10 + tid%30, Repeat: 1000}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(30 * time.Second) // the page shows 30 more seconds of load
		saveScreenshot(t, ctx, path)
		t.Logf("screenshot saved to %s", path)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}

// startBrowser starts headless Chromium (closed when the test ends) and
// returns its tab's context, and a func that returns the console errors,
// uncaught exceptions and error log entries (failed loads) so far.
func startBrowser(t *testing.T, chromium string) (context.Context, func() []string) {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1300, 1150))
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception: %s (%s:%d)", msg, d.URL, d.LineNumber))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	}); err != nil {
		t.Fatalf("starting Chromium (%s): %v", chromium, err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// startFiring connects a client (closed when the test ends) that binds
// receivers 1 to 5 and adds 300 timers for them, firing from the next
// ticks on every 5 to 24 ticks; it reads their events.
func startFiring(t *testing.T, ts *servertest.Server) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.Addr(), client.WithToken(ts.AdminToken()), client.WithEventBuffer(100_000))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		for range c.Events() {
		}
	}()
	for r := uint64(1); r <= 5; r++ {
		if _, err := c.Bind(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	for tid := uint64(1); tid <= 300; tid++ {
		if _, err := c.Add(ctx, 1+tid%5, tid, 1+tid%40, &client.AddOptions{Every: 5 + tid%20, Repeat: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// checkMoving waits for the page to show firings (the count is no longer
// firedBefore) and every plot to have points, the rate plot above 0, then
// checks that every canvas has drawn pixels, and the numbers and tables.
func checkMoving(t *testing.T, ctx context.Context, firedBefore string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector("#n-fired").textContent !== %q && document.querySelector("#n-fired").textContent !== "0"`, firedBefore),
			chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Poll[chromedp.Void](`window.tickwheelStatus.plots.every(function (p) { return p.u.data[0].length > 0; }) &&
			Math.max.apply(null, window.tickwheelStatus.plots[0].u.data[1]) > 0`, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("the numbers or plots did not move: %v (fired before %q, now %q)", err, firedBefore, text(t, ctx, "#n-fired"))
	}
	drawn, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(function () {
		var cs = Array.from(document.querySelectorAll("canvas"));
		return cs.length >= 6 && cs.every(function (c) {
			var d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
			for (var i = 3; i < d.length; i += 4) { if (d[i] !== 0) { return true; } }
			return false;
		});
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !drawn {
		t.Error("a plot's canvas is blank")
	}
	if got := text(t, ctx, "#n-timers"); got == "0" || got == "–" {
		t.Errorf("live timers shows %q", got)
	}
	if rows := count(t, ctx, "#t-timers tbody tr"); rows != 5 {
		t.Errorf("top receivers by live timers: %d rows, want 5", rows)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

func evalBool(t *testing.T, ctx context.Context, expr string) bool {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("count of %s: %v", sel, err)
	}
	return n
}

// saveScreenshot saves a PNG of the whole page at path.
func saveScreenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
