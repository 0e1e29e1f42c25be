"""deploy/daqrun's command line and main(). Each option is declared once in
OPTIONS (flag, kind, default, help): argparse's table, --help and the
command-line table of docs/TOPOLOGY.md (daqlib.doctables) all come from it.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .backends import BACKENDS, Backend, LaunchError
from .backends.base import DAEMONS
from .daemons import make_run_key, num, shm_segments
from .launcher import (EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE, REPO,
                       STOP_SIGNALS, Interrupted, Launcher, in_progress, on_stop_signal,
                       prepare_run_dir, say, write_json)
from .schema import TopologyError
from .topology import Topology, load_topology
from .serving import ServingLauncher, finish_serving, run_plan

DESCRIPTION = ("Start one run of the distributed event builder from a topology file, on this "
               "machine, on a virtual cluster of network namespaces, on real hosts over ssh or as "
               "job steps of one Slurm allocation; "
               "wait for it, print builderd's summary and check the accepted events with "
               "analysis/refbuild.py. Topology format: docs/TOPOLOGY.md; backends: "
               "docs/DEPLOY.md.")
EPILOG = ("Exit status: builderd's status; else 1 if another daemon failed, refbuild found a "
          "difference, a clock estimate's bound missed the truth (netns), "
          "or the backend could not remove what it created; 2 topology/usage "
          "error; 124 timeout; 130 interrupted. Example: deploy/daqrun "
          "deploy/topologies/three-hosts.toml --out runs/3h --set netns.shaping=1gbit "
          "--set events=20000")


@dataclass(frozen=True)
class Option:
    flag: str                    # "--out", or a positional's name
    kind: str                    # "str", "float", "choice", "list" (repeatable), "flag",
                                 # "pids" (a flag taking any number of pids)
    help: str                    # "{backends}" becomes the registered backends
    metavar: str | None = None
    default: Any = None
    choices: tuple[str, ...] = ()
    dest: str | None = None

    def help_text(self) -> str:
        return self.help.replace("{backends}", ", ".join(BACKENDS))

    def argparse_kwargs(self) -> dict:
        kw: dict[str, Any] = {"help": self.help_text()}
        if self.kind == "flag":
            return dict(kw, action="store_true")
        kw["metavar"] = self.metavar
        if self.dest:
            kw["dest"] = self.dest
        if self.kind == "float":
            kw["type"] = float
        elif self.kind == "int":
            kw["type"] = int
        elif self.kind == "choice":
            kw.update(choices=self.choices, default=self.default, metavar=None)
        elif self.kind == "list":
            kw.update(action="append", default=[])
        elif self.kind == "pids":           # the flag alone, or with PIDs after it
            kw.update(nargs="*", type=int, default=None)
            return kw
        if not self.flag.startswith("-"):
            kw["nargs"] = "?"
        return kw


OPTIONS = (
    Option("topology", "str", "topology file", metavar="TOPOLOGY.toml"),
    Option("--out", "str", "run directory: outputs, params.json, logs/, ports/ (a previous "
           "run's outputs there are removed); default runs/TOPOLOGY-BACKEND, e.g. "
           "runs/three-hosts-slurm", metavar="DIR"),
    Option("--set", "list", "override a topology key: run.events=1000 (or just events=1000), "
           "builder.host=... (builder.ID.host=... of [[builder]] tables), hub.host=..., "
           "reader.ID.host=..., source.ID.extra=[...], deploy.backend=netns, "
           "netns.shaping=1gbit, hosts.NAME.ssh=...; VALUE is a TOML value, or a string; "
           "repeatable", metavar="KEY=VALUE", dest="sets"),
    Option("--backend", "str", "shorthand for --set deploy.backend=NAME ({backends})",
           metavar="NAME"),
    Option("--bin", "str", "where builderd, readoutd and sourced are (default: $ES_BIN, else "
           "<repo>/bin)", metavar="DIR"),
    Option("--timeout", "float", "overall time limit in seconds (default: [deploy] timeout_s, "
           "else 300 + 2 x events / rate)", metavar="S"),
    Option("--check", "choice", "run refbuild after the run: auto (default) only when the "
           "accepted events are determined by the parameters alone", default="auto",
           choices=("auto", "always", "never")),
    Option("--fault", "list", "send a daemon a signal that many seconds after the start, e.g. "
           "reader:0:KILL@2 (a crash), source:1:STOP@1.5 (a stall; builder:1:CONT@4 resumes it "
           "mid-run, else it is continued once the run has ended), builder:1:KILL@2 or "
           "builder:0:USR2@3 (an operator's drained stop of the one builder; ROLE "
           "source, reader, builder or hub; with --runs, seconds after the first run's start, and a "
           "daemon it kills is named by the hub and fails the next configure); repeatable",
           metavar="ROLE:ID:SIGNAL@SECONDS"),
    Option("--runs", "int", "serve N runs back to back on the same processes, each in "
           "DIR/run-<number>/ (run numbers run, run+1, ...; docs/RUNCONTROL.md)", metavar="N"),
    Option("--run-plan", "str", "with --runs: a TOML file of [runs.K] tables of [run] keys "
           "for run K (or --set runs.K.KEY=VALUE)", metavar="FILE"),
    Option("--run-seconds", "float", "with --runs: stop each run (a drained stop) this long "
           "after its start if it has not ended", metavar="S"),
    Option("--serve", "flag", "start the daemons serving runs and leave the runs to the "
           "operator: DIR/session.json tells deploy/daqctl --session DIR where they listen; "
           "ends when the hub is shut down (daqctl shutdown) or on a signal "
           "(docs/RUNCONTROL.md)"),
    Option("--quiet", "flag", "no progress line while the run goes"),
    Option("--cleanup", "pids", "instead of a run: remove what launchers that are no longer "
           "running left behind (network namespaces esdq<pid>-*, /tmp/esdq<pid>-*, "
           "/dev/shm/es-daq<pid>-*, Slurm allocations esdq<pid>-daqrun-<this host>) and exit; "
           "with PIDs, only what those launchers left. What belongs to a process still running "
           "(one that started before it was made) is left alone, and said so",
           metavar="PID"),
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="daqrun", description=DESCRIPTION, epilog=EPILOG)
    for o in OPTIONS:
        ap.add_argument(o.flag, **o.argparse_kwargs())
    return ap


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.cleanup is None and args.topology is None:
        ap.error("a topology is required (or --cleanup)")
    if args.backend:
        args.sets = [f"deploy.backend={args.backend}"] + args.sets
    return args


def default_timeout(t: Topology) -> float:
    if t.deploy["timeout_s"] is not None:
        return float(t.deploy["timeout_s"])
    rates = [t.run["rate"]] + [s["rate"] for s in t.source_overrides.values()
                               if s["rate"] is not None]
    slowest = min(rates) if all(r > 0 for r in rates) else 0
    return 300.0 + (2.0 * t.run["events"] / slowest if slowest else 0.0)


def describe(t: Topology) -> str:
    r = t.run
    rate = f"{num(r['rate'])} ev/s per source" if r["rate"] else "unpaced"
    faults = [f"{k}={r[k]}" for k in ("missing_every", "duplicate_every", "delay_every",
                                       "filter_cost_us") if r[k]]
    faults += [k for k in ("reorder", "no_admission") if r[k]]
    builders = (f"{len(t.builders)} builders ({r['routing'] or 'manager'} routing), "
                if t.several else "")
    return (f"run {r['run']} seed {r['seed']}: {len(t.source_ids)} sources, "
            f"{len(t.readers)} readers, {builders}{r['events']} events x {r['payload']} B, "
            f"{rate}" + (f", {' '.join(faults)}" if faults else ""))


def parse_fault(text: str) -> dict:
    """ROLE:ID:SIGNAL@SECONDS, e.g. reader:0:KILL@2.5."""
    try:
        what, at = text.rsplit("@", 1)
        role, ident, sig = what.split(":")
        fault = {"text": text, "role": role, "id": int(ident), "signal": sig.upper(),
                 "at": float(at)}
    except ValueError:
        raise TopologyError(f"--fault {text}: expected ROLE:ID:SIGNAL@SECONDS, "
                            "e.g. reader:0:KILL@2") from None
    if role not in ("source", "reader", "builder", "hub") or \
            fault["signal"] not in ("KILL", "STOP", "CONT", "TERM", "INT", "USR2"):
        raise TopologyError(f"--fault {text}: ROLE is source, reader, builder or hub (hub:0, the "
                            "hub of several builders); SIGNAL is KILL, STOP, CONT, TERM, INT or USR2 "
                            "(the drained stop of a hub)")
    return fault


class Teardown:
    """Removes the backend's hosts exactly once: at the end of main, or at
    exit if something unexpected escapes it."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.problems: list[str] | None = None

    def __call__(self) -> list[str]:
        if self.problems is None:
            try:
                self.problems = self.backend.teardown()
            except Exception as e:     # noqa: BLE001 - report, never mask the run's status
                self.problems = [f"teardown failed: {e}"]
        return self.problems


def fail_usage(msg: str) -> int:
    print(f"daqrun: error: {msg}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.cleanup is not None:
        from .cleanup import cleanup
        _, problems = cleanup(say=say, owners=set(args.cleanup) if args.cleanup else None)
        return EXIT_FAIL if problems else EXIT_OK
    if args.runs is None and not args.serve and (args.run_plan or args.run_seconds is not None
                              or any(x.startswith("runs.") for x in args.sets)):
        return fail_usage("--run-plan, --run-seconds and --set runs.K.KEY=VALUE need --runs N")
    if args.runs is not None and args.runs < 1:
        return fail_usage("--runs must be at least 1")
    if args.serve:
        if args.runs is not None or args.run_plan or args.run_seconds is not None:
            return fail_usage("--serve leaves the runs to the operator: no --runs, --run-plan "
                              "or --run-seconds")
        args.runs = 0
    try:
        t = load_topology(args.topology, [x for x in args.sets if not x.startswith("runs.")])
        plan = run_plan(args.run_plan, args.sets, args.runs) if args.runs is not None else {}
    except TopologyError as e:
        return fail_usage(str(e))
    if args.timeout is not None and args.timeout <= 0:
        return fail_usage("--timeout must be positive")
    bin_dir = Path(args.bin or os.environ.get("ES_BIN") or REPO / "bin").resolve()
    specs = t.host_specs()
    cls = BACKENDS[t.deploy["backend"]]
    absent = [d for d in DAEMONS if not os.access(bin_dir / d, os.X_OK)]
    if absent and cls.needs_local_binaries(specs):
        return fail_usage(f"{', '.join(absent)} not found (or not executable) in {bin_dir}; "
                          f"build with make, or point --bin / ES_BIN at the binaries")
    backend_name = t.deploy["backend"]
    run_dir = Path(args.out or f"runs/{Path(args.topology).stem}-{backend_name}").resolve()
    try:
        prepare_run_dir(run_dir, t)
    except OSError as e:
        return fail_usage(f"cannot prepare run directory {run_dir}: {e}")

    backend = cls(specs, run_dir, bin_dir, t.backend_options(), say)
    timeout_s = args.timeout if args.timeout is not None else default_timeout(t)
    if args.runs is not None:
        launcher = ServingLauncher(t, backend, bin_dir, run_dir, timeout_s, args.check,
                                   [x for x in args.sets if not x.startswith("runs.")],
                                   runs=args.runs, plan=plan, run_seconds=args.run_seconds,
                                   topology_path=args.topology)
        try:
            launcher.check_plan()
        except TopologyError as e:
            return fail_usage(str(e))
    else:
        launcher = Launcher(t, backend, bin_dir, run_dir, timeout_s, args.check, args.sets)
    launcher.progress = not args.quiet
    try:
        launcher.faults = [parse_fault(f) for f in args.fault]
    except TopologyError as e:
        return fail_usage(str(e))
    say(describe(t))
    say(f"run directory {run_dir}, binaries {bin_dir}, backend {backend.name}, "
        f"timeout {timeout_s:g} s")
    outcome = run(launcher, backend, t, run_dir)
    try:
        if args.runs is not None:
            return finish_serving(launcher, outcome)
        return finish(launcher, outcome)
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED


def run(launcher: Launcher, backend: Backend, t: Topology, run_dir: Path) -> str:
    """Prepares the hosts, starts and waits for the daemons, and whatever
    happens stops them, collects their logs and tears the hosts down.
    Returns the outcome: "done", "timeout", "failed" or "interrupted"."""
    params_path = run_dir / "params.json"
    teardown = Teardown(backend)
    atexit.register(teardown)
    for sig in STOP_SIGNALS:
        signal.signal(sig, on_stop_signal)
    outcome = "done"
    try:
        write_json(params_path, launcher.params())
        key = make_run_key(t, run_dir)
        backend.prepare(t.hub_host)
        if backend.waits_in_queue:
            launcher.t0 = time.monotonic()     # the time in the queue is not the run's
        if not t.run.get("run_key_file"):
            backend.put_file(key)   # a key of the user's is already on every host
        launcher.start_all()
        write_json(params_path, launcher.params())
        say("running")
        outcome = launcher.wait_all()
    except LaunchError as e:
        say(f"error: {e}")
        outcome = "failed"
    except Interrupted as e:
        say(f"interrupted ({e}); stopping every daemon")
        outcome = "interrupted"
    finally:
        # Whatever happened, nothing outlives the launcher.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        try:
            launcher.stop_all()
            for h in launcher.handles:
                backend.collect(h, run_dir)
            for host, name in shm_segments(t):
                gone = backend.remove_shm(host, name)
                if gone:
                    say(f"removed shared-memory segments left on {host}: {', '.join(gone)}")
        finally:
            problems = teardown()
            for p in problems:
                say(f"teardown: {p}")
            launcher.teardown_problems = problems
            write_json(params_path, launcher.params())
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
    return outcome


def write_report(run_dir: Path) -> None:
    """analysis/report.py: report.html and its figures in the run directory.
    It needs Debian's matplotlib, hence the system Python; a run whose
    report cannot be made still stands on its metrics.json."""
    if not (run_dir / "metrics.json").exists():
        return
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    try:
        r = subprocess.run([python, str(REPO / "analysis" / "report.py"), str(run_dir)],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        say(f"report not written: {e}")
        return
    if r.returncode == 0:
        say(f"report: {run_dir / 'report.html'}")
    else:
        say(f"report not written: {(r.stderr or r.stdout).strip()[-300:]}")


def finish(launcher: Launcher, outcome: str) -> int:
    """Prints the summary, runs refbuild and decides the exit status."""
    launcher.summary()
    if outcome == "interrupted":
        return EXIT_INTERRUPTED
    if outcome == "timeout":
        return EXIT_TIMEOUT
    if outcome == "failed":
        return EXIT_FAIL

    builder_rc = launcher.builder.returncode if launcher.builder else None
    others = [h for h in launcher.handles if h is not launcher.builder
              and (h.returncode != 0 or h.killed)]
    for h in others:
        how = "had to be stopped" if h.killed else f"exited with status {h.returncode}"
        note = launcher.backend.exit_note(h)
        say(f"{h.name} {how}" + (f": {note}" if note else "") + f" (log: {h.log_path})")
    unfinished = in_progress(launcher.run_dir)
    if unfinished:
        say(f"the run did not finish: {unfinished}")
    ref = launcher.refbuild()
    truth = launcher.truthcheck()
    write_report(launcher.run_dir)

    if builder_rc is None or builder_rc < 0:
        status = EXIT_FAIL
    elif builder_rc != 0:
        status = builder_rc
    elif unfinished or others or (ref is not None and ref != 0) or (truth is not None and truth != 0) \
            or launcher.teardown_problems or launcher.recording_problems:
        status = EXIT_FAIL
    else:
        status = EXIT_OK
    verdict = "PASS" if status == 0 else "FAIL"
    parts = [f"builderd status {builder_rc}"]
    if unfinished:
        parts.append("run in progress or killed")
    if others:
        parts.append(f"{len(others)} other daemon(s) failed")
    if launcher.teardown_problems:
        parts.append(f"{len(launcher.teardown_problems)} teardown problem(s)")
    if launcher.recording_problems:
        parts.append(f"{len(launcher.recording_problems)} recording problem(s)")
    parts.append("refbuild skipped" if ref is None else f"refbuild status {ref}")
    if truth is not None:
        parts.append(f"truthcheck status {truth}")
    say(f"{verdict} ({', '.join(parts)}); exit {status}")
    return status
