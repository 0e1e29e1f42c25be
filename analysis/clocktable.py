#!/usr/bin/env python3
"""Per-peer clock estimates and the latency uncertainty of runs, as a table.

    clocktable.py RUN_DIR [RUN_DIR ...]

For each run (its metrics.json): the latency p50 and p99, the latency
uncertainty U (largest per record) and, where the build reports it, the
median and p99 of the per-record uncertainty; then per peer the estimate
applied at the end of the run, its bound and its basis, and how its stamps
were taken. Runs of a build that predates the combined estimate (no
"applied") show the in-band estimate with basis "in band". Markdown on
stdout, for docs/CLOCKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def us(ns) -> str:
    return "n/a" if ns is None else f"{ns / 1e3:.1f}"


def rows(run: Path) -> tuple[list[str], list[str]]:
    m = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    lat = m["latency"]
    dist = lat.get("uncertainty_distribution") or {}
    head = [run.name, us(lat.get("p50_ns")), us(lat.get("p99_ns")), us(lat.get("uncertainty_ns")),
            us(dist.get("p50_ns")), us(dist.get("p99_ns"))]
    peers = []
    for p in m["clocks"]["peers"]:
        a = p.get("applied")
        if a is None:
            ib = p.get("inband") or {}
            a = {"offset_ns": ib.get("offset_ns"), "bound_ns": ib.get("bound_ns"),
                 "basis": "in band"}
        st = (p.get("inband") or {}).get("stamps") or {}
        if st:
            n = [sum(st[k].values()) for k in ("t1", "t2", "t3", "t4")]
            kern = [st[k]["kernel software"] + st[k]["hardware"] for k in ("t1", "t2", "t3", "t4")]
            how = f"{st['summary']} ({100 * sum(kern) / max(1, sum(n)):.1f} % kernel, {st['transport']})"
        else:
            how = "user space (control connection)"
        peers.append(f"| {run.name} | {p['peer']} | {a['offset_ns']} | {a['bound_ns']} | "
                     f"{a['basis']} | {how} |")
    return head, peers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args(argv)
    heads, peers = [], []
    for run in args.runs:
        try:
            h, p = rows(run)
        except (OSError, ValueError, KeyError) as e:
            print(f"clocktable: {run}: {e}", file=sys.stderr)
            return 2
        heads.append(h)
        peers += p
    print("| run | latency p50 (µs) | p99 (µs) | U, max per record (µs) | "
          "per-record median (µs) | per-record p99 (µs) |")
    print("|---|---:|---:|---:|---:|---:|")
    for h in heads:
        print("| " + " | ".join(h) + " |")
    print()
    print("| run | peer | offset (ns) | bound (ns) | basis | stamps |")
    print("|---|---|---:|---:|---|---|")
    for line in peers:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
