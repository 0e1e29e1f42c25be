#!/usr/bin/python3
"""The run report: one self-contained HTML page (report.html, images inline,
no network fetches) and its PNG figures, from a run directory written by
builderd / deploy/daqrun.

Usage: analysis/report.py RUN_DIR [--out DIR]

Figures: latency CDF with its uncertainty band (none where the clock
uncertainty is 0), accepted events per second over the run in whole bins,
the outcome of every event ID, per-peer clock offsets with their bounds;
and the table of conservation equations with each side. A run of several
builders (RUN_DIR/builders/B/) adds a table of the builders (assigned,
recorded, expired, rate) and each builder's accepted rate over the run;
the rate figure counts every builder's records. A run that records its
events' data (builderd --record, daqrun's [output]) adds the recording:
each builder's files, events, bytes and MB/s, and the files of
files.json.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import builders as several  # noqa: E402


def load(run_dir: Path) -> tuple[dict, list[int]]:
    # A byte that is not UTF-8 (an older builderd wrote peers' bytes raw)
    # becomes U+FFFD rather than ending the report.
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8", errors="replace"))
    times = [t for b in several.per_builder(run_dir, metrics) for t in b["times"]]
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


def save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=100)
    plt.close(fig)


def latency_caption(m: dict) -> str:
    """What the latency figure draws: the band only where there is one."""
    u = m["latency"].get("uncertainty_ns") or 0
    if not m["latency"].get("buckets"):
        return "Latency CDF: no accepted events, so no latencies"
    if u > 0:
        return (f"Latency CDF (histogram bucket upper edges) with its band: a latency counted "
                f"in bucket [lo, hi] lies in [lo − U, hi + U], U = {u / 1e3:.1f} us the run's "
                f"clock uncertainty (cut at the axis' left edge where it reaches 0)")
    return ("Latency CDF (histogram bucket upper edges); no band: the clock uncertainty is 0 "
            "(every timestamp from one clock)")


def build_latency(m: dict):
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
        # The log axis starts below the first bucket edge; a band reaching
        # 0 or below (a bucket's lower edge minus U) is cut there.
        floor = min(xs) / 2
        if u > 0:
            # A sample counted in bucket [lo, hi] lies in [lo - U, hi + U]:
            # between the fractions y0 and y1 before and after the bucket
            # the true CDF crosses somewhere in that interval.
            by, bl, br, acc = [], [], [], 0
            for lower, upper, count in buckets:
                y0 = acc / total
                acc += count
                by += [y0, acc / total]
                bl += [max(lower / 1e3 - u, floor)] * 2
                br += [upper / 1e3 + u] * 2
            ax.fill_betweenx(by, bl, br, alpha=0.25, lw=0,
                             label=f"± {u:.1f} us clock uncertainty")
        # The percentiles go in the legend, never as free text beside their
        # line, which ran off the axes where p99 sat at the right edge.
        for key, color in (("p50_ns", "#555555"), ("p99_ns", "#d62728")):
            v = lat.get(key) or 0
            if v > 0:
                ax.axvline(v / 1e3, color=color, ls=":", lw=1.2,
                           label=f"{key[:3]} {v / 1e3:.1f} us ± {u:.1f}")
        ax.set_xscale("log")
        ax.set_xlim(left=floor)
        ax.set_ylim(0, 1.05)
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no accepted events", transform=ax.transAxes, ha="center",
                va="center", color="#b22")
    ax.set_xlabel("latency (us)")
    ax.set_ylabel("fraction of accepted events")
    ax.set_title("Latency: earliest source timestamp to record write")
    fig.tight_layout()
    return fig


def fig_latency(m: dict, path: Path) -> None:
    save(build_latency(m), path)


MIN_RATE_BIN_NS = 100_000_000


def rate_bins(times: list[int]) -> tuple[list[float], list[float], float]:
    """Accepted events per second in equal bins from the first record to
    the last: (edges in s into the run, rates, bin width in s). The span is
    cut into whole bins (at most 100, at least 0.1 s each), so no bin is
    partial: a last bin holding only the run's final moments used to show a
    rate collapse that never happened. Empty bins count as 0 events/s."""
    if not times:
        return [], [], 0.0
    t0 = min(times)
    span = max(times) - t0
    n = max(1, min(100, span // MIN_RATE_BIN_NS))
    width = span / n if span > 0 else MIN_RATE_BIN_NS
    counts = [0] * n
    for t in times:
        counts[min(int((t - t0) // width), n - 1)] += 1
    edges = [k * width / 1e9 for k in range(n + 1)]
    return edges, [c / (width / 1e9) for c in counts], width / 1e9


def rate_caption(times: list[int]) -> str:
    edges, _, width = rate_bins(times)
    if not edges:
        return "Accepted events per second: no accepted events"
    return (f"Accepted events per second in {len(edges) - 1} equal bins of {width * 1e3:.0f} ms "
            f"from the first accepted event's record to the last (no partial bin at the end)")


def build_rate(times: list[int]):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.2))
    edges, rates, _ = rate_bins(times)
    if rates:
        ax.stairs(rates, edges, baseline=None, lw=1.5)
        ax.set_ylim(0, max(rates) * 1.1)
        ax.set_xlim(edges[0], edges[-1])
    else:
        ax.text(0.5, 0.5, "no accepted events", transform=ax.transAxes, ha="center",
                va="center", color="#b22")
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel("accepted events/s")
    ax.set_title("Accepted rate over time")
    fig.tight_layout()
    return fig


def fig_rate(times: list[int], path: Path) -> None:
    save(build_rate(times), path)


def build_outcomes(m: dict):
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
    shown = [p for p in parts if p[1]]
    rows = max(1, (len(shown) + 2) // 3)
    # The legend gets a row of the figure to itself, below the axis label
    # (hung under the axes, it covered the label).
    fig, (ax, lax) = plt.subplots(2, 1, figsize=(7, 1.9 + 0.25 * rows),
                                  gridspec_kw={"height_ratios": [1.6, 0.25 + 0.25 * rows]})
    left = 0
    for label, v, color in shown:
        ax.barh([0], [v], left=[left], color=color, label=f"{label} {v} ({100 * v / total:.2f}%)")
        left += v
    ax.set_yticks([])
    ax.set_xlim(0, total)
    ax.set_xlabel("event IDs")
    ax.set_title(f"Outcome of every event ID: {100 * c['events_complete'] / total:.2f}% complete")
    lax.axis("off")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        lax.legend(handles, labels, fontsize=7, loc="center", ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def build_builder_rates(builders: list[dict]):
    """Each builder's accepted events per second over the run, in the bins
    of the whole run's records, so that the curves compare."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.2))
    everything = [t for b in builders for t in b["times"]]
    edges, _, width = rate_bins(everything)
    top = 0.0
    if edges:
        t0 = min(everything)
        for b in builders:
            counts = [0] * (len(edges) - 1)
            for t in b["times"]:
                counts[min(int((t - t0) / 1e9 // width), len(counts) - 1)] += 1
            rates = [c / width for c in counts]
            top = max([top] + rates)
            ax.stairs(rates, edges, baseline=None, lw=1.5, label=f"builder {b['id']}")
        ax.set_ylim(0, top * 1.25 or 1)
        ax.set_xlim(edges[0], edges[-1])
        ax.legend(loc="lower right", fontsize=8, ncol=min(4, len(builders)))
    else:
        ax.text(0.5, 0.5, "no accepted events", transform=ax.transAxes, ha="center",
                va="center", color="#b22")
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel("accepted events/s")
    ax.set_title("Accepted rate of each builder")
    fig.tight_layout()
    return fig


def number(x) -> str:
    return "n/a" if not isinstance(x, (int, float)) else f"{x:,.0f}"


def builders_table(builders: list[dict]) -> str:
    """The builders of a run of several: what the hub assigned each, what
    it recorded and expired (a given-up builder's below its fence), its
    rate; "" for a run of one builder."""
    if not builders:
        return ""
    rows = "\n".join(
        f"<tr><td>{b['id']}</td><td>{html.escape(str(b['host'] or 'n/a'))}</td>"
        f"<td>{number(b['assigned'])}</td><td>{number(b['complete'])}</td>"
        f"<td>{number(b['recorded'])}</td><td>{number(b['expired'])}</td>"
        f"<td>{number(b['rate'])}</td><td>{html.escape(b['rate_from'] or '')}</td></tr>"
        for b in builders)
    return (f"<h2>Builders: {len(builders)}</h2>\n<table id=\"builders\"><tr><th>builder</th>"
            "<th>host</th><th>assigned</th><th>complete</th><th>recorded</th><th>expired</th>"
            "<th>events/s</th><th>rate from</th></tr>\n" + rows + "\n</table>"
            + "".join(f"\n<p>Builder {b['id']} was given up by the hub: its records count "
                      f"below event {b['fenced_below']} only; the books count the rest of its "
                      "events lost (docs/BUILDERS.md, \"A given-up builder is fenced\").</p>"
                      for b in builders if b.get("fenced_below") is not None))


def mb_per_s(nbytes, ns) -> str:
    return f"{nbytes / (ns / 1e9) / 1e6:,.1f}" if nbytes is not None and ns else "n/a"


def recording_rows(m: dict) -> list[tuple]:
    """(builder, its END counters, its build span in ns) of each builder
    that recorded: the one of the run, or each of several."""
    span = (m.get("rates") or {}).get("build_duration_s")
    run_span = span * 1e9 if isinstance(span, (int, float)) else None
    section = m.get("builders")
    if isinstance(section, dict) and section:
        out = []
        for b, entry in sorted(section.items(), key=lambda kv: int(kv[0])):
            c = ((entry or {}).get("counters") or {}).get("builder") or {}
            out.append((b, c, c.get("build_span_ns") or run_span))
        return [r for r in out if "data_files" in r[1]]
    c = (m.get("counters") or {}).get("builder") or {}
    return [("0", c, run_span)] if "data_files" in c else []


def recording_section(run_dir: Path, m: dict) -> str:
    """The recording (docs/RECORDING.md): per builder its files, events,
    bytes, MB/s over its build span and while writing, the events not
    written; then files.json's files. "" for a run that recorded nothing."""
    rows = recording_rows(m)
    if not rows or not any(c.get("data_files") or c.get("data_events_written")
                           or c.get("data_events_unrecorded") for _, c, _ in rows):
        return ""
    body = "\n".join(
        f"<tr><td>{html.escape(str(b))}</td><td>{number(c.get('data_files'))}</td>"
        f"<td>{number(c.get('data_events_written'))}</td>"
        f"<td>{number(c.get('data_bytes_written'))}</td>"
        f"<td>{mb_per_s(c.get('data_bytes_written'), span)}</td>"
        f"<td>{mb_per_s(c.get('data_bytes_written'), c.get('data_write_ns'))}</td>"
        f"<td>{number(c.get('data_events_unwritten'))}</td>"
        f"<td>{number(c.get('data_events_unrecorded'))}</td></tr>" for b, c, span in rows)
    total = sum(c.get("data_bytes_written") or 0 for _, c, _ in rows)
    span = (m.get("rates") or {}).get("build_duration_s")
    files = ""
    try:
        doc = json.loads((run_dir / "files.json").read_text(encoding="utf-8"))
        listed = doc.get("files") or []
        files = (f"<p>files.json: {len(listed)} files, {number(doc['totals']['events'])} events, "
                 f"{number(doc['totals']['bytes'])} bytes"
                 + (f", {len(doc['unclosed'])} unclosed" if doc.get("unclosed") else "")
                 + "</p>\n<table id=\"files\"><tr><th>file</th><th>builder</th><th>bytes</th>"
                 "<th>events</th><th>first</th><th>last</th><th>CRC</th></tr>\n"
                 + "\n".join(f"<tr><td>{html.escape(str(f.get('name')))}</td>"
                             f"<td>{f.get('builder')}</td><td>{number(f.get('bytes'))}</td>"
                             f"<td>{number(f.get('events'))}</td><td>{f.get('first_event')}</td>"
                             f"<td>{f.get('last_event')}</td><td>{f.get('file_crc')}</td></tr>"
                             for f in listed[:100])
                 + "\n</table>" + (f"<p>... and {len(listed) - 100} more files.</p>"
                                   if len(listed) > 100 else ""))
    except (OSError, ValueError, KeyError, TypeError):
        files = "<p>No files.json in the run directory.</p>"
    return (f"<h2>Recording: {number(total)} bytes, "
            f"{mb_per_s(total, span * 1e9 if isinstance(span, (int, float)) else None)} MB/s "
            "over the build span</h2>\n<table id=\"recording\"><tr><th>builder</th><th>files</th>"
            "<th>events written</th><th>bytes</th><th>MB/s over its build span</th>"
            "<th>MB/s while writing</th><th>unwritten</th><th>unrecorded</th></tr>\n"
            + body + "\n</table>\n" + files)


def fig_outcomes(m: dict, path: Path) -> None:
    save(build_outcomes(m), path)


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


def page(m: dict, figures: list[tuple[Path, str]], builders: list[dict] = (),
         recording: str = "") -> str:
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
/* One cell per field with a gap between: a long field wraps inside its
   cell and never runs into the next. */
.kv {{ display: grid; grid-template-columns: max-content repeat(4, minmax(0, auto));
       gap: 0.3em 1.5em; margin: 1em 0; }}
.kv > b {{ color: #555; font-weight: 600; white-space: nowrap; }}
</style></head><body>
<h1>Run {m['run']['run']} <span class="status-{status}">{status.upper()}</span></h1>
<div class="kv" id="header">
<b>run</b><span>sources {m['run']['sources']}</span><span>readers {m['run']['readers']}</span>
<span>window {m['run']['window']}, timeout {m['run']['timeout_ms']} ms</span>
<span>admission {'on' if m['run']['admission'] else 'off'}</span>
<b>event IDs</b><span>generated {r['events_generated']}</span><span>complete {c['events_complete']}</span>
<span>accepted {c['events_accepted']}</span><span>expired {c['events_expired']}</span>
<b>rates</b><span>offered {r['offered_events_per_s']:.0f} events/s</span>
<span>accepted {r['accepted_events_per_s']:.0f} events/s</span>
<span>CPU {m['cpu']['us_per_fragment']:.3f} us per fragment</span><span></span>
<b>latency</b><span>p50 {lat['p50_ns'] / 1e3:.1f} us ± {u / 1e3:.1f}</span>
<span>p99 {lat['p99_ns'] / 1e3:.1f} us ± {u / 1e3:.1f}</span><span>max {lat['max_ns'] / 1e3:.1f} us</span><span></span>
</div>
<h2>Conservation equations: {'all balanced' if m['balanced'] else 'NOT all balanced'}</h2>
<table id="equations"><tr><th>equation</th><th>lhs</th><th>rhs</th><th>ok</th><th>note</th></tr>
{rows}
</table>
<h2>Errors</h2><ul id="errors">{errors}</ul>
{builders_table(list(builders))}
{recording}
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
    unfinished = several.in_progress(args.run_dir)
    if unfinished:
        print(f"report: no report of an unfinished run: {unfinished}", file=sys.stderr)
        return 1
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
    for name, alt, fn in (("latency.png", latency_caption(m), lambda p: fig_latency(m, p)),
                          ("rate.png", rate_caption(times), lambda p: fig_rate(times, p)),
                          ("outcomes.png", "Outcome of every event ID", lambda p: fig_outcomes(m, p))):
        fn(out / name)
        figures.append((out / name, alt))
    builders = several.per_builder(args.run_dir, m)
    if builders:
        save(build_builder_rates(builders), out / "builders.png")
        figures.append((out / "builders.png", "Accepted events per second of each builder, "
                                               "in the bins of the rate figure"))
    if fig_clocks(m, out / "clocks.png"):
        figures.append((out / "clocks.png", "Per-peer clock offsets with bounds"))
    (out / "report.html").write_text(page(m, figures, builders,
                                          recording_section(args.run_dir, m)), encoding="utf-8")
    print(f"report: {out / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
