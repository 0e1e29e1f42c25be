#!/usr/bin/env python3
"""Exact latency percentiles of a run, from its events.jsonl (a run of
several builders: every builders/B/events.jsonl together).

metrics.json reports percentiles as histogram bucket edges (within 6.25 %),
which is plenty for a report but is a term of its own when two cases differ
by a few tens of microseconds: compare.py's verdict subtracts the bucket
width from every pair difference. events.jsonl has every recorded event's
latency and uncertainty, so the percentiles can be had exactly.

The percentile is the nearest rank, as common/core/hist.c takes it (rank
ceil(q * n), clamped to 1..n); the uncertainty is the largest of any record
of the run (the one bound that holds for every percentile), None when a
record had no clock estimate.

    analysis/exact_latency.py RUN_DIR...   writes RUN_DIR/latency_exact.json
"""
import json
import math
import sys
from pathlib import Path

STATS = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}
FILE = "latency_exact.json"


def nearest_rank(sorted_values: list[int], q: float) -> int:
    n = len(sorted_values)
    rank = min(max(math.ceil(q * n), 1), n)
    return sorted_values[rank - 1]


def exact_latency(events_path: Path | list[Path]) -> dict | None:
    """The exact percentiles of one events.jsonl, or of several builders'
    together; None when they have no event."""
    paths = events_path if isinstance(events_path, list) else [events_path]
    latencies = []
    largest_uncertainty = 0
    unbounded = 0
    for path in paths:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                e = json.loads(line)
                latencies.append(int(e["latency_ns"]))
                u = e.get("uncertainty_ns")
                if u is None:
                    unbounded += 1
                else:
                    largest_uncertainty = max(largest_uncertainty, int(u))
    if not latencies:
        return None
    latencies.sort()
    return {
        "source": ", ".join(p.name if p.parent.parent.name != "builders"
                            else f"builders/{p.parent.name}/{p.name}" for p in paths),
        "samples": len(latencies),
        "definition": "nearest-rank percentiles of every recorded event's latency_ns; "
                      "uncertainty_ns is the largest of any record (null: some record had no clock estimate)",
        "uncertainty_ns": None if unbounded else largest_uncertainty,
        "records_without_estimate": unbounded,
        **{f"{name}_ns": nearest_rank(latencies, q) for name, q in STATS.items()},
    }


def load_or_make(run_dir: Path) -> dict | None:
    """latency_exact.json of a run, made from its events.jsonl when missing."""
    cached = run_dir / FILE
    if cached.is_file():
        return json.loads(cached.read_text(encoding="utf-8"))
    events = run_dir / "events.jsonl"
    several = sorted(run_dir.glob("builders/*/events.jsonl"))   # a run of several builders
    if not events.is_file() and not several:
        return None
    result = exact_latency(events if events.is_file() else several)
    if result is not None:
        try:
            cached.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        except OSError:
            pass   # a read-only run directory: compute again next time
    return result


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    status = 0
    for arg in argv:
        d = Path(arg)
        r = load_or_make(d)
        if r is None:
            print(f"exact_latency: {d}: no events.jsonl with events", file=sys.stderr)
            status = 1
            continue
        print(f"{d}: p50 {r['p50_ns']} ns, p99 {r['p99_ns']} ns, max {r['max_ns']} ns "
              f"over {r['samples']} events, uncertainty {r['uncertainty_ns']} ns")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
