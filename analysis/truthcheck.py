#!/usr/bin/env python3
"""Checks every clock estimate builderd applied against the truth.

Where every daemon of a run reads the same kernel clock (one machine: the
local backend, or the netns virtual cluster), the true offset of a peer's
clock from the builder's is exactly the difference of the --clock-offset-ns
the two daemons were started with (0 without one), whatever they declared
(docs/CLOCKS.md). This script takes those from the command lines the
launcher recorded (params.json), and compares every estimate in
metrics.json (clocks.peers[].estimates.history, and the final applied one)
with it:

    truthcheck.py RUN_DIR [RUN_DIR ...] [--json OUT]

It prints, per peer and in total, how many estimates contained the truth
(|offset - truth| <= bound), the distribution of |error| and of the bound
(p50, p99, max), and a MISS line for every estimate whose bound misses the
truth. Estimates made but not kept (more than the history holds) are
covered by the builder's own count against the declared offsets, used only
when every declared offset equals the started one.

Exit status: 0 when every estimate contains the truth, 1 on any miss, 2 when
a run cannot be checked (no metrics, no clocks, or not one kernel clock).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ONE_CLOCK_BACKENDS = ("local", "netns")


def injected_offset(argv: list[str]) -> int:
    """The --clock-offset-ns a daemon was started with (0 without one)."""
    for i, a in enumerate(argv):
        if a == "--clock-offset-ns" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--clock-offset-ns="):
            return int(a.split("=", 1)[1])
    return 0


def peer_name(process: str) -> str | None:
    """'source-3' -> 'source.3', 'reader-0' -> 'reader.0'; None for others."""
    role, _, ident = process.rpartition("-")
    return f"{role}.{ident}" if role in ("source", "reader") and ident.isdigit() else None


def quantile(values: list[int], q: float) -> int | None:
    """The smallest value with at least ceil(q * n) values at or below it."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def spread(values: list[int]) -> dict:
    return {"p50_ns": quantile(values, 0.5), "p99_ns": quantile(values, 0.99),
            "max_ns": max(values) if values else None, "n": len(values)}


def fmt_ns(v: int | None) -> str:
    if v is None:
        return "n/a"
    a = abs(v)
    if a < 10_000:
        return f"{v} ns"
    if a < 10_000_000:
        return f"{v / 1e3:.1f} us"
    return f"{v / 1e6:.2f} ms"


class Unchecked(Exception):
    pass


def check_run(run_dir: Path) -> dict:
    try:
        params = json.loads((run_dir / "params.json").read_text(encoding="utf-8"))
        metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise Unchecked(f"{run_dir}: cannot read params.json and metrics.json: {e}") from e
    backend = params.get("backend")
    if backend not in ONE_CLOCK_BACKENDS:
        raise Unchecked(f"{run_dir}: backend {backend!r} runs on several machines: the true "
                        f"offsets are not known")
    clocks = metrics.get("clocks")
    if not clocks or "peers" not in clocks:
        raise Unchecked(f"{run_dir}: metrics.json has no clock estimates")
    started = {}
    builder_inj = 0
    for proc in params.get("processes", []):
        name = proc.get("name", "")
        if name.startswith("builder"):
            builder_inj = injected_offset(proc.get("argv", []))
        elif peer_name(name):
            started[peer_name(name)] = injected_offset(proc.get("argv", []))

    peers = []
    misses = []
    for p in clocks["peers"]:
        name = p["peer"]
        truth = started.get(name, 0) - builder_inj
        est = p.get("estimates") or {}
        history = est.get("history") or []
        errors, bounds, inside = [], [], 0
        for at, offset, bound, basis in history:
            err = offset - truth
            errors.append(abs(err))
            bounds.append(bound)
            if abs(err) <= bound:
                inside += 1
            else:
                misses.append(f"{run_dir.name}: {name} at {at}: {basis} estimate "
                              f"{offset} +/- {bound} ns misses the true offset {truth} ns "
                              f"by {abs(err) - bound} ns")
        applied = p.get("applied")
        if applied is not None:
            err = applied["offset_ns"] - truth
            if abs(err) > applied["bound_ns"]:
                misses.append(f"{run_dir.name}: {name}: final {applied['basis']} estimate "
                              f"{applied['offset_ns']} +/- {applied['bound_ns']} ns misses the "
                              f"true offset {truth} ns")
        count = est.get("count", len(history))
        unkept = count - len(history)
        declared = p.get("injected_offset_ns")
        declared_truth = None if declared is None else declared - clocks["builder"].get(
            "injected_offset_ns", 0)
        agg = est.get("against_injected")
        unchecked = 0
        if unkept > 0:
            # The builder checked every estimate against the declared
            # offsets; that is the truth only if they are the started ones.
            if agg is not None and declared_truth == truth:
                outside = agg["outside"]
                if outside:
                    misses.append(f"{run_dir.name}: {name}: {outside} estimates (of {count}) "
                                  f"miss the true offset {truth} ns by up to "
                                  f"{-agg['worst_margin_ns']} ns")
            else:
                unchecked = unkept
        peers.append({"peer": name, "truth_ns": truth, "estimates": count,
                      "checked": len(history), "inside": inside, "unchecked": unchecked,
                      "abs_error": spread(errors), "bound": spread(bounds),
                      "basis": est.get("by_basis"),
                      "applied": applied})
    return {"run": str(run_dir), "backend": backend, "peers": peers, "misses": misses}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories")
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    ap.add_argument("--quiet", action="store_true", help="only the totals and any miss")
    args = ap.parse_args(argv)

    results, status = [], 0
    all_err, all_bound = [], []
    total = inside = checked = unchecked = 0
    misses: list[str] = []
    for run in args.runs:
        try:
            r = check_run(run)
        except Unchecked as e:
            print(f"truthcheck: {e}", file=sys.stderr)
            status = 2
            continue
        results.append(r)
        misses += r["misses"]
        for p in r["peers"]:
            total += p["estimates"]
            checked += p["checked"]
            inside += p["inside"]
            unchecked += p["unchecked"]
            if not args.quiet:
                print(f"truthcheck: {Path(r['run']).name}: {p['peer']}: truth {fmt_ns(p['truth_ns'])}; "
                      f"{p['inside']} of {p['checked']} estimates inside their bound; |error| "
                      f"p50 {fmt_ns(p['abs_error']['p50_ns'])}, p99 {fmt_ns(p['abs_error']['p99_ns'])}, "
                      f"max {fmt_ns(p['abs_error']['max_ns'])}; bound p50 "
                      f"{fmt_ns(p['bound']['p50_ns'])}, p99 {fmt_ns(p['bound']['p99_ns'])}, max "
                      f"{fmt_ns(p['bound']['max_ns'])}; basis {p['basis']}")
        # Pooled distributions: from the histories again.
        metrics = json.loads((Path(r["run"]) / "metrics.json").read_text(encoding="utf-8"))
        for p, q in zip(metrics["clocks"]["peers"], r["peers"]):
            for _, offset, bound, _ in (p.get("estimates") or {}).get("history") or []:
                all_err.append(abs(offset - q["truth_ns"]))
                all_bound.append(bound)
    for m in misses:
        print(f"truthcheck: MISS {m}")
    e, b = spread(all_err), spread(all_bound)
    print(f"truthcheck: {len(results)} run(s), {checked} of {total} estimates checked, "
          f"{inside} inside their bound, {len(misses)} miss(es)"
          + (f", {unchecked} not checkable (not kept, declared offsets differ from the "
             f"started ones)" if unchecked else "")
          + f"; |error| p50 {fmt_ns(e['p50_ns'])}, p99 {fmt_ns(e['p99_ns'])}, max "
          f"{fmt_ns(e['max_ns'])}; bound p50 {fmt_ns(b['p50_ns'])}, p99 {fmt_ns(b['p99_ns'])}, "
          f"max {fmt_ns(b['max_ns'])}")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "abs_error": e, "bound": b,
                                         "estimates": total, "checked": checked,
                                         "inside": inside, "misses": misses}, indent=1) + "\n",
                             encoding="utf-8")
    if misses:
        print(f"truthcheck: FAIL: {len(misses)} estimate(s) whose bound misses the true offset",
              file=sys.stderr)
        return 1
    if status == 0 and checked == 0:
        print("truthcheck: no estimate to check", file=sys.stderr)
        return 2
    if status == 0:
        print("truthcheck: PASS: every estimate contains the true offset")
    return status


if __name__ == "__main__":
    sys.exit(main())
