// tickwheel's status page: polls /status.json once a second and draws the
// last minutes with uPlot. No other dependency.
"use strict";
(function () {
  var fmt = new Intl.NumberFormat("en");
  var plotDefs = [
    { id: "rate", title: "firings and adds per second", series: [["fires/s", "fires", "#1f77b4"], ["adds/s", "adds", "#ff7f0e"]] },
    { id: "late", title: "fire lateness (ms)", series: [["p50", "p50", "#2ca02c"], ["p99", "p99", "#d62728"]], ms: true },
    { id: "timers", title: "live timers", series: [["timers", "timers", "#9467bd"]] },
    { id: "sessions", title: "sessions", series: [["sessions", "sessions", "#8c564b"]] },
    { id: "backlog", title: "queued events (backlogs, outboxes)", series: [["queued", "backlog", "#e377c2"]] },
    { id: "offset", title: "tw-time − wall-clock time (s)", series: [["offset", "tw_offset", "#17becf"]] }
  ];
  var plots = [];
  var state = { polls: 0, drawn: 0, plots: plots };
  window.tickwheelStatus = state;

  function makePlots() {
    var box = document.getElementById("plots");
    var width = Math.max(400, Math.min(640, box.clientWidth / 2 - 24));
    plotDefs.forEach(function (d) {
      var div = document.createElement("div");
      div.className = "plot";
      div.id = "plot-" + d.id;
      box.appendChild(div);
      var series = [{}].concat(d.series.map(function (s) {
        return { label: s[0], stroke: s[2], width: 1.5, spanGaps: false };
      }));
      var data = [[]].concat(d.series.map(function () { return []; }));
      plots.push({ def: d, u: new uPlot({ title: d.title, width: width, height: 200, series: series,
        scales: { x: { time: true } }, axes: [{}, { size: 60 }] }, data, div) });
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
