#!/usr/bin/env python3
"""summarize.py [-ratio A/B]... FILE.json... — medians (min–max) of each
(scenario, target) over loadtest -json result files, with the throughput,
p99 lateness, and the recover scenario's extras; -ratio A/B also gives the
median of target A's throughput over target B's, each repeat paired with
the one of the same file and position (the same run, interleaved). Used
for docs/BENCHMARKS.md."""
import json, statistics, sys
from collections import defaultdict

rates, p99s, extras, failed = defaultdict(list), defaultdict(list), defaultdict(lambda: defaultdict(list)), defaultdict(int)
order = []
args, ratios = sys.argv[1:], []
while args and args[0] == "-ratio":
    ratios.append(tuple(args[1].split("/")))
    args = args[2:]
pairs = defaultdict(list)
for f in args:
    seen = defaultdict(list)
    try:
        rs = json.load(open(f))
    except Exception as e:
        print(f"{f}: {e}", file=sys.stderr)
        continue
    for r in rs or []:
        k = (r["Scenario"], r["Target"])
        if k not in order:
            order.append(k)
        rates[k].append(r["Rate"])
        seen[r["Target"]].append(r)
        if r.get("Lateness"):
            p99s[k].append(r["Lateness"]["P99"] / 1000)
        for ek, ev in (r.get("Extra") or {}).items():
            extras[k][ek].append(ev)
        failed[k] += bool(r["Failed"])
    for a, b in ratios:
        for ra, rb in zip(seen[a], seen[b]):
            pairs[(a, b)].append(ra["Rate"] / rb["Rate"])

def med(v, fmt="{:.4g}"):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))}, n={len(v)})"

for k in order:
    line = f"{k[0]:10} {k[1]:40} rate {med(rates[k])}"
    if p99s[k]:
        line += f"  p99 ms {med(p99s[k])}"
    if failed[k]:
        line += f"  FAILED {failed[k]}"
    print(line)
    for ek in sorted(extras[k]):
        print(f"    {ek}: {med(extras[k][ek])}")
for (a, b), v in pairs.items():
    print(f"ratio {a} / {b}: {med(v, '{:.3g}')}")
