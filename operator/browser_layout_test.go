package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The status page's layout checks for TestStatusPageInBrowser: they
// compare element boxes in the page as Chromium laid it out.

// resize sets the viewport to w×h and waits until the page has seen it
// and two frames have passed (the ResizeObservers' callbacks and the
// plots' redraws run within them).
func resize(t *testing.T, ctx context.Context, w, h int64) {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`window.innerWidth === %d`, w), chromedp.WithPollingTimeout(10*time.Second)))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(function (resolve) {
			requestAnimationFrame(function () { requestAnimationFrame(function () { resolve(true); }); });
		})`, chromedp.EvalAwaitPromise))
	}
	if err != nil {
		t.Fatalf("resizing the page to %d×%d: %v", w, h, err)
	}
}

// layoutJS lists what is wrong with the page's layout: it scrolls
// sideways; a plot's canvases, title or legend reach out of its grid
// cell; a plot is narrower or wider than its cell's content box; a title
// is cut; two cells overlap; the grid has fewer plots than the page draws
// (drops, errors and connections included).
const layoutJS = `(function () {
	var bad = [], de = document.documentElement;
	if (de.scrollWidth > de.clientWidth) {
		bad.push("the page scrolls sideways: scrollWidth " + de.scrollWidth + " > clientWidth " + de.clientWidth);
	}
	function box(r) { return "[" + Math.round(r.left) + ", " + Math.round(r.right) + "] × [" + Math.round(r.top) + ", " + Math.round(r.bottom) + "]"; }
	var cells = window.tickwheelStatus.plots.map(function (p) { return p.u.root.parentElement; });
	if (cells.length < 8) { bad.push(cells.length + " plots, want 8"); }
	cells.forEach(function (cell, i) {
		var c = cell.getBoundingClientRect(), cs = getComputedStyle(cell);
		var name = cell.id || ("plot " + i);
		if (c.right > de.clientWidth + 0.5) { bad.push(name + " ends at " + c.right + " px, past the page's " + de.clientWidth); }
		cell.querySelectorAll("canvas, .u-title, .u-legend, .u-wrap").forEach(function (el) {
			var r = el.getBoundingClientRect();
			if (r.left < c.left - 0.5 || r.right > c.right + 0.5 || r.top < c.top - 0.5 || r.bottom > c.bottom + 0.5) {
				bad.push(name + ": " + (el.className || el.tagName) + " " + box(r) + " is not within its cell " + box(c));
			}
		});
		var content = cell.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
		var u = window.tickwheelStatus.plots[i].u;
		if (Math.abs(u.width - content) > 1) { bad.push(name + " is " + u.width + " px wide in a cell of " + content + " px"); }
		var title = cell.querySelector(".u-title");
		if (title && title.scrollWidth > title.clientWidth) { bad.push(name + ": its title " + JSON.stringify(title.textContent) + " is cut"); }
		for (var j = 0; j < i; j++) {
			var o = cells[j].getBoundingClientRect();
			if (c.left < o.right - 0.5 && o.left < c.right - 0.5 && c.top < o.bottom - 0.5 && o.top < c.bottom - 0.5) {
				bad.push(name + " " + box(c) + " overlaps " + (cells[j].id || j) + " " + box(o));
			}
		}
	});
	return bad;
})()`

// checkLayout fails the test with what layoutJS finds at this width.
func checkLayout(t *testing.T, ctx context.Context, width int64) {
	t.Helper()
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](layoutJS))
	if err != nil {
		t.Fatalf("%d px: %v", width, err)
	}
	if len(bad) > 0 {
		t.Errorf("%d px wide:\n  %s", width, strings.Join(bad, "\n  "))
	}
}

// axisLabelsJS gives every plot values from 0 to 1,234,567 (through
// uPlot's setData, as a poll would), and once the plots have redrawn (a
// microtask after setData) lists the y axes narrower than their widest
// label plus their ticks and gap: such a label is cut at the left edge
// (".00,000" for "100,000"), and the plots whose time labels at the plot
// area's ends would be cut by the canvas's edges.
const axisLabelsJS = `new Promise(function (resolve) {
	var plots = window.tickwheelStatus.plots, now = Math.floor(Date.now() / 1000);
	plots.forEach(function (p) {
		var xs = [], data = [xs];
		for (var i = 0; i < 10; i++) { xs.push(now - 10 + i); }
		for (var k = 1; k < p.u.series.length; k++) {
			data.push(xs.map(function (x, i) { return 1234567 * i / 9; }));
		}
		p.u.setData(data);
	});
	queueMicrotask(function () {
		var bad = [];
		plots.forEach(function (p) {
			var ax = p.u.axes[1], ctx = p.u.ctx;
			ctx.font = ax.font[0];
			var widest = 0;
			(ax._values || []).forEach(function (v) { widest = Math.max(widest, ctx.measureText(v).width / devicePixelRatio); });
			var need = ax.ticks.size + ax.gap + widest;
			if (!ax._values || ax._values.length === 0) { bad.push(p.u.root.parentElement.id + ": no y labels drawn"); }
			if (need > ax._size + 0.5) {
				bad.push(p.u.root.parentElement.id + ": y labels " + JSON.stringify(ax._values) + " need " + need.toFixed(1) + " px, the axis has " + ax._size);
			}
			// The time axis: labels are centred on their ticks, and the
			// first and last may sit at the plot area's edges.
			var xa = p.u.axes[0], half = 0;
			ctx.font = xa.font[0];
			(xa._values || []).forEach(function (v) { half = Math.max(half, ctx.measureText(v).width / devicePixelRatio / 2); });
			var left = p.u.bbox.left / devicePixelRatio, right = p.u.width - (p.u.bbox.left + p.u.bbox.width) / devicePixelRatio;
			if (half > left + 0.5 || half > right + 0.5) {
				bad.push(p.u.root.parentElement.id + ": time labels " + JSON.stringify(xa._values) + " need " + half.toFixed(1) + " px each side, the plot area leaves " + left + " px left and " + right.toFixed(1) + " right");
			}
		});
		resolve(bad);
	});
})`

// checkAxisLabels fails the test if a y axis cannot hold its labels.
func checkAxisLabels(t *testing.T, ctx context.Context) {
	t.Helper()
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](axisLabelsJS, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("y axis labels do not fit:\n  %s", strings.Join(bad, "\n  "))
	}
}
