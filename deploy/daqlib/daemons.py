"""The daemons' command lines (addresses and paths as their host sees them,
asked of the backend), the run key, and when refbuild's check applies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .backends import Backend, LaunchError
from .topology import Topology


def addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def opt(argv: list[str], flag: str, value: Any) -> None:
    """Appends flag and value when value is set (not None)."""
    if value is not None:
        argv += [flag, num(value) if isinstance(value, (int, float)) else str(value)]


def shm_name() -> str:
    """NAME of this launch's shared-memory rings: the builder's abstract
    socket @es-NAME and segments /dev/shm/es-NAME-r<id> must not collide with
    another run on the same host, so it carries the launcher's pid."""
    return f"daq{os.getpid()}"


def run_key_path(t: Topology, run_dir: Path) -> Path:
    """The run key every daemon gets: the topology's run_key_file, or
    run.key in the run directory, made by make_run_key()."""
    given = t.run.get("run_key_file")
    return Path(given) if given else run_dir / "run.key"


def make_run_key(t: Topology, run_dir: Path) -> Path:
    """Writes a fresh key (32 random bytes in hex, mode 600) unless the
    topology names one, which must then exist."""
    path = run_key_path(t, run_dir)
    if t.run.get("run_key_file"):
        if not path.is_file():
            raise LaunchError(f"[run] run_key_file: {path} does not exist")
        return path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path


def uses_shm(t: Topology) -> bool:
    return any(r["transport"] == "shm" for r in t.readers)


def builder_argv(t: Topology, be: Backend, run_dir: Path, port_file: Path) -> list[str]:
    """builderd's command line; addresses and paths as seen on its host."""
    r, b = t.run, t.builder
    host = b["host"]
    argv = [be.binary(host, "builderd"), "--run", str(r["run"]),
            "--sources", str(len(t.source_ids)), "--readers", str(len(t.readers)),
            "--listen", addr(be.address(host), b["data_port"]),
            "--control-listen", addr(be.address(host), b["control_port"]),
            "--out", be.path(host, run_dir), "--port-file", be.path(host, port_file),
            "--first-event", str(r["first_event"]), "--events", str(r["events"]),
            "--filter-modulo", str(r["filter_modulo"])]
    opt(argv, "--max-inflight", r["max_inflight"])
    opt(argv, "--timeout-ms", r["timeout_ms"])
    opt(argv, "--skip-timeout-ms", r["skip_timeout_ms"])
    opt(argv, "--filter-cost-us", r["filter_cost_us"] or None)
    opt(argv, "--flush-every", b["flush_every"])
    opt(argv, "--max-fragment", r["max_fragment"])
    opt(argv, "--peer-timeout-ms", r["peer_timeout_ms"])
    if uses_shm(t):
        argv += ["--shm-listen", shm_name()]
        opt(argv, "--shm-capacity", b["shm_capacity"])
    if r["no_admission"]:
        argv.append("--no-admission")
    if b["quiet"]:
        argv.append("--quiet")
    argv += ["--run-key-file", be.path(host, run_key_path(t, run_dir))]
    if be.status_on_loopback:
        # The launcher's progress line reads the builder's /status.
        argv += ["--metrics-listen", "127.0.0.1:0"]
    return argv + b["extra"]


def reader_argv(t: Topology, reader: dict, be: Backend, port_file: Path,
                builder_ports: dict[str, int]) -> list[str]:
    r, host, bhost = t.run, reader["host"], be.address(t.builder["host"])
    argv = [be.binary(host, "readoutd"), "--id", str(reader["id"]), "--run", str(r["run"]),
            "--listen", addr(be.address(host), reader["port"]),
            "--port-file", be.path(host, port_file),
            "--sources", ",".join(str(s) for s in reader["sources"]),
            "--builder", (f"shm://{shm_name()}" if reader["transport"] == "shm"
                          else "tcp://" + addr(bhost, builder_ports["data"])),
            "--control", addr(bhost, builder_ports["control"])]
    opt(argv, "--max-fragment", r["max_fragment"])
    opt(argv, "--connect-timeout-ms", r["connect_timeout_ms"])
    argv += ["--run-key-file", be.path(host, run_key_path(t, be.run_dir))]
    return argv + reader["extra"]


def source_argv(t: Topology, source: int, be: Backend, reader_port: int,
                builder_ports: dict[str, int]) -> list[str]:
    r = t.run
    own = t.source_overrides.get(source, {})
    rate = own.get("rate") if own.get("rate") is not None else r["rate"]
    reader_addr = be.address(t.reader_of(source)["host"])
    argv = [be.binary(t.source_host(source), "sourced"), "--id", str(source),
            "--run", str(r["run"]),
            "--seed", str(r["seed"]), "--events", str(r["events"]),
            "--first-event", str(r["first_event"]), "--payload", str(r["payload"]),
            "--rate", num(rate)]
    opt(argv, "--missing-every", r["missing_every"] or None)
    opt(argv, "--duplicate-every", r["duplicate_every"] or None)
    if r["delay_every"]:
        argv += ["--delay-every", str(r["delay_every"]), "--delay-ms", str(r["delay_ms"])]
    if r["reorder"]:
        argv.append("--reorder")
    argv += ["--connect", addr(reader_addr, reader_port),
             "--control", addr(be.address(t.builder["host"]), builder_ports["control"])]
    opt(argv, "--connect-timeout-ms", r["connect_timeout_ms"])
    argv += ["--run-key-file", be.path(t.source_host(source), run_key_path(t, be.run_dir))]
    return argv + t.sources_defaults["extra"] + own.get("extra", [])


def refbuild_policy(t: Topology) -> tuple[bool, str]:
    """Whether the accepted set is a function of the run's parameters alone,
    so that refbuild must match it exactly. See docs/TOPOLOGY.md."""
    r = t.run
    extras = list(t.sources_defaults["extra"]) + [a for s in t.source_overrides.values()
                                                    for a in s["extra"]]
    if any(a == "--inject" or a.startswith("--inject=") for a in extras):
        return False, "sources inject corrupt frames (the connection and what it held are lost)"
    if r["delay_every"]:
        return False, ("delay faults (whether a delayed fragment beats timeout_ms and "
                       "skip_timeout_ms is timing)")
    if r["no_admission"] and (r["max_inflight"] is None or r["max_inflight"] < r["events"]):
        return False, "no admission control (the window may slide over incomplete events)"
    if r["filter_cost_us"] and r["timeout_ms"] != 0:
        return False, "filter cost with event timeouts (a busy builder may time events out)"
    return True, "the accepted events depend only on the run's parameters"
