#!/usr/bin/python3
"""Runs on processes that live across them, against processes started per
run (docs/RUNCONTROL.md, docs/PERFORMANCE.md), measured in the same session
through deploy/daqrun with the real daemons on this host:

- per process: N one-run daqrun invocations (seven processes started and
  ended each time). Figures: daqrun's launch to the first built event (the
  first record's t_ns), and the whole invocation's wall time.
- serving: one daqrun --runs N (the processes started once). Figures: the
  configure (POST to every peer configured), START to the first built event
  (the hub's own measure), and each run's start to its end.
- stop: a long run stopped 1 s after its start: the operator's drained stop
  of a serving hub (stop to balanced books, the hub's measure) against
  SIGUSR2 to a one-run hub (the same drained stop, metrics.json's
  stop_to_books_ms).

Usage: analysis/bench_runs.py [--runs N] [--out DIR]
Writes DIR/runs.json and DIR/runs.md; exits 1 when a run failed.
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
DAQRUN = REPO / "deploy" / "daqrun"
EVENTS, PAYLOAD = 20000, 256

TOPOLOGY = """[run]
run = 1
seed = 5
events = {events}
payload = {payload}
rate = {rate}

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


def daqrun(topo: Path, out: Path, *args: str) -> tuple[int, str, float, int]:
    """(exit status, output, wall seconds, launch time in realtime ns)."""
    t0_ns, t0 = time.time_ns(), time.monotonic()
    r = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out), "--quiet",
                        *args], capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout + r.stderr, time.monotonic() - t0, t0_ns


def first_event_ns(run_dir: Path) -> int | None:
    try:
        with open(run_dir / "events.jsonl") as f:
            return json.loads(f.readline())["t_ns"]
    except (OSError, ValueError, KeyError):
        return None


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def per_process(work: Path, runs: int) -> dict:
    topo = work / "short.toml"
    topo.write_text(TOPOLOGY.format(events=EVENTS, payload=PAYLOAD, rate=0))
    launch_to_first, wall, failed = [], [], 0
    for k in range(runs):
        out = work / f"one-{k}"
        rc, text, seconds, t0_ns = daqrun(topo, out)
        failed += rc != 0
        first = first_event_ns(out)
        launch_to_first.append((first - t0_ns) / 1e6 if first else None)
        wall.append(seconds)
    return {"launch_to_first_event_ms": launch_to_first, "wall_s": wall, "failed": failed}


def serving(work: Path, runs: int) -> dict:
    topo = work / "short.toml"
    out = work / "serving"
    rc, text, seconds, _ = daqrun(topo, out, "--runs", str(runs))
    doc = json.loads((out / "runs.json").read_text()) if (out / "runs.json").exists() else {}
    rows = doc.get("runs", [])
    return {"status": rc, "wall_s": seconds, "failed": int(rc != 0),
            "configure_ms": [r.get("configure_ms") for r in rows],
            "start_to_first_event_ms": [r.get("start_to_first_event_ms") for r in rows],
            "run_s": [r.get("seconds") for r in rows], "output_tail": text[-1500:]}


def stops(work: Path) -> dict:
    topo = work / "long.toml"
    topo.write_text(TOPOLOGY.format(events=10_000_000, payload=PAYLOAD, rate=5000))
    rc1, text1, _, _ = daqrun(topo, work / "stop-serving", "--runs", "1", "--run-seconds", "1")
    rows = json.loads((work / "stop-serving" / "runs.json").read_text()).get("runs", []) \
        if (work / "stop-serving" / "runs.json").exists() else []
    rc2, text2, _, _ = daqrun(topo, work / "stop-one", "--fault", "builder:0:USR2@1")
    try:
        m = json.loads((work / "stop-one" / "metrics.json").read_text())
    except (OSError, ValueError):
        m = {}
    return {"serving_stop_to_books_ms": rows[0].get("stop_to_books_ms") if rows else None,
            "serving_balanced": bool(rows and rows[0].get("balanced")),
            "one_run_stop_to_books_ms": m.get("stop_to_books_ms"),
            "one_run_balanced": bool(m.get("balanced")),
            "failed": int(rc1 != 0) + int(rc2 != 0),
            "tails": [text1[-800:], text2[-800:]]}


def fmt(v: float | None, unit: str = "ms") -> str:
    return "—" if v is None else f"{v:.1f} {unit}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "results" /
                                         f"bench-runs-{datetime.date.today().isoformat()}"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp:
        work = Path(tmp)
        one = per_process(work, a.runs)
        serve = serving(work, a.runs)
        stop = stops(work)
    doc = {"format": "bench-runs/1", "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "events": EVENTS, "payload": PAYLOAD, "sources": 4, "readers": 2, "runs": a.runs,
           "per_process": one, "serving": serve, "stop": stop}
    (out / "runs.json").write_text(json.dumps(doc, indent=1) + "\n")
    rows = [
        ("to the first built event", fmt(median(one["launch_to_first_event_ms"])) +
         " (launch)", fmt(median(serve["start_to_first_event_ms"])) + " (start)"),
        ("configure", "—", fmt(median(serve["configure_ms"]))),
        ("one run", fmt(median(one["wall_s"]), "s") + " (daqrun's launch to its exit)",
         fmt(median([(c or 0) / 1000 + (r or 0) for c, r in zip(serve["configure_ms"],
                                                                 serve["run_s"])]), "s")
         + " (configure, start to the run's end)"),
        (f"{a.runs} runs, refbuild after each", fmt(sum(one["wall_s"]), "s"),
         fmt(serve["wall_s"], "s") + " (processes started once)"),
        ("stop to balanced books", fmt(stop["one_run_stop_to_books_ms"]) + " (SIGUSR2)",
         fmt(stop["serving_stop_to_books_ms"]) + " (stop)"),
    ]
    md = [f"# Runs on long-lived processes ({doc['date']})", "",
          f"{a.runs} runs of {EVENTS} events x {PAYLOAD} B from 4 unpaced sources, 2 readers, "
          "one builder, on this host; medians.", "",
          "| | processes per run | processes serving runs |", "|---|---|---|"]
    md += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    (out / "runs.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    failed = one["failed"] + serve["failed"] + stop["failed"]
    if failed:
        print(f"bench_runs: {failed} run(s) failed; see {out / 'runs.json'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
