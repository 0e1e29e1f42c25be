"""The run: starts builderd, the readers and the sources in that order
through the backend, waits for them under the overall timeout (sending
--fault signals, showing progress), stops what is left, and writes
params.json. docs/TOPOLOGY.md, "What the launcher does".
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .backends import Backend, Handle, LaunchError
from .daemons import (addr, builder_argv, builder_out, builder_role_argv, builder_shm_name,
                      hub_argv, placement_prefix, port_file, reader_argv, refbuild_policy,
                      shm_name, source_argv, uses_shm)
from .hubclient import Hub, HubError
from .recording import FILES_JSON, clear_event_files, files_doc, make_data_dirs, params_section, summary_lines
from .topology import Topology

REPO = Path(__file__).resolve().parent.parent.parent
REFBUILD = REPO / "analysis" / "refbuild.py"
TRUTHCHECK = REPO / "analysis" / "truthcheck.py"

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 124, 130
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived."""


class _Signals:
    """Signal state: a signal that arrives inside deferred_signals() is
    raised as Interrupted when the block ends."""
    deferring = False
    pending: str | None = None


def on_stop_signal(signum: int, _frame: Any) -> None:
    name = signal.Signals(signum).name
    if _Signals.deferring:
        _Signals.pending = _Signals.pending or name
    else:
        raise Interrupted(name)


@contextlib.contextmanager
def deferred_signals():
    _Signals.deferring = True
    try:
        yield
    finally:
        _Signals.deferring = False
    if _Signals.pending:
        name, _Signals.pending = _Signals.pending, None
        raise Interrupted(name)


class _Terminal:
    """Whether the progress line, rewritten in place, is the terminal's
    last line: what is said next ends it first."""
    line_open = False


def say(msg: str) -> None:
    if _Terminal.line_open:
        print(flush=True)
        _Terminal.line_open = False
    print(f"daqrun: {msg}", flush=True)


OUTPUTS = ("events.jsonl", "expired.jsonl", "metrics.json", "params.json", "running.json")
# builderd writes it as a run starts and removes it once its end document
# (metrics.json, a builder's builder.json) is written (docs/METRICS.md, "A
# run in progress"): a directory holding it is a run still going or killed.
RUN_MARKER = "running.json"


def in_progress(run_dir: Path) -> str | None:
    """A sentence naming the unfinished run when RUN_DIR (or one of its
    builders/B/) holds running.json, else None."""
    run_dir = Path(run_dir)
    markers = [run_dir / RUN_MARKER] + sorted((run_dir / "builders").glob(f"*/{RUN_MARKER}"))
    for path in markers:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            if path.exists():
                doc = {}
            else:
                continue
        doc = doc if isinstance(doc, dict) else {}
        who = f"{doc.get('role', 'builderd')}" + (f" {doc['id']}" if doc.get("role") == "builder"
                                                 and "id" in doc else "")
        return (f"{path} says run {doc.get('run', '?')} is in progress ({who}, pid "
                f"{doc.get('pid', '?')} on {doc.get('host', '?')}, started "
                f"{doc.get('started', '?')}): it is still running or was killed before writing "
                f"its {doc.get('end_document', 'end document')}; its records are partial and "
                f"it has no books")
    return None


def prepare_run_dir(run_dir: Path, t: Topology | None = None) -> None:
    """Creates the run directory, or clears a previous run's outputs from it
    (with the builders' folders of a run of several builders, and the event
    files of t's data directories under it)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (run_dir / name).unlink(missing_ok=True)
    if t is not None:
        clear_event_files(t, run_dir)
    shutil.rmtree(run_dir / "builders", ignore_errors=True)
    for sub in ("logs", "ports"):
        d = run_dir / sub
        d.mkdir(exist_ok=True)
        for f in d.iterdir():
            if f.is_file():
                f.unlink()


def write_json(path: Path, doc: dict) -> None:
    """The document whole or not at all, as the daemons write theirs
    (common/sys/afile): a temporary beside it, fsynced, renamed over it,
    the directory fsynced."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_ports(backend: Backend, h: Handle, path: Path, keys: tuple[str, ...],
               timeout_s: float) -> dict[str, int]:
    """Waits for a daemon's port file ("data <port>", "control <port>")."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = backend.read_file(h.host, path)
        if text is not None:
            ports = {}
            for line in text.splitlines():
                words = line.split()
                if len(words) == 2 and words[1].isdigit():
                    ports[words[0]] = int(words[1])
            if all(k in ports for k in keys):
                backend.wait(h, 0)     # (a remote backend learns the daemon's pid)
                return ports
        rc = backend.wait(h, 0)
        if rc is not None:
            raise LaunchError(f"{h.name} exited with status {rc} before writing its port "
                              f"file {path}\n{log_tail(h, backend)}")
        if time.monotonic() > deadline:
            raise LaunchError(f"{h.name} did not write {' and '.join(keys)} to its port file "
                              f"{path} within {timeout_s:g} s\n{log_tail(h, backend)}")
        time.sleep(backend.poll_s)


def log_tail(h: Handle, backend: Backend | None = None, lines: int = 12) -> str:
    if backend is not None:
        raw = backend.log_text(h)
    else:
        try:
            raw = h.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            raw = None
    if raw is None:
        return f"  (no log at {h.log_path})"
    text = raw.splitlines()
    if not text:
        return f"  ({h.log_path} is empty)"
    return "\n".join(f"  | {line}" for line in text[-lines:]) + f"\n  (log: {h.log_path})"


def fence_of(entry: dict) -> int | None:
    """A builder the hub gave up counts its records below this event (its
    last token's decided_below, docs/BUILDERS.md, "A given-up builder is
    fenced"); None for a builder not given up."""
    if entry.get("lost_reason") is None:
        return None
    below = entry.get("decided_below")
    return below if isinstance(below, int) else 0


def below_fence(line: bytes, fence: int | None) -> bool:
    if fence is None:
        return True
    try:
        return json.loads(line)["event"] < fence
    except (TypeError, ValueError, KeyError):
        return False


def records(path: Path, fence: int | None = None) -> tuple[int | None, float | None]:
    """(records in a .jsonl file, None when it does not exist; their rate
    from the first record's t_ns to the last's, None when unknown); with a
    fence, only the records of events below it count."""
    count, first, last = 0, None, None
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.strip() and below_fence(line, fence):
                    count += 1
                    first = first or line
                    last = line
    except OSError:
        return None, None
    try:
        t0, t1 = json.loads(first)["t_ns"], json.loads(last)["t_ns"]
        return count, (count - 1) / ((t1 - t0) / 1e9) if t1 > t0 else None
    except (TypeError, ValueError, KeyError):
        return count, None


def builders_section(metrics: dict) -> dict[int, dict]:
    """metrics.json's "builders" section by builder id, {} when absent (an
    object keyed by id, as the hub writes it, or a list of objects with "id")."""
    section = metrics.get("builders")
    if isinstance(section, dict):
        items = list(section.items())
    elif isinstance(section, list):
        items = [(v.get("id", i) if isinstance(v, dict) else i, v) for i, v in enumerate(section)]
    else:
        return {}
    out = {}
    for ident, value in items:
        try:
            out[int(ident)] = value if isinstance(value, dict) else {}
        except (TypeError, ValueError):
            continue
    return out


def figure(entry, *names: str, depth: int = 2):
    """The first of names with a number in entry or in its objects down to
    depth (a builder's END counters are in entry["counters"]["builder"])."""
    if not isinstance(entry, dict):
        return None
    for name in names:
        value = entry.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    for value in entry.values() if depth > 0 else ():
        found = figure(value, *names, depth=depth - 1)
        if found is not None:
            return found
    return None


def builder_lines(run_dir: Path, t: Topology) -> list[str]:
    """One line per builder of several: its records (and their rate) and
    what the hub says of it (assigned, complete) when metrics.json has a
    "builders" section."""
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        metrics = {}
    section = builders_section(metrics) if isinstance(metrics, dict) else {}
    lines = []
    for b in t.builders:
        out = builder_out(run_dir, b["id"])
        entry = section.get(b["id"], {})
        fence = fence_of(entry)
        recorded, rate = records(out / "events.jsonl", fence)
        expired, _ = records(out / "expired.jsonl", fence)
        parts = [f"{recorded} events recorded" if recorded is not None else "no events.jsonl",
                 f"{expired} expired" if expired is not None else "no expired.jsonl"]
        if fence is not None:
            parts.append(f"given up ({entry.get('lost_reason')}): records count below event "
                         f"{fence}, {entry.get('lost')} events lost")
        assigned = figure(entry, "assigned", depth=0)
        complete = figure(entry, "events_complete")
        hub_rate = figure(entry, "events_per_s", "rate")
        rate = hub_rate if hub_rate is not None else rate
        if assigned is not None:
            parts.append(f"assigned {assigned:.0f}")
        if complete is not None:
            parts.append(f"complete {complete:.0f}")
        if rate is not None:
            parts.append(f"{rate:.0f} events/s")
        lines.append(f"builder {b['id']} ({b['host']}): " + ", ".join(parts))
    return lines


class Launcher:
    def __init__(self, t: Topology, backend: Backend, bin_dir: Path, run_dir: Path,
                 timeout_s: float, check: str, sets: list[str]):
        self.t, self.backend, self.bin_dir, self.run_dir = t, backend, bin_dir, run_dir
        self.faults: list[dict] = []      # --fault: signals to send mid-run
        self.status: Hub | None = None    # the one builder's (or hub's) /status
        self.progress = True              # --quiet turns it off
        self.last_progress = 0.0
        self.stopped: list = []           # SIGSTOPped, to continue at the end
        self.timeout_s, self.check, self.sets = timeout_s, check, sets
        self.handles: list[Handle] = []
        self.ports: dict[str, dict[str, int]] = {}
        self.builder: Handle | None = None     # the run's hub: builder-0, or "hub"
        self.builder_status: dict[int, Hub] = {}   # /status of each builder of several
        self.builder_seen: dict[int, tuple[float, int]] = {}   # when, events_complete
        self.teardown_problems: list[str] = []
        self.recording_problems: list[str] = []   # files.json against the counters
        self.t0 = time.monotonic()

    # params.json: what refbuild and later analysis need to know about the run.
    def params(self) -> dict:
        run = dict(self.t.run)
        run["sources"] = len(self.t.source_ids)
        stopped_at = self.stopped_at_event()
        if stopped_at is not None:
            # A drained stop ended the run at an event boundary: the run's
            # events are those up to it, and refbuild expects just those.
            run["events_planned"] = run["events"]
            run["stopped_at_event"] = stopped_at
            run["events"] = max(0, stopped_at + 1 - run["first_event"])
        deterministic, reason = refbuild_policy(self.t)
        return {
            "format": "daqrun-params/1",
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "topology_file": os.path.abspath(self.t.path),
            "sets": self.sets,
            "bin": str(self.bin_dir),
            "backend": self.backend.name,
            "hosts": {name: {"address": self.backend.address(name),
                             "daemons": [h.name for h in self.handles if h.host == name]}
                      for name in self.backend.hosts},
            "backend_info": self.backend.describe(),
            "rails": {name: self.backend.rail_addresses(name) for name in self.backend.hosts},
            "run": run,
            "topology": self.t.as_dict(),
            "refbuild": {"deterministic": deterministic, "reason": reason},
            "output": params_section(self.t, self.run_dir),
            "ports": self.ports,
            "shm_name": shm_name() if uses_shm(self.t) else None,
            "builders": [{"id": b["id"], "host": b["host"], "out": f"builders/{b['id']}",
                          "shm_name": builder_shm_name(b["id"])
                          if b["id"] in {x["id"] for x in self.t.shm_builders()} else None}
                         for b in self.t.builders] if self.t.several else None,
            "processes": [{"name": h.name, "host": h.host, "pid": h.pid, "argv": h.argv,
                           "log": str(h.log_path), "status": h.returncode, "killed": h.killed,
                           "elapsed_s": round((h.ended or time.monotonic()) - h.started, 3)}
                          for h in self.handles],
        }

    def stopped_at_event(self) -> int | None:
        """The last event of a drained stop, from metrics.json; None without one."""
        try:
            m = json.loads((self.run_dir / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        last = m.get("stop_last_event") if isinstance(m, dict) else None
        return last if isinstance(last, int) and not isinstance(last, bool) else None

    def start(self, name: str, argv: list[str], host: str, stdout: bool = False) -> Handle:
        logs = self.run_dir / "logs"
        # No interruption between the fork and the bookkeeping: a daemon the
        # launcher does not know about would outlive it. (Blocking the
        # signals instead would leave them blocked in the daemons.)
        with deferred_signals():
            h = self.backend.start(name, argv, logs / f"{name}.log", host=host,
                                   stdout_path=logs / f"{name}.out" if stdout else None)
            self.handles.append(h)
        return h

    def on(self, host: str) -> str:
        """" on HOST" when the topology names its hosts."""
        return f" on {host}" if self.t.hosts_declared else ""

    def start_all(self) -> None:
        """Starts the builders (the one of --role both, or the hub, then
        every builder), the readers, then the sources, each stage once the
        one before has written its ports."""
        make_data_dirs(self.t, self.backend, self.run_dir)
        if self.t.several:
            self.start_hub()
            self.start_builders()
        else:
            self.start_builder()
        self.start_readers()
        self.start_sources()

    def start_builder(self) -> None:
        t, be = self.t, self.backend
        pf = port_file(self.run_dir, "builder-0")
        bhost = t.builder["host"]
        self.builder = self.start("builder-0", placement_prefix(t.builder) +
                                  builder_argv(t, be, self.run_dir, pf), bhost, stdout=True)
        bports = read_ports(be, self.builder, pf, ("data", "control"),
                            t.deploy["start_timeout_s"])
        self.ports["builder-0"] = bports
        self.status = self.status_of(bhost, bports)
        say(f"builder-0 pid {self.builder.pid}{self.on(bhost)}: data "
            f"{addr(be.address(bhost), bports['data'])}, "
            f"control {addr(be.address(bhost), bports['control'])}")

    def start_hub(self) -> None:
        t, be = self.t, self.backend
        pf = port_file(self.run_dir, "hub")
        self.builder = self.start("hub", placement_prefix(t.hub) +
                                  hub_argv(t, be, self.run_dir, pf), t.hub_host, stdout=True)
        ports = read_ports(be, self.builder, pf, ("control",), t.deploy["start_timeout_s"])
        self.ports["hub"] = ports
        self.status = self.status_of(t.hub_host, ports)
        say(f"hub pid {self.builder.pid}{self.on(t.hub_host)}: control "
            f"{addr(be.address(t.hub_host), ports['control'])}, {len(t.builders)} builders, "
            f"routing {t.run['routing'] or 'manager'}")

    def start_builders(self) -> None:
        """Every builder at once; then their port files in turn."""
        t, be = self.t, self.backend
        started = []
        shm = {b["id"] for b in t.shm_builders()}
        for b in t.builders:
            name = f"builder-{b['id']}"
            be.make_dir(b["host"], builder_out(self.run_dir, b["id"]))
            pf = port_file(self.run_dir, name)
            started.append((b, pf, self.start(name, placement_prefix(b) + builder_role_argv(
                t, b, be, self.run_dir, pf, self.ports), b["host"])))
        for b, pf, h in started:
            ports = read_ports(be, h, pf, ("data",), t.deploy["start_timeout_s"])
            self.ports[h.name] = ports
            status = self.status_of(b["host"], ports)
            if status is not None:
                self.builder_status[b["id"]] = status
            say(f"{h.name} pid {h.pid}{self.on(b['host'])}: data "
                f"{addr(be.address(b['host']), ports['data'])}"
                + (f", shared memory @es-{builder_shm_name(b['id'])}" if b["id"] in shm else ""))

    def link_words(self, r: dict) -> str:
        if not self.t.several:
            return "to the builder over " + (f"shared memory @es-{shm_name()}"
                                             if r["transport"] == "shm" else "tcp")
        return "to builders " + ", ".join(f"{b} {link}" for b, link in self.t.links(r).items())

    def start_readers(self) -> None:
        """All readers at once; then their port files in turn."""
        t, be = self.t, self.backend
        readers = []
        for r in t.readers:
            name = f"reader-{r['id']}"
            pf = port_file(self.run_dir, name)
            readers.append((r, pf, self.start(name, placement_prefix(r) +
                                              reader_argv(t, r, be, pf, self.ports), r["host"])))
        for r, pf, h in readers:
            port = read_ports(be, h, pf, ("data",), t.deploy["start_timeout_s"])["data"]
            self.ports[h.name] = {"data": port}
            say(f"{h.name} pid {h.pid}{self.on(r['host'])}: data "
                f"{addr(be.address(r['host']), port)}, "
                f"sources {','.join(map(str, r['sources']))}, {self.link_words(r)}")

    def start_sources(self) -> None:
        t, be = self.t, self.backend
        started = []
        for s in t.source_ids:
            reader = t.reader_of(s)
            argv = placement_prefix(t.source_overrides.get(s, {}), t.sources_defaults) + \
                source_argv(t, s, be, self.ports[f"reader-{reader['id']}"]["data"], self.ports)
            h = self.start(f"source-{s}", argv, t.source_host(s))
            started.append(f"{s} (pid {h.pid}{self.on(t.source_host(s))})" if h.pid
                           else f"{s}{self.on(t.source_host(s))}")
        say(f"sources {', '.join(started)}")

    def status_of(self, host: str, ports: dict) -> Hub | None:
        """Where the launcher reads the /status of a builder on host whose
        port file is ports (the backend's status_address, inside its
        netns_path), or None."""
        where = self.backend.status_address(host)
        if where is None or "metrics" not in ports:
            return None
        return Hub(f"http://{addr(where, ports['metrics'])}", None, timeout_s=0.5,
                   netns=self.backend.netns_path(host))

    @staticmethod
    def read_status(where: Hub) -> dict | None:
        try:
            status, st = where.request("GET", "/status")
        except HubError:
            return None
        return st if status == 200 else None

    def one_builder_line(self) -> str | None:
        """The progress of the one builder of a run, from its /status."""
        st = self.read_status(self.status) if self.status else None
        if st is None:
            return None
        complete, expired = st.get("events_complete", 0), st.get("events_expired", 0)
        rate = st.get("events_per_s", 0)
        expected = st.get("events_expected") or 0
        left = expected - complete - expired
        eta = f", ETA {left / rate:.0f} s" if expected and rate > 0 and left > 0 else ""
        limit = (f", limit {st['admission_limit']}" if "admission_limit" in st else "")
        return (f"daqrun: {100 * st.get('completeness', 0):.1f}% complete, {complete} built "
                f"({rate:.0f}/s), {st.get('events_accepted', 0)} accepted, {expired} expired, "
                f"{st.get('events_pending', 0)} pending{limit}, "
                f"p99 {st.get('latency_p99_ns', 0) / 1e6:.3f} ms{eta}")

    def several_builders_line(self, now: float) -> str | None:
        """The progress of several builders, each from its own /status: the
        sums, and each builder's count and rate, measured here between two
        looks (whatever its /status says of its rate)."""
        parts, total, expired, accepted, p99, rate = [], 0, 0, 0, 0, 0.0
        for b_id, where in sorted(self.builder_status.items()):
            st = self.read_status(where)
            if st is None:
                parts.append(f"b{b_id} ?")
                continue
            complete = st.get("events_complete", 0)
            total += complete
            expired += st.get("events_expired", 0)
            accepted += st.get("events_accepted", 0)
            p99 = max(p99, st.get("latency_p99_ns", 0))
            then, before = self.builder_seen.get(b_id, (now, complete))
            self.builder_seen[b_id] = (now, complete)
            own = (complete - before) / (now - then) if now > then else 0.0
            rate += own
            parts.append(f"b{b_id} {complete} ({own:.0f}/s)")
        if not parts:
            return None
        expected = self.t.run["events"]
        left = expected - total - expired
        eta = f", ETA {left / rate:.0f} s" if rate > 0 and left > 0 else ""
        return (f"daqrun: {100 * (total + expired) / expected:.1f}% complete, {total} built "
                f"({rate:.0f}/s), {accepted} accepted, {expired} expired, "
                f"p99 {p99 / 1e6:.3f} ms{eta}; {', '.join(parts)}")

    def show_progress(self, now: float) -> None:
        """One status line from the builder's /status (several builders:
        from each builder's): rewritten each second on a terminal, printed
        every five seconds otherwise."""
        tty = sys.stdout.isatty()
        if not self.progress or now - self.last_progress < (1.0 if tty else 5.0):
            return
        self.last_progress = now
        line = self.several_builders_line(now) if self.t.several else self.one_builder_line()
        if line is None:
            return
        if tty:
            sys.stdout.write("\r" + line + "\033[K")
            sys.stdout.flush()
            _Terminal.line_open = True
        else:
            print(line, flush=True)

    def inject_faults(self, now: float, since: float | None = None) -> None:
        """Sends each --fault signal when its moment comes, counted from
        `since` (the start, by default); a stopped daemon is continued once
        the builder has ended the run, so it can see that and exit."""
        since = self.started_at if since is None else since
        for f in self.faults:
            if f.get("done") or now < since + f["at"]:
                continue
            name = "hub" if f["role"] == "hub" else f"{f['role']}-{f['id']}"
            h = next((h for h in self.handles if h.name == name), None)
            if h is None:
                raise LaunchError(f"--fault {f['text']}: no daemon {name} in this run")
            f["done"], f["name"] = True, name
            if self.backend.wait(h, 0) is not None:
                say(f"fault: {h.name} had already exited at {now - since:.2f} s; "
                    f"SIG{f['signal']} not sent")
                continue
            say(f"fault: sending SIG{f['signal']} to {h.name} at {now - since:.2f} s")
            self.backend.kill(h, getattr(signal, "SIG" + f["signal"]))
            if f["signal"] == "STOP":
                self.stopped.append(h)
            elif f["signal"] == "CONT" and h in self.stopped:
                self.stopped.remove(h)

    def wait_all(self) -> str:
        """Waits for every daemon. Returns "done" or "timeout"."""
        deadline = self.t0 + self.timeout_s
        grace = self.t.deploy["grace_s"]
        builder_done_at = None
        pending = list(self.handles)
        self.started_at = time.monotonic()
        while pending:
            self.inject_faults(time.monotonic())
            if builder_done_at is None:
                self.show_progress(time.monotonic())
            if builder_done_at is not None:
                for h in self.stopped:
                    self.backend.kill(h, signal.SIGCONT)
                self.stopped = []
            for h in list(pending):
                rc = self.backend.wait(h, 0)
                if rc is None:
                    continue
                pending.remove(h)
                note = self.backend.exit_note(h)
                if rc != 0 or h is self.builder or note:
                    say(f"{h.name} exited with status {rc} after "
                        f"{h.ended - h.started:.1f} s" + (f": {note}" if note else "")
                        + ("" if rc == 0 else f"\n{log_tail(h, self.backend)}"))
                if h is self.builder:
                    builder_done_at = time.monotonic()
            if not pending:
                break
            now = time.monotonic()
            if builder_done_at is not None and now > builder_done_at + grace:
                names = ", ".join(h.name for h in pending)
                say(f"still running {grace:g} s after {self.builder.name} exited, stopping: "
                    f"{names}")
                self.stop_all()
                return "done"
            if now > deadline:
                names = ", ".join(h.name for h in pending)
                say(f"timeout after {self.timeout_s:g} s; stopping {names}")
                self.stop_all()
                return "timeout"
            time.sleep(0.05)
        return "done"

    def stop_all(self) -> None:
        """Stops every daemon still running: sources first, builder last,
        all signalled before any is waited for."""
        running = [h for h in reversed(self.handles) if self.backend.wait(h, 0) is None]
        for h in running:
            h.killed = True
            self.backend.kill(h, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        for h in running:
            if self.backend.wait(h, max(0.0, deadline - time.monotonic())) is None:
                self.backend.kill(h, signal.SIGKILL)
                self.backend.wait(h, 5.0)

    def summary(self) -> None:
        if self.builder is None or self.builder.stdout_path is None:
            return
        # Local once collected (every backend collects before the summary).
        try:
            text = self.builder.stdout_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        print("---- builderd summary " + "-" * 50)
        print(text.rstrip("\n") if text.strip() else "(builderd printed nothing)")
        if self.t.several:
            print("---- builders " + "-" * 58)
            for line in builder_lines(self.run_dir, self.t):
                print(line)
        lines = self.recording()
        if lines:
            print("---- recording " + "-" * 57)
            for line in lines:
                print(line)
        print("-" * 72, flush=True)

    def recording(self) -> list[str]:
        """Writes RUN_DIR/files.json when the run records; the summary's
        lines of what was written (docs/RECORDING.md, "What daqrun shows").
        A difference between files.json and the builders' counters goes
        to recording_problems, which fail the run."""
        if not self.t.records:
            return []
        files = None
        try:
            files = files_doc(self.t, self.run_dir)
            write_json(self.run_dir / FILES_JSON, files)
        except OSError as e:
            self.recording_problems.append(f"{FILES_JSON} not written: {e}")
        lines, problems = summary_lines(self.t, self.run_dir, files)
        self.recording_problems += problems
        return lines + [f"recording: {p}" for p in problems]

    def truthcheck(self) -> int | None:
        """In the virtual cluster every namespace reads one kernel clock, so
        the true offsets are the injected ones: checks every clock estimate
        builderd applied against them. Its status, None where not run."""
        if self.t.deploy["backend"] != "netns" or not (self.run_dir / "metrics.json").exists():
            return None
        say(f"truthcheck {self.run_dir}")
        try:
            done = subprocess.run([sys.executable, str(TRUTHCHECK), "--quiet", str(self.run_dir)],
                                  stdin=subprocess.DEVNULL, timeout=120)
        except subprocess.TimeoutExpired:
            say("truthcheck did not finish within 120 s")
            return EXIT_FAIL
        return done.returncode

    def refbuild(self) -> int | None:
        """Runs refbuild when the policy allows; its status, or None if skipped."""
        deterministic, reason = refbuild_policy(self.t)
        if self.check == "never" or (self.check == "auto" and not deterministic):
            say(f"refbuild skipped: {reason}" if self.check == "auto"
                else "refbuild skipped (--check never)")
            return None
        records = "builders" if self.t.several else "events.jsonl"
        if not (self.run_dir / records).exists():
            say(f"refbuild: no {records} in {self.run_dir}")
            return EXIT_FAIL
        say(f"refbuild {self.run_dir}")
        try:
            done = subprocess.run([sys.executable, str(REFBUILD), str(self.run_dir)],
                                  stdin=subprocess.DEVNULL, timeout=600)
        except subprocess.TimeoutExpired:
            say("refbuild did not finish within 600 s")
            return EXIT_FAIL
        return done.returncode
