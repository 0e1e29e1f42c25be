"""Unattended scans (deploy/daqctl scan FILE): points over a topology's
[run] keys run one after another on serving daemons (the processes of
deploy/daqrun --serve or --runs, never restarted), each point's runs
configured through runconfig.configure_body as daqrun's are, and one
table written with a row per point (JSON and CSV). docs/RUNCONTROL.md,
"Scans".

A scan file (TOML), checked whole before anything starts:

    topology = "two-readers.toml"   # relative to the scan file (or --topology)
    repeats = 3                     # runs per point, 1 .. 1000 (default 1)
    stop = { events = 20000 }       # or { seconds = 2.5 }: how each run ends
    [grid]                          # every combination, the first key slowest
    payload = [64, 1024]
    rate = [1000, 10000]

or, instead of [grid], [[point]] tables (each may carry its own stop).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import statistics
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .hubclient import Hub
from .launcher import prepare_run_dir
from .recording import make_data_dirs
from .runconfig import CLIENT_BACKENDS, Session, configure_body
from .schema import RUN_KEYS, TopologyError
from .topology import Topology, load_topology

FILE_KEYS = ("topology", "repeats", "stop", "grid", "point")
STOP_KEYS = ("events", "seconds")
# [run] keys a scan may vary: the run number is the scan's, the key file
# the session's, and a run's length is its stop condition.
SCAN_KEYS = tuple(k for k in RUN_KEYS if k not in ("run", "run_key_file", "events"))
REPEATS_MAX = 1000
PERCENTILES = ("p50", "p90", "p99")
POLL_S = 0.02


class ScanError(Exception):
    """A scan file that cannot run; the message names the file and what is wrong."""


class RunTimeout(Exception):
    """The hub did not reach a state in time; the message names the run and the state."""


@dataclass
class Point:
    values: dict               # run key -> value
    stop: dict                 # {"events": N} or {"seconds": S}
    sets: list[str] = field(default_factory=list)

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items()) or "(the topology's)"


@dataclass
class Scan:
    path: Path
    topology: str
    repeats: int
    points: list[Point]
    keys: list[str]            # every key some point sets, in first-seen order


def _stop(where: str, value) -> dict:
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in STOP_KEYS:
        raise ScanError(f"{where}: a stop condition is {{events = N}} or {{seconds = S}}, "
                        f"got {value!r}")
    (kind, n), = value.items()
    if isinstance(n, bool) or not isinstance(n, (int, float)) or n <= 0 or \
            (kind == "events" and not isinstance(n, int)) or not math.isfinite(n):
        raise ScanError(f"{where}: stop {kind} must be a positive "
                        f"{'integer' if kind == 'events' else 'number'}, got {n!r}")
    return {kind: n}


def _values(where: str, table: dict, allowed_extra: tuple[str, ...] = ()) -> dict:
    for k in table:
        if k not in SCAN_KEYS and k not in allowed_extra:
            hint = "; a run's length is stop = {events = N}" if k == "events" else ""
            raise ScanError(f"{where}: unknown key {k!r}{hint} (a scan varies [run] keys: "
                            f"{', '.join(SCAN_KEYS)})")
    return {k: v for k, v in table.items() if k not in allowed_extra}


def _grid(where: str, grid) -> list[dict]:
    if not isinstance(grid, dict) or not grid:
        raise ScanError(f"{where}: [grid] is empty: give each key a list of values")
    _values(where, grid)
    for k, vals in grid.items():
        if not isinstance(vals, list) or not vals:
            raise ScanError(f"{where}: grid key {k!r} needs a non-empty list of values, "
                            f"got {vals!r}")
    return [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]


def load_scan(path: str, topology: str | None, sets: list[str]) -> tuple[Scan, list[Topology]]:
    """The scan and every point's topology (with the point's keys and the
    base sets), each checked against the topology's schema: ScanError
    names the file, the point and the key of the first problem."""
    where = f"scan {path}"
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise ScanError(f"{where}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScanError(f"{where}: not valid TOML: {e}") from None
    unknown = [k for k in doc if k not in FILE_KEYS]
    if unknown:
        raise ScanError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(FILE_KEYS)})")
    repeats = doc.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or \
            not 1 <= repeats <= REPEATS_MAX:
        raise ScanError(f"{where}: repeats must be an integer in 1..{REPEATS_MAX}, "
                        f"got {repeats!r}")
    stop = _stop(where, doc["stop"]) if "stop" in doc else None
    if ("grid" in doc) == ("point" in doc):
        raise ScanError(f"{where}: give either [grid] or [[point]] tables (not "
                        f"{'both' if 'grid' in doc else 'neither'})")
    if "grid" in doc:
        tables = _grid(where, doc["grid"])
    else:
        tables = doc["point"]
        if not isinstance(tables, list) or not tables or \
                not all(isinstance(p, dict) for p in tables):
            raise ScanError(f"{where}: [[point]] must be one or more tables of [run] keys")
    points = []
    for i, table in enumerate(tables, 1):
        values = _values(f"{where}: point {i}", table, ("stop",))
        own = _stop(f"{where}: point {i}", table["stop"]) if "stop" in table else stop
        if own is None:
            raise ScanError(f"{where}: point {i} has no stop condition: give stop = "
                            f"{{events = N}} or {{seconds = S}}")
        points.append(Point(values, own, [f"run.{k}={json.dumps(v)}" for k, v in values.items()]
                            + ([f"run.events={own['events']}"] if "events" in own else [])))
    topo = topology or doc.get("topology")
    if not isinstance(topo, str) or not topo:
        raise ScanError(f"{where}: no topology: give topology = \"FILE\" or --topology")
    if topology is None:
        topo = str((Path(path).parent / topo))
    topologies = []
    for i, p in enumerate(points, 1):
        try:
            topologies.append(load_topology(topo, sets + p.sets))
        except TopologyError as e:
            raise ScanError(f"{where}: point {i} ({p.label()}): {e}") from None
    if topologies[0].deploy["backend"] not in CLIENT_BACKENDS:
        raise ScanError(f"{where}: the topology's backend is {topologies[0].deploy['backend']}; "
                        f"a scan runs on the {' and '.join(CLIENT_BACKENDS)} backends")
    keys = list(dict.fromkeys(k for p in points for k in p.values))
    return Scan(Path(path), topo, repeats, points, keys), topologies


PLAN_FORMAT = "daq-scan-plan/1"


def prepare_run(scan: Scan, session: Session, sets: list[str], point: Point,
                number: int) -> dict:
    """Run number's directory made ready (a previous run's outputs cleared,
    the builders' data directories made) and POST /configure's body for it
    as configure_body builds it; the body is also the run's configure.json."""
    t = load_topology(scan.topology, sets + point.sets + [f"run.run={number}"])
    run_dir = session.run_dir(number)
    prepare_run_dir(run_dir, t)
    backend = session.backend(t, run_dir)
    make_data_dirs(t, backend, run_dir)
    body = configure_body(t, backend, run_dir, session.ports)
    (run_dir / "configure.json").write_text(json.dumps(body, indent=2) + "\n")
    return body


def scan_plan(scan: Scan, session: Session, sets: list[str], first_run: int) -> dict:
    """Every run of the scan as its configure body, for a client that runs
    the points itself (the console, daqctl scan --print-bodies): the same
    points, numbers and bodies ScanRunner would post, each run's directory
    made ready; the stop condition of each point as the scan file says."""
    points, number = [], first_run
    for i, point in enumerate(scan.points, 1):
        runs = []
        for _ in range(scan.repeats):
            runs.append({"run": number, "body": prepare_run(scan, session, sets, point, number)})
            number += 1
        points.append({"point": i, "values": point.values, "label": point.label(),
                       "stop": point.stop, "runs": runs})
    return {"format": PLAN_FORMAT, "scan": str(scan.path), "topology": scan.topology,
            "repeats": scan.repeats, "keys": scan.keys, "first_run": first_run,
            "points": points}


class ScanRunner:
    """Runs a checked scan on a serving session through its hub."""

    def __init__(self, scan: Scan, hub: Hub, session: Session, sets: list[str],
                 first_run: int, point_timeout_s: float, say: Callable[[str], None]):
        self.scan, self.hub, self.session, self.sets = scan, hub, session, sets
        self.first_run, self.point_timeout_s, self.say = first_run, point_timeout_s, say
        self.last_end: float | None = None      # monotonic, the previous run's end
        self.rows: list[dict] = []              # the points done so far

    def wait(self, done: Callable[[dict], bool], timeout_s: float, what: str) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.hub.state()
            if done(st):
                return st
            if time.monotonic() > deadline:
                raise RunTimeout(f"{what}: the hub is still {st['state']} after "
                                 f"{timeout_s:g} s")
            time.sleep(POLL_S)

    def one_run(self, point: Point, number: int) -> dict:
        """Configure, start, end (the run's own or a stop), and its figures."""
        body = prepare_run(self.scan, self.session, self.sets, point, number)
        run_dir = self.session.run_dir(number)
        run = {"run": number, "dir": str(run_dir)}
        ok, reason = self.hub.post("/configure", body)
        if ok:
            try:
                st = self.wait(lambda s: s["state"] in ("configured", "error", "idle"),
                               self.point_timeout_s, f"run {number}: configure")
                ok, reason = st["state"] == "configured", st.get("error") or st["state"]
            except RunTimeout as e:
                ok, reason = False, str(e)
        if ok:
            ok, reason = self.hub.post("/start", {"run": number})
        if not ok:
            self.hub.post("/reset", {})
            self.wait(lambda s: s["state"] in ("idle", "error"), self.point_timeout_s, "reset")
            return dict(run, failed=f"run {number}: {reason}")
        t0, run["started_at"] = time.monotonic(), time.time()
        run["gap_s"] = None if self.last_end is None else t0 - self.last_end
        stopped = False
        deadline = t0 + self.point_timeout_s
        while True:
            st = self.hub.state()
            done = [r for r in st["runs"] if r["run"] == number]
            if done and st["state"] in ("idle", "error"):
                break
            now = time.monotonic()
            if not stopped and "seconds" in point.stop and now - t0 >= point.stop["seconds"]:
                self.hub.post("/stop", {"run": number})
                stopped = True
            if now > deadline:
                self.hub.post("/reset", {})
                self.wait(lambda s: s["state"] in ("idle", "error"), self.point_timeout_s,
                          "reset")
                return dict(run, failed=f"run {number}: not over after "
                                        f"{self.point_timeout_s:g} s; reset")
            time.sleep(POLL_S)
        self.last_end = time.monotonic()
        run.update(done[-1], ended_at=time.time(), seconds=self.last_end - t0)
        if st["state"] == "error":
            self.hub.post("/reset", {})
        return dict(run, metrics=read_metrics(run_dir))

    def run(self) -> list[dict]:
        """Every point in turn; self.rows holds those done when a HubError
        (the hub gone) or RunTimeout (a reset that never ends) stops it."""
        number = self.first_run
        for i, point in enumerate(self.scan.points, 1):
            runs = []
            for _ in range(self.scan.repeats):
                runs.append(self.one_run(point, number))
                number += 1
            row = point_row(i, point, self.scan, runs)
            self.rows.append(row)
            self.say(progress_line(row, len(self.scan.points)))
        return self.rows


def read_metrics(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return {}


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _latency_us(runs: list[dict], name: str) -> tuple[float | None, float | None]:
    """The percentile's median over the point's runs and its uncertainty:
    the larger of the builder's own (clock offsets) and half the spread
    between the runs."""
    vals, own = [], []
    for r in runs:
        w = r.get("metrics", {}).get("latency", {}).get("with_uncertainty", {}).get(name)
        if w:
            vals.append(w["value_ns"] / 1000)
            own.append(w.get("uncertainty_ns", 0) / 1000)
    if not vals:
        return None, None
    return statistics.median(vals), max(max(own), (max(vals) - min(vals)) / 2)


def point_row(i: int, point: Point, scan: Scan, runs: list[dict]) -> dict:
    failed = [r["failed"] for r in runs if "failed" in r]
    balanced = not failed and all(r.get("balanced") for r in runs)
    m = [r.get("metrics", {}) for r in runs]
    row = {"point": i, "runs": [r["run"] for r in runs]}
    row.update({k: point.values.get(k) for k in scan.keys})
    (kind, n), = point.stop.items()
    row.update({
        "stop": f"{kind}={n}",
        "verdict": failed[0] if failed else ("balanced" if balanced else "NOT balanced"),
        "balanced": balanced,
        "status": max((r.get("status", 1) for r in runs), default=1) if not failed else None,
        "events_decided": _median([r.get("events_decided") for r in runs]),
        "offered_events_per_s": _median([x.get("rates", {}).get("offered_events_per_s")
                                         for x in m]),
        "accepted_events_per_s": _median([x.get("rates", {}).get("accepted_events_per_s")
                                          for x in m]),
    })
    for p in PERCENTILES:
        row[f"{p}_us"], row[f"{p}_uncertainty_us"] = _latency_us(runs, p)
    row["cpu_us_per_fragment"] = _median([x.get("cpu", {}).get("us_per_fragment") for x in m])
    row["seconds"] = _median([r.get("seconds") for r in runs])
    gaps = [r.get("gap_s") for r in runs if r.get("gap_s") is not None]
    row["gap_s"] = max(gaps) if gaps else None
    row["started_at"] = runs[0].get("started_at")
    row["ended_at"] = runs[-1].get("ended_at")
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}


def _fig(v, unit: str, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f} {unit}"


def progress_line(row: dict, points: int) -> str:
    lat = (f"p99 {_fig(row['p99_us'], 'us')} ± {_fig(row['p99_uncertainty_us'], 'us')}"
           if row["p99_us"] is not None else "no latency")
    values = " ".join(f"{k}={row[k]}" for k in row if k not in ROW_FIXED and row[k] is not None)
    return (f"point {row['point']}/{points} ({values}; runs "
            f"{' '.join(map(str, row['runs']))}): {row['verdict']}, "
            f"{_fig(row['accepted_events_per_s'], 'ev/s', 0)}, {lat}, "
            f"{_fig(row['cpu_us_per_fragment'], 'us/fragment', 2)}, "
            f"gap {_fig(row['gap_s'], 's', 3)}")


ROW_FIXED = ("point", "runs", "stop", "verdict", "balanced", "status", "events_decided",
             "offered_events_per_s", "accepted_events_per_s", "p50_us", "p50_uncertainty_us",
             "p90_us", "p90_uncertainty_us", "p99_us", "p99_uncertainty_us",
             "cpu_us_per_fragment", "seconds", "gap_s", "started_at", "ended_at")


def write_table(prefix: Path, scan: Scan, rows: list[dict], wall_s: float) -> tuple[Path, Path]:
    """PREFIX.json (the scan and its rows) and PREFIX.csv (the rows; runs
    joined by spaces, an absent figure empty)."""
    js, cs = prefix.with_name(prefix.name + ".json"), prefix.with_name(prefix.name + ".csv")
    doc = {"format": "daq-scan/1", "scan": str(scan.path), "topology": scan.topology,
           "repeats": scan.repeats, "keys": scan.keys, "wall_s": wall_s, "rows": rows}
    js.write_text(json.dumps(doc, indent=1) + "\n")
    with open(cs, "w", newline="") as f:
        w = csv.writer(f)
        columns = list(rows[0]) if rows else ["point"]
        w.writerow(columns)
        for row in rows:
            w.writerow([" ".join(map(str, v)) if isinstance(v, list) else
                        "" if v is None else v for v in (row[c] for c in columns)])
    return js, cs
