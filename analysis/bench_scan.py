#!/usr/bin/python3
"""A scan on serving daemons against the same points as separate launches
(docs/RUNCONTROL.md "Scans", docs/PERFORMANCE.md), with the real daemons
on this host, interleaved round by round so that the shared machine's
load falls on both alike:

- scan: deploy/daqrun --serve started, deploy/daqctl scan of POINTS points
  (a grid of payloads x rates, each run EVENTS events per source), then
  daqctl shutdown; its wall time from daqrun's launch to its exit, the
  scan's own, and the gaps between runs.
- launches: one deploy/daqrun per point with the same keys (--check never:
  the scan runs no refbuild either); the sum of their wall times.

Usage: analysis/bench_scan.py [--rounds N] [--out DIR]
Writes DIR/scan.json and DIR/scan.md; exits 1 when a run failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN, DAQCTL = REPO / "deploy" / "daqrun", REPO / "deploy" / "daqctl"
EVENTS = 2000
PAYLOADS = (64, 256, 1024, 4096)
RATES = (0, 10000, 20000, 40000, 80000)

TOPOLOGY = """[run]
run = 1
seed = 5
events = {events}
payload = 64
rate = 0

[builder]
host = "127.0.0.1"
quiet = true

[[reader]]
id = 0
sources = [0, 1]
host = "127.0.0.1"
transport = "tcp"

[[reader]]
id = 1
sources = [2, 3]
host = "127.0.0.1"
transport = "tcp"
"""

SCAN = f"""topology = "topology.toml"
stop = {{ events = {EVENTS} }}
[grid]
payload = {list(PAYLOADS)}
rate = {list(RATES)}
"""


def timed(argv: list, timeout_s: float = 900) -> tuple[int, str, float]:
    t0 = time.monotonic()
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                       timeout=timeout_s)
    return r.returncode, r.stdout + r.stderr, time.monotonic() - t0


def scan_round(work: Path, k: int) -> dict:
    out = work / f"serve-{k}"
    t0 = time.monotonic()
    serving = subprocess.Popen([sys.executable, DAQRUN, work / "topology.toml", "--serve",
                                "--quiet", "--out", out], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    while not (out / "session.json").exists():
        if serving.poll() is not None or time.monotonic() - t0 > 60:
            serving.kill()
            return {"failed": 1, "tail": (serving.communicate()[0] or "")[-800:]}
        time.sleep(0.02)
    rc, text, scan_s = timed([sys.executable, DAQCTL, "--session", out, "scan",
                              work / "scan.toml", "--out", out / "table"])
    rc_down, _, _ = timed([sys.executable, DAQCTL, "--session", out, "shutdown"], 60)
    serving.wait(120)
    wall = time.monotonic() - t0
    try:
        rows = json.loads((out / "table.json").read_text())["rows"]
    except (OSError, ValueError, KeyError):
        rows = []
    return {"wall_s": wall, "scan_s": scan_s, "points": len(rows),
            "balanced": sum(bool(r["balanced"]) for r in rows),
            "gaps_s": [r["gap_s"] for r in rows if r["gap_s"] is not None],
            "failed": int(rc != 0 or rc_down != 0 or serving.returncode != 0
                          or len(rows) != len(PAYLOADS) * len(RATES)),
            "tail": text[-800:]}


def launches_round(work: Path, k: int) -> dict:
    total, failed = 0.0, 0
    for payload in PAYLOADS:
        for rate in RATES:
            rc, _, seconds = timed([sys.executable, DAQRUN, work / "topology.toml", "--quiet",
                                    "--check", "never", "--out", work / f"one-{k}",
                                    "--set", f"payload={payload}", "--set", f"rate={rate}"])
            total += seconds
            failed += rc != 0
    return {"wall_s": total, "failed": failed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "results" /
                                         f"bench-scan-{datetime.date.today().isoformat()}"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    scans, launches = [], []
    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        work = Path(tmp)
        (work / "topology.toml").write_text(TOPOLOGY.format(events=EVENTS))
        (work / "scan.toml").write_text(SCAN)
        for k in range(a.rounds):
            scans.append(scan_round(work, k))
            launches.append(launches_round(work, k))
            print(f"bench_scan: round {k + 1}/{a.rounds}: scan {scans[-1].get('wall_s', 0):.1f} s,"
                  f" launches {launches[-1]['wall_s']:.1f} s", flush=True)
    points = len(PAYLOADS) * len(RATES)
    gaps = [g for s in scans for g in s.get("gaps_s", [])]
    doc = {"format": "bench-scan/1", "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "points": points, "events": EVENTS, "sources": 4, "readers": 2,
           "payloads": PAYLOADS, "rates": RATES, "scan": scans, "launches": launches}
    (out / "scan.json").write_text(json.dumps(doc, indent=1) + "\n")
    med = statistics.median
    md = [f"# A {points}-point scan against {points} launches ({doc['date']})", "",
          f"{points} points (payload {', '.join(map(str, PAYLOADS))} B x rate "
          f"{', '.join(map(str, RATES))} ev/s per source, 0 unpaced), {EVENTS} events each, "
          f"4 sources, 2 readers, one builder, on this host; {a.rounds} interleaved rounds, "
          "medians (min-max).", "",
          "| | wall time |", "|---|---|"]

    def cell(values: list[float]) -> str:
        return f"{med(values):.1f} s ({min(values):.1f}-{max(values):.1f})" if values else "—"

    md.append(f"| daqrun --serve, daqctl scan, shutdown | "
              f"{cell([s['wall_s'] for s in scans if 'wall_s' in s])} |")
    md.append(f"| the scan alone | {cell([s['scan_s'] for s in scans if 'scan_s' in s])} |")
    md.append(f"| {points} daqrun launches | {cell([x['wall_s'] for x in launches])} |")
    if gaps:
        md.append(f"| gap between runs | {med(gaps) * 1000:.0f} ms median, "
                  f"{max(gaps) * 1000:.0f} ms most |")
    (out / "scan.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    failed = sum(s["failed"] for s in scans) + sum(x["failed"] for x in launches)
    if failed:
        print(f"bench_scan: {failed} failure(s); see {out / 'scan.json'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
