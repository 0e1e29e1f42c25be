#!/usr/bin/python3
"""Side-by-side comparison of runs: single host against multi-host.

Usage: analysis/compare.py RUN [RUN ...] [--out DIR] [--label NAME ...]
                           [--group] [--title TEXT] [--no-plot]

Each RUN is a run directory (metrics.json, and params.json when
deploy/daqrun wrote one) or a metrics.json file. Prints two tables:

- per run: topology and placement, backend and link shaping, transports,
  offered and accepted rates, with several builders each builder's events
  and rate (analysis/builders.py: builders/B/ and metrics.json "builders"),
  latency p50/p90/p99/max as value +/- clock uncertainty, CPU per fragment,
  peak RSS per daemon;
- per host of each run: its daemons, chrony's bound at start and end (from
  each daemon's own chronyd), and the in-band clock offsets of its daemons
  against the builder with their bounds.

A field that a run's metrics.json does not carry (an older builderd, a
failed run) is shown as "n/a". With --group, runs with the same label
(repeats of one configuration: same topology, backend and shaping) share a
column showing the median [min – max] over them, and the plot pools their
histograms. With --out DIR it writes DIR/compare.md (the
tables), DIR/compare.json (the numbers) and DIR/latency.png: each run's
latency distribution, the CDF and its tail, read from the histogram buckets
of metrics.json, with a band that holds the true distribution (bucket width
plus the clock uncertainty U: a sample counted in bucket [lo, hi] has its
true latency in [lo - U, hi + U]), p50 and p99 marked with their +/- U.

Uses /usr/bin/python3 with Debian's numpy and matplotlib (only for the
plot; the tables need the standard library alone).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import builders as several  # noqa: E402
import exact_latency  # noqa: E402

NA = "n/a"


# --------------------------------------------------------------------------
# Reading runs.

def load_run(arg: str, label: str | None = None) -> dict:
    p = Path(arg)
    metrics_path = p / "metrics.json" if p.is_dir() else p
    run_dir = metrics_path.parent
    try:
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"compare: {metrics_path} does not exist") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"compare: {metrics_path} is not valid JSON: {e}") from None
    try:
        params = json.loads((run_dir / "params.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        params = {}
    return {"path": str(run_dir), "metrics": metrics, "params": params,
            "exact": exact_latency.load_or_make(run_dir),
            "builders": several.per_builder(run_dir, metrics),
            "label": label or default_label(run_dir, params)}


def get(d: Any, *keys: Any, default: Any = None) -> Any:
    for k in keys:
        if isinstance(d, dict) and k in d:
            d = d[k]
        elif isinstance(d, list) and isinstance(k, int) and -len(d) <= k < len(d):
            d = d[k]
        else:
            return default
    return d


def shaping_of(params: dict) -> str | None:
    """The link shaping of a netns run, "none", or None (not a netns run)."""
    if params.get("backend") != "netns":
        return None
    rates = {h.get("shaping") for h in get(params, "backend_info", "hosts",
                                           default={}).values()}
    rates.discard(None)
    if not rates:
        return "none"
    return ",".join(sorted(rates))


def scheduling_of(params: dict) -> str | None:
    """How the daemons were placed on CPUs and prioritised (the topology's
    `cpus` and `rtprio`), e.g. "rtprio 20, cpus pinned"; None when neither
    was set. Runs that differ in it are different cases."""
    t = params.get("topology") or {}
    builder = t.get("builder") or {}
    tables = (list(builder) if isinstance(builder, list) else [builder]) + \
        [t.get("hub") or {}, t.get("sources") or {}]
    tables += list(t.get("reader") or []) + list(t.get("source") or [])
    prios = sorted({x.get("rtprio") for x in tables if isinstance(x, dict)} - {None})
    pinned = any(isinstance(x, dict) and x.get("cpus") for x in tables)
    parts = []
    if prios:
        parts.append("rtprio " + "/".join(str(v) for v in prios))
    if pinned:
        parts.append("cpus pinned")
    return ", ".join(parts) or None


def default_label(run_dir: Path, params: dict) -> str:
    topo = params.get("topology_file")
    if not topo:
        return run_dir.name
    how = [params.get("backend", "?")]
    shaping = shaping_of(params)
    if shaping is not None:
        how.append("no shaping" if shaping == "none" else f"tbf {shaping}")
    scheduling = scheduling_of(params)
    if scheduling is not None:
        how.append(scheduling)
    return f"{Path(topo).stem} ({', '.join(how)})"


# --------------------------------------------------------------------------
# Formatting.

def fmt_ns(ns: Any) -> str:
    if not isinstance(ns, (int, float)):
        return NA
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def fmt_pm(value: Any, unc: Any) -> str:
    if not isinstance(value, (int, float)):
        return NA
    return f"{fmt_ns(value)} ± {fmt_ns(unc) if isinstance(unc, (int, float)) else NA}"


def fmt_signed(ns: Any) -> str:
    if not isinstance(ns, (int, float)):
        return NA
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


def fmt_num(x: Any, unit: str = "", digits: int = 0) -> str:
    if not isinstance(x, (int, float)):
        return NA
    return f"{x:,.{digits}f}{unit}"


def fmt_mib(kib: Any) -> str:
    return NA if not isinstance(kib, (int, float)) else f"{kib / 1024:.1f} MiB"


# --------------------------------------------------------------------------
# The numbers of one run.

def latency_rows(m: dict, exact: dict | None = None) -> dict[str, tuple[Any, Any]]:
    """(value, uncertainty) per percentile: exact from events.jsonl where the
    run has one (analysis/exact_latency.py), else metrics.json's bucket edges."""
    if exact is not None:
        return {name: (exact.get(f"{name}_ns"), exact.get("uncertainty_ns"))
                for name in ("p50", "p90", "p99", "max")}
    lat = m.get("latency") or {}
    wu = lat.get("with_uncertainty") or {}
    out = {}
    for name in ("p50", "p90", "p99", "max"):
        entry = wu.get(name)
        if isinstance(entry, dict):
            out[name] = (entry.get("value_ns"), entry.get("uncertainty_ns"))
        else:
            out[name] = (lat.get(f"{name}_ns"), lat.get("uncertainty_ns"))
    return out


def daemon_hosts(run: dict) -> dict[str, str]:
    """"builder.0" / "reader.1" / "source.3" -> host name."""
    out = {}
    for p in get(run, "params", "processes", default=[]) or []:
        role, _, ident = p.get("name", "").partition("-")
        out[f"{role}.{ident}"] = p.get("host")
    for p in get(run, "metrics", "processes", default=[]) or []:
        out.setdefault(f"{p.get('role')}.{p.get('id')}", p.get("host"))
    return out


def placement(run: dict) -> str:
    params = run["params"]
    hosts = params.get("hosts")
    if not hosts:
        by_host: dict[str, list[str]] = {}
        for key, host in daemon_hosts(run).items():
            if host:
                by_host.setdefault(host, []).append(key.replace(".", "-"))
        hosts = {h: {"daemons": d} for h, d in by_host.items()}
        if not hosts:
            return NA
    parts = []
    for name, h in hosts.items():
        daemons = h.get("daemons") or []
        if not daemons:
            continue
        roles: dict[str, int] = {}
        for d in daemons:
            roles[d.split("-")[0]] = roles.get(d.split("-")[0], 0) + 1
        desc = ", ".join(r if n == 1 and r in ("builder", "hub") else
                         f"{n} {r}{'s' if n > 1 else ''}" for r, n in roles.items())
        parts.append(f"{name} ({desc})")
    return f"{len(parts)} host{'s' if len(parts) != 1 else ''}: " + "; ".join(parts)


def transports(m: dict) -> str:
    links = m.get("reader_links")
    if not isinstance(links, list) or not links:
        return NA
    return ", ".join(f"r{link.get('id')} {link.get('transport', '?')}" for link in links)


def run_summary(run: dict) -> dict:
    m, params = run["metrics"], run["params"]
    r = params.get("run") or {}
    equations = m.get("equations") or []
    rss = {}
    for p in m.get("processes") or []:
        rss[f"{p.get('role')} {p.get('id')}"] = p.get("max_rss_kib")
    lat = m.get("latency") or {}
    return {
        "label": run["label"],
        "path": run["path"],
        "topology": Path(params["topology_file"]).name if params.get("topology_file") else NA,
        "placement": placement(run),
        "backend": params.get("backend", NA),
        "shaping": shaping_of(params),
        "scheduling": scheduling_of(params),
        "transports": transports(m),
        "workload": (f"{r.get('sources', '?')} sources x {r.get('events', '?')} events x "
                     f"{r.get('payload', '?')} B, "
                     + (f"{r.get('rate'):g} ev/s per source" if r.get("rate") else "unpaced"))
        if r else NA,
        "status": m.get("status", NA),
        "balanced": (sum(1 for e in equations if e.get("ok")), len(equations)),
        "offered": get(m, "rates", "offered_events_per_s"),
        "accepted": get(m, "rates", "accepted_events_per_s"),
        "events_accepted": get(m, "counters", "builder", "events_accepted"),
        "latency": latency_rows(m, run.get("exact")),
        "latency_exact": run.get("exact") is not None,
        "latency_min": lat.get("min_ns"),
        "latency_mean": lat.get("mean_ns"),
        "samples": lat.get("samples"),
        "uncertainty_basis": lat.get("uncertainty_basis"),
        "cpu_us_per_fragment": get(m, "cpu", "us_per_fragment"),
        "cpu_total_s": get(m, "cpu", "total_s"),
        "rss_kib": rss,
        "builders": [{k: v for k, v in b.items() if k != "times"}
                     for b in run.get("builders") or []],
    }


def host_clocks(run: dict) -> list[dict]:
    """Per host: its daemons, chrony bounds, in-band offsets of its daemons."""
    m = run["metrics"]
    clocks = m.get("clocks")
    where = daemon_hosts(run)
    hosts: dict[str, dict] = {}

    def entry(host: str) -> dict:
        return hosts.setdefault(host, {"host": host, "daemons": [], "chrony_start": None,
                                       "chrony_end": None, "offsets": [], "bounds": [],
                                       "consistent": [], "drift": set(), "same_clock": []})

    if not isinstance(clocks, dict):
        for key, host in where.items():
            if host:
                entry(host)["daemons"].append(key)
        return list(hosts.values())
    b = clocks.get("builder") or {}
    bhost = where.get("builder.0") or b.get("host") or "builder"
    e = entry(bhost)
    e["daemons"].append("builder.0")
    e["chrony_start"], e["chrony_end"] = b.get("chrony_start"), b.get("chrony_end")
    e["reference"] = True
    for p in clocks.get("peers") or []:
        key = p.get("peer", "?")
        e = entry(where.get(key) or p.get("host") or "?")
        e["daemons"].append(key)
        e["chrony_start"] = e["chrony_start"] or p.get("chrony_start")
        e["chrony_end"] = e["chrony_end"] or p.get("chrony_end")
        inband = p.get("inband") or {}
        # The estimate applied (in band intersected with chrony) where the
        # builder reports one; the in-band one from older builds.
        est = p.get("applied") or inband
        if isinstance(est.get("offset_ns"), (int, float)):
            e["offsets"].append(est["offset_ns"])
        if isinstance(est.get("bound_ns"), (int, float)):
            e["bounds"].append(est["bound_ns"])
        if est.get("basis"):
            e.setdefault("basis", set()).add(est["basis"])
        if inband.get("drift_from"):
            e["drift"].add((inband["drift_from"], inband.get("drift_ppm") or 0.0))
        e["consistent"].append(p.get("consistent"))
        e["same_clock"].append(bool(p.get("same_clock")))
    return list(hosts.values())


def chrony_text(c: Any) -> str:
    if not isinstance(c, dict):
        return NA
    if not c.get("available"):
        return f"none ({c.get('reason', 'not available')})"
    if not c.get("synchronised"):
        return "not synchronised"
    return f"{fmt_ns(c.get('bound_ns'))} (stratum {c.get('stratum', '?')})"


def offsets_text(h: dict) -> str:
    if h.get("reference") and not h["offsets"]:
        return "reference (builder's clock)"
    if h["same_clock"] and all(h["same_clock"]):
        return "builder's clock (same host)"
    if not h["offsets"]:
        return NA
    lo, hi = min(h["offsets"]), max(h["offsets"])
    rng = fmt_signed(lo) if lo == hi else f"{fmt_signed(lo)} … {fmt_signed(hi)}"
    basis = f" ({', '.join(sorted(h['basis']))})" if h.get("basis") else ""
    return (f"{rng} ± ≤{fmt_ns(max(h['bounds']))}" if h["bounds"] else rng) + basis


def drift_text(drift: set) -> str:
    if not drift:
        return NA
    out = []
    for source in sorted({d[0] for d in drift}):
        ppm = [d[1] for d in drift if d[0] == source]
        lo, hi = f"{min(ppm):.3g}", f"{max(ppm):.3g}"
        out.append(f"{lo} ppm ({source})" if lo == hi else f"{lo}–{hi} ppm ({source})")
    return ", ".join(out)


def consistent_text(h: dict) -> str:
    vals = [v for v in h["consistent"] if v is not None]
    if not vals:
        return NA
    if all(vals):
        return "yes"
    return f"NO ({vals.count(False)} of {len(vals)} disagree)"


# --------------------------------------------------------------------------
# Tables.

def md_table(header: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return str(s).replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _nums(values: list) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def cell_text(col: list[dict], fn) -> str:
    """A text cell: the value, or the distinct values of a group's runs."""
    return " / ".join(dict.fromkeys(fn(s) for s in col))


def cell_num(col: list[dict], get, fmt) -> str:
    """A number; for a group of runs its median [min – max]."""
    values = [get(s) for s in col]
    if len(col) == 1:
        return fmt(values[0])
    nums = _nums(values)
    if not nums:
        return NA
    text = f"{fmt(statistics.median(nums))} [{fmt(min(nums))} – {fmt(max(nums))}]"
    return text + (f" ({len(values) - len(nums)} n/a)" if len(nums) < len(values) else "")


def cell_latency(col: list[dict], name: str) -> str:
    """value ± U; for a group the median value ± the largest U (each run's
    value is within its U of the truth, so the median is within the
    largest), then [min – max] of the runs' values."""
    pairs = [s["latency"][name] for s in col]
    if len(col) == 1:
        return fmt_pm(*pairs[0])
    values = _nums([v for v, _ in pairs])
    if not values:
        return NA
    uncs = [u for _, u in pairs]
    unc = max(_nums(uncs)) if len(_nums(uncs)) == len(uncs) else None
    return f"{fmt_pm(statistics.median(values), unc)} [{fmt_ns(min(values))} – " \
           f"{fmt_ns(max(values))}]"


def per_builder_text(s: dict, key: str, unit: str) -> str:
    """"b0 51,200, b1 48,800" for a run of several builders, n/a for one."""
    if not s["builders"]:
        return NA
    return ", ".join(f"b{b['id']} {fmt_num(b[key], unit)}" for b in s["builders"])


def runs_table(columns: list[tuple[str, list[dict]]]) -> str:
    """One column per run, or per group of runs (median [min – max])."""
    header = [""] + [label if len(col) == 1 else f"{label}, {len(col)} runs"
                     for label, col in columns]
    rows: list[list[str]] = []

    def text(name: str, fn) -> None:
        rows.append([name] + [cell_text(col, fn) for _, col in columns])

    def num(name: str, get, fmt) -> None:
        rows.append([name] + [cell_num(col, get, fmt) for _, col in columns])

    text("topology", lambda s: s["topology"])
    text("placement", lambda s: s["placement"])
    text("backend", lambda s: s["backend"] + ("" if s["shaping"] is None else
                                              ", no shaping" if s["shaping"] == "none" else
                                              f", tbf {s['shaping']} per link"))
    text("scheduling", lambda s: s["scheduling"] or "as the kernel chooses")
    text("reader → builder", lambda s: s["transports"])
    text("workload", lambda s: s["workload"])
    text("status", lambda s: f"{s['status']}, {s['balanced'][0]}/{s['balanced'][1]} balanced")
    num("offered rate", lambda s: s["offered"], lambda x: fmt_num(x, " ev/s"))
    num("accepted rate", lambda s: s["accepted"], lambda x: fmt_num(x, " ev/s"))
    num("accepted events", lambda s: s["events_accepted"], fmt_num)
    for name in ("p50", "p90", "p99", "max"):
        rows.append([f"latency {name}"] + [cell_latency(col, name) for _, col in columns])
    num("latency min", lambda s: s["latency_min"], fmt_ns)
    num("latency mean", lambda s: s["latency_mean"], fmt_ns)
    text("uncertainty from", lambda s: s["uncertainty_basis"] or NA)
    text("builders", lambda s: str(len(s["builders"])) if s["builders"] else "1")
    text("events per builder", lambda s: per_builder_text(s, "recorded", ""))
    text("rate per builder", lambda s: per_builder_text(s, "rate", " ev/s"))
    num("CPU per fragment", lambda s: s["cpu_us_per_fragment"], lambda x: fmt_num(x, " us", 2))
    num("CPU, all daemons", lambda s: s["cpu_total_s"], lambda x: fmt_num(x, " s", 2))
    daemons: list[str] = []
    for _, col in columns:
        for s in col:
            for k in s["rss_kib"]:
                if k not in daemons:
                    daemons.append(k)
    order = {"builder": 0, "reader": 1, "source": 2}
    daemons.sort(key=lambda k: (order.get(k.split()[0], 9), int(k.split()[1])
                                if k.split()[1].isdigit() else 0))
    for d in daemons:
        num(f"peak RSS {d}", lambda s, d=d: s["rss_kib"].get(d), fmt_mib)
    return md_table(header, rows)


def clocks_table(runs: list[dict]) -> str:
    header = ["run", "host", "daemons", "chrony bound start", "chrony bound end",
              "offset to builder (± bound, basis)", "drift bound", "agrees with chrony"]
    rows = []
    for run in runs:
        for h in host_clocks(run):
            rows.append([run.get("member", run["label"]), h["host"],
                         ", ".join(h["daemons"]) or NA,
                         chrony_text(h["chrony_start"]), chrony_text(h["chrony_end"]),
                         offsets_text(h), drift_text(h["drift"]),
                         consistent_text(h)])
    return md_table(header, rows)


# --------------------------------------------------------------------------
# The verdict: is a difference between two cases resolved?

def bucket_width(value: Any) -> int | None:
    """Width of the histogram bucket whose upper edge a percentile reports
    (common/core/hist.h: exact below 16, then 16 buckets per power of two): the
    true percentile lies in [value - width, value]."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        return None
    v = int(value)
    if v < 16:
        return 0
    return (1 << (v.bit_length() - 1)) // 16


# Confidence asked of a verdict from paired repeats (sign test).
CONFIDENCE = 0.90


def sign_test_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """The largest k such that [k-th smallest, k-th largest] of n paired
    differences holds their median with at least `confidence` (the
    distribution-free sign-test interval); None when n is too small."""
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if 1 - 2 * tail >= confidence:
            best = k
    return best


def verdict(base: list[dict], other: list[dict], name: str) -> dict:
    """Whether the `name` latency of the runs `other` differs from that of
    the runs `base` beyond what measurement could explain.

    A run's true percentile lies in [value - bucket width - U, value + U].
    With the same number of repeats on both sides (interleaved, so that run
    k of each case saw the same minute of the machine), the runs are paired:
    each pair's difference, less what its buckets and clock uncertainties
    could explain, is a lower bound of the true difference of that pair, and
    the sign test turns the k-th smallest of those into a lower bound of
    the median difference at CONFIDENCE. Otherwise every run of one case
    must lie above every run of the other even so."""
    def runs(col):
        out = []
        for s in col:
            v, u = s["latency"][name]
            w = 0 if s.get("latency_exact") else bucket_width(v)
            if w is None or not isinstance(u, (int, float)):
                return None
            out.append((v, w, u))
        return out

    a, b = runs(base), runs(other)
    if not a or not b:
        return {"stat": name, "resolved": None, "why": "a value or its uncertainty is n/a"}
    if len(a) < 2 or len(b) < 2:
        return {"stat": name, "resolved": None,
                "why": "one run of a case: the spread between repeats is unknown"}
    med_a = statistics.median(x[0] for x in a)
    med_b = statistics.median(x[0] for x in b)
    clock = max(x[2] for x in a) + max(x[2] for x in b)
    buckets = max(x[1] for x in a) + max(x[1] for x in b)
    out = {"stat": name, "clock_ns": clock, "buckets_ns": buckets,
           "spread_ns": [max(x[0] for x in a) - min(x[0] for x in a),
                         max(x[0] for x in b) - min(x[0] for x in b)],
           "repeats": [len(a), len(b)]}
    k = sign_test_rank(len(a)) if len(a) == len(b) else None
    if k is not None:
        diffs = [y[0] - x[0] for x, y in zip(a, b)]
        diff = statistics.median(diffs)
        sign = 1 if diff >= 0 else -1
        # Per pair, the least the true difference can be in the direction
        # of the median: less b's bucket and both uncertainties (or, for a
        # negative difference, less a's bucket).
        lows = sorted(sign * d - (y[1] if sign > 0 else x[1]) - x[2] - y[2]
                      for d, x, y in zip(diffs, a, b))
        gap = lows[k - 1]
        out.update(method=f"paired repeats, sign test at {CONFIDENCE:.0%} "
                          f"(the {k}{'st' if k == 1 else 'nd' if k == 2 else 'rd' if k == 3 else 'th'} "
                          f"smallest of {len(diffs)} pair differences)",
                   pair_differences_ns=diffs)
    else:
        diff = med_b - med_a
        if diff >= 0:
            gap = min(y[0] - y[1] - y[2] for y in b) - max(x[0] + x[2] for x in a)
        else:
            gap = min(x[0] - x[1] - x[2] for x in a) - max(y[0] + y[2] for y in b)
        out.update(method="every run of one case above every run of the other")
    out.update(difference_ns=diff, resolved=gap > 0, at_least_ns=gap if gap > 0 else None)
    return out


STAT_WORDS = {"p50": "the median", "p90": "p90", "p99": "p99", "max": "the maximum"}


def verdict_text(base_label: str, label: str, v: dict) -> str:
    stat = STAT_WORDS.get(v["stat"], v["stat"])
    if v["resolved"] is None:
        return f"- {v['stat']}: not judged ({v['why']})"
    head = (f"- {v['stat']}: difference {fmt_signed(v['difference_ns'])} ({label} − "
            f"{base_label}); clock uncertainties could explain ±{fmt_ns(v['clock_ns'])}, "
            f"bucket widths {fmt_ns(v['buckets_ns'])}; spread between repeats "
            f"{fmt_ns(v['spread_ns'][0])} and {fmt_ns(v['spread_ns'][1])} "
            f"({v['repeats'][0]} and {v['repeats'][1]} runs; {v['method']}): ")
    if not v["resolved"]:
        return head + "**not resolved at this noise**"
    what = "add" if v["difference_ns"] >= 0 else "save"
    return head + (f"**resolved: {label} {what} {fmt_ns(abs(v['difference_ns']))} at {stat} "
                   f"(at least {fmt_ns(v['at_least_ns'])})**")


def verdicts(columns: list[tuple[str, list[dict]]]) -> tuple[str, list[dict]]:
    """For p50, p99 and max: each column of another topology than the
    first column's against the column of the first topology with the same
    backend, shaping and scheduling (one host against three hosts,
    unshaped against unshaped), else against the first column."""
    if len(columns) < 2:
        return "", []
    def key(col):
        return (col[0]["backend"], col[0]["shaping"], col[0]["scheduling"])
    first_topology = columns[0][1][0]["topology"]
    bases: dict = {}
    for label, col in columns:
        if col[0]["topology"] == first_topology:
            bases.setdefault(key(col), (label, col))
    lines, doc = [], []
    for label, col in columns[1:]:
        base_label, base = bases.get(key(col), columns[0])
        if base is col:
            continue
        lines.append(f"{label} against {base_label}:\n")
        for name in ("p50", "p99", "max"):
            v = verdict(base, col, name)
            v.update(base=base_label, case=label)
            doc.append(v)
            lines.append(verdict_text(base_label, label, v))
        lines.append("")
    return "\n".join(lines), doc


# --------------------------------------------------------------------------
# The plot.

def cdf_data(runs: list[dict]):
    """(buckets (lo, hi, count) pooled over runs, U = the largest clock
    uncertainty), or None when no run has buckets."""
    counts: dict[tuple[float, float], int] = {}
    uncs = []
    for run in runs:
        lat = run["metrics"].get("latency") or {}
        buckets = lat.get("buckets")
        if not isinstance(buckets, list) or not buckets:
            continue
        for x in buckets:
            if isinstance(x, list) and len(x) == 3:
                key = (float(x[0]), float(x[1]))
                counts[key] = counts.get(key, 0) + int(x[2])
        uncs.append(lat.get("uncertainty_ns"))
    if not counts:
        return None
    known = _nums(uncs)
    unc = max(known) if known and len(known) == len(uncs) else None
    return sorted((lo, hi, n) for (lo, hi), n in counts.items()), unc


def plot(columns: list[tuple[str, list[dict], list[dict]]], path: Path,
         title: str) -> str | None:
    """Draws latency.png (one curve per column: a run, or a group's pooled
    histogram); returns why not, or None."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError as e:
        return f"no plot: {e} (use /usr/bin/python3 with python3-matplotlib)"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = 0
    # The x range: from half the 0.1 % quantile of the fastest run (a latency
    # clamped to 0, or the band reaching below zero, would stretch the log
    # axis to nothing) to the largest upper edge plus its uncertainty.
    x_min, x_max = float("inf"), 0.0
    for _, runs, _ in columns:
        data = cdf_data(runs)
        if data is None:
            continue
        total = sum(x[2] for x in data[0]) or 1
        acc = 0
        for lo, hi, cnt in data[0]:
            acc += cnt
            if acc / total >= 0.001:
                x_min = min(x_min, max(hi, 1000.0) * 0.5e-3)
                break
        x_max = max(x_max, (data[0][-1][1] + (data[1] or 0)) * 1.3e-3)
    for i, (label, runs, col) in enumerate(columns):
        data = cdf_data(runs)
        if data is None:
            continue
        buckets, unc = data
        u = unc or 0.0
        lo = np.array([x[0] for x in buckets])
        hi = np.array([x[1] + 1 for x in buckets])       # upper edges are inclusive
        n = np.array([x[2] for x in buckets], dtype=float)
        total = n.sum()
        if total <= 0:
            continue
        cum = np.cumsum(n) / total
        c = colors[i % len(colors)]
        us = 1e-3
        name = label if len(runs) == 1 else f"{label}, {len(runs)} runs pooled"
        # The CDF read from the buckets: F(hi) = samples up to that bucket.
        ax1.step(hi * us, cum, where="post", color=c, lw=1.6,
                 label=f"{name} (± {fmt_ns(unc) if unc is not None else 'n/a'})")
        # The true CDF lies between the bucket-and-clock edges.
        x_lo = np.maximum((lo - u) * us, x_min)  # every sample of bucket k is >= lo - U
        x_hi = (hi + u) * us                     # ... and <= hi + U
        xs = np.unique(np.concatenate([x_lo, x_hi]))
        upper = np.array([n[x_lo <= x].sum() for x in xs]) / total   # could be <= x
        lower = np.array([n[x_hi <= x].sum() for x in xs]) / total   # surely <= x
        ax1.fill_between(xs, lower, upper, step="post", color=c, alpha=0.18, lw=0)
        # The tail: 1 - F on a log scale, same band.
        floor = 0.5 / total
        ax2.step(hi * us, np.clip(1.0 - cum, floor, 1.0), where="post", color=c, lw=1.6,
                 label=name)
        ax2.fill_between(xs, np.clip(1 - upper, floor, 1), np.clip(1 - lower, floor, 1),
                         step="post", color=c, alpha=0.18, lw=0)
        if len(runs) == 1:
            for pname, y in (("p50", 0.5), ("p99", 0.99)):
                v, pu = col[0]["latency"][pname]
                if isinstance(v, (int, float)):
                    err = (pu or 0) * us
                    for ax, yy in ((ax1, y), (ax2, 1 - y)):
                        ax.errorbar([v * us], [yy], xerr=[[err], [err]], fmt="o", color=c,
                                    ms=4, capsize=3)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return "no plot: no run has latency buckets in its metrics.json"
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        if x_min < x_max:
            ax.set_xlim(x_min, x_max)
        ax.set_xlabel("latency (us): earliest source timestamp to record written")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("fraction of events with latency ≤ x")
    ax1.set_ylim(0, 1.005)
    ax1.axhline(0.5, color="grey", lw=0.6, ls=":")
    ax1.axhline(0.99, color="grey", lw=0.6, ls=":")
    ax1.legend(loc="lower right", fontsize=8)
    ax1.set_title("CDF (band: bucket width + clock uncertainty; dots: p50, p99 ± U)",
                  fontsize=10)
    ax2.set_yscale("log")
    ax2.set_ylabel("fraction of events with latency > x")
    ax2.set_title("tail", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# --------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="compare.py",
        description="Compare runs side by side: topology, rates, latency with clock "
                    "uncertainty, clocks per host, CPU and memory; draw their latency "
                    "distributions.",
        epilog="Example: analysis/compare.py runs/one-host runs/three-hosts --out results/x")
    ap.add_argument("runs", nargs="+", metavar="RUN", help="run directory or metrics.json")
    ap.add_argument("--out", metavar="DIR", help="write compare.md, compare.json, latency.png")
    ap.add_argument("--label", action="append", default=[], metavar="NAME",
                    help="name of a run's column, in the order of the runs (repeatable)")
    ap.add_argument("--group", action="store_true",
                    help="runs with the same label (repeats of one configuration) share a "
                         "column: median [min – max] of their values, their latency "
                         "histograms pooled in the plot")
    ap.add_argument("--title", default="Event latency, single host against multi-host",
                    help="title of the plot")
    ap.add_argument("--no-plot", action="store_true", help="tables only")
    args = ap.parse_args(argv)
    if len(args.label) > len(args.runs):
        ap.error("more --label than runs")
    labels = args.label + [None] * (len(args.runs) - len(args.label))
    runs = [load_run(r, lab) for r, lab in zip(args.runs, labels)]
    groups: dict[str, list[dict]] = {}
    for run in runs:
        groups.setdefault(run["label"], []).append(run)
    if args.group:
        for label, members in groups.items():
            for k, run in enumerate(members):
                run["member"] = f"{label} #{k + 1}" if len(members) > 1 else label
    else:
        for label, members in groups.items():     # columns need distinct names
            for k, run in enumerate(members[1:], 2):
                run["label"] = run["member"] = f"{label} ({k})"
            members[0]["member"] = label
        groups = {run["label"]: [run] for run in runs}
    for run in runs:
        run["summary"] = run_summary(run)
    columns = [(label, [r["summary"] for r in members]) for label, members in groups.items()]

    text = ("## Runs\n\n" + runs_table(columns) + "\n\n"
            + ("Latencies are exact percentiles of every recorded event (events.jsonl)"
               if all(s.get("latency_exact") for _, c in columns for s in c) else
               "Latencies are histogram bucket upper edges (within 6.25 %)"
               + (", exact percentiles of events.jsonl where a run has one"
                  if any(s.get("latency_exact") for _, c in columns for s in c) else ""))
            + " ± the largest clock uncertainty of any event of the run (docs/CLOCKS.md)"
            + ("; a column of several runs shows the median [min – max] over them, ± the "
               "largest uncertainty" if any(len(c) > 1 for _, c in columns) else "")
            + "; n/a: not in that run's metrics.json.\n\n## Clocks per host\n\n"
            + clocks_table(runs) + "\n\n"
            "chrony bound: |offset| + root dispersion + root delay / 2 of that host's chronyd "
            "against its reference; offset: peer clock − builder clock applied at the end of "
            "the run, the in-band interval (kernel-stamped UDP probes) intersected with "
            "chrony's, range over the host's daemons, ± the largest bound, with the basis.\n")
    vtext, vdoc = verdicts(columns)
    if vtext:
        text += ("\n## Verdict\n\nEach case against the same case on the first topology (or the first case). A run's true percentile lies "
                 "within [value − bucket width − U, value + U] (bucket width 0 where the percentiles are exact, from events.jsonl). With as many interleaved "
                 "repeats of each case (at least 5), run k of one case is paired with run k "
                 "of the other; each pair's difference less what its buckets and clocks could "
                 "explain bounds that pair's true difference, and the sign test makes the "
                 "k-th smallest of those a lower bound of the median difference at 90 %. With "
                 "fewer, every run of one case must lie beyond every run of the other.\n\n" + vtext)
    sources = "\n".join(f"- {run['member']}: {run['path']}" for run in runs)
    print(text + "\nRuns:\n" + sources, flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(f"# {args.title}\n\n" + text + "\nRuns:\n\n" +
                                        sources + "\n", encoding="utf-8")
        doc = []
        for run in runs:
            d = dict(run["summary"])
            d["column"] = run["label"]
            d["run"] = run["member"]
            d["latency"] = {k: {"value_ns": v, "uncertainty_ns": u}
                            for k, (v, u) in d["latency"].items()}
            d["hosts"] = [{k: (sorted(v) if isinstance(v, set) else v) for k, v in h.items()}
                          for h in host_clocks(run)]
            for h in d["hosts"]:
                h["drift"] = [{"from": f, "ppm": p} for f, p in h["drift"]]
            doc.append(d)
        (out / "compare.json").write_text(json.dumps(doc, indent=1, default=str) + "\n",
                                          encoding="utf-8")
        (out / "verdict.json").write_text(json.dumps(vdoc, indent=1) + "\n", encoding="utf-8")
        if not args.no_plot:
            why = plot([(label, members, [r["summary"] for r in members])
                        for label, members in groups.items()], out / "latency.png", args.title)
            print(why if why else f"wrote {out / 'latency.png'}", file=sys.stderr)
        print(f"wrote {out / 'compare.md'}, {out / 'compare.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
