#!/usr/bin/env python3
# bench-tls-summary.py OUTDIR: medians of loadtest/bench-tls.sh runs (adds/s, fire lateness p99 and
# the server CPU seconds of each scenario) for TLS vs plaintext and plaintext before vs after.
import json,glob,statistics,sys
d=sys.argv[1]
def load(f):
    try: return json.load(open(f))
    except Exception: return None
def collect(files, keyf):
    acc={}
    for f in files:
        rs=load(f)
        if not rs: continue
        for r in rs:
            k=keyf(r)
            a=acc.setdefault(k,{'rate':[],'cpu':[],'p99':[],'tp99':[],'p50':[]})
            a['cpu'].append(r['Server']['CPUSeconds'])
            if r['Scenario']=='add': a['rate'].append(r['Rate'])
            else:
                a['p99'].append(r['Lateness']['P99']/1000); a['tp99'].append(r['TickLateness']['P99']/1000); a['p50'].append(r['Lateness']['P50']/1000)
    return acc
def show(acc):
    for k in sorted(acc):
        a=acc[k]
        med=lambda v: round(statistics.median(v),2) if v else None
        if a['rate']:
            print(k, 'n=%d'%len(a['rate']), 'adds/s median %.0f (min %.0f max %.0f)'%(statistics.median(a['rate']),min(a['rate']),max(a['rate'])), 'server cpu s median', med(a['cpu']), a['cpu'])
        else:
            print(k, 'n=%d'%len(a['p99']), 'p99 ms median', med(a['p99']), sorted(a['p99']), 'tick-p99 median', med(a['tp99']), 'p50 med', med(a['p50']), 'cpu med', med(a['cpu']))
print("== TLS vs plaintext, same run")
show(collect(sorted(glob.glob(d+'/tls-vs-plain-*.json')), lambda r:(r['Scenario'],r['Target'])))
print("== TLS vs plaintext, same run, plaintext read without kernel receive stamps (-no-rxstamp)")
show(collect(sorted(glob.glob(d+'/nostamp-tls-vs-plain-*.json')), lambda r:(r['Scenario'],r['Target'])))
print("== plaintext before/after")
show(collect(sorted(glob.glob(d+'/plain-before-*.json')), lambda r:(r['Scenario'],'before')))
show(collect(sorted(glob.glob(d+'/plain-after-*.json')), lambda r:(r['Scenario'],'after')))
