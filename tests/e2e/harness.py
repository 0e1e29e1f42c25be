"""End-to-end test harness: real daemons, temp dirs, no leftovers.

Every test gets a Harness (through E2ETestCase) with its own temporary
directory. Daemons are started on port 0 and their ports read back from
the port files they write, so no test ever guesses a free port. Every
process the harness starts runs in a process group of its own and carries
ES_E2E_TAG=<unique tag> in its environment, which its children (the
daemons deploy/daqrun starts) inherit: at teardown anything still carrying
the tag is killed by PID, and assert_clean() fails a test that left a
daemon running or a port listening. Every wait has a timeout.

Environment: ES_BIN (daemon binaries, default <repo>/bin), ES_E2E_KEEP=1
(keep every test's directory; a failed test's is always kept).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[2]
DAQRUN = REPO / "deploy" / "daqrun"
# The launcher's package (deploy/daqlib), for tests that use its parts.
sys.path.insert(0, str(REPO / "deploy"))
REFBUILD = REPO / "analysis" / "refbuild.py"
VECTORS = REPO / "tests" / "data" / "vectors.json"
DAEMONS = ("builderd", "readoutd", "sourced")
TAG_VAR = "ES_E2E_TAG"


class HarnessError(AssertionError):
    """A wait timed out or a process misbehaved; fails the test."""


def bin_dir() -> Path:
    return Path(os.environ.get("ES_BIN") or REPO / "bin").resolve()


def missing_daemons(directory: Path | None = None) -> list[str]:
    d = directory or bin_dir()
    return [name for name in DAEMONS if not os.access(d / name, os.X_OK)]


def skip_unless_daemons(test: unittest.TestCase) -> None:
    """Skips the test, saying why, when the daemon binaries are absent."""
    absent = missing_daemons()
    if absent:
        test.skipTest(f"daemons not built: {bin_dir()} lacks {', '.join(absent)} "
                      f"(run make, or set ES_BIN)")


@dataclass
class Proc:
    name: str
    argv: list[str]
    popen: subprocess.Popen
    log_path: Path
    started: float

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        text = self.log().splitlines()[-lines:]
        return "\n".join(f"  | {line}" for line in text) or "  (empty log)"


@dataclass
class Result:
    """A finished command: its status and everything it printed."""
    name: str
    argv: list[str]
    returncode: int
    output: str
    elapsed_s: float
    pid: int = 0          # the process the harness started (a launcher's pid names its objects)

    def describe(self) -> str:
        return (f"{self.name} exited {self.returncode} after {self.elapsed_s:.1f} s: "
                f"{' '.join(self.argv)}\n{self.output[-6000:]}")


@dataclass
class Run(Result):
    """A deploy/daqrun run."""
    run_dir: Path = Path()

    def params(self) -> dict:
        return read_json(self.run_dir / "params.json")

    def metrics(self) -> dict:
        return read_metrics(self.run_dir)


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise HarnessError(f"{path} does not exist") from None
    except json.JSONDecodeError as e:
        raise HarnessError(f"{path} is not valid JSON: {e}") from None


def read_jsonl(path: Path) -> list[dict]:
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise HarnessError(f"{path}:{number}: not JSON: {e}") from None
    except FileNotFoundError:
        raise HarnessError(f"{path} does not exist") from None
    return out


def wait_for_line(proc: Proc, words: str, timeout_s: float = 15) -> None:
    """Waits until proc's log contains words; fails if it exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while words not in proc.log():
        if proc.returncode is not None or time.monotonic() > deadline:
            raise HarnessError(f"{proc.name} never said {words!r}:\n{proc.tail()}")
        time.sleep(0.05)


def read_metrics(run_dir: Path) -> dict:
    """metrics.json of a run, checked for the fields the spec requires."""
    m = read_json(Path(run_dir) / "metrics.json")
    if not isinstance(m, dict):
        raise HarnessError(f"{run_dir}/metrics.json is not an object")
    absent = [k for k in ("counters", "equations", "balanced") if k not in m]
    if absent:
        raise HarnessError(f"{run_dir}/metrics.json lacks {', '.join(absent)}")
    return m


def unbalanced(metrics: dict) -> list[str]:
    """The equations of a metrics.json that do not hold, as readable lines."""
    return [f"{e.get('name')}: {e.get('lhs')} != {e.get('rhs')}"
            for e in metrics.get("equations", []) if not e.get("ok")]


def dump_toml(doc: dict) -> str:
    """TOML for a topology: tables of scalars and lists, arrays of tables."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(f"cannot write {type(v).__name__} to TOML")

    lines: list[str] = []
    for name, body in doc.items():
        entries = body if isinstance(body, list) else [body]
        header = f"[[{name}]]" if isinstance(body, list) else f"[{name}]"
        for entry in entries:
            lines.append(header)
            lines += [f"{k} = {value(v)}" for k, v in entry.items()]
            lines.append("")
    return "\n".join(lines)


def topology(events: int = 20000, payload: int = 64, rate: float = 0,
             readers: Iterable[Iterable[int]] = ((0, 1), (2, 3)), **run: Any) -> dict:
    """A one-host topology as a dict: readers[i] lists reader i's sources;
    further keyword arguments are [run] keys."""
    return {
        "run": {"run": 1, "seed": 1, "events": events, "payload": payload, "rate": rate, **run},
        "builder": {"host": "127.0.0.1"},
        "reader": [{"id": i, "sources": list(s), "host": "127.0.0.1"}
                   for i, s in enumerate(readers)],
    }


# --------------------------------------------------------------------------
# Processes and sockets seen through /proc.

def _proc_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # Fields after the parenthesised command: state ppid pgrp ...
        return int(stat[stat.rindex(b")") + 2:].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()[0] == b"Z"
    except (OSError, ValueError, IndexError):
        return True


def _has_tag(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state on this host (IPv4 and IPv6)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 3 and fields[3] == "0A":
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


def listening_inodes(ports: set[int]) -> dict[int, set[str]]:
    """The socket inodes listening on each of ports (IPv4 and IPv6)."""
    found: dict[int, set[str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == "0A":
                        port = int(fields[1].rsplit(":", 1)[1], 16)
                        if port in ports:
                            found.setdefault(port, set()).add(fields[9])
        except OSError:
            continue
    return found


def socket_owners(inodes: set[str]) -> dict[str, set[int]]:
    """The processes holding each socket inode open."""
    owners: dict[str, set[int]] = {}
    for pid in _proc_pids():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                owners.setdefault(target[8:-1], set()).add(pid)
    return owners


def read_port_file(path: Path) -> dict[str, int]:
    """Lines "<name> <port>" of a daemon's port file; {} if absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    ports = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isdigit():
            ports[words[0]] = int(words[1])
    return ports


# --------------------------------------------------------------------------

class Harness:
    """One test's processes, files and ports."""

    def __init__(self, name: str, bin_path: Path | None = None):
        safe = "".join(c if c.isalnum() else "-" for c in name.split(".")[-1])[:40]
        self.dir = Path(tempfile.mkdtemp(prefix=f"es-e2e-{safe}-"))
        self.bin = bin_path or bin_dir()
        self.tag = f"{safe}-{uuid.uuid4().hex[:12]}"
        self.procs: list[Proc] = []
        self.ports: set[int] = set()     # every port a daemon of this test reported
        self._count = 0

    # -- environment and starting --------------------------------------
    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env[TAG_VAR] = self.tag
        env["ES_BIN"] = str(self.bin)
        env.update(extra or {})
        return env

    def path(self, *parts: str) -> Path:
        p = self.dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None,
              stdout_path: Path | None = None) -> Proc:
        """Starts argv in a new process group; stderr (and stdout unless
        stdout_path) to <dir>/logs/<name>.log."""
        log = self.path("logs", f"{name}.log")
        err = open(log, "ab")
        out = open(stdout_path, "ab") if stdout_path else err
        try:
            popen = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=err, env=self.env(env),
                                     start_new_session=True, cwd=self.dir)
        finally:
            err.close()
            if out is not err:
                out.close()
        proc = Proc(name, [str(a) for a in argv], popen, log, time.monotonic())
        self.procs.append(proc)
        return proc

    def daemon(self, role: str, name: str, args: list[str], **flags: Any) -> Proc:
        """Starts bin/<role> with args, then --flag value for every keyword
        (underscores become dashes; True adds a bare flag; None and False
        are left out)."""
        argv = [str(self.bin / role)] + [str(a) for a in args]
        for k, v in flags.items():
            if v is None or v is False:
                continue
            argv.append("--" + k.replace("_", "-"))
            if v is not True:
                argv.append(str(v))
        return self.start(name, argv)

    def start_builder(self, *, run: int, sources: int, readers: int, out: Path | None = None,
                      timeout_s: float = 15, **flags: Any) -> tuple[Proc, dict[str, int]]:
        """builderd on ephemeral ports; returns it and its {"data", "control"} ports."""
        out = out or self.dir / "run"
        out.mkdir(parents=True, exist_ok=True)
        pf = self.path("ports", "builder-0.port")
        p = self.daemon("builderd", "builder-0",
                        ["--run", run, "--sources", sources, "--readers", readers,
                         "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0",
                         "--out", out, "--port-file", pf], **flags)
        return p, self.wait_port_file(pf, ("data", "control"), timeout_s, p)

    def start_reader(self, *, id: int, run: int, sources: Iterable[int],
                     builder: dict[str, int], timeout_s: float = 15,
                     **flags: Any) -> tuple[Proc, int]:
        """readoutd on an ephemeral port; returns it and its data port."""
        pf = self.path("ports", f"reader-{id}.port")
        p = self.daemon("readoutd", f"reader-{id}",
                        ["--id", id, "--run", run, "--listen", "127.0.0.1:0",
                         "--port-file", pf, "--sources", ",".join(map(str, sources)),
                         "--builder", f"tcp://127.0.0.1:{builder['data']}",
                         "--control", f"127.0.0.1:{builder['control']}"], **flags)
        return p, self.wait_port_file(pf, ("data",), timeout_s, p)["data"]

    def start_source(self, *, id: int, run: int, seed: int, events: int, payload: int,
                     reader_port: int, builder: dict[str, int], rate: float = 0,
                     **flags: Any) -> Proc:
        return self.daemon("sourced", f"source-{id}",
                           ["--id", id, "--run", run, "--seed", seed, "--events", events,
                            "--payload", payload, "--rate", rate,
                            "--connect", f"127.0.0.1:{reader_port}",
                            "--control", f"127.0.0.1:{builder['control']}"], **flags)

    # -- waiting --------------------------------------------------------
    def wait_port_file(self, path: Path, keys: Iterable[str], timeout_s: float = 15,
                       proc: Proc | None = None) -> dict[str, int]:
        """Waits until path lists every key; fails early if proc exits."""
        keys = tuple(keys)
        deadline = time.monotonic() + timeout_s
        while True:
            ports = read_port_file(path)
            if all(k in ports for k in keys):
                self.ports.update(ports.values())
                return ports
            if proc is not None and proc.returncode is not None:
                raise HarnessError(f"{proc.name} exited {proc.returncode} before writing "
                                   f"{path}:\n{proc.tail()}")
            if time.monotonic() > deadline:
                tail = f":\n{proc.tail()}" if proc else ""
                raise HarnessError(f"no {'/'.join(keys)} in {path} after {timeout_s:g} s{tail}")
            time.sleep(0.02)

    def wait(self, proc: Proc, timeout_s: float) -> int:
        """Waits for proc to exit; on timeout stops it and fails."""
        try:
            return proc.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop(proc)
            raise HarnessError(f"{proc.name} still running after {timeout_s:g} s "
                               f"(stopped):\n{proc.tail()}") from None

    def stop(self, proc: Proc, grace_s: float = 3.0) -> int | None:
        """SIGTERM to its process group, SIGKILL after grace_s."""
        if proc.returncode is not None:
            return proc.returncode
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                return proc.popen.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        return proc.returncode

    def run(self, name: str, argv: list[Any], timeout_s: float,
            env: dict[str, str] | None = None, seen: set[int] | None = None) -> Result:
        """Runs a command to completion (own process group, output to a log).
        With seen, adds to it the pid of every process of this test seen
        while it runs (its launchers, whose pids name what they make), by
        looking every 0.1 s."""
        p = self.start(name, [str(a) for a in argv], env=env)
        t0 = time.monotonic()
        try:
            if seen is None:
                rc = p.popen.wait(timeout=timeout_s)
            else:
                seen.add(p.pid)
                while True:
                    seen.update(pid for pid, _ in self.leftovers())
                    try:
                        rc = p.popen.wait(timeout=0.1)
                        break
                    except subprocess.TimeoutExpired:
                        if time.monotonic() - t0 > timeout_s:
                            raise
        except subprocess.TimeoutExpired:
            self.stop(p, grace_s=10.0)
            raise HarnessError(f"{name} did not finish within {timeout_s:g} s "
                               f"(stopped):\n{p.tail(60)}") from None
        return Result(name, p.argv, rc, p.log(), time.monotonic() - t0, p.pid)

    def refbuild(self, *args: Any, timeout_s: float = 120) -> Result:
        return self.run(f"refbuild-{self._next()}", [sys.executable, REFBUILD, *args],
                        timeout_s)

    def write_topology(self, doc: dict, name: str = "topology.toml") -> Path:
        path = self.path(name)
        path.write_text(dump_toml(doc), encoding="utf-8")
        return path

    def daqrun(self, topo: dict | Path, *, sets: Iterable[str] = (), timeout_s: float = 300,
               out: Path | None = None, args: Iterable[str] = (),
               env: dict[str, str] | None = None) -> Run:
        """Runs deploy/daqrun on a topology (a dict is written to a file
        first) with an inner --timeout a little below timeout_s."""
        n = self._next()
        path = topo if isinstance(topo, Path) else self.write_topology(topo, f"topology-{n}.toml")
        run_dir = out or self.dir / f"run-{n}"
        argv = [sys.executable, DAQRUN, path, "--out", run_dir, "--bin", self.bin,
                "--timeout", max(5.0, timeout_s - 15)]
        for s in sets:
            argv += ["--set", s]
        argv += list(args)
        r = self.run(f"daqrun-{n}", argv, timeout_s, env=env)
        try:
            params = read_json(run_dir / "params.json")
            # Daemons on a test host in a namespace of its own (netns, the
            # virtual Slurm cluster: 198.18.0.0/15) listen there: a number of
            # theirs listening here is another suite's port, not a leftover.
            in_ns = {d for h in params.get("hosts", {}).values()
                     if str(h.get("address", "")).startswith(("198.18.", "198.19."))
                     for d in h.get("daemons", ())}
            for name, ports in params.get("ports", {}).items():
                if name not in in_ns:
                    self.ports.update(ports.values())
        except HarnessError:
            pass
        return Run(r.name, r.argv, r.returncode, r.output, r.elapsed_s, r.pid, run_dir=run_dir)

    def _next(self) -> int:
        self._count += 1
        return self._count

    # -- leftovers --------------------------------------------------------
    def leftovers(self) -> list[tuple[int, str]]:
        """Live processes of this test: the harness's own children still
        running, anything in their process groups, and anything carrying
        this test's tag (daemons started by daqrun)."""
        me = os.getpid()
        groups = {p.pid for p in self.procs if p.returncode is None}
        marker = f"{TAG_VAR}={self.tag}".encode()
        found = []
        for pid in _proc_pids():
            if pid == me or _is_zombie(pid):
                continue
            if _pgid(pid) in groups or _has_tag(pid, marker):
                found.append((pid, _cmdline(pid)))
        return found

    def listening(self) -> set[int]:
        """Ports a daemon of this test reported that are still listening,
        but for those held only by processes not of this test: on a machine
        running another suite beside this one, a port number this test saw
        may since have been given to the other's daemon."""
        ports = self.ports & listening_ports()
        if not ports:
            return ports
        inodes = listening_inodes(ports)
        owners = socket_owners({i for s in inodes.values() for i in s})
        mine = {pid for pid, _ in self.leftovers()} | {os.getpid()}
        left = set()
        for port in ports:
            held = {pid for i in inodes.get(port, ()) for pid in owners.get(i, ())}
            if not held or held & mine:
                left.add(port)
        return left

    def assert_clean(self, settle_s: float = 5.0) -> None:
        """Fails if any process of the test still runs or any of its ports
        still listens (after up to settle_s for exits to complete)."""
        deadline = time.monotonic() + settle_s
        while True:
            procs, ports = self.leftovers(), self.listening()
            if not procs and not ports:
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        lines = [f"  pid {pid}: {cmd}" for pid, cmd in procs]
        lines += [f"  port {port} still listening" for port in sorted(ports)]
        raise HarnessError("the test left things behind:\n" + "\n".join(lines))

    def close(self, keep: bool = False) -> list[tuple[int, str]]:
        """Kills everything the test started (by PID) and removes its
        directory unless keep. Returns what had to be killed."""
        for p in self.procs:
            self.stop(p, grace_s=2.0)
        killed = self.leftovers()
        for pid, _ in killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        return killed


class E2ETestCase(unittest.TestCase):
    """A TestCase with self.h, a Harness torn down after the test. A failed
    test's directory is kept (and named on stderr) for its logs."""

    needs_daemons = False

    def setUp(self) -> None:
        if self.needs_daemons:
            skip_unless_daemons(self)
        self.h = Harness(self.id())
        self.addCleanup(self._teardown_harness)

    def _failed(self) -> bool:
        """Whether this test has failed so far (cleanups run before the
        result is final, but failures are recorded as they happen)."""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        if result is None:
            return False
        return any(getattr(t, "test_case", t) is self
                   for t, _ in list(result.failures) + list(result.errors))

    def _teardown_harness(self) -> None:
        keep = self._failed() or os.environ.get("ES_E2E_KEEP") == "1"
        killed = self.h.close(keep=keep)
        if killed:
            print(f"\n  teardown killed {len(killed)} leftover process(es): "
                  + "; ".join(f"{pid} {cmd[:80]}" for pid, cmd in killed), file=sys.stderr)
        if keep:
            print(f"\n  kept {self.h.dir}", file=sys.stderr)

    # Assertions with the context a failure needs.
    def assertRunOk(self, run: Run) -> None:
        if run.returncode != 0:
            self.fail(f"daqrun failed:\n{run.describe()}")

    def assertBalanced(self, run: Run) -> dict:
        m = run.metrics()
        bad = unbalanced(m)
        if not m.get("balanced") or bad:
            self.fail(f"{run.run_dir}/metrics.json not balanced: {bad}; "
                      f"errors {m.get('errors')}")
        return m

    def assertRefbuildPasses(self, run_dir: Path) -> Result:
        r = self.h.refbuild(run_dir)
        if r.returncode != 0:
            self.fail(f"refbuild does not match {run_dir}:\n{r.describe()}")
        return r
