"""The Backend interface every backend implements, the host description it
gets, the registry, and helpers the backends share.

A backend knows the run's hosts (HostSpec) and answers, for each daemon the
launcher wants to start on a host: which address it listens on and is
reached at, which path it uses for a file the launcher knows locally (port
files, logs, the builder's outputs), where its binary is and which extra
environment it needs. It then starts, watches, signals and collects the
daemon. prepare() sets the hosts up before the first start (a virtual
network, clocks, binaries) and teardown() removes everything prepare() or
start() created, whatever happened in between; teardown() is idempotent.

A backend also declares what it adds to a topology: `options`, the keys of
its own table [NAME]; `host_keys`, the keys it reads from [hosts.NAME]; and
`validate()`, its checks of the resolved topology. The topology schema,
--set, the launcher and the documentation tables take them from here.

A new backend (Slurm's srun, Kubernetes) is one module in this folder: it
subclasses Backend, implements the abstract methods, declares its keys and
registers itself with @register("name").
"""

from __future__ import annotations

import abc
import ctypes
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..schema import Key

# Every object a backend creates on this machine carries this prefix and the
# launcher's pid: network namespaces "esdq<pid>-<host>", directories
# /tmp/esdq<pid>-*. deploy/daqrun --cleanup removes those of launchers that
# are no longer running.
PREFIX = "esdq"
NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?$")
DAEMONS = ("builderd", "readoutd", "sourced")


class LaunchError(Exception):
    """A host could not be prepared or a daemon could not be started."""


class TeardownError(Exception):
    """Something a backend created could not be removed."""


@dataclass
class HostSpec:
    """One host of a topology ([hosts.NAME], docs/TOPOLOGY.md). The keys a
    backend declares in host_keys are attributes too (spec.netns_address)."""
    name: str
    address: str = "127.0.0.1"         # local and ssh: where its daemons listen
    addresses: list[str] = field(default_factory=list)   # one per rail; [0] is address
    bin: str | None = None             # where the daemons are on that host
    chrony_socket: str | None = None   # ES_CHRONY_SOCKET for its daemons
    env: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)   # the backends' host keys

    def __getattr__(self, key: str) -> Any:
        extra = self.__dict__.get("extra")
        if extra is None or key not in extra:
            raise AttributeError(f"host {self.__dict__.get('name')!r} has no key {key!r}")
        return extra[key]


@dataclass
class Handle:
    name: str                    # "builder-0", "reader-1", "source-3"
    host: str                    # topology host the daemon runs on
    argv: list[str]
    log_path: Path               # stderr (and stdout unless stdout_path), local path
    stdout_path: Path | None
    pid: int = 0
    started: float = 0.0         # time.monotonic() at start
    returncode: int | None = None
    ended: float | None = None
    killed: bool = False         # the launcher had to stop it
    impl: Any = None             # backend-private


def run_cmd(argv: list[str], *, check: bool = True, timeout: float = 30,
            input: bytes | None = None) -> subprocess.CompletedProcess:
    """Runs a short command; with check, a failure raises LaunchError naming it."""
    try:
        r = subprocess.run(argv, input=input, stdin=None if input is not None else
                           subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except FileNotFoundError as e:
        raise LaunchError(f"{argv[0]} not found: {e}") from e
    except subprocess.TimeoutExpired as e:
        raise LaunchError(f"{' '.join(argv)} did not finish within {timeout:g} s") from e
    if check and r.returncode != 0:
        err = (r.stderr or r.stdout).decode(errors="replace").strip()
        raise LaunchError(f"{' '.join(argv)} failed (status {r.returncode}): {err}")
    return r


def text(r: subprocess.CompletedProcess) -> str:
    return (r.stdout or b"").decode(errors="replace")


def die_with_parent_fn() -> Callable[[], None] | None:
    """A preexec_fn after which the child gets SIGKILL when the launcher
    dies, even by SIGKILL (prctl PR_SET_PDEATHSIG): a crashed launcher
    leaves no daemon in a namespace it can no longer delete. The C library
    is looked up here, in the parent; the child only calls prctl."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    sig = int(signal.SIGKILL)

    def fn() -> None:
        prctl(1, sig, 0, 0, 0)                     # PR_SET_PDEATHSIG = 1
    return fn


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# The programs that create esdq<pid>-* objects: the launcher, and
# analysis/railcap.py and analysis/cms2003.py, which build virtual clusters
# with the netns backend (and ssh control directories) themselves; but any
# program that uses a backend in its own process (a test) owns them too.
OWNERS = (b"daqrun", b"railcap", b"cms2003")
# How much later than an object a process may seem to have started and
# still be its owner: the start time is counted in clock ticks of the boot
# clock, an object's time is the wall clock's.
START_SLACK_S = 1.0


def process_start(pid: int) -> float | None:
    """When pid started (seconds of the wall clock), or None when it does
    not run (no such process, or a zombie: its children got their
    PDEATHSIG, what it made is orphaned)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    try:
        ticks = int(fields[19])                    # field 22, starttime
    except (IndexError, ValueError):
        return None
    booted = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return booted + ticks / os.sysconf("SC_CLK_TCK")


def owner_alive(pid: int, made_at: float | None = None) -> bool:
    """Whether the owner of an esdq<pid>-* object made at made_at (wall
    clock) still runs: pid runs and started before the object was made,
    whatever the program (a reused pid started after its object, the
    owner having died in between). Without made_at: pid runs and is one of
    OWNERS."""
    if pid == os.getpid():
        return True
    start = process_start(pid)
    if start is None:
        return False
    if made_at is not None:
        return start <= made_at + START_SLACK_S
    return launcher_alive(pid)


def launcher_alive(pid: int) -> bool:
    """Whether pid is a running deploy/daqrun, analysis/railcap.py or
    analysis/cms2003.py (by its command line)."""
    if pid == os.getpid():
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return any(owner in cmd for owner in OWNERS)


def process_name(pid: int) -> str:
    """pid's command line, shortened, for messages."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())
    except OSError:
        return "?"
    return cmd if len(cmd) <= 60 else cmd[:57] + "..."


class Backend(abc.ABC):
    """How the launcher prepares hosts and starts, watches, stops and
    collects daemons on them."""

    name = "abstract"
    poll_s = 0.02                # how often the launcher looks at port files
    # What the backend adds to a topology (docs/TOPOLOGY.md is made from it):
    options: dict[str, Key] = {}     # its table [NAME]; the instance gets it resolved
    options_title = ""               # what [NAME] is, for the docs
    host_keys: dict[str, Key] = {}   # keys of [hosts.NAME] it reads (HostSpec attributes)
    needs_hosts = True               # needs the hosts named in [hosts.NAME]
    # Whether prepare() may wait in a batch system's queue: the run's
    # --timeout then starts once it returns.
    waits_in_queue = False

    @classmethod
    def validate(cls, where: str, hosts: dict[str, dict], options: dict) -> None:
        """Checks the resolved [hosts.NAME] tables and the backend's own
        table (raising TopologyError naming the key); may fill in defaults."""

    @classmethod
    def needs_local_binaries(cls, hosts: dict[str, HostSpec]) -> bool:
        """Whether the daemons must exist in the launcher's --bin."""
        return True

    def __init__(self, hosts: dict[str, HostSpec], run_dir: Path, bin_dir: Path,
                 options: dict | None = None, say: Callable[[str], None] = print):
        self.hosts = hosts
        self.run_dir = run_dir
        self.bin_dir = bin_dir
        self.options = options or {}
        self.say = say
        # The name of everything the backend creates on this machine
        # (esdq<pid>-...), which --cleanup recognises.
        self.tag = f"{PREFIX}{os.getpid()}"

    # -- hosts -----------------------------------------------------------
    def prepare(self, builder_host: str) -> None:
        """Sets the hosts up before any daemon starts (network, clocks,
        binaries). builder_host is the host whose chronyd, where the
        backend runs one, serves time to the others."""

    def teardown(self) -> list[str]:
        """Removes everything prepare() and start() created; idempotent.
        Returns the problems met (empty when everything is gone)."""
        return []

    def address(self, host: str) -> str:
        """The address daemons on host listen on and are reached at."""
        return self.hosts[host].address

    def status_address(self, host: str) -> str | None:
        """The address a builder on host serves /status and /metrics on so
        that the launcher's progress line can read them (entering
        netns_path(host) when it is set); None: no progress line."""
        return None

    def netns_path(self, host: str) -> str | None:
        """The network namespace (/run/netns/NAME) the launcher enters to
        reach host's addresses, when they are not reachable from its own."""
        return None

    def rail_addresses(self, host: str) -> list[str]:
        """host's address on each of its rails (network interfaces), rail 0
        first: address(host). A builder listens on each, and a reader's TCP
        link to it is one connection per rail both hosts have
        (deploy/daqlib/sockbuf.py, docs/BUILDERS.md "Rails")."""
        spec = self.hosts[host]
        return [self.address(host)] + list(spec.addresses[1:])

    def host_command(self, host: str, argv: list[str]) -> list[str]:
        """The command line that runs argv on host from this machine, its
        output and status this process's to read: a short command (a tool's
        measurement, a file of /proc), not a daemon (start() is for those,
        with their logs and lifetime). Hosts that are this machine run argv
        as it is."""
        return list(argv)

    def path(self, host: str, local: Path) -> str:
        """The path a daemon on host uses for local, a path under run_dir."""
        return str(local)

    def make_dir(self, host: str, local: Path) -> None:
        """Creates local, a folder under run_dir, at path(host, local) on host
        (with its parents): where a builder of several writes its records.
        Hosts sharing this machine's file system have it once made here."""
        local.mkdir(parents=True, exist_ok=True)

    def put_file(self, local: Path) -> None:
        """Makes local, a file under run_dir, readable at path(host, local)
        on every host (private to the user). Hosts sharing this machine's
        file system have it already."""

    def binary(self, host: str, daemon: str) -> str:
        spec = self.hosts.get(host)
        base = spec.bin if spec is not None and spec.bin else str(self.bin_dir)
        return f"{base}/{daemon}"

    def env(self, host: str) -> dict[str, str]:
        """Environment added for daemons on host."""
        spec = self.hosts.get(host)
        out = dict(spec.env) if spec else {}
        if spec is not None and spec.chrony_socket:
            out["ES_CHRONY_SOCKET"] = spec.chrony_socket
        return out

    def describe(self) -> dict:
        """What params.json records about the backend's hosts."""
        return {"hosts": {n: {"address": self.address(n)} for n in self.hosts}}

    # -- daemons ---------------------------------------------------------
    @abc.abstractmethod
    def start(self, name: str, argv: list[str], log_path: Path, *, host: str,
              stdout_path: Path | None = None) -> Handle:
        """Starts argv on host in a process group of its own, with stderr (and
        stdout, unless stdout_path is given) appended to log_path (local
        paths; remote backends bring them back in collect())."""

    @abc.abstractmethod
    def wait(self, handle: Handle, timeout: float | None = 0) -> int | None:
        """The exit status (negative: killed by that signal), or None if still
        running after timeout seconds (0 = just look, None = forever)."""

    @abc.abstractmethod
    def kill(self, handle: Handle, sig: int = signal.SIGTERM) -> None:
        """Sends sig to the daemon, if it still runs."""

    @abc.abstractmethod
    def collect(self, handle: Handle, run_dir: Path) -> list[Path]:
        """Brings the daemon's logs (and anything else it wrote on its host)
        into run_dir; returns the local paths."""

    @abc.abstractmethod
    def read_file(self, host: str, path: Path) -> str | None:
        """Text of a file on host (port files, the builder's summary), or None
        if it does not exist. path is the local path under run_dir."""

    def exit_note(self, handle: Handle) -> str:
        """What the backend knows of why an ended daemon ended, when that was
        not the launcher's doing (a batch system cancelled its step), else ""."""
        return ""

    def log_text(self, handle: Handle) -> str | None:
        """The daemon's log as it is now (for error messages mid-run)."""
        try:
            return handle.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def remove_shm(self, host: str, name: str) -> list[str]:
        """Removes shared-memory segments /dev/shm/es-NAME-r* left on host
        (builderd removes them itself except when killed at the wrong
        moment). Returns the names removed."""
        removed = []
        for p in Path("/dev/shm").glob(f"es-{name}-r*"):
            try:
                p.unlink()
                removed.append(p.name)
            except FileNotFoundError:
                pass
            except OSError:
                pass
        return removed

    def stop(self, handle: Handle, grace_s: float = 3.0) -> None:
        """SIGTERM (the daemons drain), then SIGKILL after grace_s."""
        if self.wait(handle, 0) is not None:
            return
        handle.killed = True
        self.kill(handle, signal.SIGTERM)
        if self.wait(handle, grace_s) is None:
            self.kill(handle, signal.SIGKILL)
            self.wait(handle, 5.0)


class SharedRunDir:
    """collect() and read_file() of a backend whose hosts write straight
    into the launcher's run directory: the same file system (local, netns)
    or one shared by every node (a batch system's)."""

    def collect(self, handle: Handle, run_dir: Path) -> list[Path]:
        return [p for p in (handle.log_path, handle.stdout_path) if p is not None]

    def read_file(self, host: str, path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None


BACKENDS: dict[str, type[Backend]] = {}


def register(name: str):
    def deco(cls: type[Backend]) -> type[Backend]:
        cls.name = name
        BACKENDS[name] = cls
        return cls
    return deco


def stop_processes(procs: Iterable[subprocess.Popen], grace_s: float = 3.0) -> None:
    """SIGTERM to each process group still running, SIGKILL after grace_s."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    for p in live:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
