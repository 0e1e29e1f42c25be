"""A serving session's runs as the hub takes them: the configure request
built from a topology (every daemon's run arguments, the one-run
launcher's command lines less what the process fixed at its start), and
the session file that tells a client (deploy/daqctl) where the serving
daemons listen. deploy/daqrun --runs and --serve and deploy/daqctl both
build their configure here (docs/RUNCONTROL.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .backends import BACKENDS, Backend
from .daemons import command_lines, set_shm_name
from .topology import Topology

# Options every run shares with the process's start (fixed, docs/RUNCONTROL.md)
# that a run's command line may leave out: the session keeps the base's.
OMITTED_PER_RUN = ("--port-file", "--run-key-file", "--metrics-listen")
DAEMONS = ("builderd", "readoutd", "sourced")
# Backends whose addresses and paths follow from the topology alone; the
# others (netns, slurm) learn them when they prepare the hosts, which only
# the launcher that started the daemons has done.
CLIENT_BACKENDS = ("local", "ssh")
SESSION_FILE = "session.json"
SESSION_FORMAT = "daq-session/1"


class SessionError(Exception):
    """A session directory without a usable session file; the message names it."""


def daemon_key(name: str, several: bool) -> str:
    """The configure's args key of a daemon: "hub", "source.0", "reader.1", "builder.2"."""
    if name == "hub" or (name == "builder-0" and not several):
        return "hub"
    role, ident = name.rsplit("-", 1)
    return f"{role}.{ident}"


def run_args(argv: list[str]) -> list[str]:
    """A run's arguments from a command line: what follows the binary (a
    taskset/chrt prefix dropped), less the fixed paths the base gave."""
    i = next(i for i, a in enumerate(argv) if Path(a).name in DAEMONS)
    out, rest = [], argv[i + 1:]
    skip = False
    for a in rest:
        if skip:
            skip = False
        elif a in OMITTED_PER_RUN:
            skip = True
        elif not any(a.startswith(o + "=") for o in OMITTED_PER_RUN):
            out.append(a)
    return out


def configure_body(t: Topology, backend: Backend, run_dir: Path,
                   ports: dict[str, dict[str, int]]) -> dict:
    """POST /configure's body for the run t describes, its outputs in
    run_dir: {"run": N, "args": {"hub": [...], "source.0": [...], ...}}.
    ports: every serving daemon's port file, keyed by name ("hub",
    "builder-B", "reader-R"), as the session learnt them at start."""
    lines = command_lines(t, backend, run_dir, ports)
    return {"run": t.run["run"],
            "args": {daemon_key(name, t.several): run_args(argv) for name, _, argv in lines}}


@dataclass(frozen=True)
class Session:
    """What a client needs of serving daemons started by deploy/daqrun:
    the hub's endpoint, the run key, every daemon's ports, the name of the
    shared-memory rings (fixed at start) and where runs write."""
    dir: Path
    hub: str
    run_key_file: str | None
    ports: dict[str, dict[str, int]]
    shm_name: str
    bin_dir: str

    def backend(self, t: Topology, run_dir: Path) -> Backend:
        """The topology's backend, only asked for addresses and paths;
        SessionError for a backend a client cannot stand in for."""
        name = t.deploy["backend"]
        if name not in CLIENT_BACKENDS:
            raise SessionError(f"a run of the {name} backend is built by the daqrun that "
                               f"started its daemons (daqrun --runs); a client builds runs "
                               f"for the {' and '.join(CLIENT_BACKENDS)} backends")
        set_shm_name(self.shm_name)
        cls = BACKENDS[name]
        return cls(t.host_specs(), run_dir, Path(self.bin_dir), t.backend_options(),
                   lambda _msg: None)

    def run_dir(self, number: int) -> Path:
        return self.dir / f"run-{number}"


def write_session(s: Session) -> Path:
    path = s.dir / SESSION_FILE
    doc = {"format": SESSION_FORMAT, "hub": s.hub, "run_key_file": s.run_key_file,
           "ports": s.ports, "shm_name": s.shm_name, "bin": s.bin_dir, "pid": os.getpid()}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_session(directory: str | Path) -> Session:
    d = Path(directory).resolve()
    path = d / SESSION_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SessionError(f"cannot read {path}: {e.strerror} (is it the directory of "
                           f"daqrun --serve or --runs?)") from None
    except ValueError as e:
        raise SessionError(f"{path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != SESSION_FORMAT:
        raise SessionError(f"{path} is not a session file ({SESSION_FORMAT})")
    try:
        ports = {str(n): {str(k): int(v) for k, v in p.items()} for n, p in doc["ports"].items()}
        return Session(d, str(doc["hub"]), doc.get("run_key_file"), ports,
                       str(doc["shm_name"]), str(doc["bin"]))
    except (KeyError, AttributeError, TypeError, ValueError) as e:
        raise SessionError(f"{path}: missing or bad field {e}") from None
