#!/usr/bin/python3
"""The CMS 2003 event-builder measurement (ACAT 2003 TCP/IP peer transport
note; issue 17) on the netns virtual cluster, beside the note's figures.

A bare event builder, N readers by N builders: N reader hosts, each with
its source on the same host (source -> reader over loopback), N builder
hosts, the hub on builder 0's host, manager routing in batches of 128
events, fixed fragment sizes, unpaced sources, no faults. Every host's link
is shaped with tbf (RATE below, on both ends, as the netns backend does):
a rate low enough that this machine's two cores are not the limit, so the
figure that compares is the share of the link, not MB/s. The rail capacity
is measured in the same run with analysis/railcap.py's functions on a
cluster built by the same backend code with the same rails, MTU and shaping.

Throughput per node is measured in the steady state, as the note's is: the
events every builder completed (their events.jsonl, one clock: the hosts
are namespaces of one machine) between the 15th and the 85th percentile of
their completion times, their bytes over that time, divided by N. The
pipeline's filling (the first batches) and draining (the last builders
finishing alone) are outside it; the whole run's figure (bytes the builders
received over rates.build_duration_s) is shown beside it. Its fraction is
over the measured rail capacity (the best of railcap's one-stream and
N-stream figures), times the rails. The CPU idle share is from /proc/stat
before and after each run.

The rate: the 2 x 2 configurations at 100mbit per rail; 8 x 8 at 40mbit,
since 8 readers and 8 builders (and 8 sources) on two cores run out of CPU
at 100mbit with fragments of a few kB (measured: 10-20 % idle at 4 kB).
Socket buffers are the launcher's `auto` (deploy/daqlib/sockbuf.py: a
batch's bytes on each rail, at least twice the bandwidth-delay product).

On a real cluster, `--hosts FILE` runs the same configurations over the
launcher's ssh backend on the hosts FILE lists (analysis/cms2003_ssh.py):
the first 2N hosts in file order are b0..b(N-1), r0..r(N-1); no shaping
(the rate is the wire's), the rails' MTU as the hosts have it (read and
reported, never changed), the rail capacity iperf3 from r0 to b0 over ssh,
the CPU idle share the busiest host's. A configuration whose rails the
hosts lack is skipped (docs/DEPLOY.md, "The CMS 2003 measurement on a real
cluster").

Usage: analysis/cms2003.py [--quick] [--out DIR] [--bin DIR] [--rate R]
       analysis/cms2003.py --hosts FILE [--quick] [--n N] [--sizes ...]
Writes DIR/cms2003.json, DIR/cms2003.md and DIR/cms2003.png (default
DIR = results/cms2003-<date>/); exits 1 when a run failed its books.
The netns cluster needs root (network namespaces, veth pairs, tc); --hosts
needs key-based ssh to the hosts and iperf3 on them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN = REPO / "deploy" / "daqrun"
sys.path.insert(0, str(REPO / "analysis"))

import railcap  # noqa: E402
from cms2003_ssh import Cluster, idle_share, mtu_line  # noqa: E402
from daqlib.schema import TopologyError  # noqa: E402

RATE = "100mbit"            # tbf per rail of the 2 x 2 configurations
RATE_8X8 = "40mbit"         # 8 x 8: 25 processes on 2 cores (module docstring)
# tbf's queue stands for the switch port's buffer: at 10 ms (the backend's
# default) a 100mbit rail queues 28 kB and drops the bursts of two readers
# sending to one builder at once, and each drop at a batch's tail is a
# 200 ms retransmission timeout (measured: the whole cluster at half rate
# for 0.2 s every few seconds). 50 ms, 640 kB at 100mbit, is a modest
# buffer for a gigabit switch port; iperf3 measures the same links.
LATENCY = "50ms"
# The hub's clock exchanges: 10 ms (builderd's default) to each of 24 peers
# cost the 8 x 8 hub a third of a core (measured); the figure here is
# throughput, and latency's clock bound is not looked at.
PROBE_PERIOD_MS = 100
SIZES = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
QUICK_SIZES = [1024, 16384]
BATCH = 128
# The note's figures: (MB/s per node, fraction of the link, where).
PAPER = {"8x8, 1 rail, MTU 1500": (100.0, 0.80, "fragments > 4 kB", 4096),
         "2x2, 2 rails, MTU 9000": (240.0, 0.95, "16 kB", 16384)}
CONFIGS = [
    {"name": "8x8, 1 rail, MTU 1500", "n": 8, "rails": 1, "mtu": 1500, "rate": RATE_8X8},
    {"name": "2x2, 1 rail, MTU 1500", "n": 2, "rails": 1, "mtu": 1500, "rate": RATE},
    {"name": "2x2, 2 rails, MTU 9000", "n": 2, "rails": 2, "mtu": 9000, "rate": RATE},
]
# The steady state: events completed between these quantiles of the times.
STEADY = (0.15, 0.85)
# Batches per builder at least: the filling and the draining (the last
# batch of the slowest builder, built alone) are each about one batch time,
# outside STEADY only when every builder has many.
MIN_BATCHES = 10


def topology(n: int, rails: int, mtu: int, rate: str | float, payload: int, events: int,
             cluster=None) -> str:
    """N x N bare event builder: hosts b0..b(N-1) (the hub on b0), r0..r(N-1),
    reader i with source i on host ri; netns, or with cluster (--hosts) the
    ssh backend on its hosts (rate: the rail capacity in bit/s)."""
    if cluster is not None:
        text = cluster.tables(n, rails)
    else:
        text = (f'[deploy]\nbackend = "netns"\n\n[netns]\nrails = {rails}\nmtu = {mtu}\n'
                f'shaping = "{rate}"\nshaping_latency = "{LATENCY}"\nchrony = false\n\n')
        hosts = [f"b{i}" for i in range(n)] + [f"r{i}" for i in range(n)]
        text += "".join(f'[hosts.{h}]\naddress = "127.0.0.1"\n\n' for h in hosts)
    text += (f'[run]\nrun = 1\nseed = 2003\nevents = {events}\npayload = {payload}\nrate = 0\n'
             f'filter_modulo = 1\nrouting = "manager"\nbatch = {BATCH}\n'
             f'max_inflight = 16384\ntimeout_ms = {event_timeout_ms(n, rate, payload)}\n\n[hub]\nhost = "b0"\nquiet = true\n'
             f'extra = ["--stall-timeout-ms", "{stall_ms(n, rate, payload)}", '
             f'"--probe-period-ms", "{PROBE_PERIOD_MS}"]\n\n')
    text += "".join(f'[[builder]]\nid = {i}\nhost = "b{i}"\nquiet = true\n\n' for i in range(n))
    text += "".join(f'[[reader]]\nid = {i}\nsources = [{i}]\nhost = "r{i}"\n\n'
                    for i in range(n))
    return text


def stall_ms(n: int, rate: str | float, payload: int) -> int:
    """The hub's stall timeout: a builder fed a batch of BATCH events of n
    fragments through its shaped link sends no token until the batch's first
    event is complete, which at 64 KiB and 100mbit takes seconds; the
    default 2000 ms would give healthy builders up. Ten batch times."""
    batch_s = BATCH * n * payload / (bits(rate) / 8)
    return int(min(600_000, max(2000, 10_000 * batch_s)))


def event_timeout_ms(n: int, rate: str | float, payload: int) -> int:
    """The builders' event timeout: n readers share a builder's link, so an
    event's fragments may arrive up to about a batch time apart (8 x 8 at
    64 KiB over 40mbit: 13 s a batch, and 3 of 10,240 events expired at
    10 s); the note's bare builder has no timeout at all. Two batch times,
    at least 10 s."""
    batch_s = BATCH * n * payload / (bits(rate) / 8)
    return int(min(600_000, max(10_000, 2_000 * batch_s)))


def bits(rate: str | float) -> float:
    """bit/s of a tc rate (netns) or of a measured capacity (--hosts)."""
    return railcap.rate_bits(rate) if isinstance(rate, str) else float(rate)


def cpu_times() -> tuple[int, int]:
    """(idle + iowait, total) jiffies of every CPU, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])


def one_run(bin_dir: Path, work: Path, cfg: dict, rate: str | float, payload: int, events: int,
            cluster=None, hosts_be=None) -> dict:
    """One run of cfg at payload; with cluster (--hosts) on its hosts, the
    CPU idle share the busiest host's (hosts_be reads their /proc/stat)."""
    name = f"n{cfg['n']}-r{cfg['rails']}-m{cfg['mtu']}-p{payload}"
    topo = work / f"{name}.toml"
    topo.write_text(topology(cfg["n"], cfg["rails"], cfg["mtu"], rate, payload, events, cluster))
    out = work / name
    on_hosts = cluster.cpu_times(hosts_be) if cluster is not None else None
    idle0, total0 = cpu_times()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out),
                           "--bin", str(bin_dir), "--check", "never"],
                          capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    idle1, total1 = cpu_times()
    idle = (idle1 - idle0) / max(1, total1 - total0)
    hosts_idle = None
    if cluster is not None:
        hosts_idle = idle_share(on_hosts, cluster.cpu_times(hosts_be))
        idle = min(hosts_idle.values())
    try:
        m = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        return {"payload": payload, "ok": False, "balanced": False, "cpu_idle": idle,
                "cpu_idle_hosts": hosts_idle,
                "error": (proc.stdout[-1200:] + proc.stderr[-1200:]).strip()}
    received = 0
    for sec in (m.get("builders") or {}).values():
        for key, c in sec.get("counters", {}).items():
            if key.startswith("reader.") and ".rail." not in key:
                received += c.get("bytes_received", 0)
    span = m["rates"]["build_duration_s"] or float("nan")
    steady = steady_state(out, cfg["n"])
    reference = refbuild(out)
    return {"payload": payload, "events": events,
            "ok": proc.returncode == 0 and m["balanced"] and reference == "PASS",
            "refbuild": reference,
            "steady": steady, "socket_buffer": socket_buffers(out),
            "status": proc.returncode, "balanced": m["balanced"],
            "equations": m.get("equations", {}).get("summary") if isinstance(
                m.get("equations"), dict) else None,
            "errors": m.get("errors", [])[:3], "accepted": m["counters"]["builder"].get(
                "events_accepted"),
            "bytes_received": received, "build_s": span,
            "whole_run_Bps": received / span / cfg["n"],
            "per_node_Bps": steady["Bps"] / cfg["n"] if steady else received / span / cfg["n"],
            "cpu_idle": idle, "cpu_idle_hosts": hosts_idle, "wall_s": wall}


def refbuild(out: Path) -> str:
    """The independent reference builder's verdict on the run's accepted
    events, run after the run so that the CPU idle share is the run's own."""
    proc = subprocess.run([sys.executable, str(REPO / "analysis" / "refbuild.py"), str(out)],
                          capture_output=True, text=True, timeout=900)
    return "PASS" if proc.returncode == 0 else "FAIL"


def steady_state(out: Path, n: int) -> dict | None:
    """Bytes per second of the events all builders completed between the
    STEADY quantiles of their completion times (module docstring)."""
    done = []
    for path in (out / "builders").glob("*/events.jsonl"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                done.append((e["t_ns"], e["bytes"]))
    if len(done) < 20:
        return None
    done.sort()
    lo, hi = (done[int(q * (len(done) - 1))][0] for q in STEADY)
    if hi <= lo:
        return None
    inside = sum(b for t, b in done if lo < t <= hi)
    return {"Bps": inside / ((hi - lo) / 1e9), "seconds": (hi - lo) / 1e9,
            "events": sum(1 for t, _b in done if lo < t <= hi)}


def socket_buffers(out: Path) -> list[int]:
    """The --socket-buffer values the launcher gave the daemons (params.json)."""
    try:
        params = json.loads((out / "params.json").read_text())
    except (OSError, ValueError):
        return []
    got = set()
    for p in params.get("processes", []):
        argv = p.get("argv", [])
        got.update(int(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--socket-buffer")
    return sorted(got)


def capacity(rails: int, mtu: int, rate: str, seconds: float) -> dict:
    """railcap on two hosts made by the netns backend with this configuration's
    rails, MTU and shaping: bytes/s of one rail (best of 1 and 4 streams)."""
    with tempfile.TemporaryDirectory(prefix="cms2003-cap-") as tmp:
        be = railcap.cluster(Path(tmp), rails, mtu, rate, latency=LATENCY, say=lambda _l: None)
        try:
            be.prepare(railcap.HOSTS[1])
            res = railcap.measure_rails(be, railcap.HOSTS[0], railcap.HOSTS[1], 4, seconds,
                                        say=lambda line: print(f"cms2003: {line}", flush=True))
        finally:
            be.teardown()
    per_rail = [max(r["one_stream_Bps"], r["streams_Bps"]) for r in res["rails"]]
    res["rail_Bps"] = min(per_rail)
    return res


def events_for(payload: int, rate: str | float, seconds: float, n: int, rails: int) -> int:
    """Enough events per source for about `seconds` at the links' rate, and
    at least MIN_BATCHES batches per builder, so that a steady state exists."""
    per_s = bits(rate) / 8 * rails / payload
    return int(min(200_000, max(2000, MIN_BATCHES * n * BATCH, per_s * seconds)))


def note_cell(paper: tuple | None, payload: int) -> str:
    """The note's figure where it applies to this fragment size."""
    if paper is None:
        return ""
    mbs, frac, where, size = paper
    applies = payload > size if where.startswith("fragments >") else payload == size
    return f"{mbs:.0f} MB/s = {frac:.0%}" if applies else ""


def md_tables(doc: dict) -> str:
    lines = [f"# CMS 2003 event builder on the netns cluster ({doc['date']})", "",
             "tbf per rail on both ends of every host's link (the rate is each "
             f"configuration's, the queue {LATENCY}); manager routing, batch {BATCH}, one unpaced source per "
             "reader on its host, fixed fragment sizes. MB/s per node = 10^6 bytes of the "
             "events the builders completed per second in the steady state (the 15th to "
             "the 85th percentile of their completion times), over N; the whole run's "
             "figure beside it. Of the link = over the rail capacity iperf3 measured "
             "(railcap) on the same shaped links in this run, times the rails.", ""]
    if doc.get("hosts_file"):
        lines[0] = (f"# CMS 2003 event builder on the hosts of {doc['hosts_file']} over ssh "
                    f"({doc['date']})")
        lines[2] = ("Real links, no shaping (the rate is the wire's), the rails' MTU as the "
                    f"hosts have it; manager routing, batch {BATCH}, one unpaced source per "
                    "reader on its host, fixed fragment sizes. MB/s per node = 10^6 bytes of "
                    "the events the builders completed per second in the steady state (the "
                    "15th to the 85th percentile of their completion times, on the hosts' "
                    "synchronised clocks), over N; the whole run's figure beside it. Of the "
                    "link = over the rail capacity iperf3 measured from r0 to b0 over ssh in "
                    "this run, times the rails. CPU idle = the busiest host's.")
    for cfg in doc["configs"]:
        lines.append(f"## {cfg['name']}")
        lines.append("")
        paper = PAPER.get(cfg["name"])
        if paper:
            lines.append(f"The note: {paper[0]:.0f} MB/s per node = {paper[1]:.0%} of the "
                         f"link ({paper[2]}).")
            lines.append("")
        if not cfg.get("runs"):
            lines += [cfg.get("why", "not run"), ""]
            continue
        cap = cfg["capacity"]["rail_Bps"]
        bufs = sorted({b for r in cfg["runs"] for b in r.get("socket_buffer", [])})
        sizes = f"{', '.join(f'{b >> 10} KiB' for b in bufs) or 'the kernel’s'}"
        if cfg.get("mtu_seen"):
            lines.append(f"No shaping; rail capacity {cap / 1e6:.2f} MB/s (iperf3 r0 to b0); "
                         f"{cfg['rails']} rail(s), {cfg['mtu_seen']}; socket buffers {sizes}.")
        else:
            lines.append(f"tbf {cfg['rate']} per rail; rail capacity {cap / 1e6:.2f} MB/s; "
                         f"{cfg['rails']} rail(s), MTU {cfg['mtu']}; socket buffers {sizes}.")
        lines.append("")
        lines.append("| fragment B | MB/s per node | of the link | whole run | CPU idle | books "
                     "| events accepted | the note |")
        lines.append("|---:|---:|---:|---:|---:|---|---:|---|")
        for r in cfg["runs"]:
            if "per_node_Bps" not in r:
                lines.append(f"| {r['payload']} | failed | | | {r['cpu_idle']:.0%} | "
                             f"{r.get('error', '')[:60]!r} | | |")
                continue
            lines.append(f"| {r['payload']} | {r['per_node_Bps'] / 1e6:.2f} | "
                         f"{r['fraction']:.1%} | {r['whole_run_Bps'] / 1e6:.2f} | "
                         f"{r['cpu_idle']:.0%} | "
                         f"{'balanced' if r['balanced'] else 'NOT balanced'}, refbuild "
                         f"{r.get('refbuild', '?')} | "
                         f"{r['accepted']} | {note_cell(paper, r['payload'])} |")
        lines.append("")
    lines += rails_ratio(doc)
    return "\n".join(lines) + "\n"


def rails_ratio(doc: dict) -> list[str]:
    """Two rails against one in the 2 x 2 builder, size by size."""
    by = {c["name"]: {r["payload"]: r for r in c.get("runs", []) if "per_node_Bps" in r}
          for c in doc["configs"]}
    one, two = by.get("2x2, 1 rail, MTU 1500", {}), by.get("2x2, 2 rails, MTU 9000", {})
    sizes = sorted(set(one) & set(two))
    if not sizes:
        return []
    out = ["## Two rails against one (2x2)", "",
           "| fragment B | 1 rail MB/s | 2 rails MB/s | ratio |", "|---:|---:|---:|---:|"]
    for p in sizes:
        a, b = one[p]["per_node_Bps"], two[p]["per_node_Bps"]
        out.append(f"| {p} | {a / 1e6:.2f} | {b / 1e6:.2f} | {b / a:.2f}x |")
    return out + [""]


def plot(doc: dict, path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        print(f"cms2003: no plot: {sys.executable} has no matplotlib (/usr/bin/python3 has)",
              flush=True)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for cfg in doc["configs"]:
        pts = [(r["payload"], r["per_node_Bps"] / 1e6) for r in cfg.get("runs", [])
               if "per_node_Bps" in r]
        if pts:
            how = f"tbf {cfg['rate']} per rail" if cfg.get("rate") else "real links"
            ax.plot(*zip(*pts), marker="o", label=f"{cfg['name']} (this cluster, {how})")
    for name, (mbs, frac, _where, size) in PAPER.items():
        ax.plot([size], [mbs], marker="*", ms=12, ls="none",
                label=f"note: {name}, {mbs:.0f} MB/s = {frac:.0%}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("fragment size (bytes)")
    ax.set_ylabel("throughput per node (MB/s)")
    ax.set_title("Bare event builder: throughput per node against fragment size", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def run_config(cfg: dict, args, sizes: list[int], seconds: float, cap_s: float,
               cluster=None) -> dict:
    if cluster is not None:
        return run_config_hosts(cfg, args, sizes, seconds, cap_s, cluster)
    row = dict(cfg)
    if args.rate:
        row["rate"] = args.rate
    rate = row["rate"]
    row["capacity"] = capacity(cfg["rails"], cfg["mtu"], rate, cap_s)
    cap = row["capacity"]["rail_Bps"] * cfg["rails"]
    with tempfile.TemporaryDirectory(prefix="cms2003-") as tmp:
        row["runs"] = sweep(cfg, args, sizes, seconds, rate, cap, Path(tmp))
    return row


def sweep(cfg: dict, args, sizes: list[int], seconds: float, rate: str | float, cap: float,
          work: Path, cluster=None, hosts_be=None) -> list[dict]:
    """One run per fragment size; fraction = per node over cap (bytes/s)."""
    runs = []
    for size in sizes:
        events = args.events or events_for(size, rate, seconds, cfg["n"], cfg["rails"])
        r = one_run(args.bin, work, cfg, rate, size, events, cluster, hosts_be)
        if "per_node_Bps" in r:
            r["fraction"] = r["per_node_Bps"] / cap
            print(f"cms2003: {cfg['name']}: {size:>6} B  {r['per_node_Bps'] / 1e6:7.2f} MB/s"
                  f" per node = {r['fraction']:.1%} of the link (whole run "
                  f"{r['whole_run_Bps'] / 1e6:.2f}), CPU idle {r['cpu_idle']:.0%}, books "
                  f"{'balanced' if r['balanced'] else 'NOT balanced'}, refbuild "
                  f"{r['refbuild']}", flush=True)
        else:
            print(f"cms2003: {cfg['name']}: {size} B FAILED: {r['error'][-400:]}",
                  flush=True)
        runs.append(r)
    return runs


def run_config_hosts(cfg: dict, args, sizes: list[int], seconds: float, cap_s: float,
                     cluster) -> dict:
    """cfg on the hosts of --hosts over ssh: skipped when they lack its rails;
    the rails' MTU read, the capacity measured over ssh, then the sweep."""
    n, rails = cfg["n"], cfg["rails"]
    row = dict(cfg, rate=None, hosts=cluster.describe(n), runs=[])
    have = cluster.rails(n)
    if have < rails:
        row["why"] = (f"Skipped: it needs {rails} rails, and the hosts b0..r{n - 1} have "
                      f"{have} address(es) each; give each host `addresses = [\"RAIL0\", "
                      f"\"RAIL1\"]`, one per interface, on {rails} subnets.")
        print(f"cms2003: {cfg['name']}: {row['why']}", flush=True)
        return row
    say = lambda line: print(f"cms2003: {line}", flush=True)     # noqa: E731
    with tempfile.TemporaryDirectory(prefix="cms2003-") as tmp:
        work = Path(tmp)
        topo = work / "hosts.toml"
        topo.write_text(topology(n, rails, cfg["mtu"], 1e9, sizes[0], 1000, cluster))
        hosts_be = cluster.backend(topo, list(cluster.roles(n)), work / "hosts")
        try:
            row["mtus"] = cluster.mtus(hosts_be)
            row["mtu_seen"] = mtu_line(row["mtus"], rails)
            say(f"{cfg['name']}: on the hosts {row['mtu_seen']} (not changed; the "
                f"configuration's name is the note's)")
            row["capacity"] = cluster.capacity(topo, work, cap_s, say)
            row["capacity"]["rail_Bps"] = min(max(r["one_stream_Bps"], r["streams_Bps"])
                                              for r in row["capacity"]["rails"])
            per_rail = row["capacity"]["rail_Bps"]
            command = row["capacity"]["command"]
            say(f"{cfg['name']}: rail capacity {per_rail / 1e6:.2f} MB/s (iperf3 r0 to b0, "
                f"through ssh to {command[-3]}: {command[-1]})")
            row["runs"] = sweep(cfg, args, sizes, seconds, per_rail * 8, per_rail * rails,
                                work, cluster, hosts_be)
        finally:
            hosts_be.teardown()
    return row


def select(args) -> list[dict]:
    return [c for c in CONFIGS if (not args.quick or c["n"] == 2)
            and (args.n is None or c["n"] == args.n)
            and (args.rails is None or c["rails"] == args.rails)]


def open_cluster(args, configs: list[dict]):
    """The Cluster of --hosts (a usage error: a string to print)."""
    if args.rate:
        return "--rate shapes the netns cluster's links; with --hosts the rate is the wire's"
    if shutil.which("ssh") is None:
        return "--hosts needs the ssh client, which is not installed"
    try:
        cluster = Cluster(args.hosts, args.bin, args.iperf_port, args.iperf3)
    except TopologyError as e:
        return str(e)
    for c in configs:
        why = cluster.missing(c["n"])
        if why:
            return why
    n = max((c["n"] for c in configs), default=0)
    print("cms2003: hosts " + ", ".join(f"{role} = {name}" for role, name in
                                        cluster.roles(n).items()), flush=True)
    return cluster


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=(
        "--hosts FILE runs it on a real cluster over ssh instead (docs/DEPLOY.md, \"The CMS "
        "2003 measurement on a real cluster\")."))
    ap.add_argument("--quick", action="store_true", help="2x2 only, 2 sizes, short runs")
    ap.add_argument("--out", type=Path, help="output directory")
    ap.add_argument("--bin", type=Path, default=REPO / "bin")
    ap.add_argument("--rate", help=f"tbf rate per rail of every configuration (default "
                                   f"{RATE}, 8x8 {RATE_8X8}); netns only")
    ap.add_argument("--sizes", help="fragment sizes to sweep, e.g. 4096,65536")
    ap.add_argument("--n", type=int, help="only the N x N configurations")
    ap.add_argument("--rails", type=int, help="only the configurations of this many rails")
    ap.add_argument("--events", type=int, help="events per source of every run (default: "
                                               "about the run's seconds at the rail capacity)")
    ap.add_argument("--hosts", type=Path, metavar="FILE",
                    help="run on a real cluster over ssh: FILE lists its hosts as a topology "
                         "does ([hosts.NAME] with ssh, address or addresses one per rail, "
                         "workdir, ...; optionally [ssh]); the first 2N hosts in file order "
                         "are b0..b(N-1) (builders, the hub on b0) and r0..r(N-1) (readers "
                         "and their sources): 8x8 needs 16, 2x2 4; a configuration of 2 "
                         "rails needs 2 addresses per host and is skipped otherwise")
    ap.add_argument("--iperf-port", type=int, default=railcap.PORT,
                    help="--hosts: iperf3's port on b0 (rail R: +R; default %(default)s)")
    ap.add_argument("--iperf3", default="iperf3", metavar="PATH",
                    help="--hosts: iperf3 on the hosts (default %(default)s, on their PATH)")
    args = ap.parse_args(argv)
    configs = select(args)
    cluster = None
    if args.hosts:
        cluster = open_cluster(args, configs)
        if isinstance(cluster, str):
            print(f"cms2003: {cluster}", file=sys.stderr)
            return 2
    else:
        why = railcap.unavailable()
        if why:
            print(f"cms2003: {why}", file=sys.stderr)
            return 2
    today = datetime.date.today().isoformat()
    out = args.out or REPO / "results" / f"cms2003-{today}"
    out.mkdir(parents=True, exist_ok=True)
    sizes, seconds, cap_s = (QUICK_SIZES, 0.8, 1.0) if args.quick else (SIZES, 3.0, 3.0)
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    print(f"cms2003: sizes {sizes}", flush=True)
    doc = {"date": today, "batch": BATCH, "quick": args.quick, "steady_quantiles": STEADY,
           "backend": "ssh" if cluster else "netns",
           "hosts_file": str(args.hosts) if cluster else None,
           "paper": {k: {"MBps_per_node": v[0], "fraction": v[1], "where": v[2]}
                     for k, v in PAPER.items()}}
    try:
        doc["configs"] = [run_config(c, args, sizes, seconds, cap_s, cluster) for c in configs]
    except railcap.LaunchError as e:
        print(f"cms2003: {e}", file=sys.stderr)
        return 1
    (out / "cms2003.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    text = md_tables(doc)
    (out / "cms2003.md").write_text(text, encoding="utf-8")
    plot(doc, out / "cms2003.png")
    print(text, flush=True)
    print(f"cms2003: wrote {out}/cms2003.json, cms2003.md, cms2003.png", flush=True)
    ran = [r for c in doc["configs"] for r in c.get("runs", [])]
    if cluster is not None and not ran:
        print("cms2003: no configuration could run on these hosts", file=sys.stderr)
        return 1
    ok = all(r["ok"] for r in ran)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
