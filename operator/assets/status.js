// tickwheel's status page: polls /status.json once a second and draws the
// last minutes with uPlot. No other dependency.
"use strict";
(function () {
  var fmt = new Intl.NumberFormat("en");
  // Each plot: its title and series [legend label, key in a history
  // sample, colour]; ms: the values are seconds shown as milliseconds.
  var plotDefs = [
    { id: "rate", title: "firings and adds per second", series: [["fires/s", "fires", "#1f77b4"], ["adds/s", "adds", "#ff7f0e"]] },
    { id: "late", title: "fire lateness (ms)", series: [["p50", "p50", "#2ca02c"], ["p99", "p99", "#d62728"]], ms: true },
    { id: "timers", counts: true, title: "live timers", series: [["timers", "timers", "#9467bd"]] },
    { id: "conns", counts: true, title: "connections and sessions", series: [["connections", "connections", "#8c564b"], ["sessions", "sessions", "#bcbd22"]] },
    { id: "backlog", counts: true, title: "queued events (backlogs, outboxes)", series: [["queued", "backlog", "#e377c2"]] },
    { id: "drops", title: "events dropped per second", series: [["dropped/s", "dropped", "#d62728"], ["lost with connections/s", "lost", "#7f7f7f"]] },
    { id: "errors", title: "error replies and refused connections per second", series: [["errors/s", "errors", "#ff7f0e"], ["refused/s", "refused", "#1f77b4"]] },
    { id: "offset", title: "tw-time − wall-clock time (s)", series: [["offset", "tw_offset", "#17becf"]] }
  ];
  var plots = [];
  var state = { polls: 0, drawn: 0, plots: plots };
  window.tickwheelStatus = state;
  var plotHeight = 200;
  // Room for half a time label ("17:59:03") left and right of the plot
  // area, where the first and last are centred.
  var minYAxis = 40, rightPad = 32;
  var compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });

  // axisValues formats a y axis's labels: compact from 10,000 on (12.5K,
  // 1.2M), else with as many decimals as the step between labels has.
  function axisValues(u, splits, axisIdx, space, incr) {
    var decimals = 0;
    while (decimals < 6 && Math.abs(incr * Math.pow(10, decimals) - Math.round(incr * Math.pow(10, decimals))) > 1e-6) { decimals++; }
    var plain = new Intl.NumberFormat("en", { maximumFractionDigits: decimals });
    return splits.map(function (v) { return Math.abs(v) >= 1e4 ? compact.format(v) : plain.format(v); });
  }

  // Steps between labels: whole seconds on the time axis (samples are a
  // second apart), whole numbers for counts.
  var timeIncrs = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  var countIncrs = [];
  for (var mag = 1; mag <= 1e15; mag *= 10) { countIncrs.push(mag, 2 * mag, 5 * mag); }

  // timeValues labels the time axis with local wall-clock times on one
  // line (uPlot's second line, the date, is cut at the plot's left edge).
  function timeValues(u, splits) {
    return splits.map(function (v) {
      var d = new Date(v * 1000);
      return [d.getHours(), d.getMinutes(), d.getSeconds()].map(function (n) { return String(n).padStart(2, "0"); }).join(":");
    });
  }

  // axisSize makes a y axis as wide as its widest label plus its ticks and
  // gap, so no label is clipped at the plot's left edge.
  function axisSize(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) { return axis._size; } // uPlot converges over cycles: stop here
    var widest = 0;
    u.ctx.font = axis.font[0];
    (values || []).forEach(function (v) { widest = Math.max(widest, u.ctx.measureText(v).width); });
    return Math.max(minYAxis, Math.ceil(axis.ticks.size + axis.gap + widest / devicePixelRatio) + 4);
  }

  // yAxis is the y axis of plot d: sized to its labels; whole-number
  // steps for counts (d.counts).
  function yAxis(d) {
    var ax = { size: axisSize, values: axisValues };
    if (d.counts) { ax.incrs = countIncrs; }
    return ax;
  }

  // cellWidth is the width a plot in cell may take: its content box.
  function cellWidth(cell) {
    var cs = getComputedStyle(cell);
    return Math.max(100, Math.floor(cell.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)));
  }

  // makePlots puts a cell per plot in the grid and a uPlot in each, as
  // wide as its cell; a ResizeObserver resizes a plot when its cell's
  // width changes (window resized, grid reflowed to more or fewer columns).
  function makePlots() {
    var box = document.getElementById("plots");
    var ro = new ResizeObserver(function (entries) {
      entries.forEach(function (e) {
        var p = e.target.tickwheelPlot, w = cellWidth(e.target);
        if (p && p.u.width !== w) { p.u.setSize({ width: w, height: plotHeight }); }
      });
    });
    plotDefs.forEach(function (d) {
      var div = document.createElement("div");
      div.className = "plot";
      div.id = "plot-" + d.id;
      box.appendChild(div);
      var series = [{}].concat(d.series.map(function (s) {
        return { label: s[0], stroke: s[2], width: 1.5, spanGaps: false };
      }));
      var data = [[]].concat(d.series.map(function () { return []; }));
      var p = { def: d, cell: div, u: new uPlot({ title: d.title, width: cellWidth(div), height: plotHeight, series: series, padding: [null, rightPad, null, null],
        scales: { x: { time: true } }, axes: [{ values: timeValues, incrs: timeIncrs }, yAxis(d)] }, data, div) };
      div.tickwheelPlot = p;
      plots.push(p);
      ro.observe(div);
    });
  }

  function column(hist, key, ms) {
    return hist.map(function (s) {
      if ((key === "p50" || key === "p99") && !s.has_latency) { return null; }
      var v = s[key];
      return ms ? v * 1000 : v;
    });
  }

  function draw(hist) {
    var xs = hist.map(function (s) { return s.t; });
    plots.forEach(function (p) {
      var data = [xs].concat(p.def.series.map(function (s) { return column(hist, s[1], p.def.ms); }));
      p.u.setData(data);
    });
    state.drawn++;
  }

  function set(id, text) { document.getElementById(id).textContent = text; }

  function seconds(v) {
    var a = Math.abs(v);
    if (a < 1e-3) { return (v * 1e6).toFixed(0) + " µs"; }
    if (a < 1) { return (v * 1e3).toFixed(1) + " ms"; }
    return v.toFixed(1) + " s";
  }

  function table(id, rows) {
    var body = document.querySelector("#" + id + " tbody");
    body.textContent = "";
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      [r.receiver, fmt.format(r.timers), fmt.format(r.backlog), r.bound ? "yes" : "no"].forEach(function (v) {
        var td = document.createElement("td");
        td.textContent = v;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  // cluster shows a cluster node's raft state (st.cluster), or hides the
  // section on a single server.
  function cluster(k) {
    document.getElementById("cluster").hidden = !k;
    if (!k) { return; }
    set("k-role", k.role + (k.suffrage === "nonvoter" ? " (non-voter)" : ""));
    set("k-leader", k.leader ? k.leader + (k.leader_addr ? " (" + k.leader_addr + ")" : "") : "unknown");
    set("k-term", fmt.format(k.term));
    set("k-commit", fmt.format(k.commit_index));
    set("k-applied", fmt.format(k.applied_index));
    set("k-members", k.members.length ? k.members.map(function (m) {
      return m.id + " " + m.raft_addr + (m.voter ? "" : " (non-voter)");
    }).join(", ") : "–");
  }

  function show(st) {
    var badge = document.getElementById("ready");
    badge.textContent = st.ready ? "ready" : "not ready";
    badge.className = "badge " + (st.ready ? "ok" : "bad");
    set("updated", st.taken_ms ? "updated " + new Date(st.taken_ms).toLocaleTimeString() : "waiting for the first sample");
    set("version", "v" + st.version + (st.revision ? " · " + st.revision.slice(0, 12) : ""));
    set("n-timers", fmt.format(st.timers));
    set("n-receivers", fmt.format(st.receivers));
    set("n-sessions", fmt.format(st.sessions));
    set("n-fired", fmt.format(st.fired_total));
    set("n-backlog", fmt.format(st.backlog));
    set("n-dropped", fmt.format(st.dropped_total));
    set("n-stalled", fmt.format(st.stalled));
    set("n-lag", seconds(st.lag_seconds));
    if (st.taken_ms) {
      set("c-tw", new Date(st.tw_seconds * 1000).toISOString().replace("T", " ").replace("Z", ""));
      set("c-wall", new Date(st.taken_ms).toISOString().replace("T", " ").replace("Z", ""));
      set("c-offset", seconds(st.tw_seconds - st.taken_ms / 1000));
    }
    set("c-speed", st.speed + "×");
    set("c-frozen", st.frozen ? "yes" : "no");
    set("c-now", st.now || "–");
    cluster(st.cluster);
    table("t-timers", st.top_timers);
    table("t-backlog", st.top_backlog);
    document.getElementById("sampled").hidden = !st.sampled;
    draw(st.history);
  }

  function poll() {
    fetch("/status.json", { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error("/status.json: " + r.status + " " + r.statusText); }
      return r.json();
    }).then(function (st) {
      state.polls++;
      document.getElementById("error").hidden = true;
      show(st);
    }).catch(function (e) {
      var el = document.getElementById("error");
      el.textContent = "cannot read the server's status: " + e.message;
      el.hidden = false;
    }).finally(function () { setTimeout(poll, 1000); });
  }

  makePlots();
  poll();
})();
