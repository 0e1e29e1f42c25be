"""The daemons' command lines (addresses and paths as their host sees them,
asked of the backend), the run key, and when refbuild's check applies.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from . import sockbuf
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


_shm_name: str | None = None


def shm_name() -> str:
    """NAME of this launch's shared-memory rings: the builder's abstract
    socket @es-NAME and segments /dev/shm/es-NAME-r<id> must not collide with
    another run on the same host, so it carries the launcher's pid (or the
    name set_shm_name() gave)."""
    return _shm_name or f"daq{os.getpid()}"


def set_shm_name(name: str) -> None:
    """The rings' NAME of serving daemons another process started: a
    client building their run's arguments must name the rings they fixed
    at their start (deploy/daqlib/runconfig.py)."""
    global _shm_name
    _shm_name = name


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


def builder_shm_name(builder_id: int) -> str:
    """--shm-listen of builder B of several: its rings /dev/shm/es-RUN-bB-r<id>."""
    return f"{shm_name()}-b{builder_id}"


def uses_shm(t: Topology) -> bool:
    if t.several:
        return bool(t.shm_builders())
    return any(r["transport"] == "shm" for r in t.readers)


def shm_segments(t: Topology) -> list[tuple[str, str]]:
    """(host, NAME) of every builder's rings, /dev/shm/es-NAME-r*."""
    if not t.several:
        return [(t.builder["host"], shm_name())] if uses_shm(t) else []
    return [(b["host"], builder_shm_name(b["id"])) for b in t.shm_builders()]


def hub_name(t: Topology) -> str:
    """The process of the run's control port: the hub, or the one builder."""
    return "hub" if t.several else "builder-0"


def builder_names(t: Topology) -> list[str]:
    return [f"builder-{b['id']}" for b in t.builders]


def control_addr(t: Topology, be: Backend, ports: dict[str, dict[str, int]]) -> str:
    """HOST:PORT every reader, source and builder dials: the hub's control port."""
    return addr(be.address(t.hub_host), ports[hub_name(t)]["control"])


def building_options(t: Topology, table: dict) -> list[str]:
    """The run's building options, as builderd takes them whatever its role."""
    r = t.run
    argv = ["--first-event", str(r["first_event"]), "--events", str(r["events"]),
            "--filter-modulo", str(r["filter_modulo"])]
    opt(argv, "--max-inflight", r["max_inflight"])
    opt(argv, "--timeout-ms", r["timeout_ms"])
    opt(argv, "--skip-timeout-ms", r["skip_timeout_ms"])
    opt(argv, "--filter-cost-us", r["filter_cost_us"] or None)
    opt(argv, "--flush-every", table.get("flush_every"))
    opt(argv, "--max-fragment", r["max_fragment"])
    opt(argv, "--peer-timeout-ms", r["peer_timeout_ms"])
    return argv


def config_sha256(t: Topology) -> str:
    """The run's configuration hash, stamped into every event file: the
    SHA-256 of the topology as resolved (params.json's "topology", every
    default filled in and every --set applied) in canonical JSON: keys
    sorted, no spaces, UTF-8 (docs/TOPOLOGY.md, "[output]")."""
    text = json.dumps(t.as_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_max_payload(t: Topology) -> int:
    """[output] max_payload, by default the run's largest payload."""
    o, r = t.output, t.run
    if o["max_payload"] is not None:
        return o["max_payload"]
    return max(1, r["payload"], r["max_fragment"] or 0)


def data_dir(t: Topology, run_dir: Path, builder_id: int) -> Path:
    """Where builder B writes its event files: [output] directory (under
    the run directory when relative), the run directory by default; with
    several builders, its builders/B/ below that."""
    given = t.output.get("directory")
    base = run_dir if given is None else run_dir / given   # an absolute path stays itself
    return base / "builders" / str(builder_id) if t.several else base


def record_options(t: Topology, be: Backend, host: str, run_dir: Path,
                   builder_id: int) -> list[str]:
    """builderd's --record options from [output]; none when it records nothing."""
    o = t.output
    if not t.records:
        return []
    argv = ["--record", o["format"],
            "--record-dir", be.path(host, data_dir(t, run_dir, builder_id)),
            "--record-max-payload", str(record_max_payload(t))]
    opt(argv, "--record-max-file-bytes", o["max_file_bytes"])
    opt(argv, "--record-sync", o["sync"])
    opt(argv, "--record-io", o["io"])
    opt(argv, "--record-keep", o["keep"])
    opt(argv, "--record-slice-ms", o["slice_ms"])
    opt(argv, "--record-slice-events", o["slice_events"])
    return argv + ["--config-sha256", config_sha256(t)]


def common_tail(t: Topology, be: Backend, host: str, table: dict, run_dir: Path) -> list[str]:
    """What ends every builderd's command line: quiet, the run key, the
    metrics listener the progress line reads, the table's extra."""
    argv = ["--quiet"] if table["quiet"] else []
    argv += ["--run-key-file", be.path(host, run_key_path(t, run_dir))]
    status = be.status_address(host)
    if status:
        # The launcher's progress line reads the builder's /status.
        argv += ["--metrics-listen", addr(status, 0)]
    return argv + table["extra"]


def builder_argv(t: Topology, be: Backend, run_dir: Path, port_file: Path) -> list[str]:
    """builderd's command line, the one builder of a run that is also its
    hub (--role both); addresses and paths as seen on its host."""
    r, b = t.run, t.builder
    host = b["host"]
    argv = [be.binary(host, "builderd"), "--run", str(r["run"]),
            "--sources", str(len(t.source_ids)), "--readers", str(len(t.readers)),
            *listen_args(be, host, b["data_port"]),
            "--control-listen", addr(be.address(host), b["control_port"]),
            "--out", be.path(host, run_dir), "--port-file", be.path(host, port_file)]
    argv += building_options(t, b)
    opt(argv, "--socket-buffer", builder_socket_buffer(t, be, 0))
    if uses_shm(t):
        argv += ["--shm-listen", shm_name()]
        opt(argv, "--shm-capacity", b["shm_capacity"])
    if r["no_admission"]:
        argv.append("--no-admission")
    argv += record_options(t, be, host, run_dir, 0)
    return argv + common_tail(t, be, host, b, run_dir)


def hub_argv(t: Topology, be: Backend, run_dir: Path, port_file: Path) -> list[str]:
    """The hub of several builders (--role hub): no data port; it writes
    RUNDIR/metrics.json (docs/BUILDERS.md, "Interfaces between the daemons")."""
    r, hub = t.run, t.hub
    host = hub["host"]
    argv = [be.binary(host, "builderd"), "--role", "hub", "--builders", str(len(t.builders)),
            "--run", str(r["run"]), "--sources", str(len(t.source_ids)),
            "--readers", str(len(t.readers)),
            "--control-listen", addr(be.address(host), hub["control_port"]),
            "--out", be.path(host, run_dir), "--port-file", be.path(host, port_file)]
    argv += building_options(t, hub)
    opt(argv, "--routing", r["routing"])
    opt(argv, "--batch", r["batch"])
    opt(argv, "--window-batches", r["window_batches"])
    return argv + common_tail(t, be, host, hub, run_dir)


def builder_out(run_dir: Path, builder_id: int) -> Path:
    """Where builder B of several writes events.jsonl and expired.jsonl."""
    return run_dir / "builders" / str(builder_id)


def builder_role_argv(t: Topology, b: dict, be: Backend, run_dir: Path, port_file: Path,
                      ports: dict[str, dict[str, int]]) -> list[str]:
    """Builder b of several (--role builder), once the hub listens."""
    r, host = t.run, b["host"]
    argv = [be.binary(host, "builderd"), "--role", "builder", "--id", str(b["id"]),
            "--builders", str(len(t.builders)), "--hub", control_addr(t, be, ports),
            "--run", str(r["run"]), "--sources", str(len(t.source_ids)),
            "--readers", str(len(t.readers)),
            *listen_args(be, host, b["data_port"]),
            "--out", be.path(host, builder_out(run_dir, b["id"])),
            "--port-file", be.path(host, port_file)]
    argv += building_options(t, b)
    opt(argv, "--socket-buffer", builder_socket_buffer(t, be, b["id"]))
    if b["id"] in [x["id"] for x in t.shm_builders()]:
        argv += ["--shm-listen", builder_shm_name(b["id"])]
        opt(argv, "--shm-capacity", b["shm_capacity"])
    argv += record_options(t, be, host, run_dir, b["id"])
    return argv + common_tail(t, be, host, b, run_dir)


def listen_args(be: Backend, host: str, port: int) -> list[str]:
    """A builder's data port on each of its host's rails, all on one port
    (docs/BUILDERS.md, "Rails")."""
    argv = []
    for a in be.rail_addresses(host):
        argv += ["--listen", addr(a, port)]
    return argv


def builder_host(t: Topology, b_id: int) -> str:
    return t.builders[b_id]["host"] if t.several else t.builder["host"]


def tcp_urls(t: Topology, reader: dict, be: Backend, b_id: int, port: int) -> list[str]:
    """One URL per rail the reader's host and builder b_id's share, in rail order."""
    host = builder_host(t, b_id)
    rails = sockbuf.common_rails(be, reader["host"], host)
    return ["tcp://" + addr(a, port) for a in be.rail_addresses(host)[:rails]]


def reader_targets(t: Topology, reader: dict, be: Backend,
                   ports: dict[str, dict[str, int]]) -> list[str]:
    """The reader's --builder arguments: for the one builder its URL, else
    B=URL per builder; shared memory where the topology says so, else TCP
    with one URL per rail the two hosts share (repeated, in rail order)."""
    argv = []
    for b_id, link in t.links(reader).items():
        prefix = f"{b_id}=" if t.several else ""
        if link == "shm":
            name = builder_shm_name(b_id) if t.several else shm_name()
            argv += ["--builder", f"{prefix}shm://{name}"]
            continue
        for url in tcp_urls(t, reader, be, b_id, ports[f"builder-{b_id}"]["data"]):
            argv += ["--builder", prefix + url]
    return argv


def reader_socket_buffer(t: Topology, reader: dict, be: Backend) -> int | None:
    """--socket-buffer of a reader: its TCP links' (deploy/daqlib/sockbuf.py)."""
    peers = [(builder_host(t, b_id), len(reader["sources"]))
             for b_id, link in t.links(reader).items() if link == "tcp"]
    return sockbuf.socket_buffer(t, be, reader["host"], peers)


def builder_socket_buffer(t: Topology, be: Backend, b_id: int) -> int | None:
    """--socket-buffer of builder b_id: its readers' TCP links'."""
    peers = [(r["host"], len(r["sources"])) for r in t.readers
             if t.links(r).get(b_id) == "tcp"]
    return sockbuf.socket_buffer(t, be, builder_host(t, b_id), peers)


def reader_argv(t: Topology, reader: dict, be: Backend, port_file: Path,
                ports: dict[str, dict[str, int]]) -> list[str]:
    r, host = t.run, reader["host"]
    argv = [be.binary(host, "readoutd"), "--id", str(reader["id"]), "--run", str(r["run"]),
            "--listen", addr(be.address(host), reader["port"]),
            "--port-file", be.path(host, port_file),
            "--sources", ",".join(str(s) for s in reader["sources"])]
    argv += reader_targets(t, reader, be, ports)
    argv += ["--control", control_addr(t, be, ports)]
    opt(argv, "--max-fragment", r["max_fragment"])
    opt(argv, "--connect-timeout-ms", r["connect_timeout_ms"])
    opt(argv, "--socket-buffer", reader_socket_buffer(t, reader, be))
    argv += ["--run-key-file", be.path(host, run_key_path(t, be.run_dir))]
    return argv + reader["extra"]


def source_argv(t: Topology, source: int, be: Backend, reader_port: int,
                ports: dict[str, dict[str, int]]) -> list[str]:
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
             "--control", control_addr(t, be, ports)]
    opt(argv, "--connect-timeout-ms", r["connect_timeout_ms"])
    argv += ["--run-key-file", be.path(t.source_host(source), run_key_path(t, be.run_dir))]
    return argv + t.sources_defaults["extra"] + own.get("extra", [])


def placement_prefix(*specs: dict) -> list[str]:
    """taskset/chrt in front of a daemon's command line: the first of
    specs (most specific first) that sets cpus, and rtprio, wins."""
    cpus = next((s["cpus"] for s in specs if s.get("cpus") is not None), None)
    prio = next((s["rtprio"] for s in specs if s.get("rtprio") is not None), None)
    out = ["taskset", "-c", cpus] if cpus is not None else []
    return out + (["chrt", "-f", str(prio)] if prio is not None else [])


def port_file(run_dir: Path, name: str) -> Path:
    return run_dir / "ports" / f"{name}.port"


def command_lines(t: Topology, be: Backend, run_dir: Path,
                  ports: dict[str, dict[str, int]]) -> list[tuple[str, str, list[str]]]:
    """(name, host, argv) of every daemon of the run in start order, given
    the ports their port files will say (keyed by name: "hub", "builder-B",
    "reader-R"). The launcher starts exactly these."""
    out = []
    if t.several:
        out.append(("hub", t.hub_host, placement_prefix(t.hub) +
                    hub_argv(t, be, run_dir, port_file(run_dir, "hub"))))
        for b in t.builders:
            name = f"builder-{b['id']}"
            out.append((name, b["host"], placement_prefix(b) + builder_role_argv(
                t, b, be, run_dir, port_file(run_dir, name), ports)))
    else:
        out.append(("builder-0", t.builder["host"], placement_prefix(t.builder) +
                    builder_argv(t, be, run_dir, port_file(run_dir, "builder-0"))))
    for r in t.readers:
        name = f"reader-{r['id']}"
        out.append((name, r["host"], placement_prefix(r) +
                    reader_argv(t, r, be, port_file(run_dir, name), ports)))
    for s in t.source_ids:
        reader = t.reader_of(s)
        out.append((f"source-{s}", t.source_host(s),
                    placement_prefix(t.source_overrides.get(s, {}), t.sources_defaults) +
                    source_argv(t, s, be, ports[f"reader-{reader['id']}"]["data"], ports)))
    return out


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
