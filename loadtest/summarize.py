#!/usr/bin/env python3
"""summarize.py [-ratio A/B]... [-diff A/B]... [-windows] FILE.json... — medians
(min–max) of each (scenario, target) over loadtest -json result files, with
the throughput, lateness (p50, p99, p99.9, p99 from the tick boundary), and
the recover scenario's extras; -ratio A/B also gives the median of target
A's throughput over target B's, each repeat paired with the one of the same
file and position (the same run, interleaved); -diff A/B the same pairing
for the p99 lateness, A's minus B's, in ms.

-windows also reads each FILE.json's server logs (FILE.log.<mode>, written
by the loadtest's -server-log FILE.log) and prints, per lateness window,
the snapshots whose loop pause began between the plan's first and last due
(from a `snapshot written` line's time minus its took=), and the loop
pauses (loop_pause=) of every snapshot of >= 0.9M timers, the graceful
stop's left out, split into the first after the preload (its Freeze
allocates the copy: "first after growth") and the rest (steady state).
Used for docs/BENCHMARKS.md."""
import glob, json, re, statistics, sys
from collections import defaultdict
from datetime import datetime, timedelta

rates, extras, failed = defaultdict(list), defaultdict(lambda: defaultdict(list)), defaultdict(int)
lat = defaultdict(lambda: defaultdict(list))  # (scenario, target) -> quantile -> ms
order = []
args, ratios, diffs, windows = sys.argv[1:], [], [], False
while args and args[0] in ("-ratio", "-diff", "-windows"):
    if args[0] == "-windows":
        windows, args = True, args[1:]
        continue
    (ratios if args[0] == "-ratio" else diffs).append(tuple(args[1].split("/")))
    args = args[2:]
pairs, dpairs = defaultdict(list), defaultdict(list)
pauses = defaultdict(lambda: defaultdict(list))  # target -> "steady"/"first" -> ms
took = defaultdict(list)

def when(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))

def dur(s):  # a Go duration as logged: 142ms, 41.959ms, 44µs, 1.2s
    m = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", s)
    if not m:
        return None
    return float(m.group(1)) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]

def snapshots(log):
    """(start, pause ms, took ms, timers, kind) of each snapshot of >= 0.9M timers before the stop."""
    out, first = [], True
    for line in open(log, errors="replace"):
        if 'msg="shutting down"' in line:
            break
        if 'msg="snapshot written"' not in line:
            continue
        f = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
        if int(f.get("timers", 0)) < 900000:
            continue
        t, tk, p = when(f["time"]), dur(f["took"]), dur(f["loop_pause"])
        out.append((t - timedelta(milliseconds=tk), p, tk, int(f["timers"]), "first" if first else "steady"))
        first = False
    return out

def label(target):  # the loadtest's -server-log suffix for a target
    l = target[len("tickwheel"):] if target.startswith("tickwheel") else target
    for a, b in (("(", ""), (")", ""), ("=", "-"), (",", "-")):
        l = l.replace(a, b)
    return l.strip(".")

for f in args:
    seen = defaultdict(list)
    try:
        rs = json.load(open(f))
    except Exception as e:
        print(f"{f}: {e}", file=sys.stderr)
        continue
    logs = {}
    if windows:
        for log in glob.glob(f[: -len(".json")] + ".log.*"):
            logs[log.rsplit(".log.", 1)[1]] = snapshots(log)
        for mode, snaps in logs.items():
            for s in snaps:
                pauses[mode][s[4]].append(s[1])
                took[mode].append(s[2])
    for r in rs or []:
        k = (r["Scenario"], r["Target"])
        if k not in order:
            order.append(k)
        rates[k].append(r["Rate"])
        seen[r["Target"]].append(r)
        if r.get("Lateness"):
            for q in ("P50", "P99", "P999"):
                lat[k][q].append(r["Lateness"][q] / 1000)
        if r.get("TickLateness"):
            lat[k]["tick P99"].append(r["TickLateness"]["P99"] / 1000)
        for ek, ev in (r.get("Extra") or {}).items():
            extras[k][ek].append(ev)
        failed[k] += bool(r["Failed"])
        p = r.get("Params") or {}
        if windows and r.get("Lateness") and "first_due_utc" in p:
            a, b = when(p["first_due_utc"]), when(p["last_due_utc"])
            inside = [s for s in logs.get(label(r["Target"]), []) if a <= s[0] <= b]
            desc = ", ".join(f"{s[1]:.1f} ms{' (first after growth)' if s[4] == 'first' else ''}" for s in inside) or "none"
            print(f"{f} {r['Target']:36} p99 {r['Lateness']['P99']/1000:6.2f} ms  tick p99 {r['TickLateness']['P99']/1000:6.2f}  "
                  f"snapshots inside {len(inside)}: {desc}")
    for a, b in ratios:
        for ra, rb in zip(seen[a], seen[b]):
            pairs[(a, b)].append(ra["Rate"] / rb["Rate"])
    for a, b in diffs:
        for ra, rb in zip(seen[a], seen[b]):
            if ra.get("Lateness") and rb.get("Lateness"):
                dpairs[(a, b)].append((ra["Lateness"]["P99"] - rb["Lateness"]["P99"]) / 1000)

def med(v, fmt="{:.4g}"):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))}, n={len(v)})"

for k in order:
    line = f"{k[0]:10} {k[1]:40} rate {med(rates[k])}"
    for q in ("P50", "P99", "P999", "tick P99"):
        if lat[k][q]:
            line += f"  {q.lower()} ms {med(lat[k][q])}"
    if failed[k]:
        line += f"  FAILED {failed[k]}"
    print(line)
    for ek in sorted(extras[k]):
        print(f"    {ek}: {med(extras[k][ek])}")
for (a, b), v in pairs.items():
    print(f"ratio {a} / {b}: {med(v, '{:.3g}')}")
for (a, b), v in dpairs.items():
    print(f"p99 difference {a} - {b} (ms): {med(v, '{:.2f}')}  pairs: {' '.join(f'{x:+.2f}' for x in v)}")
for mode, kinds in pauses.items():
    for kind in ("steady", "first"):
        v = sorted(kinds[kind])
        if v:
            p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
            print(f"loop pause {mode} {kind}: median {statistics.median(v):.2f} p90 {p90:.2f} max {v[-1]:.2f} ms (n={len(v)})")
    if took[mode]:
        print(f"time to write {mode}: median {statistics.median(took[mode]):.0f} ms")
