#!/usr/bin/python3
"""The benchmark matrix of the event builder, with same-run baselines.

Runs whole runs of the real daemons on this host through deploy/daqrun over a
matrix of sources, payload sizes, paced and unpaced rates, reader-to-builder
transports and filter costs, three repetitions each, and in the same session
the raw hop baselines (build/tests/bench_shm: the same frames over loopback
TCP and through a shared-memory ring, nothing else). Every throughput is also
given as a fraction of its baseline, since absolute figures on a shared
machine drift by tens of percent between runs.

Usage: analysis/bench.py [--quick] [--out DIR] [--repeats N] [--bin DIR]
Writes DIR/bench.json, DIR/bench.md and DIR/*.png.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
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

FULL = {
    "sources": [2, 4],
    "payload": [64, 1024, 16384],
    "rate": [1000, 10000, 50000, 0],
    "transport": ["shm", "tcp"],
    "filter_cost_us": [0],
}
# The filter cost makes the builder the bottleneck on purpose; a slice of the
# matrix is enough to show it.
FILTER_SLICE = {
    "sources": [4],
    "payload": [64],
    "rate": [1000, 0],
    "transport": ["shm", "tcp"],
    "filter_cost_us": [100],
}
# Every daemon at its default settings (window, timeout, buffers, ring):
# what the peak-RSS target is about, with and without the builder as the
# bottleneck.
DEFAULTS = {
    "sources": [4],
    "payload": [64],
    "rate": [0],
    "transport": ["shm", "tcp"],
    "filter_cost_us": [0, 100],
    "settings": ["defaults"],
}
QUICK = {
    "sources": [2, 4],
    "payload": [64, 1024],
    "rate": [10000, 0],
    "transport": ["shm", "tcp"],
    "filter_cost_us": [0],
}


def events_for(cfg: dict, seconds: float) -> int:
    """Enough events for about `seconds` of running."""
    if cfg["filter_cost_us"]:
        per_s = min(cfg["rate"] or 1e9, 1e6 / cfg["filter_cost_us"])
    elif cfg["rate"]:
        per_s = cfg["rate"]
    else:
        per_s = {64: 1_000_000, 1024: 300_000, 16384: 30_000}[cfg["payload"]] / (cfg["sources"] / 2)
    return max(1000, int(per_s * seconds))


def topology(cfg: dict, events: int) -> str:
    readers = []
    for r in range(cfg["sources"] // 2):
        readers.append(f'[[reader]]\nid = {r}\nsources = [{2 * r}, {2 * r + 1}]\n'
                       f'host = "127.0.0.1"\ntransport = "{cfg["transport"]}"\n')
    window = 65536 if cfg["rate"] == 0 else 16384
    tuned = "" if cfg.get("settings") == "defaults" else \
        f"max_inflight = {window}\ntimeout_ms = 5000\n"
    return f"""[run]
run = 1
seed = 11
events = {events}
payload = {cfg["payload"]}
rate = {cfg["rate"]}
{tuned}filter_cost_us = {cfg["filter_cost_us"]}

[builder]
host = "127.0.0.1"
quiet = true

""" + "\n".join(readers)


def one_run(bin_dir: Path, work: Path, name: str, cfg: dict, seconds: float) -> dict:
    events = events_for(cfg, seconds)
    topo = work / f"{name}.toml"
    topo.write_text(topology(cfg, events))
    out = work / name
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out),
                           "--bin", str(bin_dir), "--check", "never"],
                          capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    try:
        m = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        return {"ok": False, "error": proc.stdout[-2000:] + proc.stderr[-2000:]}
    c = m["counters"]["builder"]
    rss = {}
    for p in m["processes"]:
        key = p["role"]
        if p.get("max_rss_kib") is not None:
            rss[key] = max(rss.get(key, 0), p["max_rss_kib"])
    lat = m["latency"]
    return {
        "ok": proc.returncode == 0 and m["balanced"],
        "status": proc.returncode,
        "balanced": m["balanced"],
        "events": events,
        "complete": c["events_complete"],
        "offered_events_per_s": m["rates"]["offered_events_per_s"],
        "accepted_events_per_s": m["rates"]["accepted_events_per_s"],
        "fragments_per_s": m["rates"]["accepted_events_per_s"] * cfg["sources"],
        "p50_ns": lat["p50_ns"],
        "p99_ns": lat["p99_ns"],
        "max_ns": lat["max_ns"],
        "uncertainty_ns": lat.get("uncertainty_ns", 0),
        "cpu_us_per_fragment": m["cpu"]["us_per_fragment"],
        "peak_rss_kib": rss,
        "wall_s": wall,
    }


def baseline(build: Path, out: Path, quick: bool) -> dict:
    """Raw hop figures: frames/s of the same frames over TCP and shm."""
    tool = build / "tests" / "bench_shm"
    args = [str(tool), "--out", str(out / "baseline"), "--sizes", "64,1024,16384"]
    args += ["--mb", "300", "--repeat", "1"] if quick else ["--mb", "1000", "--repeat", "3"]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=1800)
    data = json.loads((out / "baseline" / "results.json").read_text())
    return {(r["transport"], r["payload_bytes"]): r["frames_per_s"]
            for r in data["results"] if r["mode"] == "transport"}


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k"


def fmt_ns(x: float) -> str:
    return f"{x / 1e6:.2f} ms" if x >= 1e6 else f"{x / 1e3:.0f} us"


def plots(rows: list[dict], out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {64: "#1b9e77", 1024: "#d95f02", 16384: "#7570b3"}
    markers = {("shm", 2): "o", ("tcp", 2): "s", ("shm", 4): "^", ("tcp", 4): "D"}
    names = []

    def scatter(ax, yk, label_done=set()):
        for r in rows:
            if r["cfg"]["filter_cost_us"] or r["cfg"].get("settings"):
                continue
            c = r["cfg"]
            x = r["offered"]["median"]
            y = r[yk]["median"]
            lab = f'{c["payload"]} B, {c["sources"]} src, {c["transport"]}'
            ax.errorbar([x], [y], yerr=[[y - r[yk]["min"]], [r[yk]["max"] - y]],
                        fmt=markers[(c["transport"], c["sources"])], color=colors[c["payload"]],
                        label=None if lab in label_done else lab, alpha=0.85, capsize=2)
            label_done.add(lab)

    fig, ax = plt.subplots(figsize=(7.5, 5))
    scatter(ax, "accepted", set())
    lim = [1e3, 5e6]
    ax.plot(lim, lim, "k--", lw=0.8, label="accepted = offered")
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel("offered events/s"), ax.set_ylabel("accepted events/s")
    ax.set_title("Accepted against offered rate (median, min-max of runs)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "rate.png", dpi=110)
    names.append("rate.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, key, title in ((axes[0], "p50", "p50 latency"), (axes[1], "p99", "p99 latency")):
        scatter(ax, key, set())
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("offered events/s")
        ax.set_title(title)
    axes[0].set_ylabel("latency (ns)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    names.append("latency.png")

    fig, ax = plt.subplots(figsize=(11, 4.5))
    labels = [f'{r["cfg"]["sources"]}s {r["cfg"]["payload"]}B\n{r["cfg"]["rate"] or "unp"} '
              f'{r["cfg"]["transport"]}{" f" + str(r["cfg"]["filter_cost_us"]) if r["cfg"]["filter_cost_us"] else ""}'
              f'{" def" if r["cfg"].get("settings") else ""}'
              for r in rows]
    med = [r["cpu"]["median"] for r in rows]
    err = [[r["cpu"]["median"] - r["cpu"]["min"] for r in rows],
           [r["cpu"]["max"] - r["cpu"]["median"] for r in rows]]
    ax.bar(range(len(rows)), med, yerr=err, color=[colors[r["cfg"]["payload"]] for r in rows],
           capsize=2)
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="1 us target (64 B)")
    ax.set_xticks(range(len(rows)), labels, fontsize=5.5, rotation=90)
    ax.set_ylabel("CPU us per fragment, all daemons")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("CPU per fragment, summed over every daemon")
    fig.tight_layout()
    fig.savefig(out / "cpu.png", dpi=110)
    names.append("cpu.png")

    fig, ax = plt.subplots(figsize=(11, 4.5))
    roles = ["builder", "reader", "source"]
    width = 0.28
    for k, role in enumerate(roles):
        ax.bar([i + (k - 1) * width for i in range(len(rows))],
               [r["rss"][role] / 1024 for r in rows], width, label=role)
    ax.set_xticks(range(len(rows)), labels, fontsize=5.5, rotation=90)
    ax.axhline(8.0, color="k", ls="--", lw=0.8, label="8 MiB target (defaults)")
    ax.set_ylabel("peak RSS (MiB, largest of the role, median of runs)")
    ax.set_title("Peak memory per daemon")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "rss.png", dpi=110)
    names.append("rss.png")
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a reduced matrix, under 5 minutes")
    ap.add_argument("--out", type=Path,
                    default=REPO / "results" / f"bench-{datetime.date.today()}")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--seconds", type=float, help="length of each run (default 2, quick 1)")
    ap.add_argument("--bin", type=Path, default=REPO / "bin")
    ap.add_argument("--build", type=Path, default=REPO / "build")
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    seconds = args.seconds or (1.0 if args.quick else 2.0)
    args.out.mkdir(parents=True, exist_ok=True)
    matrices = [QUICK, DEFAULTS] if args.quick else [FULL, FILTER_SLICE, DEFAULTS]
    configs = []
    for mtx in matrices:
        for values in itertools.product(*mtx.values()):
            configs.append(dict(zip(mtx.keys(), values)))

    started = time.monotonic()
    print(f"bench: baselines (raw hop over TCP and shm) ...", flush=True)
    base = baseline(args.build, args.out, args.quick)
    rows = []
    failures = 0
    with tempfile.TemporaryDirectory(prefix="es-bench-") as tmp:
        work = Path(tmp)
        for n, cfg in enumerate(configs):
            runs = []
            for rep in range(repeats):
                r = one_run(args.bin, work, f"{n}-{rep}", cfg, seconds)
                if not r["ok"]:
                    failures += 1
                    print(f"bench: run {cfg} repetition {rep + 1} FAILED: "
                          f"{r.get('error', r.get('status'))}", flush=True)
                    if "accepted_events_per_s" not in r:
                        continue
                runs.append(r)
            if not runs:
                continue
            row = {
                "cfg": cfg,
                "runs": runs,
                "offered": summary([r["offered_events_per_s"] for r in runs]),
                "accepted": summary([r["accepted_events_per_s"] for r in runs]),
                "p50": summary([r["p50_ns"] for r in runs]),
                "p99": summary([r["p99_ns"] for r in runs]),
                "cpu": summary([r["cpu_us_per_fragment"] for r in runs]),
                "rss": {role: statistics.median(r["peak_rss_kib"].get(role, 0) for r in runs)
                        for role in ("builder", "reader", "source")},
            }
            b = base.get((cfg["transport"], cfg["payload"]))
            row["baseline_frames_per_s"] = b
            row["fraction_of_baseline"] = (row["accepted"]["median"] * cfg["sources"] / b
                                           if b else None)
            rows.append(row)
            el = time.monotonic() - started
            print(f"bench: [{n + 1}/{len(configs)} {el:5.0f} s] {cfg['sources']} sources "
                  f"{cfg['payload']:>5} B rate {cfg['rate'] or 'unpaced':>7} {cfg['transport']} "
                  f"filter {cfg['filter_cost_us']} us{' (defaults)' if cfg.get('settings') else ''}: accepted {fmt_rate(row['accepted']['median'])}/s "
                  f"of {fmt_rate(row['offered']['median'])}/s, p99 {fmt_ns(row['p99']['median'])}, "
                  f"{row['cpu']['median']:.3f} us CPU/fragment", flush=True)

    doc = {
        "format": "bench/1",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
        "repeats": repeats, "seconds_per_run": seconds, "quick": args.quick,
        "baseline_frames_per_s": {f"{t} {p}": v for (t, p), v in base.items()},
        "rows": rows,
    }
    (args.out / "bench.json").write_text(json.dumps(doc, indent=1))
    lines = [f"# Benchmark {doc['date']} ({'quick' if args.quick else 'full'} matrix)", "",
             f"{doc['cpus']} CPUs, every daemon on this host; {repeats} run(s) per row, "
             "median with min-max. *Baseline*: frames/s of the raw hop (same frames over "
             "loopback TCP or through the shm ring, nothing else) measured in this session; "
             "*of base.* is accepted fragments/s over it. *settings*: `bench` runs "
             "take a window of 65,536 events unpaced (16,384 paced) and a 5 s timeout; "
             "`defaults` runs leave every daemon at its defaults.", "",
             "| sources | payload | rate/source | transport | filter us | settings | offered ev/s | accepted ev/s (min-max) | of base. | p50 | p99 (min-max) | CPU us/frag | RSS builder/reader/source MiB |",
             "|---:|---:|---:|---|---:|---|---:|---|---:|---:|---|---:|---|"]
    for r in rows:
        c = r["cfg"]
        frac = f"{100 * r['fraction_of_baseline']:.1f}%" if r["fraction_of_baseline"] else "n/a"
        lines.append(
            f"| {c['sources']} | {c['payload']} | {c['rate'] or 'unpaced'} | {c['transport']} | "
            f"{c['filter_cost_us']} | {c.get('settings', 'bench')} | {fmt_rate(r['offered']['median'])} | "
            f"{fmt_rate(r['accepted']['median'])} ({fmt_rate(r['accepted']['min'])}-{fmt_rate(r['accepted']['max'])}) | "
            f"{frac} | {fmt_ns(r['p50']['median'])} | {fmt_ns(r['p99']['median'])} "
            f"({fmt_ns(r['p99']['min'])}-{fmt_ns(r['p99']['max'])}) | {r['cpu']['median']:.3f} | "
            f"{r['rss']['builder'] / 1024:.1f}/{r['rss']['reader'] / 1024:.1f}/{r['rss']['source'] / 1024:.1f} |")
    lines += ["", "Baselines (frames/s of the raw hop):", ""]
    lines += [f"- {t} {p} B: {fmt_rate(v)}" for (t, p), v in sorted(base.items())]
    pngs = plots(rows, args.out)
    lines += [""] + [f"![{p}]({p})" for p in pngs]
    (args.out / "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nbench: wrote {args.out}/bench.md, bench.json and {', '.join(pngs)} "
          f"in {time.monotonic() - started:.0f} s; {failures} failed run(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
