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
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from .backends import Backend, Handle, LaunchError
from .daemons import (addr, builder_argv, reader_argv, refbuild_policy, shm_name, source_argv,
                      uses_shm)
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


def say(msg: str) -> None:
    print(f"daqrun: {msg}", flush=True)


OUTPUTS = ("events.jsonl", "expired.jsonl", "metrics.json", "params.json")


def prepare_run_dir(run_dir: Path) -> None:
    """Creates the run directory, or clears a previous run's outputs from it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (run_dir / name).unlink(missing_ok=True)
    for sub in ("logs", "ports"):
        d = run_dir / sub
        d.mkdir(exist_ok=True)
        for f in d.iterdir():
            if f.is_file():
                f.unlink()


def write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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


def placement_prefix(*specs: dict) -> list[str]:
    """taskset/chrt in front of a daemon's command line: the first of
    specs (most specific first) that sets cpus, and rtprio, wins."""
    cpus = next((s["cpus"] for s in specs if s.get("cpus") is not None), None)
    prio = next((s["rtprio"] for s in specs if s.get("rtprio") is not None), None)
    out = ["taskset", "-c", cpus] if cpus is not None else []
    return out + (["chrt", "-f", str(prio)] if prio is not None else [])


class Launcher:
    def __init__(self, t: Topology, backend: Backend, bin_dir: Path, run_dir: Path,
                 timeout_s: float, check: str, sets: list[str]):
        self.t, self.backend, self.bin_dir, self.run_dir = t, backend, bin_dir, run_dir
        self.faults: list[dict] = []      # --fault: signals to send mid-run
        self.status_url: str | None = None
        self.progress = True              # --quiet turns it off
        self.last_progress = 0.0
        self.progress_shown = False
        self.stopped: list = []           # SIGSTOPped, to continue at the end
        self.timeout_s, self.check, self.sets = timeout_s, check, sets
        self.handles: list[Handle] = []
        self.ports: dict[str, dict[str, int]] = {}
        self.builder: Handle | None = None
        self.teardown_problems: list[str] = []
        self.t0 = time.monotonic()

    # params.json: what refbuild and later analysis need to know about the run.
    def params(self) -> dict:
        run = dict(self.t.run)
        run["sources"] = len(self.t.source_ids)
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
            "run": run,
            "topology": self.t.as_dict(),
            "refbuild": {"deterministic": deterministic, "reason": reason},
            "ports": self.ports,
            "shm_name": shm_name() if uses_shm(self.t) else None,
            "processes": [{"name": h.name, "host": h.host, "pid": h.pid, "argv": h.argv,
                           "log": str(h.log_path), "status": h.returncode, "killed": h.killed,
                           "elapsed_s": round((h.ended or time.monotonic()) - h.started, 3)}
                          for h in self.handles],
        }

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
        t, start_timeout = self.t, self.t.deploy["start_timeout_s"]
        ports_dir = self.run_dir / "ports"
        pf = ports_dir / "builder-0.port"
        be = self.backend
        bhost = t.builder["host"]
        self.builder = self.start("builder-0", placement_prefix(t.builder) +
                                  builder_argv(t, be, self.run_dir, pf), bhost, stdout=True)
        bports = read_ports(be, self.builder, pf, ("data", "control"), start_timeout)
        self.ports["builder-0"] = bports
        self.status_url = (f"http://127.0.0.1:{bports['metrics']}/status"
                           if "metrics" in bports else None)
        say(f"builder-0 pid {self.builder.pid}{self.on(bhost)}: data "
            f"{addr(be.address(bhost), bports['data'])}, "
            f"control {addr(be.address(bhost), bports['control'])}")

        # All readers start at once; then their port files are read in turn.
        readers = []
        for r in t.readers:
            name = f"reader-{r['id']}"
            pf = ports_dir / f"{name}.port"
            readers.append((r, pf, self.start(name, placement_prefix(r) +
                                              reader_argv(t, r, be, pf, bports), r["host"])))
        reader_ports: dict[int, int] = {}
        for r, pf, h in readers:
            port = read_ports(be, h, pf, ("data",), start_timeout)["data"]
            reader_ports[r["id"]] = port
            self.ports[h.name] = {"data": port}
            say(f"{h.name} pid {h.pid}{self.on(r['host'])}: data "
                f"{addr(be.address(r['host']), port)}, "
                f"sources {','.join(map(str, r['sources']))}, to the builder over "
                + (f"shared memory @es-{shm_name()}" if r["transport"] == "shm" else "tcp"))

        started = []
        for s in t.source_ids:
            reader = t.reader_of(s)
            argv = placement_prefix(t.source_overrides.get(s, {}), t.sources_defaults) + \
                source_argv(t, s, be, reader_ports[reader["id"]], bports)
            h = self.start(f"source-{s}", argv, t.source_host(s))
            started.append(f"{s} (pid {h.pid}{self.on(t.source_host(s))})" if h.pid
                           else f"{s}{self.on(t.source_host(s))}")
        say(f"sources {', '.join(started)}")

    def show_progress(self, now: float) -> None:
        """One status line from the builder's /status: rewritten each second
        on a terminal, printed every five seconds otherwise."""
        tty = sys.stdout.isatty()
        if not self.progress or self.status_url is None or \
                now - self.last_progress < (1.0 if tty else 5.0):
            return
        self.last_progress = now
        try:
            with urllib.request.urlopen(self.status_url, timeout=0.5) as r:
                st = json.loads(r.read())
        except (OSError, ValueError):
            return
        expected = st.get("events_expected") or 0
        left = expected - st["events_complete"] - st["events_expired"]
        eta = (f", ETA {left / st['events_per_s']:.0f} s"
               if expected and st["events_per_s"] > 0 and left > 0 else "")
        line = (f"daqrun: {100 * st['completeness']:.1f}% complete, {st['events_complete']} built "
                f"({st['events_per_s']:.0f}/s), {st['events_accepted']} accepted, "
                f"{st['events_expired']} expired, {st['events_pending']} pending, "
                f"limit {st['admission_limit']}, p99 {st['latency_p99_ns'] / 1e6:.3f} ms{eta}")
        if tty:
            sys.stdout.write("\r" + line + "\033[K")
            sys.stdout.flush()
            self.progress_shown = True
        else:
            print(line, flush=True)

    def inject_faults(self, now: float) -> None:
        """Sends each --fault signal when its moment comes; a stopped daemon
        is continued once the builder has ended the run, so it can see that
        and exit."""
        for f in self.faults:
            if f.get("done") or now < self.started_at + f["at"]:
                continue
            h = next((h for h in self.handles if h.name == f"{f['role']}-{f['id']}"), None)
            if h is None:
                raise LaunchError(f"--fault {f['text']}: no daemon {f['role']}-{f['id']} in this run")
            f["done"] = True
            if self.backend.wait(h, 0) is not None:
                say(f"fault: {h.name} had already exited at {now - self.started_at:.2f} s; "
                    f"SIG{f['signal']} not sent")
                continue
            say(f"fault: sending SIG{f['signal']} to {h.name} at {now - self.started_at:.2f} s")
            self.backend.kill(h, getattr(signal, "SIG" + f["signal"]))
            if f["signal"] == "STOP":
                self.stopped.append(h)

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
                if rc != 0 or h is self.builder:
                    say(f"{h.name} exited with status {rc} after "
                        f"{h.ended - h.started:.1f} s" + ("" if rc == 0 else f"\n{log_tail(h, self.backend)}"))
                if h is self.builder:
                    builder_done_at = time.monotonic()
                    if self.progress_shown:
                        print(flush=True)
                        self.progress_shown = False
            if not pending:
                break
            now = time.monotonic()
            if builder_done_at is not None and now > builder_done_at + grace:
                names = ", ".join(h.name for h in pending)
                say(f"still running {grace:g} s after builder-0 exited, stopping: {names}")
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
        print("-" * 72, flush=True)

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
        if not (self.run_dir / "events.jsonl").exists():
            say(f"refbuild: no events.jsonl in {self.run_dir}")
            return EXIT_FAIL
        say(f"refbuild {self.run_dir}")
        try:
            done = subprocess.run([sys.executable, str(REFBUILD), str(self.run_dir)],
                                  stdin=subprocess.DEVNULL, timeout=600)
        except subprocess.TimeoutExpired:
            say("refbuild did not finish within 600 s")
            return EXIT_FAIL
        return done.returncode
