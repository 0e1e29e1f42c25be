#!/usr/bin/python3
"""The run report: one self-contained HTML page (report.html, images inline,
no network fetches) and its PNG figures, from a run directory written by
builderd / deploy/daqrun.

Usage: analysis/report.py RUN_DIR [--out DIR]

Figures: latency CDF with its uncertainty band, accepted events per second
over the run, the outcome of every event ID, per-peer clock offsets with
their bounds; and the table of conservation equations with each side.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import sys
from pathlib import Path


def load(run_dir: Path) -> tuple[dict, list[int]]:
    # A byte that is not UTF-8 (an older builderd wrote peers' bytes raw)
    # becomes U+FFFD rather than ending the report.
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8", errors="replace"))
    times = []
    events = run_dir / "events.jsonl"
    if events.exists():
        with events.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    t = json.loads(line).get("t_ns")
                except ValueError:
                    continue
                if t is not None:
                    times.append(t)
    return metrics, times


def fig_latency(m: dict, path: Path) -> None:
    import matplotlib.pyplot as plt
    lat = m["latency"]
    buckets = lat.get("buckets", [])
    fig, ax = plt.subplots(figsize=(7, 4))
    if buckets:
        total = sum(c for _, _, c in buckets)
        xs, ys, acc = [], [], 0
        for lower, upper, count in buckets:
            acc += count
            xs.append(upper / 1e3)
            ys.append(acc / total)
        ax.step(xs, ys, where="post", label="latency CDF (bucket upper edges)")
        u = (lat.get("uncertainty_ns") or 0) / 1e3
        if u > 0:
            ax.fill_betweenx(ys, [max(x - u, 1e-3) for x in xs], [x + u for x in xs],
                             step="post", alpha=0.25, label=f"± {u:.1f} us clock uncertainty")
        for q, key in ((0.5, "p50_ns"), (0.99, "p99_ns")):
            ax.axvline(lat[key] / 1e3, color="grey", ls=":", lw=1)
            ax.text(lat[key] / 1e3, q, f" p{int(q * 100)} {lat[key] / 1e3:.0f} us", fontsize=8)
        ax.set_xscale("log")
    ax.set_xlabel("latency (us)")
    ax.set_ylabel("fraction of accepted events")
    ax.set_title("Latency: earliest source timestamp to record write")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_rate(times: list[int], path: Path) -> None:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.2))
    if times:
        t0 = min(times)
        span = max(times) - t0
        width = max(span / 100, 1e8)
        bins = {}
        for t in times:
            k = int((t - t0) // width)
            bins[k] = bins.get(k, 0) + 1
        ks = sorted(bins)
        ax.plot([k * width / 1e9 for k in ks], [bins[k] / (width / 1e9) for k in ks])
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel("accepted events/s")
    ax.set_title("Accepted rate over time")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_outcomes(m: dict, path: Path) -> None:
    import matplotlib.pyplot as plt
    c = m["counters"]["builder"]
    parts = [("accepted", c["events_accepted"], "#2ca02c"),
             ("filtered", c["events_filtered"], "#98df8a"),
             ("expired: timeout", c["events_expired_timeout"], "#ff7f0e"),
             ("expired: skipped", c.get("events_expired_skipped", 0), "#ffbb78"),
             ("expired: window", c["events_expired_window"], "#d62728"),
             ("expired: end of run", c["events_expired_end_of_run"], "#9467bd"),
             ("never observed", c["events_unobserved"], "#7f7f7f")]
    total = sum(v for _, v, _ in parts) or 1
    fig, ax = plt.subplots(figsize=(7, 2.2))
    left = 0
    for label, v, color in parts:
        if v:
            ax.barh([0], [v], left=[left], color=color, label=f"{label} {v} ({100 * v / total:.2f}%)")
            left += v
    ax.set_yticks([])
    ax.set_xlabel("event IDs")
    ax.set_title(f"Outcome of every event ID: {100 * c['events_complete'] / total:.2f}% complete")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_clocks(m: dict, path: Path) -> bool:
    import matplotlib.pyplot as plt
    peers = [p for p in m.get("clocks", {}).get("peers", [])
             if p.get("inband", {}).get("offset_ns") is not None]
    if not peers:
        return False
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.35 * len(peers)))
    for i, p in enumerate(peers):
        ib = p["inband"]
        ax.errorbar([ib["offset_ns"] / 1e3], [i], xerr=[[ib["bound_ns"] / 1e3], [ib["bound_ns"] / 1e3]],
                    fmt="o", color="#1f77b4", capsize=3,
                    label="in band ± bound" if i == 0 else None)
        cb = p.get("chrony_pair_bound_ns")
        if cb is not None:
            ax.errorbar([0], [i + 0.15], xerr=[[cb / 1e3], [cb / 1e3]], fmt="|", color="#ff7f0e",
                        capsize=3, label="chrony: agreement bound" if i == 0 else None)
    ax.set_yticks(range(len(peers)), [p["peer"] for p in peers])
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("clock offset, peer minus builder (us)")
    ax.set_title("Per-peer clock offsets with their bounds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


def page(m: dict, figures: list[tuple[Path, str]]) -> str:
    lat = m["latency"]
    u = lat.get("uncertainty_ns") or 0
    status = html.escape(str(m.get("status", "?")))
    rows = "\n".join(
        f'<tr class="{"ok" if e["ok"] else "bad"}"><td>{html.escape(e["name"])}</td>'
        f'<td>{e["lhs"]}</td><td>{e["rhs"]}</td><td>{"yes" if e["ok"] else "NO"}</td>'
        f'<td>{html.escape(e.get("note", ""))}</td></tr>' for e in m["equations"])
    errors = "".join(f"<li>{html.escape(e)}</li>" for e in m.get("errors", [])) or "<li>none</li>"
    procs = "\n".join(
        f"<tr><td>{html.escape(str(p['role']))} {html.escape(str(p['id']))}</td>"
        f"<td>{html.escape(str(p.get('host')))}</td>"
        f"<td>{p.get('pid')}</td><td>{p.get('cpu_user_s')}</td><td>{p.get('cpu_sys_s')}</td>"
        f"<td>{p.get('max_rss_kib')}</td></tr>" for p in m.get("processes", []))
    r = m["rates"]
    c = m["counters"]["builder"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Run {m['run']['run']}: {status}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 60em; color: #222; }}
.status-ok {{ color: #2a7d2a; }} .status-failed {{ color: #b22; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; }}
tr.bad td {{ background: #fdd; }} tr.ok td:nth-child(4) {{ color: #2a7d2a; }}
figure {{ margin: 1em 0; }} img {{ max-width: 100%; }}
.kv span {{ display: inline-block; min-width: 14em; }}
</style></head><body>
<h1>Run {m['run']['run']} <span class="status-{status}">{status.upper()}</span></h1>
<p class="kv"><span>sources {m['run']['sources']}, readers {m['run']['readers']}</span>
<span>window {m['run']['window']}, timeout {m['run']['timeout_ms']} ms</span>
<span>admission {'on' if m['run']['admission'] else 'off'}</span></p>
<p class="kv"><span>event IDs {r['events_generated']}</span><span>complete {c['events_complete']}</span>
<span>accepted {c['events_accepted']}</span><span>expired {c['events_expired']}</span></p>
<p class="kv"><span>offered {r['offered_events_per_s']:.0f} events/s</span>
<span>accepted {r['accepted_events_per_s']:.0f} events/s</span>
<span>CPU {m['cpu']['us_per_fragment']:.3f} us per fragment</span></p>
<p class="kv"><span>latency p50 {lat['p50_ns'] / 1e3:.1f} us ± {u / 1e3:.1f}</span>
<span>p99 {lat['p99_ns'] / 1e3:.1f} us ± {u / 1e3:.1f}</span><span>max {lat['max_ns'] / 1e3:.1f} us</span></p>
<h2>Conservation equations: {'all balanced' if m['balanced'] else 'NOT all balanced'}</h2>
<table id="equations"><tr><th>equation</th><th>lhs</th><th>rhs</th><th>ok</th><th>note</th></tr>
{rows}
</table>
<h2>Errors</h2><ul id="errors">{errors}</ul>
<h2>Figures</h2>
{''.join(img(p, alt) for p, alt in figures)}
<h2>Processes</h2>
<table><tr><th>daemon</th><th>host</th><th>pid</th><th>user s</th><th>sys s</th><th>peak RSS KiB</th></tr>
{procs}
</table>
<p><small>Latency: {html.escape(lat.get('definition', ''))}. Generated by analysis/report.py from metrics.json and events.jsonl.</small></p>
</body></html>
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, help="folder for report.html and the PNGs (default RUN_DIR)")
    args = ap.parse_args()
    if not (args.run_dir / "metrics.json").exists():
        print(f"report: {args.run_dir}/metrics.json not found: is this a run directory?",
              file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    out = args.out or args.run_dir
    out.mkdir(parents=True, exist_ok=True)
    m, times = load(args.run_dir)
    figures = []
    for name, alt, fn in (("latency.png", "Latency CDF with uncertainty band", lambda p: fig_latency(m, p)),
                          ("rate.png", "Accepted events per second over the run", lambda p: fig_rate(times, p)),
                          ("outcomes.png", "Outcome of every event ID", lambda p: fig_outcomes(m, p))):
        fn(out / name)
        figures.append((out / name, alt))
    if fig_clocks(m, out / "clocks.png"):
        figures.append((out / "clocks.png", "Per-peer clock offsets with bounds"))
    (out / "report.html").write_text(page(m, figures), encoding="utf-8")
    print(f"report: {out / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
