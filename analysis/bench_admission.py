#!/usr/bin/python3
"""Completeness with and without credit-based admission (the EventStream
note's Figure 6, on this machine): 4 unpaced sources of 64 B fragments, a
small and a large reader-to-builder buffer, three runs of each, the share of
event IDs completed as median with min-max.

Usage: analysis/bench_admission.py [--out DIR] [--events N] [--window W]
       [--repeats R] [--bin DIR]
Writes DIR/admission.json, DIR/admission.md and DIR/admission.png.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN = REPO / "deploy" / "daqrun"

# The hop between reader and builder: kernel socket buffers on both ends and
# the user-space batch of each daemon.
BUFFERS = {
    "small (16 KiB)": {"socket_buffer": 16384, "batch": 16384},
    "large (4 MiB)": {"socket_buffer": 4 << 20, "batch": 1 << 20},
}


def topology(events: int, window: int, buffer: dict, admission: bool) -> str:
    extra = ["--socket-buffer", str(buffer["socket_buffer"]),
             "--batch-bytes", str(buffer["batch"])]
    readers = "\n".join(
        f'[[reader]]\nid = {r}\nsources = [{2 * r}, {2 * r + 1}]\nhost = "127.0.0.1"\n'
        f'transport = "tcp"\nextra = {json.dumps(extra)}\n' for r in range(2))
    return f"""[run]
run = 1
seed = 7
events = {events}
payload = 64
rate = 0
max_inflight = {window}
timeout_ms = 2000
no_admission = {"false" if admission else "true"}

[builder]
host = "127.0.0.1"
extra = {json.dumps(extra)}

{readers}"""


def one_run(bin_dir: Path, work: Path, name: str, text: str) -> dict:
    topo = work / f"{name}.toml"
    topo.write_text(text)
    out = work / name
    proc = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out),
                           "--bin", str(bin_dir), "--check", "never"],
                          capture_output=True, text=True, timeout=600)
    metrics = json.loads((out / "metrics.json").read_text())
    c = metrics["counters"]["builder"]
    generated = c["events_complete"] + c["events_expired"] + c["events_unobserved"]
    return {
        "status": proc.returncode,
        "balanced": metrics["balanced"],
        "events": generated,
        "complete": c["events_complete"],
        "expired_window": c["events_expired_window"],
        "expired_timeout": c["events_expired_timeout"],
        "completeness": c["events_complete"] / generated if generated else 0.0,
        "accepted_events_per_s": metrics["rates"]["accepted_events_per_s"],
    }


def summarise(runs: list[dict]) -> dict:
    shares = [r["completeness"] for r in runs]
    return {"median": statistics.median(shares), "min": min(shares), "max": max(shares)}


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.36
    for k, (label, color) in enumerate((("with admission", "#2c7fb8"),
                                        ("without admission", "#d95f0e"))):
        xs, med, lo, hi = [], [], [], []
        for i, buf in enumerate(BUFFERS):
            s = results[buf][label]["summary"]
            xs.append(i + (k - 0.5) * width)
            med.append(100 * s["median"])
            lo.append(100 * (s["median"] - s["min"]))
            hi.append(100 * (s["max"] - s["median"]))
        ax.bar(xs, med, width, label=label, color=color, yerr=[lo, hi], capsize=5)
        for x, m in zip(xs, med):
            ax.text(x, m + 1.5, f"{m:.1f}%", ha="center", fontsize=8)
    ax.set_xticks(range(len(BUFFERS)), [f"reader-to-builder buffer\n{b}" for b in BUFFERS])
    ax.set_ylabel("event IDs completed (%)")
    ax.set_ylim(0, 110)
    ax.set_title("Completeness under overload: 4 unpaced sources, 64 B\n"
                 "median of runs, bars min-max")
    ax.legend(loc="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path,
                    default=REPO / "results" / f"bench-admission-{datetime.date.today()}")
    ap.add_argument("--events", type=int, default=100000)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bin", type=Path, default=REPO / "bin")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="es-bench-admission-") as tmp:
        work = Path(tmp)
        for buf_name, buf in BUFFERS.items():
            results[buf_name] = {}
            for label, admission in (("with admission", True), ("without admission", False)):
                runs = []
                for rep in range(args.repeats):
                    name = f"{len(results)}-{admission}-{rep}"
                    r = one_run(args.bin, work, name,
                                topology(args.events, args.window, buf, admission))
                    runs.append(r)
                    print(f"{buf_name:15s} {label:18s} run {rep + 1}: "
                          f"{100 * r['completeness']:6.2f}% complete, "
                          f"{r['expired_window']} evicted by the window, "
                          f"balanced {r['balanced']}", flush=True)
                results[buf_name][label] = {"runs": runs, "summary": summarise(runs)}
    doc = {"events": args.events, "window": args.window, "sources": 4, "payload": 64,
           "repeats": args.repeats, "buffers": BUFFERS, "results": results}
    (args.out / "admission.json").write_text(json.dumps(doc, indent=1))
    lines = [f"# Completeness with and without admission ({datetime.date.today()})", "",
             f"4 unpaced sources, 64 B, {args.events} events, window {args.window}, "
             f"{args.repeats} runs each; share of event IDs completed.", "",
             "| reader-to-builder buffer | admission | median | min | max | window evictions (median) | all balanced |",
             "|---|---|---:|---:|---:|---:|---|"]
    for buf_name in BUFFERS:
        for label in ("with admission", "without admission"):
            e = results[buf_name][label]
            s = e["summary"]
            ev = statistics.median(r["expired_window"] for r in e["runs"])
            ok = all(r["balanced"] for r in e["runs"])
            lines.append(f"| {buf_name} | {label.split()[0]} | {100 * s['median']:.2f}% | "
                         f"{100 * s['min']:.2f}% | {100 * s['max']:.2f}% | {ev:g} | {ok} |")
    (args.out / "admission.md").write_text("\n".join(lines) + "\n")
    plot(results, args.out / "admission.png")
    print("\n".join(lines))
    print(f"\nwrote {args.out}/admission.md, admission.json, admission.png")
    complete = all(r["completeness"] == 1.0 for b in results.values()
                   for r in b["with admission"]["runs"])
    balanced = all(r["balanced"] for b in results.values() for v in b.values()
                   for r in v["runs"])
    return 0 if complete and balanced else 1


if __name__ == "__main__":
    sys.exit(main())
