"""daqrun --runs N: the daemons started once, serving runs (the hub with
--session-listen and --control-http, every peer with --session), then N
runs configured, started and ended on the same processes through the hub's
HTTP endpoint, each in DIR/run-<number>/ with its own params.json,
metrics.json, events and refbuild check. docs/RUNCONTROL.md.
"""

from __future__ import annotations

import json
import signal
import time
import tomllib
from pathlib import Path

from .backends import LaunchError
from .daemons import addr, builder_out, run_key_path, shm_name
from .hubclient import Hub, HubError, read_key
from .recording import make_data_dirs
from .runconfig import Session, configure_body, write_session
from .launcher import (EXIT_FAIL, EXIT_OK, Launcher, prepare_run_dir, say, write_json)
from .schema import TopologyError
from .topology import Topology, load_topology

def run_plan(path: str | None, sets: list[str], runs: int) -> dict[int, list[str]]:
    """Each run's own --set assignments (runs.K.KEY=VALUE, or a [runs.K]
    table of a plan file), keyed by K (1 .. runs)."""
    plan: dict[int, list[str]] = {}
    if path:
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise TopologyError(f"--run-plan {path}: {e}") from None
        for k, table in (doc.get("runs") or {}).items():
            if not str(k).isdigit() or not isinstance(table, dict):
                raise TopologyError(f"--run-plan {path}: [runs.{k}]: a run number 1 .. {runs} "
                                    f"with a table of [run] keys is needed")
            plan.setdefault(int(k), []).extend(f"{key}={json.dumps(v)}" for key, v in table.items())
    for s in sets:
        parts = s.split(".", 2)
        if parts[0] == "runs":
            if len(parts) < 3 or not parts[1].isdigit():
                raise TopologyError(f"--set {s}: runs.K.KEY=VALUE is needed")
            plan.setdefault(int(parts[1]), []).append(parts[2])
    for k in plan:
        if not 1 <= k <= runs:
            raise TopologyError(f"runs.{k}: there are runs 1 .. {runs} (--runs {runs})")
    return plan


class ServingLauncher(Launcher):
    """The daemons started once, serving; then every run in turn."""

    def __init__(self, *args, runs: int, plan: dict[int, list[str]], run_seconds: float | None,
                 topology_path: str, **kw):
        super().__init__(*args, **kw)
        self.runs, self.plan, self.run_seconds = runs, plan, run_seconds
        self.topology_path = topology_path
        self.base_dir = self.run_dir
        self.session_addr = ""
        self.hub: Hub | None = None
        self.rows: list[dict] = []
        self.first_start: float | None = None    # --fault moments count from it

    # ---- starting the daemons, serving ------------------------------------
    def start(self, name, argv, host, stdout=False):
        be = self.backend
        if name == "hub" or (name == "builder-0" and not self.t.several):
            argv = argv + ["--session-listen", addr(be.address(host), 0),
                           "--control-http", addr(be.address(host), 0)]
        else:
            argv = argv + ["--session", self.session_addr]
        return super().start(name, argv, host, stdout)

    def hub_ports(self) -> None:
        name = "hub" if self.t.several else "builder-0"
        ports = self.ports[name]
        if "session" not in ports or "http" not in ports:
            raise LaunchError(f"{name}'s port file has no session and http ports; is builderd "
                              f"built with run control?")
        host = self.backend.address(self.t.hub_host)
        self.session_addr = addr(host, ports["session"])
        key = run_key_path(self.t, self.base_dir)
        self.hub = Hub(f"http://{addr(host, ports['http'])}", read_key(key),
                       netns=self.backend.netns_path(self.t.hub_host))
        say(f"serving: session {self.session_addr}, control {self.hub.url}")

    def start_builder(self) -> None:
        super().start_builder()
        self.hub_ports()

    def start_hub(self) -> None:
        super().start_hub()
        self.hub_ports()

    # ---- the runs ------------------------------------------------------------
    def topology_of(self, k: int) -> Topology:
        base_run = self.t.run["run"]
        own = self.plan.get(k, [])
        sets = list(self.sets) + ([] if any(s.split("=", 1)[0] in ("run", "run.run")
                                            for s in own) else [f"run.run={base_run + k - 1}"])
        return load_topology(self.topology_path, [s for s in sets if not s.startswith("runs.")]
                             + own)

    def check_plan(self) -> None:
        """Every run's topology loads (TopologyError otherwise), before any
        daemon starts."""
        for k in range(1, self.runs + 1):
            self.topology_of(k)

    def wait_state(self, want: tuple[str, ...], timeout_s: float, what: str) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll()
            st = self.hub.state()
            if st["state"] in want:
                return st
            if time.monotonic() > deadline:
                raise LaunchError(f"{what}: the hub is still {st['state']} after {timeout_s:g} s"
                                  + (f"; missing {', '.join(st['missing'])}"
                                     if st.get("missing") else ""))
            time.sleep(0.02)

    def check_alive(self) -> None:
        """Any daemon gone ends the session, but one a --fault signalled:
        the hub gives that one up and names it in the run's books, and the
        next configure that needs it fails with the hub's reason."""
        faulted = {f["name"] for f in self.faults if f.get("done")}
        for h in self.handles:
            if h.name in faulted:
                continue
            rc = self.backend.wait(h, 0)
            if rc is not None:
                raise LaunchError(f"{h.name} exited with status {rc} between or during runs")

    def poll(self) -> None:
        """What every wait of the session does: the --fault signals due
        (their moments counted from the first run's start), then check the
        daemons."""
        if self.first_start is not None:
            self.inject_faults(time.monotonic(), self.first_start)
        self.check_alive()

    def continue_stopped(self) -> None:
        """A daemon a --fault stopped is continued once its run is over, as
        a one-shot run continues it once the builder has ended: it may then
        see that it was given up."""
        for h in self.stopped:
            self.backend.kill(h, signal.SIGCONT)
        self.stopped = []

    def wait_joined(self) -> None:
        deadline = time.monotonic() + self.t.deploy["start_timeout_s"]
        while True:
            self.poll()
            st = self.hub.state()
            if not st["missing"]:
                return
            if time.monotonic() > deadline:
                raise LaunchError(f"not joined the hub's session after "
                                  f"{self.t.deploy['start_timeout_s']:g} s: "
                                  f"{', '.join(st['missing'])}")
            time.sleep(0.02)

    def one_run(self, k: int) -> dict:
        t = self.topology_of(k)
        number = t.run["run"]
        run_dir = self.base_dir / f"run-{number}"
        prepare_run_dir(run_dir, t)
        for b in t.builders if t.several else ():
            self.backend.make_dir(b["host"], builder_out(run_dir, b["id"]))
        make_data_dirs(t, self.backend, run_dir)
        body = configure_body(t, self.backend, run_dir, self.ports)
        write_json(run_dir / "configure.json", body)
        row = {"k": k, "run": number, "dir": run_dir, "t": t}
        t_configure = time.monotonic()
        ok, reason = self.hub.post("/configure", body)
        if not ok:
            raise LaunchError(f"run {number}: configure refused: {reason}")
        st = self.wait_state(("configured", "error"), self.t.deploy["start_timeout_s"],
                             f"run {number}: configure")
        if st["state"] == "error":
            self.hub.post("/reset", {})
            raise LaunchError(f"run {number}: configure failed: {st['error']}")
        t0 = time.monotonic()
        if self.first_start is None:
            self.first_start = t0
        row["configure_ms"] = (t0 - t_configure) * 1000
        ok, reason = self.hub.post("/start", {"run": number})
        if not ok:
            raise LaunchError(f"run {number}: start refused: {reason}")
        say(f"run {number} ({k} of {self.runs}) started")
        stopped = False
        while True:
            st = self.hub.state()
            done = [r for r in st["runs"] if r["run"] == number]
            if done and st["state"] in ("idle", "error"):
                break
            self.poll()
            self.show_progress(time.monotonic())
            elapsed = time.monotonic() - t0
            if not stopped and self.run_seconds is not None and elapsed > self.run_seconds:
                ok, reason = self.hub.post("/stop", {"run": number})
                say(f"run {number}: stop after {elapsed:.1f} s"
                    + ("" if ok else f" refused: {reason}"))
                stopped = True
            if elapsed > self.timeout_s:
                self.hub.post("/reset", {})
                raise LaunchError(f"run {number}: not over after {self.timeout_s:g} s; reset")
            time.sleep(0.02)
        self.continue_stopped()
        row.update(done[-1])
        row["seconds"] = time.monotonic() - t0
        return row

    def per_run_outputs(self, row: dict) -> int | None:
        """params.json and the refbuild check of one run; refbuild's status."""
        base_t, base_dir = self.t, self.run_dir
        self.t, self.run_dir = row["t"], row["dir"]
        try:
            doc = self.params()
            doc["serving"] = {"run_of_session": row["k"], "runs": self.runs}
            write_json(self.run_dir / "params.json", doc)
            row["recording"] = self.recording()
            row["recording_problems"] = list(self.recording_problems)
            self.recording_problems = []
            return self.refbuild()
        finally:
            self.t, self.run_dir = base_t, base_dir

    def write_session(self) -> None:
        """DIR/session.json: where a client (deploy/daqctl --session DIR)
        finds the hub, the run key and every daemon's ports."""
        path = write_session(Session(
            self.base_dir, self.hub.url, str(run_key_path(self.t, self.base_dir)),
            self.ports, shm_name(), str(self.bin_dir)))
        say(f"session: {path} (deploy/daqctl --session {self.base_dir} ...)")

    def serve(self) -> None:
        """--serve: the runs are the operator's (deploy/daqctl); the
        session lasts until the hub is told to shut down, or a signal."""
        hub = next(h for h in self.handles if h.name in ("hub", "builder-0"))
        say("serving until deploy/daqctl shutdown (or a signal)")
        while self.backend.wait(hub, 0.2) is None:
            pass

    def wait_all(self) -> str:
        """Every run in turn, then shutdown; "done" or "failed"."""
        self.started_at = time.monotonic()
        outcome = "done"
        try:
            self.wait_joined()
            self.write_session()
            if self.runs == 0:
                self.serve()
            for k in range(1, self.runs + 1):
                row = self.one_run(k)
                row["refbuild"] = self.per_run_outputs(row)
                self.rows.append(row)
                say(summary_line(row))
                for line in row["recording"]:
                    say(f"run {row['run']}: {line}")
        except (LaunchError, HubError) as e:
            say(f"error: {e}")
            outcome = "failed"
        self.shutdown()
        return outcome

    def shutdown(self) -> None:
        try:
            if self.hub is not None:
                self.hub.post("/shutdown", {})
        except HubError as e:
            say(f"shutdown: {e}")
        deadline = time.monotonic() + self.t.deploy["grace_s"]
        for h in self.handles:
            rc = self.backend.wait(h, max(0.0, deadline - time.monotonic()))
            if rc is None:
                say(f"{h.name} still running {self.t.deploy['grace_s']:g} s after shutdown")
                h.killed = True
                self.backend.kill(h, signal.SIGTERM)


def summary_line(row: dict) -> str:
    first = row.get("start_to_first_event_ms")
    stop = row.get("stop_to_books_ms")
    ref = row.get("refbuild")
    return (f"run {row['run']}: status {row['status']}, books "
            f"{'balanced' if row.get('balanced') else 'NOT balanced'}, "
            f"{row.get('events_decided', 0)} events decided in {row['seconds']:.2f} s, "
            f"configure {row.get('configure_ms', 0):.0f} ms, "
            f"start to first event {first:.1f} ms" if first is not None else
            f"run {row['run']}: status {row['status']}, no event built") + \
        (f", stop to books {stop:.1f} ms" if stop is not None else "") + \
        (", refbuild skipped" if ref is None else f", refbuild {'PASS' if ref == 0 else 'FAIL'}")


def finish_serving(launcher: ServingLauncher, outcome: str) -> int:
    """The table of every run and the exit status: 0 when every run was
    balanced, passed refbuild (where it applies) and every daemon exited 0."""
    print("---- runs " + "-" * 62)
    for row in launcher.rows:
        print(summary_line(row))
    write_json(launcher.base_dir / "runs.json", {
        "format": "daqrun-runs/1", "runs": [
            {k: (str(v) if isinstance(v, Path) else v) for k, v in row.items() if k != "t"}
            for row in launcher.rows],
        "pids": {h.name: h.pid for h in launcher.handles}})
    print("-" * 72, flush=True)
    bad_rows = [r for r in launcher.rows if r["status"] != 0 or not r.get("balanced")
                or (r.get("refbuild") not in (None, 0)) or r.get("recording_problems")]
    bad_daemons = [h for h in launcher.handles if h.returncode != 0 or h.killed]
    for h in bad_daemons:
        say(f"{h.name} " + ("had to be stopped" if h.killed else f"exited with status {h.returncode}")
            + f" (log: {h.log_path})")
    pids = sorted({h.pid for h in launcher.handles if h.pid})
    status = EXIT_OK if outcome == "done" and not bad_rows and not bad_daemons and \
        len(launcher.rows) == launcher.runs else EXIT_FAIL
    say(f"{'PASS' if status == 0 else 'FAIL'} ({len(launcher.rows)} of {launcher.runs} runs on "
        f"the same {len(pids)} processes, {len(bad_rows)} failed); exit {status}")
    return status
