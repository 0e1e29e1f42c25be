#!/usr/bin/python3
"""The cost of recording the events' data (docs/RECORDING.md, "Measured"),
with the real daemons on this host, every figure beside a baseline taken
in the same run, interleaved round by round so that the shared machine's
load falls on both alike:

- disk: the file system's sequential write bandwidth with `dd oflag=direct`
  against one builder recording 4 sources x 16 KiB unpaced (its
  data_bytes_written over its build time) through the page cache
  (--record-io buffered, the default) and by direct I/O, with each
  fragment copied into the window's cells as it comes (--record-keep copy,
  the default) and kept in its shared-memory ring until written
  (in-place), the same run not recording, the writer alone both ways, and where
  the builder's time goes (perf);
- writer: the raw and HDF5 writers alone on tmpfs (tests/bench/bench_evwriter),
  16 KiB fragments: GB/s and CPU per byte, beside dd's own rate into tmpfs;
- small: 4 x 64 B unpaced, events/s recorded (buffered, direct, kept in
  place) against not recorded, and where the builder's time goes when recording (perf);
- paced: 4 sources x 10k events/s, latency p50/p99 recorded against not;
- crash: runs killed with SIGKILL at random moments: damaged closed files,
  `.writing` files recovered by evdump --recover, manifests against the
  recovered counts.

Usage: analysis/bench_record.py [--rounds N] [--crashes N] [--dir DIR] [--out DIR] [--quick]
Writes OUT/record.json and OUT/record.md; exits 1 when a run failed or a
crash left a damaged closed file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN, EVDUMP = REPO / "deploy" / "daqrun", REPO / "analysis" / "evdump.py"
sys.path.insert(0, str(REPO / "analysis"))
import evdump  # noqa: E402
import evfile  # noqa: E402

TOPOLOGY = """[run]
run = 1
seed = 7
events = {events}
payload = {payload}
rate = {rate}
max_inflight = {window}

[builder]
host = "127.0.0.1"
quiet = true
extra = {extra}

[[reader]]
id = 0
sources = [0, 1]
host = "127.0.0.1"
transport = "shm"

[[reader]]
id = 1
sources = [2, 3]
host = "127.0.0.1"
transport = "shm"
"""


def run(argv: list, timeout_s: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout_s)


def daqrun(work: Path, name: str, *, events: int, payload: int, rate: int, record: Path | None,
           window: int = 1024, max_file: int = 256 << 20, io: str = "buffered",
           keep: str = "copy") -> dict:
    """One run; its metrics' figures, or {"failed": ...}. io: builderd's
    --record-io (buffered, its default, or direct); keep: its --record-keep
    (copy, its default, or in-place)."""
    extra = ["--record", "none"]
    if record is not None:
        extra = ["--record", "raw", "--record-dir", str(record), "--record-max-payload",
                 str(payload), "--record-max-file-bytes", str(max_file), "--record-io", io,
                 "--record-keep", keep]
    topo = work / f"{name}.toml"
    topo.write_text(TOPOLOGY.format(events=events, payload=payload, rate=rate, window=window,
                                    extra=json.dumps(extra)))
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    r = run([sys.executable, DAQRUN, topo, "--quiet", "--check", "never", "--out", out])
    try:
        m = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        return {"failed": 1, "tail": (r.stdout + r.stderr)[-800:]}
    b = m["counters"]["builder"]
    span = m["rates"]["build_duration_s"]
    shutil.rmtree(out, ignore_errors=True)
    return {"failed": int(r.returncode != 0), "events_per_s": m["rates"]["accepted_events_per_s"],
            "span_s": span, "data_bytes": b.get("data_bytes_written", 0),
            "data_mb_per_s": b.get("data_bytes_written", 0) / span / 1e6 if span else 0.0,
            "p50_us": m["latency"]["p50_ns"] / 1e3 if m["latency"].get("p50_ns") else None,
            "p99_us": m["latency"]["p99_ns"] / 1e3 if m["latency"].get("p99_ns") else None,
            "cpu_us_per_fragment": m["cpu"]["us_per_fragment"],
            "direct_bytes": b.get("data_direct_bytes", 0),
            "frames_in_place": b.get("data_frames_in_place", 0),
            "frames_copied_late": b.get("data_frames_copied_late", 0),
            "frames_unique": b.get("frags_unique", 0),
            "builder_cpu_us_per_fragment": builder_cpu_us_per_fragment(m),
            "builder_max_rss_mib": m["processes"][0]["max_rss_kib"] / 1024,
            "tail": (r.stdout + r.stderr)[-400:] if r.returncode else ""}


def builder_cpu_us_per_fragment(m: dict) -> float | None:
    """The builder process's own CPU (user and system) per fragment."""
    me = m["processes"][0]
    frags = m["cpu"]["fragments"]
    return (me["cpu_user_s"] + me["cpu_sys_s"]) * 1e6 / frags if frags else None


def dd_mb_per_s(d: Path, mib: int, direct: bool = True) -> float:
    target = d / "dd.bin"
    r = run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}",
             *(["oflag=direct"] if direct else []), "conv=fsync"])
    target.unlink(missing_ok=True)
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", r.stderr)
    return int(m.group(1)) / float(m.group(2)) / 1e6 if m else 0.0


def clean(d: Path) -> None:
    for p in d.iterdir():
        if p.is_file():
            p.unlink()


def median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None and not r.get("failed")]
    return statistics.median(vals) if vals else None


def writer_alone(d: Path, events: int, fmt: str = "raw", direct: bool = False) -> dict:
    """tests/bench/bench_evwriter: 4 x 16 KiB events written in d, nothing else running."""
    tool = REPO / "build" / "tests" / "bench_evwriter"
    r = run([tool, "--dir", d, "--sources", 4, "--payload", 16384, "--events", events,
             "--format", fmt, *(["--direct"] if direct else [])])
    clean(d)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"failed": 1}


def bench_disk(work: Path, disk: Path, rounds: int, events: int, mib: int) -> dict:
    dd, rec, buf, plain, alone, alone_buf, copied = [], [], [], [], [], [], []  # copied: in place
    for k in range(rounds):
        dd.append(dd_mb_per_s(disk, mib))
        alone.append(writer_alone(disk, events, direct=True))
        alone_buf.append(writer_alone(disk, events))
        rec.append(daqrun(work, f"disk-rec-{k}", events=events, payload=16384, rate=0,
                          record=disk))
        clean(disk)
        buf.append(daqrun(work, f"disk-buf-{k}", events=events, payload=16384, rate=0,
                          record=disk, io="direct"))
        clean(disk)
        copied.append(daqrun(work, f"disk-inplace-{k}", events=events, payload=16384, rate=0,
                             record=disk, keep="in-place"))
        clean(disk)
        plain.append(daqrun(work, f"disk-plain-{k}", events=events, payload=16384, rate=0,
                            record=None))
    writer = median(alone, "gb_per_s")
    writer_buf = median(alone_buf, "gb_per_s")
    out = {"dd_mb_per_s": statistics.median(dd), "dd_rounds": dd,
           "writer_alone_mb_per_s": writer_buf * 1e3 if writer_buf is not None else None,
           "writer_alone_cpu_ns_per_byte": median(alone_buf, "cpu_ns_per_byte"),
           "writer_alone_direct_mb_per_s": writer * 1e3 if writer is not None else None,
           "writer_alone_direct_cpu_ns_per_byte": median(alone, "cpu_ns_per_byte"),
           "recorded_mb_per_s": median(rec, "data_mb_per_s"),
           "recorded_events_per_s": median(rec, "events_per_s"),
           "recorded_direct_io_bytes": median(buf, "direct_bytes"),
           "recorded_direct_mb_per_s": median(buf, "data_mb_per_s"),
           "recorded_direct_events_per_s": median(buf, "events_per_s"),
           "recorded_in_place_mb_per_s": median(copied, "data_mb_per_s"),
           "recorded_in_place_events_per_s": median(copied, "events_per_s"),
           "recorded_cpu_us_per_fragment": median(rec, "cpu_us_per_fragment"),
           "recorded_in_place_cpu_us_per_fragment": median(copied, "cpu_us_per_fragment"),
           "recorded_builder_cpu_us_per_fragment": median(rec, "builder_cpu_us_per_fragment"),
           "recorded_in_place_builder_cpu_us_per_fragment": median(copied, "builder_cpu_us_per_fragment"),
           **kept_in_place(copied),
           "not_recorded_events_per_s": median(plain, "events_per_s"),
           "profile": profile(work, "disk-profile", events=events, payload=16384, record=disk),
           "failed": sum(r["failed"] for r in rec + buf + copied + plain), "rounds": rounds,
           "events": events}
    out["recorded_direct_of_dd"] = (out["recorded_direct_mb_per_s"] or 0) / \
        out["dd_mb_per_s"] if out["dd_mb_per_s"] else None
    out["recorded_of_dd"] = (out["recorded_mb_per_s"] or 0) / out["dd_mb_per_s"] \
        if out["dd_mb_per_s"] else None
    out["recorded_in_place_of_dd"] = (out["recorded_in_place_mb_per_s"] or 0) / out["dd_mb_per_s"] \
        if out["dd_mb_per_s"] else None
    out["writer_alone_of_dd"] = (out["writer_alone_mb_per_s"] or 0) / out["dd_mb_per_s"] \
        if out["dd_mb_per_s"] else None
    return out


def kept_in_place(rows: list[dict]) -> dict:
    """Of the unique fragments of the in-place runs, the share kept in
    their ring until written, and the share of those copied out after all."""
    unique = sum(r.get("frames_unique", 0) for r in rows)
    kept = sum(r.get("frames_in_place", 0) for r in rows)
    late = sum(r.get("frames_copied_late", 0) for r in rows)
    return {"in_place_share": kept / unique if unique else None,
            "copied_late_share": late / kept if kept else None}


def bench_writer(rounds: int, events: int) -> dict:
    """On tmpfs, beside dd's buffered write to it: the kernel's own rate
    of putting bytes into tmpfs, which bounds any writer there."""
    d = Path(tempfile.mkdtemp(prefix="esdq-bench-dd-", dir="/dev/shm"))
    dd = [dd_mb_per_s(d, 1024, direct=False) for _ in range(rounds)]
    shutil.rmtree(d, ignore_errors=True)
    out = {"dd_tmpfs_gb_per_s": statistics.median(dd) / 1e3 if dd else None}
    for fmt in ("raw", "hdf5"):
        rows = []
        for _ in range(rounds):
            d = Path(tempfile.mkdtemp(prefix="esdq-bench-writer-", dir="/dev/shm"))
            rows.append(writer_alone(d, events, fmt))
            shutil.rmtree(d, ignore_errors=True)
        out[fmt] = {"gb_per_s": median(rows, "gb_per_s"),
                    "cpu_ns_per_byte": median(rows, "cpu_ns_per_byte"),
                    "failed": sum(1 for r in rows if r.get("failed"))}
    return out


def profile(work: Path, name: str, *, events: int, payload: int, record: Path) -> list[str]:
    """The builder's hottest symbols in one recorded unpaced run."""
    if shutil.which("perf") is None:
        return ["perf is not installed: no profile"]
    data = work / "perf.data"
    perf = subprocess.Popen(["perf", "record", "-F", "999", "-a", "-g", "-o", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    disk = record
    daqrun(work, name, events=events, payload=payload, rate=0, record=disk)
    perf.send_signal(signal.SIGINT)
    perf.wait(60)
    clean(disk)
    r = run(["perf", "report", "-i", data, "--comm", "builderd", "--no-children", "--stdio",
             "--sort", "symbol", "--percentage", "relative", "--percent-limit", "2", "-g", "none"], 300)
    data.unlink(missing_ok=True)
    lines = [ln.strip() for ln in r.stdout.splitlines() if re.match(r"\s+[\d.]+%", ln)]
    return lines[:12] or ["perf report gave nothing: " + r.stderr[-200:]]


def bench_small(work: Path, disk: Path, rounds: int, events: int) -> dict:
    rec, buf, plain, copied = [], [], [], []
    for k in range(rounds):
        rec.append(daqrun(work, f"small-rec-{k}", events=events, payload=64, rate=0, record=disk))
        clean(disk)
        copied.append(daqrun(work, f"small-inplace-{k}", events=events, payload=64, rate=0,
                             record=disk, keep="in-place"))
        clean(disk)
        buf.append(daqrun(work, f"small-buf-{k}", events=events, payload=64, rate=0,
                          record=disk, io="direct"))
        clean(disk)
        plain.append(daqrun(work, f"small-plain-{k}", events=events, payload=64, rate=0,
                            record=None))
    return {"recorded_events_per_s": median(rec, "events_per_s"),
            "recorded_direct_events_per_s": median(buf, "events_per_s"),
            "not_recorded_events_per_s": median(plain, "events_per_s"),
            "recorded_cpu_us_per_fragment": median(rec, "cpu_us_per_fragment"),
            "recorded_direct_cpu_us_per_fragment": median(buf, "cpu_us_per_fragment"),
            "not_recorded_cpu_us_per_fragment": median(plain, "cpu_us_per_fragment"),
            "recorded_in_place_events_per_s": median(copied, "events_per_s"),
            "recorded_in_place_cpu_us_per_fragment": median(copied, "cpu_us_per_fragment"),
            "recorded_builder_cpu_us_per_fragment": median(rec, "builder_cpu_us_per_fragment"),
            "recorded_in_place_builder_cpu_us_per_fragment": median(copied, "builder_cpu_us_per_fragment"),
            **kept_in_place(copied),
            "failed": sum(r["failed"] for r in rec + buf + copied + plain), "events": events,
            "profile": profile(work, "small-profile", events=max(events, 1000000), payload=64,
                               record=disk)}


def bench_paced(work: Path, disk: Path, rounds: int, events: int) -> dict:
    rec, plain = [], []
    for k in range(rounds):
        rec.append(daqrun(work, f"paced-rec-{k}", events=events, payload=256, rate=10000,
                          record=disk))
        clean(disk)
        plain.append(daqrun(work, f"paced-plain-{k}", events=events, payload=256, rate=10000,
                            record=None))
    return {"recorded_p50_us": median(rec, "p50_us"), "recorded_p99_us": median(rec, "p99_us"),
            "not_recorded_p50_us": median(plain, "p50_us"),
            "not_recorded_p99_us": median(plain, "p99_us"),
            "failed": sum(r["failed"] for r in rec + plain), "events": events}


def builder_pid(out: Path) -> int | None:
    r = run(["pgrep", "-f", f"builderd .*--out {out}"])
    pids = [int(p) for p in r.stdout.split()]
    return pids[0] if pids else None


def one_crash(work: Path, k: int, rng: random.Random) -> dict:
    """A recording run killed at a random moment; what it left."""
    out, rec = work / f"crash-{k}", work / f"crash-{k}-data"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(rec, ignore_errors=True)
    rec.mkdir()
    topo = work / "crash.toml"
    topo.write_text(TOPOLOGY.format(events=200000, payload=1024, rate=20000, window=1024,
                                    extra=json.dumps(["--record", "raw", "--record-dir", str(rec),
                                                      "--record-max-payload", "1024",
                                                      "--record-max-file-bytes", str(4 << 20),
                                                      "--record-slice-ms", "1000"])))
    launcher = subprocess.Popen([sys.executable, DAQRUN, topo, "--quiet", "--check", "never",
                                 "--out", out], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    pid, t0 = None, time.monotonic()
    while pid is None and time.monotonic() - t0 < 30:
        pid = builder_pid(out)
        time.sleep(0.05)
    at = rng.uniform(0.3, 4.0)
    time.sleep(at)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    launcher.wait(120)
    closed = sorted(rec.glob("*.dat"))
    damaged = bare = 0
    for f in closed:
        try:
            info = evfile.check_file(f)    # with its manifest, when it has one
        except (evfile.EventFileError, OSError, ValueError):
            damaged += 1
            continue
        bare += not Path(str(f) + ".json").exists()   # killed between rename and manifest
    left = sorted(rec.glob("*.writing"))
    recovered = kept = empty = 0
    manifests_equal = True
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            work = evdump.recover_dir(rec)
            statuses = {p: fn(p) for fn, p in work}
        finally:
            sys.stdout = stdout
    for f in left:
        closed_name = f.with_name(f.name[:-len(evfile.OPEN_SUFFIX)])
        if statuses.get(f) == 0 and not f.exists() and not closed_name.exists():
            empty += 1      # empty: held no event, removed
        elif statuses.get(f) == 0 and closed_name.exists():
            recovered += 1
            info = evfile.check_file(closed_name)
            kept += info["events"]
            doc = json.loads(Path(str(closed_name) + ".json").read_text())
            manifests_equal &= doc["event_count"] == info["events"] and doc["recovered"]
    for f in closed:
        if not Path(str(f) + ".json").exists():
            manifests_equal = False
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(rec, ignore_errors=True)
    return {"killed_at_s": round(at, 2), "killed": pid is not None, "closed_files": len(closed),
            "damaged_closed": damaged, "manifest_missing": bare, "left_open": len(left),
            "recovered": recovered, "empty_removed": empty, "events_kept": kept,
            "manifests_equal": manifests_equal}


def bench_crash(work: Path, crashes: int, seed: int) -> dict:
    rng = random.Random(seed)
    rows = [one_crash(work, k, rng) for k in range(crashes)]
    return {"runs": crashes, "seed": seed, "killed": sum(r["killed"] for r in rows),
            "closed_files": sum(r["closed_files"] for r in rows),
            "damaged_closed_files": sum(r["damaged_closed"] for r in rows),
            "manifest_missing": sum(r["manifest_missing"] for r in rows),
            "left_open": sum(r["left_open"] for r in rows),
            "recovered": sum(r["recovered"] for r in rows),
            "empty_removed": sum(r["empty_removed"] for r in rows),
            "manifests_equal": all(r["manifests_equal"] for r in rows), "rows": rows}


def fmt(v, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def markdown(res: dict) -> str:
    d, w, s, p, c = res["disk"], res["writer"], res["small"], res["paced"], res["crash"]
    lines = [f"# Recording: {res['date']} on {res['host']}", "",
             f"Disk ({res['disk_dir']}): dd oflag=direct {fmt(d['dd_mb_per_s'])} MB/s; the raw "
             f"writer alone there, 4 x 16 KiB events, {fmt(d['writer_alone_mb_per_s'])} MB/s "
             f"({fmt(100 * (d['writer_alone_of_dd'] or 0))} % of dd); one builder "
             f"recording 4 x 16 KiB unpaced {fmt(d['recorded_mb_per_s'])} MB/s "
             f"({fmt(100 * (d['recorded_of_dd'] or 0))} % of dd) buffered (the default), "
             f"{fmt(d['recorded_direct_mb_per_s'])} MB/s "
             f"({fmt(100 * (d['recorded_direct_of_dd'] or 0))} % of dd) by direct I/O; events/s "
             f"{fmt(d['recorded_events_per_s'])} recorded buffered, "
             f"{fmt(d['recorded_direct_events_per_s'])} direct, "
             f"{fmt(d['not_recorded_events_per_s'])} not recorded. The writer alone: "
             f"{fmt(d['writer_alone_cpu_ns_per_byte'], 2)} CPU ns/byte buffered, "
             f"{fmt(d['writer_alone_direct_cpu_ns_per_byte'], 2)} direct "
             f"({fmt(d['writer_alone_direct_mb_per_s'])} MB/s).", "",
             f"Fragments kept in their ring until written (--record-keep in-place) against "
             f"copied into the window's cells (copy, the default), 4 x 16 KiB buffered: "
             f"{fmt(d['recorded_in_place_mb_per_s'])} against {fmt(d['recorded_mb_per_s'])} MB/s "
             f"({fmt(100 * (d['recorded_in_place_of_dd'] or 0))} % of dd); the builder's own CPU "
             f"{fmt(d['recorded_in_place_builder_cpu_us_per_fragment'], 2)} against "
             f"{fmt(d['recorded_builder_cpu_us_per_fragment'], 2)} us per fragment; "
             f"{fmt(100 * (d['in_place_share'] or 0))} % of the fragments kept in place, "
             f"{fmt(100 * (d['copied_late_share'] or 0), 2)} % of those copied out after all. "
             "The builder's time recording 4 x 16 KiB (perf, self time):", "", "```",
             *d["profile"], "```", "",
             f"On tmpfs dd writes {fmt(w['dd_tmpfs_gb_per_s'], 2)} GB/s (buffered, 1 MiB blocks). "
             f"Writer alone on tmpfs, 4 x 16 KiB: raw {fmt(w['raw']['gb_per_s'], 2)} GB/s at "
             f"{fmt(w['raw']['cpu_ns_per_byte'], 2)} CPU ns/byte; HDF5 "
             f"{fmt(w['hdf5']['gb_per_s'], 2)} GB/s at {fmt(w['hdf5']['cpu_ns_per_byte'], 2)} ns/byte.",
             "",
             f"Small events, 4 x 64 B unpaced: {fmt(s['recorded_events_per_s'])} events/s recorded "
             f"buffered, {fmt(s['recorded_direct_events_per_s'])} direct, "
             f"{fmt(s['not_recorded_events_per_s'])} not; CPU per fragment "
             f"{fmt(s['recorded_cpu_us_per_fragment'], 2)} us buffered, "
             f"{fmt(s['recorded_direct_cpu_us_per_fragment'], 2)} us direct, against "
             f"{fmt(s['not_recorded_cpu_us_per_fragment'], 2)} us. Kept in their ring instead "
             f"of copied: {fmt(s['recorded_in_place_events_per_s'])} events/s; the builder's own "
             f"CPU {fmt(s['recorded_in_place_builder_cpu_us_per_fragment'], 2)} against "
             f"{fmt(s['recorded_builder_cpu_us_per_fragment'], 2)} us per fragment "
             f"({fmt(100 * (s['in_place_share'] or 0))} % kept in place, "
             f"{fmt(100 * (s['copied_late_share'] or 0), 2)} % of those copied out after all). "
             "The builder's time when recording (perf, self time):", "", "```", *s["profile"],
             "```", "",
             f"Paced 4 x 10k events/s: latency p50 {fmt(p['recorded_p50_us'])} us, p99 "
             f"{fmt(p['recorded_p99_us'])} us recorded; p50 {fmt(p['not_recorded_p50_us'])} us, p99 "
             f"{fmt(p['not_recorded_p99_us'])} us not.", "",
             f"Crash: {c['runs']} runs (seed {c['seed']}), {c['killed']} builders killed with "
             f"SIGKILL: {c['closed_files']} closed files, {c['damaged_closed_files']} damaged, "
             f"{c['manifest_missing']} without their manifest (killed between the rename and "
             f"it; given one by recovery); {c['left_open']} left open, {c['recovered']} "
             f"recovered, {c['empty_removed']} removed as empty (killed as it was opened); "
             f"every manifest equal to its file's events: "
             f"{'yes' if c['manifests_equal'] else 'NO'}.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--crashes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--dir", default="/var/tmp",
                    help="a folder on the file system to measure (default /var/tmp)")
    ap.add_argument("--quick", action="store_true", help="small runs, 1 round, 3 crashes")
    ap.add_argument("--out", default=str(REPO / "results" /
                                         f"bench-record-{datetime.date.today().isoformat()}"))
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.crashes = 1, min(a.crashes, 3)
    scale = 0.2 if a.quick else 1.0
    work = Path(tempfile.mkdtemp(prefix="esdq-bench-record-"))
    disk = Path(tempfile.mkdtemp(prefix="esdq-bench-record-disk-", dir=a.dir))
    try:
        res = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
               "host": os.uname().nodename, "disk_dir": a.dir, "rounds": a.rounds}
        print("bench_record: disk ...", flush=True)
        res["disk"] = bench_disk(work, disk, a.rounds, int(16000 * scale), int(1024 * scale))
        print("bench_record: writer ...", flush=True)
        res["writer"] = bench_writer(a.rounds, int(20000 * scale))
        print("bench_record: small events ...", flush=True)
        res["small"] = bench_small(work, disk, a.rounds, int(300000 * scale))
        print("bench_record: paced ...", flush=True)
        res["paced"] = bench_paced(work, disk, a.rounds, int(50000 * scale))
        print("bench_record: crashes ...", flush=True)
        res["crash"] = bench_crash(work, a.crashes, a.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "record.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "record.md").write_text(markdown(res))
    print(markdown(res))
    failed = sum(res[k]["failed"] for k in ("disk", "small", "paced")) + \
        res["writer"]["raw"]["failed"] + res["writer"]["hdf5"]["failed"]
    return 1 if failed or res["crash"]["damaged_closed_files"] or \
        not res["crash"]["manifests_equal"] else 0


if __name__ == "__main__":
    sys.exit(main())
