#!/usr/bin/python3
"""Several builders, measured (docs/BUILDERS.md, docs/PERFORMANCE.md).

Three experiments on this host, each against a baseline run in the same
session, through deploy/daqrun with the real daemons:

- scaling: 4 unpaced 64 B sources, every builder given the same filter cost
  (100 us of CPU per event), M = 1 (one builderd, --role both; and a hub with
  one builder), 2 and 3 builders. The figure is accepted events/s of M
  builders over M = 1.
- routing cost: the same without a filter cost, M = 2 against M = 1: what the
  hub, the assignments and a reader's second link cost in events/s and in
  CPU per fragment.
- slow builder: builder 0 with the scaling filter cost, builder 1 ten times
  slower (1 ms), with the event manager and with static routing, against
  builder 0 alone (M = 1 at builder 0's cost).

Usage: analysis/bench_builders.py [--quick] [--out DIR] [--repeats N]
Writes DIR/builders.json, DIR/builders.md, DIR/builders-scaling.png and
DIR/builders-slow.png; exits 1 when a run failed its books.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN = REPO / "deploy" / "daqrun"

SOURCES = 4
PAYLOAD = 64
FILTER_US = 100
SLOW_FILTER_US = 1000


def topology(builders: list[dict], events: int, routing: str, hub: bool) -> str:
    """One host: 4 unpaced sources, 2 readers, the given builders. hub=False
    with one builder is today's single builderd (--role both)."""
    readers = "".join(
        f'[[reader]]\nid = {r}\nsources = [{2 * r}, {2 * r + 1}]\nhost = "127.0.0.1"\n\n'
        for r in range(SOURCES // 2))
    run = (f'[run]\nrun = 1\nseed = 17\nevents = {events}\npayload = {PAYLOAD}\nrate = 0\n'
           f'max_inflight = 16384\ntimeout_ms = 5000\n')
    if not hub:
        b = builders[0]
        return (run + f'filter_cost_us = {b["filter_cost_us"]}\n\n'
                f'[builder]\nhost = "127.0.0.1"\nquiet = true\n\n' + readers)
    # [run]'s filter cost goes to every builder; a builder's own comes
    # after it on its command line, and the last one counts.
    run += (f'filter_cost_us = {builders[0]["filter_cost_us"]}\nrouting = "{routing}"\n'
            f'batch = 64\n\n[hub]\nhost = "127.0.0.1"\nquiet = true\n\n')
    tables = "".join(
        f'[[builder]]\nid = {i}\nhost = "127.0.0.1"\nquiet = true\n'
        f'extra = ["--filter-cost-us", "{b["filter_cost_us"]}"]\n\n'
        for i, b in enumerate(builders))
    return run + tables + readers


def one_run(bin_dir: Path, work: Path, name: str, text: str) -> dict:
    topo = work / f"{name}.toml"
    topo.write_text(text)
    out = work / name
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out),
                           "--bin", str(bin_dir), "--check", "never"],
                          capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    try:
        m = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        return {"ok": False, "error": proc.stdout[-1500:] + proc.stderr[-1500:]}
    per_builder = {}
    for bid, sec in (m.get("builders") or {}).items():
        counters = sec.get("counters", {})
        counters = counters.get("builder", counters)
        per_builder[bid] = {"complete": counters.get("events_complete"),
                            "assigned": sec.get("assigned"),
                            "backlog_cap": sec.get("backlog_cap")}
    return {
        "ok": proc.returncode == 0 and m["balanced"],
        "status": proc.returncode,
        "error": "; ".join(m.get("errors", [])[:3]) or proc.stdout[-800:],
        "balanced": m["balanced"],
        "accepted_events_per_s": m["rates"]["accepted_events_per_s"],
        "offered_events_per_s": m["rates"]["offered_events_per_s"],
        "cpu_us_per_fragment": m["cpu"]["us_per_fragment"],
        "p99_ns": m["latency"]["p99_ns"],
        "builders": per_builder,
        "wall_s": wall,
    }


def events_for(rate_per_s: float, seconds: float) -> int:
    return max(2000, int(rate_per_s * seconds))


def measure(bin_dir: Path, work: Path, label: str, builders: list[dict], routing: str,
            hub: bool, events: int, repeats: int) -> dict:
    runs = []
    for rep in range(repeats):
        r = one_run(bin_dir, work, f"{label}-{rep}".replace(" ", "_"),
                    topology(builders, events, routing, hub))
        if not r["ok"]:
            print(f"bench-builders: {label} repetition {rep + 1} FAILED: "
                  f"{r.get('error', r.get('status'))}", flush=True)
        if "accepted_events_per_s" in r:
            runs.append(r)
    row = {"label": label, "builders": len(builders), "routing": routing if hub else "none",
           "hub": hub, "filter_cost_us": [b["filter_cost_us"] for b in builders],
           "events": events, "runs": runs, "failed": repeats - sum(r["ok"] for r in runs)}
    if runs:
        acc = [r["accepted_events_per_s"] for r in runs]
        cpu = [r["cpu_us_per_fragment"] for r in runs]
        row["accepted"] = {"median": statistics.median(acc), "min": min(acc), "max": max(acc)}
        row["cpu"] = {"median": statistics.median(cpu), "min": min(cpu), "max": max(cpu)}
        print(f"bench-builders: {label:<34} {row['accepted']['median']:>9.0f} events/s "
              f"({row['accepted']['min']:.0f}-{row['accepted']['max']:.0f}), "
              f"{row['cpu']['median']:.2f} us CPU/fragment", flush=True)
    return row


def ratio(a: dict, b: dict) -> float | None:
    if "accepted" not in a or "accepted" not in b or not b["accepted"]["median"]:
        return None
    return a["accepted"]["median"] / b["accepted"]["median"]


def plots(rows: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    keys = [k for k in ("M=1 both", "M=1 hub", "M=2", "M=3") if "accepted" in rows[k]]
    xs = range(len(keys))
    med = [rows[k]["accepted"]["median"] for k in keys]
    err = [[rows[k]["accepted"]["median"] - rows[k]["accepted"]["min"] for k in keys],
           [rows[k]["accepted"]["max"] - rows[k]["accepted"]["median"] for k in keys]]
    ax.bar(xs, med, yerr=err, capsize=3, color=["#999999", "#bbbbbb", "#1b9e77", "#7570b3"][:len(keys)])
    base = rows["M=1 both"].get("accepted", {}).get("median")
    if base:
        for m, style in ((2, "--"), (3, ":")):
            ax.axhline(base * m, color="k", ls=style, lw=0.8, label=f"{m} x M=1")
        ax.axhline(base * 1.8, color="#d95f02", ls="-", lw=0.8, label="1.8 x M=1 (target for M=2)")
    ax.set_xticks(list(xs), keys)
    ax.set_ylabel("accepted events/s (median, min-max)")
    ax.set_title(f"Builders in parallel: {SOURCES} unpaced {PAYLOAD} B sources, "
                 f"{FILTER_US} us filter per event", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "builders-scaling.png", dpi=110)
    names.append("builders-scaling.png")

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    keys = [k for k in ("builder 0 alone", "slow 1, manager", "slow 1, static")
            if "accepted" in rows[k]]
    med = [rows[k]["accepted"]["median"] for k in keys]
    ax.bar(range(len(keys)), med, color=["#999999", "#1b9e77", "#d95f02"][:len(keys)])
    alone = rows["builder 0 alone"].get("accepted", {}).get("median")
    if alone:
        ax.axhline(alone * 0.9, color="k", ls="--", lw=0.8, label="90% of builder 0 alone")
        ax.legend(fontsize=7)
    for i, k in enumerate(keys):
        share = []
        for r in rows[k]["runs"][:1]:
            for bid, b in sorted(r["builders"].items()):
                share.append(f"b{bid}: {b['complete']}")
        ax.text(i, med[i], "\n".join(share), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(keys)), keys)
    ax.set_ylabel("accepted events/s (median)")
    ax.set_title(f"One slow builder ({SLOW_FILTER_US} us against {FILTER_US} us per event)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "builders-slow.png", dpi=110)
    names.append("builders-slow.png")
    return names


def run_all(bin_dir: Path, out: Path, quick: bool, repeats: int) -> int:
    seconds = 1.5 if quick else 3.0
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    fast = {"filter_cost_us": FILTER_US}
    free = {"filter_cost_us": 0}
    slow = {"filter_cost_us": SLOW_FILTER_US}
    filtered = events_for(1e6 / FILTER_US * 2, seconds)
    unfiltered = events_for(300_000, seconds)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="es-bench-builders-") as tmp:
        work = Path(tmp)
        plan = [
            ("M=1 both", [fast], "manager", False, filtered),
            ("M=1 hub", [fast], "manager", True, filtered),
            ("M=2", [fast, fast], "manager", True, filtered),
            ("M=3", [fast, fast, fast], "manager", True, filtered),
            ("no filter, M=1", [free], "manager", False, unfiltered),
            ("no filter, M=2", [free, free], "manager", True, unfiltered),
            ("builder 0 alone", [fast], "manager", False, filtered),
            ("slow 1, manager", [fast, slow], "manager", True, filtered),
            ("slow 1, static", [fast, slow], "static", True, events_for(2000, seconds)),
        ]
        if quick:
            plan = [p for p in plan if p[0] != "M=3"]
        for label, builders, routing, hub, events in plan:
            rows[label] = measure(bin_dir, work, label, builders, routing, hub, events, repeats)
    for k in ("M=3",):
        rows.setdefault(k, {"label": k, "runs": []})
    figures = {
        "scaling_m2_over_m1": ratio(rows["M=2"], rows["M=1 both"]),
        "scaling_m2_over_m1_hub": ratio(rows["M=2"], rows["M=1 hub"]),
        "scaling_m3_over_m1": ratio(rows["M=3"], rows["M=1 both"]),
        "routing_cost_m2_over_m1": ratio(rows["no filter, M=2"], rows["no filter, M=1"]),
        "slow_manager_over_alone": ratio(rows["slow 1, manager"], rows["builder 0 alone"]),
        "slow_static_over_alone": ratio(rows["slow 1, static"], rows["builder 0 alone"]),
    }
    doc = {
        "format": "bench-builders/1",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
        "repeats": repeats, "quick": quick, "rows": rows, "figures": figures,
    }
    (out / "builders.json").write_text(json.dumps(doc, indent=1))

    def pct(x):
        return "n/a" if x is None else f"{x:.2f}x"

    lines = [f"# Several builders {doc['date']}", "",
             f"{doc['cpus']} CPUs, every daemon on this host, {SOURCES} unpaced {PAYLOAD} B "
             f"sources and 2 readers; {repeats} run(s) per row, median (min-max).", "",
             "| run | builders | routing | filter us | accepted events/s | CPU us/fragment | books |",
             "|---|---:|---|---|---|---:|---|"]
    for label, r in rows.items():
        if "accepted" not in r:
            continue
        a = r["accepted"]
        lines.append(f"| {label} | {r['builders']} | {r['routing']} | "
                     f"{'/'.join(map(str, r['filter_cost_us']))} | {a['median']:.0f} "
                     f"({a['min']:.0f}-{a['max']:.0f}) | {r['cpu']['median']:.2f} | "
                     f"{'balanced' if not r['failed'] else str(r['failed']) + ' failed'} |")
    lines += ["",
              f"- scaling, M=2 over M=1: **{pct(figures['scaling_m2_over_m1'])}** "
              f"(over a hub with one builder: {pct(figures['scaling_m2_over_m1_hub'])}); "
              f"M=3 over M=1: {pct(figures['scaling_m3_over_m1'])}",
              f"- routing cost without a filter, M=2 over M=1: {pct(figures['routing_cost_m2_over_m1'])}",
              f"- one slow builder: manager {pct(figures['slow_manager_over_alone'])}, static "
              f"{pct(figures['slow_static_over_alone'])} of builder 0 alone", ""]
    pngs = plots(rows, out)
    lines += [f"![{p}]({p})" for p in pngs]
    (out / "builders.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    failed = sum(r.get("failed", 0) for r in rows.values())
    print(f"bench-builders: wrote {out}/builders.md in {time.monotonic() - started:.0f} s; "
          f"{failed} failed run(s)")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs, no M=3")
    ap.add_argument("--out", type=Path,
                    default=REPO / "results" / f"bench-{datetime.date.today()}")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--bin", type=Path, default=REPO / "bin")
    args = ap.parse_args()
    return run_all(args.bin, args.out, args.quick, args.repeats or (1 if args.quick else 3))


if __name__ == "__main__":
    sys.exit(main())
