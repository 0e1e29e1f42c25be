"""What a run records ([output], docs/RECORDING.md) as daqrun sees it: the
builders' data directories, made before they start and cleared of an
earlier run's event files; after the run RUN_DIR/files.json, the run's
manifest of every event file of every builder from the files' own
manifests; and the summary's lines of files, events, bytes and MB/s from
metrics.json's counters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .backends import Backend
from .daemons import config_sha256, data_dir
from .topology import Topology

FILES_JSON = "files.json"
FILES_FORMAT = "daqrun-files/1"
# runRRRRRR_bB_sSSSS_fFFFF.dat or .h5, with .json (its manifest) or
# .writing (open, or left by a killed builder) after it.
EVENT_FILE = re.compile(r"run\d{6,}_b\d+_s\d{4,}_f\d{4,}\.(dat|h5)(\.json|\.writing)?")
# The end-of-slice and end-of-run documents (docs/RECORDING.md, "Slices").
SLICE_DOC = re.compile(r"run\d{6,}_b\d+(_s\d{4,}\.eos|\.eor)\.json")
MANIFEST_KEYS = ("bytes", "event_count", "first_event", "last_event", "file_crc", "slice",
                 "file_seq", "recovered")


def data_dirs(t: Topology, run_dir: Path) -> dict[int, Path]:
    """{builder id: its data directory}, {} when the run records nothing."""
    if not t.records:
        return {}
    return {b.get("id", 0): data_dir(t, run_dir, b.get("id", 0)) for b in t.builders}


def shown(path: Path, run_dir: Path) -> str:
    """A path relative to the run directory when under it, else absolute."""
    try:
        return path.relative_to(run_dir).as_posix() or "."
    except ValueError:
        return str(path)


def clear_event_files(t: Topology, run_dir: Path) -> list[Path]:
    """Removes an earlier run's event files (and files.json) from the data
    directories under the run directory, as prepare_run_dir clears
    events.jsonl: a builder refuses to open a file whose name exists. A
    directory outside the run directory is the operator's and left alone."""
    gone = []
    (run_dir / FILES_JSON).unlink(missing_ok=True)
    dirs = {run_dir, *data_dirs(t, run_dir).values()}
    for d in dirs:
        if not d.is_dir() or shown(d, run_dir).startswith("/"):
            continue
        for f in d.iterdir():
            if f.is_file() and (EVENT_FILE.fullmatch(f.name) or SLICE_DOC.fullmatch(f.name)):
                f.unlink()
                gone.append(f)
    return gone


def make_data_dirs(t: Topology, be: Backend, run_dir: Path) -> None:
    """Every builder's data directory on its host, before it starts."""
    for b in t.builders:
        if t.records:
            be.make_dir(b["host"], data_dir(t, run_dir, b.get("id", 0)))


def params_section(t: Topology, run_dir: Path) -> dict:
    """params.json's "output": what refbuild and a reader need to find the data."""
    return {**t.output, "config_sha256": config_sha256(t),
            "directories": {str(b): shown(d, run_dir) for b, d in data_dirs(t, run_dir).items()}}


def files_doc(t: Topology, run_dir: Path) -> dict:
    """files.json: every event file of every builder, from its manifest;
    a file without one (a .writing left open) is listed as unclosed."""
    files, unclosed, problems = [], [], []
    for b, d in sorted(data_dirs(t, run_dir).items()):
        names = sorted(f.name for f in d.iterdir()) if d.is_dir() else []
        for name in names:
            m = EVENT_FILE.fullmatch(name)
            if m is None or m.group(2) == ".json":
                continue
            if m.group(2) == ".writing":
                unclosed.append({"name": shown(d / name, run_dir), "builder": b,
                                 "bytes": (d / name).stat().st_size})
                continue
            entry = {"name": shown(d / name, run_dir), "builder": b,
                     "format": "raw" if m.group(1) == "dat" else "hdf5"}
            try:
                doc = json.loads((d / (name + ".json")).read_text(encoding="utf-8"))
                entry.update({"events" if k == "event_count" else k: doc.get(k)
                              for k in MANIFEST_KEYS})
            except (OSError, ValueError) as e:
                problems.append(f"{shown(d / name, run_dir)}: no readable manifest ({e})")
                entry["bytes"] = (d / name).stat().st_size
            files.append(entry)
    events = sum(f.get("events") or 0 for f in files)
    return {"format": FILES_FORMAT, "run": t.run["run"], "output": t.output["format"],
            "config_sha256": config_sha256(t),
            "directories": {str(b): shown(d, run_dir) for b, d in data_dirs(t, run_dir).items()},
            "files": files, "unclosed": unclosed, "problems": problems,
            "totals": {"files": len(files), "events": events,
                       "bytes": sum(f.get("bytes") or 0 for f in files)}}


def builder_counters(t: Topology, metrics: dict) -> dict[int, dict]:
    """{builder id: its END counters} from metrics.json."""
    if not t.several:
        return {0: (metrics.get("counters") or {}).get("builder") or {}}
    section = metrics.get("builders") or {}
    out = {}
    for b in t.builders:
        entry = section.get(str(b["id"])) if isinstance(section, dict) else None
        out[b["id"]] = ((entry or {}).get("counters") or {}).get("builder") or {}
    return out


def rate_words(nbytes: int, span_ns: int | None, write_ns: int | None) -> str:
    parts = []
    if span_ns:
        parts.append(f"{nbytes / (span_ns / 1e9) / 1e6:.1f} MB/s over the build span "
                     f"({span_ns / 1e9:.2f} s)")
    if write_ns:
        parts.append(f"{nbytes / (write_ns / 1e9) / 1e6:.1f} MB/s while writing "
                     f"({write_ns / 1e9:.3f} s)")
    return ", ".join(parts) or "no time measured"


def summary_lines(t: Topology, run_dir: Path, files: dict | None) -> tuple[list[str], list[str]]:
    """(the summary's lines, the differences that fail the run): each
    builder's files, events, bytes and MB/s from its counters, and
    files.json's totals, which must equal them."""
    if not t.records:
        return [], []
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ["recording: no metrics.json"], []
    metrics = metrics if isinstance(metrics, dict) else {}
    counters = builder_counters(t, metrics)
    # The run's build span: the first fragment to the last complete event
    # (metrics.json's rates.build_duration_s; each builder of several its own).
    duration = (metrics.get("rates") or {}).get("build_duration_s")
    run_span = int(duration * 1e9) if isinstance(duration, (int, float)) else None
    lines, total = [], {"files": 0, "events": 0, "bytes": 0, "write_ns": 0}
    for b, c in sorted(counters.items()):
        n, ev, nb = (c.get(k, 0) for k in ("data_files", "data_events_written",
                                           "data_bytes_written"))
        total["files"] += n
        total["events"] += ev
        total["bytes"] += nb
        total["write_ns"] += c.get("data_write_ns", 0)
        lost = [f"{c[k]} {k[5:].replace('_', ' ')}" for k in
                ("data_events_unwritten", "data_events_unrecorded") if c.get(k)]
        lines.append(f"builder {b} recorded {t.output['format']}: {n} files, {ev} events, "
                     f"{nb / 1e6:.1f} MB in {shown(data_dir(t, run_dir, b), run_dir)}; "
                     f"{rate_words(nb, c.get('build_span_ns') or run_span, c.get('data_write_ns'))}"
                     + (f"; {', '.join(lost)}" if lost else ""))
    problems = []
    if files is not None:
        tot = files["totals"]
        lines.append(f"files.json: {tot['files']} files, {tot['events']} events, "
                     f"{tot['bytes'] / 1e6:.1f} MB"
                     + (f", {len(files['unclosed'])} unclosed" if files["unclosed"] else ""))
        if tot["files"] != total["files"] or tot["events"] != total["events"]:
            problems.append(f"files.json lists {tot['files']} files of {tot['events']} events; "
                            f"the builders counted {total['files']} files of {total['events']} "
                            f"events written")
        problems += files["problems"]
    if t.several:
        lines.append(f"recorded in all: {total['files']} files, {total['events']} events, "
                     f"{total['bytes'] / 1e6:.1f} MB; "
                     f"{rate_words(total['bytes'], run_span, None)}")
    return lines, problems
