#!/usr/bin/python3
"""Tokens written at once (the msgconn_write_now fix) against before: 2 builders behind a hub,
manager routing, 4 x 64 B unpaced, not recorded; interleaved ABBA."""
import sys, json, tempfile, shutil, subprocess, statistics
from pathlib import Path
trees = {"before": Path("/tmp/pre"), "after": Path("/work/main")}
TOPO = """[run]
run = 1
seed = 7
events = {events}
payload = 64
rate = 0
routing = "manager"

[hub]
host = "127.0.0.1"

[[builder]]
id = 0
host = "127.0.0.1"
quiet = true
extra = ["--record", "none"]

[[builder]]
id = 1
host = "127.0.0.1"
quiet = true
extra = ["--record", "none"]

[[reader]]
id = 0
sources = [0, 1]
host = "127.0.0.1"
transport = "shm"

[[reader]]
id = 1
sources = [2, 3]
host = "127.0.0.1"
transport = "shm"
"""
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
events = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
work = Path(tempfile.mkdtemp(prefix="abtok-"))
topo = work / "t.toml"
topo.write_text(TOPO.format(events=events))
res = {k: [] for k in trees}
for r in range(rounds):
    order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
    for k in order:
        out = work / f"{k}-{r}"
        p = subprocess.run([sys.executable, str(trees[k] / "deploy" / "daqrun"), str(topo), "--quiet", "--check", "never", "--out", str(out)], capture_output=True, text=True)
        try:
            m = json.loads((out / "metrics.json").read_text())
        except Exception:
            print(k, r, "failed", p.stdout[-500:], p.stderr[-500:]); continue
        ev = m["rates"]["accepted_events_per_s"]
        cpu = m["cpu"]["us_per_fragment"]
        tok = sum(b.get("counters", {}).get("builder", {}).get("tokens_sent", 0) for b in m.get("builders", {}).values()) if isinstance(m.get("builders"), dict) else None
        res[k].append((ev, cpu))
        print(k, r, "ev/s", round(ev), "cpu us/frag", round(cpu, 3), "rc", p.returncode, flush=True)
        shutil.rmtree(out, ignore_errors=True)
for k in trees:
    if res[k]:
        print(k, "median ev/s", round(statistics.median(x[0] for x in res[k])), "cpu us/frag", round(statistics.median(x[1] for x in res[k]), 3))
