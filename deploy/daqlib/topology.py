"""A topology file (docs/TOPOLOGY.md): read, changed by --set, validated
against the keys of daqlib.schema and of the backends, defaults filled in.
"""

from __future__ import annotations

import os
import re
import shutil

import tomllib
from dataclasses import dataclass, field
from typing import Any

from .backends import BACKENDS, HostSpec, host_keys, option_tables
from .backends.base import NAME_RE
from .schema import (ARRAYS, BUILDER_ARRAY_KEYS, CORE_TABLES, DEFAULT_BATCH, DEFAULT_SLOTS,
                     DEFAULT_TIMEOUT_MS, HIGH_WATER_BATCHES, MAX_RAILS, OUTPUT_FORMATS,
                     OUTPUT_IOS, OUTPUT_KEEPS, OUTPUT_SYNCS, ROUTINGS, TRANSPORTS, U64,
                     TopologyError, default_of, resolve_table)

# [run] keys of the hub of several builders: a single [builder] takes none.
HUB_RUN_KEYS = ("routing", "batch", "window_batches")


def tables() -> dict[str, dict]:
    """Every single table of a topology: the launcher's, then each
    backend's own ([netns], [ssh])."""
    return {**CORE_TABLES, **option_tables()}


@dataclass
class Topology:
    path: str
    deploy: dict
    run: dict
    builder: dict                   # [builder]; with [[builder]] tables, builder 0's
    readers: list[dict]
    sources_defaults: dict
    source_overrides: dict[int, dict]
    source_ids: list[int] = field(default_factory=list)
    hosts: dict[str, dict] = field(default_factory=dict)   # [hosts.NAME], resolved
    hosts_declared: bool = False    # False: every host string is an address (local)
    backend_tables: dict[str, dict] = field(default_factory=dict)   # [netns], [ssh], resolved
    # With [[builder]] tables: every builder by id (0 .. M-1) and the hub's
    # [hub]; with one [builder], [that table] and None (builderd --role both).
    builders: list[dict] = field(default_factory=list)
    hub: dict | None = None
    output: dict = field(default_factory=dict)     # [output], resolved

    @property
    def records(self) -> bool:
        """Whether every builder writes its events' data ([output] format)."""
        return self.output.get("format", "none") != "none"

    @property
    def several(self) -> bool:
        """A hub of its own and [[builder]] tables (--role hub, --role builder)."""
        return self.hub is not None

    @property
    def hub_host(self) -> str:
        """The host of the run's control port: the hub, or the one builder."""
        return self.hub["host"] if self.hub is not None else self.builder["host"]

    def links(self, reader: dict) -> dict[int, str]:
        """{builder id: "shm" or "tcp"}: how reader forwards to each builder.
        Shared memory where the two share a host, unless the reader says tcp."""
        if not self.several:
            return {0: reader["transport"]}
        return {b["id"]: "shm" if reader["transport"] == "shm" and b["host"] == reader["host"]
                else "tcp" for b in self.builders}

    def shm_builders(self) -> list[dict]:
        """The builders at least one reader reaches through shared memory."""
        return [b for b in self.builders
                if any(self.links(r)[b["id"]] == "shm" for r in self.readers)]

    def reader_of(self, source: int) -> dict:
        return next(r for r in self.readers if source in r["sources"])

    def source_host(self, source: int) -> str:
        own = self.source_overrides.get(source, {}).get("host")
        return own or self.sources_defaults["host"] or self.reader_of(source)["host"]

    def used_hosts(self) -> list[str]:
        """Hosts with at least one daemon, the builder's first."""
        order = [self.hub_host] + [b["host"] for b in self.builders] + \
            [r["host"] for r in self.readers] + [self.source_host(s) for s in self.source_ids]
        return list(dict.fromkeys(order))

    def host_specs(self) -> dict[str, HostSpec]:
        """The hosts the backend gets: every declared host (in file order),
        or, without [hosts], one per host string, named by its address."""
        names = list(self.hosts) if self.hosts_declared else self.used_hosts()
        keys = host_keys()
        out = {}
        for name in names:
            h = self.hosts.get(name) or {k: default_of(spec) for k, spec in keys.items()}
            rails = h.get("addresses") or []
            address = h["address"] or (rails[0] if rails else name)
            out[name] = HostSpec(name=name, address=address, bin=h["bin"],
                                 addresses=list(rails) or [address],
                                 chrony_socket=h["chrony_socket"],
                                 env=dict(e.split("=", 1) for e in h.get("env") or []),
                                 extra={k: v for k, v in h.items()
                                        if k not in ("address", "addresses", "bin",
                                                     "chrony_socket", "env")})
        return out

    def backend_options(self) -> dict:
        return self.backend_tables.get(self.deploy["backend"], {})

    def as_dict(self) -> dict:
        several = {"builder": self.builders, "hub": self.hub} if self.several else \
            {"builder": self.builder}
        return {"deploy": self.deploy, "run": self.run, **several,
                "reader": self.readers, "sources": self.sources_defaults,
                "source": [dict(v) for _, v in sorted(self.source_overrides.items())],
                "hosts": self.hosts, "output": self.output, **self.backend_tables}


def _resolve_hosts(where: str, doc: dict) -> dict[str, dict]:
    raw = doc.get("hosts", {})
    if not isinstance(raw, dict):
        raise TopologyError(f"{where} [hosts] must be a table of tables: write [hosts.NAME]")
    keys = host_keys()
    hosts = {}
    for name, table in raw.items():
        if not NAME_RE.match(name):
            raise TopologyError(f"{where} [hosts.{name}]: a host name is 1-32 letters, digits "
                                f"and inner '-' (it names a namespace and a host)")
        hosts[name] = resolve_table(f"{where} [hosts.{name}]", table, keys)
    return hosts


def _place(where: str, what: str, value: str | None, hosts: dict, declared: bool,
           default: str | None) -> str | None:
    """Checks a daemon's host key against [hosts]; fills in the default."""
    if value is None:
        if not declared:
            return default
        if default is not None:
            return default
        if len(hosts) == 1:
            return next(iter(hosts))
        raise TopologyError(f"{where} {what}: missing key 'host' (one of the [hosts]: "
                            f"{', '.join(hosts)})")
    if declared and value not in hosts:
        raise TopologyError(f"{where} {what} host: {value!r} is not a host of [hosts] "
                            f"(known: {', '.join(hosts)})")
    return value


CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def parse_cpus(text: str) -> list[int] | None:
    """'0,2-3' -> [0, 2, 3]; None when it is not such a list."""
    if not CPU_LIST.fullmatch(text):
        return None
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if b < a:
            return None
        out += range(a, b + 1)
    return sorted(set(out))


def placements(t: Topology) -> list[tuple[str, dict]]:
    """(where, table) of every table that may carry cpus and rtprio."""
    if t.several:
        out = [("[hub]", t.hub)] + [(f"[[builder]] id {b['id']}", b) for b in t.builders]
    else:
        out = [("[builder]", t.builder)]
    out.append(("[sources]", t.sources_defaults))
    out += [(f"[[reader]] id {r['id']}", r) for r in t.readers]
    out += [(f"[[source]] id {s}", o) for s, o in sorted(t.source_overrides.items())]
    return out


def _check_placement(where: str, t: Topology) -> None:
    one_machine = t.deploy["backend"] in ("local", "netns")
    allowed = sorted(os.sched_getaffinity(0))
    for table, spec in placements(t):
        cpus = spec.get("cpus")
        if cpus is not None:
            cpu_list = parse_cpus(cpus)
            if cpu_list is None:
                raise TopologyError(f"{where} {table} cpus: expected a CPU list such as "
                                    f"'2-3' or '0,2', got {cpus!r}")
            if one_machine and not set(cpu_list) <= set(allowed):
                raise TopologyError(f"{where} {table} cpus: {cpus!r} names CPUs this machine "
                                    f"does not give the launcher (it has {len(allowed)}: "
                                    f"{','.join(map(str, allowed))})")
        for key, tool in (("cpus", "taskset"), ("rtprio", "chrt")):
            if spec.get(key) is not None and one_machine and shutil.which(tool) is None:
                raise TopologyError(f"{where} {table} {key}: needs {tool}, which is not "
                                    f"installed (util-linux)")


def _check_env(where: str, t: Topology) -> None:
    for name, h in t.hosts.items():
        for e in h.get("env") or []:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", e):
                raise TopologyError(f"{where} [hosts.{name}] env: expected NAME=VALUE, got {e!r}")


def _check_rails(where: str, t: Topology) -> None:
    """A host's addresses: one per rail, 1 .. MAX_RAILS, each once, the first
    its address when both are given."""
    for name, h in t.hosts.items():
        rails = h.get("addresses")
        if rails is None:
            continue
        at = f"{where} [hosts.{name}] addresses"
        if not 1 <= len(rails) <= MAX_RAILS:
            raise TopologyError(f"{at}: expected 1 to {MAX_RAILS} addresses (one per rail), "
                                f"got {len(rails)}")
        for i, a in enumerate(rails):
            if not a:
                raise TopologyError(f"{at}: address {i} (rail {i}) is empty")
            if a in rails[:i]:
                raise TopologyError(f"{at}: {a} is listed twice (rails {rails.index(a)} and "
                                    f"{i}); every rail needs an address of its own")
        if h["address"] is not None and h["address"] != rails[0]:
            raise TopologyError(f"{at}: the first (rail 0) is {rails[0]} but address is "
                                f"{h['address']}; give one of them, or the same address")


def _check_backend(where: str, t: Topology) -> None:
    _check_placement(where, t)
    _check_env(where, t)
    _check_rails(where, t)
    backend = t.deploy["backend"]
    if backend not in BACKENDS:
        raise TopologyError(f"{where} [deploy] backend: {backend!r} is not implemented "
                            f"(known: {', '.join(BACKENDS)})")
    cls = BACKENDS[backend]
    if cls.needs_hosts and not t.hosts_declared:
        raise TopologyError(f"{where} [deploy] backend {backend!r} needs the hosts named in "
                            f"[hosts.NAME] tables, and every host key naming one of them "
                            f"(docs/TOPOLOGY.md)")
    cls.validate(where, t.hosts, t.backend_options())


def _resolve_readers(where: str, doc: dict, builders: list[dict], several: bool, hosts: dict,
                     declared: bool) -> list[dict]:
    readers = []
    for i, entry in enumerate(doc.get("reader", [])):
        r = resolve_table(f"{where} [[reader]] #{i + 1}", entry, ARRAYS["reader"])
        for req in ("id", "sources"):
            if r[req] is None:
                raise TopologyError(f"{where} [[reader]] #{i + 1}: missing key {req!r}")
        r["host"] = _place(where, f"[[reader]] id {r['id']}", r["host"], hosts, declared,
                           "127.0.0.1" if not declared else None)
        readers.append(r)
    if not readers:
        raise TopologyError(f"{where} no [[reader]] section: at least one reader is needed")
    for r in readers:
        same_host = any(r["host"] == b["host"] for b in builders)
        if r["transport"] is None:
            r["transport"] = "shm" if same_host else "tcp"
        elif r["transport"] not in TRANSPORTS:
            raise TopologyError(f"{where} [[reader]] id {r['id']} transport: expected "
                                f"\"shm\" or \"tcp\", got {r['transport']!r}")
        elif r["transport"] == "shm" and not same_host and several:
            raise TopologyError(f"{where} [[reader]] id {r['id']} transport: \"shm\" needs a "
                                f"builder on the reader's host, but no [[builder]] is on reader "
                                f"host {r['host']!r} (builder hosts: "
                                f"{', '.join(dict.fromkeys(b['host'] for b in builders))})")
        elif r["transport"] == "shm" and not same_host:
            raise TopologyError(f"{where} [[reader]] id {r['id']} transport: \"shm\" needs the "
                                f"builder's host, but reader host {r['host']!r} is not builder "
                                f"host {builders[0]['host']!r}")
    ids = [r["id"] for r in readers]
    if len(set(ids)) != len(ids):
        raise TopologyError(f"{where} [[reader]] id: {ids} has duplicates")
    return readers


def _resolve_builders(where: str, doc: dict, hub: dict, hosts: dict,
                      declared: bool) -> tuple[list[dict], dict | None]:
    """The builders by id and the hub: every [[builder]] and the resolved
    [hub], or the one [builder] and None (the hub itself, --role both)."""
    raw = doc.get("builder", {})
    default = "127.0.0.1" if not declared else None
    if not isinstance(raw, list):
        if "hub" in doc:
            raise TopologyError(f"{where} [hub]: a hub of its own goes with [[builder]] tables; "
                                f"the one [builder] of a run is its own hub (write [[builder]] "
                                f"tables, id = 0, 1, ..., for several builders)")
        builder = resolve_table(f"{where} [builder]", raw, CORE_TABLES["builder"])
        builder["host"] = _place(where, "[builder]", builder["host"], hosts, declared, default)
        return [builder], None
    if not raw:
        raise TopologyError(f"{where} [[builder]]: no builder listed")
    builders = []
    for i, entry in enumerate(raw):
        at = f"{where} [[builder]] #{i + 1}"
        if isinstance(entry, dict) and "control_port" in entry:
            raise TopologyError(f"{at} control_port: a builder of several has no control port; "
                                f"the run's is the hub's ([hub] control_port)")
        b = resolve_table(at, entry, BUILDER_ARRAY_KEYS)
        if b["id"] is None:
            raise TopologyError(f"{at}: missing key 'id'")
        b["host"] = _place(where, f"[[builder]] id {b['id']}", b["host"], hosts, declared,
                           default)
        builders.append(b)
    ids = [b["id"] for b in builders]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise TopologyError(f"{where} [[builder]] id: builder {twice[0]} appears twice")
    if sorted(ids) != list(range(len(ids))):
        absent = sorted(set(range(max(ids) + 1)) - set(ids))
        raise TopologyError(f"{where} [[builder]] id: the builders' ids must be 0..M-1, each "
                            f"once; missing {absent}")
    builders.sort(key=lambda b: b["id"])
    hub["host"] = _place(where, "[hub]", hub["host"], hosts, declared, builders[0]["host"])
    return builders, hub


def _check_several(where: str, run: dict, several: bool) -> None:
    """The [run] keys of a hub and its builders."""
    if not several:
        given = [k for k in HUB_RUN_KEYS if run[k] is not None]
        if given:
            raise TopologyError(f"{where} [run] {given[0]}: applies to a hub and its builders "
                                f"([[builder]] tables); the one [builder] of a run admits "
                                f"events with its credits")
        return
    if run["routing"] is not None and run["routing"] not in ROUTINGS:
        raise TopologyError(f"{where} [run] routing: expected \"manager\" or \"static\", got "
                            f"{run['routing']!r}")
    if run["no_admission"]:
        raise TopologyError(f"{where} [run] no_admission: a run of [[builder]] tables has no "
                            f"credits to ignore (the hub's tokens bound each builder)")
    if run["timeout_ms"] == 0:
        raise TopologyError(f"{where} [run] timeout_ms: 0 (events never expire) with [[builder]] "
                            f"tables: a healthy builder could then go without a token for ever, "
                            f"and the hub gives a builder holding events up after its "
                            f"--stall-timeout-ms past timeout_ms (docs/BUILDERS.md)")
    slots, batch = run["max_inflight"], run["batch"] or DEFAULT_BATCH
    high_water = HIGH_WATER_BATCHES * batch
    if (slots if slots is not None else DEFAULT_SLOTS) <= high_water:
        shown = f"{slots}" if slots is not None else f"{DEFAULT_SLOTS}, builderd's default"
        raise TopologyError(f"{where} [run] max_inflight: each builder's slots ({shown}) must "
                            f"exceed the hub's high water mark, {HIGH_WATER_BATCHES} x batch "
                            f"= {high_water} (docs/BUILDERS.md): raise max_inflight or lower "
                            f"batch")


def _extra_value(extra: list[str], flag: str) -> str | None:
    """The last value of flag in a table's extra arguments, None without one."""
    value = None
    for i, a in enumerate(extra):
        if a == flag and i + 1 < len(extra):
            value = extra[i + 1]
        elif a.startswith(flag + "="):
            value = a[len(flag) + 1:]
    return value


def _check_event_timeouts(where: str, run: dict, builders: list[dict], hub: dict) -> None:
    """The hub gives a builder holding events up after its --stall-timeout-ms
    past its own --timeout-ms, the builders' event timeout (docs/BUILDERS.md,
    "A dead or stalled builder"): a builder given a longer one in its extra
    could be given up while healthy."""
    hub_timeout = _extra_value(hub["extra"], "--timeout-ms") or run["timeout_ms"]
    if hub_timeout is None:
        hub_timeout = DEFAULT_TIMEOUT_MS
    for b in builders:
        own = _extra_value(b["extra"], "--timeout-ms")
        if own is None or not str(own).isdigit() or not str(hub_timeout).isdigit():
            continue   # builderd names a malformed value itself
        if int(own) > int(hub_timeout):
            raise TopologyError(f"{where} [[builder]] id {b['id']} extra: --timeout-ms {own} "
                                f"exceeds the hub's {hub_timeout}, which its stall limit "
                                f"follows; set [run] timeout_ms instead (docs/BUILDERS.md)")


def _source_owners(where: str, readers: list[dict]) -> dict[int, int]:
    """{source: its reader's id}; the sources must be 0..S-1, each listed once."""
    owner: dict[int, int] = {}
    for r in readers:
        for s in r["sources"]:
            if s in owner:
                raise TopologyError(f"{where} [[reader]] sources: source {s} is listed by "
                                    f"reader {owner[s]} and reader {r['id']}")
            owner[s] = r["id"]
    source_ids = sorted(owner)
    if source_ids != list(range(len(source_ids))):
        absent = sorted(set(range(max(source_ids) + 1)) - set(source_ids))
        raise TopologyError(f"{where} [[reader]] sources: the readers' sources must be "
                            f"0..S-1; missing {absent}")
    return owner


def _resolve_overrides(where: str, doc: dict, owner: dict[int, int]) -> dict[int, dict]:
    overrides: dict[int, dict] = {}
    for i, entry in enumerate(doc.get("source", [])):
        s = resolve_table(f"{where} [[source]] #{i + 1}", entry, ARRAYS["source"])
        if s["id"] is None:
            raise TopologyError(f"{where} [[source]] #{i + 1}: missing key 'id'")
        if s["id"] not in owner:
            raise TopologyError(f"{where} [[source]] id: source {s['id']} is not listed by "
                                f"any reader")
        if s["id"] in overrides:
            raise TopologyError(f"{where} [[source]] id: source {s['id']} appears twice")
        overrides[s["id"]] = s
    return overrides


def _check_run(where: str, run: dict) -> None:
    if run["delay_every"] and not run["delay_ms"]:
        raise TopologyError(f"{where} [run] delay_ms: must be > 0 when delay_every is set")
    if run["first_event"] + run["events"] > U64 + 1:
        raise TopologyError(f"{where} [run] events: first_event + events exceeds 2^64")
    if run["max_fragment"] is not None and run["max_fragment"] < run["payload"]:
        raise TopologyError(f"{where} [run] max_fragment: {run['max_fragment']} is smaller "
                            f"than payload {run['payload']}")


def _check_output(where: str, run: dict, output: dict) -> None:
    """[output]: the format, sync, io and keep by name, a directory that is a path,
    and cells large enough for the run's payload."""
    for key, names in (("format", OUTPUT_FORMATS), ("sync", OUTPUT_SYNCS), ("io", OUTPUT_IOS),
                        ("keep", OUTPUT_KEEPS)):
        value = output[key]
        if value is not None and value not in names:
            raise TopologyError(f"{where} [output] {key}: expected "
                                f"{', '.join(repr(n) for n in names[:-1])} or {names[-1]!r}, "
                                f"got {value!r}")
    directory = output["directory"]
    if directory is not None and "\0" in directory:
        raise TopologyError(f"{where} [output] directory: a path cannot hold a NUL byte")
    if output["max_payload"] is not None and output["max_payload"] < run["payload"]:
        raise TopologyError(f"{where} [output] max_payload: {output['max_payload']} is smaller "
                            f"than payload {run['payload']}: no event of the run could be "
                            f"recorded")


def _check_sections(where: str, doc: dict, known_tables: dict) -> None:
    unknown = sorted(set(doc) - set(known_tables) - set(ARRAYS) - {"hosts"})
    if unknown:
        raise TopologyError(f"{where} unknown section [{unknown[0]}] (known: "
                            f"{', '.join(list(known_tables) + ['[reader]', '[source]', 'hosts.NAME'])})")
    for name in ARRAYS:
        if name in doc and not isinstance(doc[name], list):
            raise TopologyError(f"{where} [{name}] must be an array of tables: write [[{name}]]")


def resolve_topology(doc: dict, path: str) -> Topology:
    """Validates a parsed topology and fills in defaults."""
    where = f"topology {path}:"
    known = tables()
    _check_sections(where, doc, known)
    resolved = {name: resolve_table(f"{where} [{name}]", doc.get(name, {}), keys)
                for name, keys in known.items() if name != "builder"}
    run = resolved["run"]
    hosts = _resolve_hosts(where, doc)
    declared = "hosts" in doc
    if declared and not hosts:
        raise TopologyError(f"{where} [hosts] is empty: name at least one host")
    builders, hub = _resolve_builders(where, doc, resolved["hub"], hosts, declared)
    readers = _resolve_readers(where, doc, builders, hub is not None, hosts, declared)
    owner = _source_owners(where, readers)
    overrides = _resolve_overrides(where, doc, owner)
    _check_run(where, run)
    _check_output(where, run, resolved["output"])
    _check_several(where, run, hub is not None)
    if hub is not None:
        _check_event_timeouts(where, run, builders, hub)
    sd = resolved["sources"]
    sd["host"] = _place(where, "[sources]", sd["host"], hosts, declared, None) \
        if sd["host"] is not None else None
    for s_id, s in overrides.items():
        if s["host"] is not None:
            _place(where, f"[[source]] id {s_id}", s["host"], hosts, declared, None)
    t = Topology(path=path, deploy=resolved["deploy"], run=run, builder=builders[0],
                 readers=readers, sources_defaults=sd, source_overrides=overrides,
                 source_ids=sorted(owner), hosts=hosts, hosts_declared=declared,
                 backend_tables={n: resolved[n] for n in known if n not in CORE_TABLES},
                 builders=builders, hub=hub, output=resolved["output"])
    _check_backend(where, t)
    return t


def parse_set_value(text: str) -> Any:
    """A --set value is a TOML value (10, true, [0, 1], "x"); anything that is
    not valid TOML is taken as a string (127.0.0.1)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _set_in_array(doc: dict, dotted: str, parts: list[str], value: Any) -> None:
    section, keys = parts[0], ARRAYS[parts[0]]
    try:
        ident = int(parts[1])
    except ValueError:
        raise TopologyError(f"--set {dotted}: {parts[1]!r} is not a {section} id") from None
    if parts[2] not in keys or parts[2] == "id":
        raise TopologyError(f"--set {dotted}: unknown key {parts[2]!r} in [[{section}]] "
                            f"(known: {', '.join(k for k in keys if k != 'id')})")
    entries = doc.setdefault(section, [])
    match = [e for e in entries if isinstance(e, dict) and e.get("id") == ident]
    if match:
        match[0][parts[2]] = value
    elif section == "source":
        entries.append({"id": ident, parts[2]: value})
    else:
        raise TopologyError(f"--set {dotted}: no [[{section}]] with id {ident}")


def _set_in_builders(doc: dict, dotted: str, parts: list[str], value: Any) -> None:
    entries = doc.get("builder")
    if not isinstance(entries, list):
        raise TopologyError(f"--set {dotted}: no [[builder]] tables (the one [builder] takes "
                            f"builder.KEY)")
    try:
        ident = int(parts[1])
    except ValueError:
        raise TopologyError(f"--set {dotted}: {parts[1]!r} is not a builder id") from None
    if parts[2] not in BUILDER_ARRAY_KEYS or parts[2] == "id":
        raise TopologyError(f"--set {dotted}: unknown key {parts[2]!r} in [[builder]] "
                            f"(known: {', '.join(k for k in BUILDER_ARRAY_KEYS if k != 'id')})")
    match = [e for e in entries if isinstance(e, dict) and e.get("id") == ident]
    if not match:
        raise TopologyError(f"--set {dotted}: no [[builder]] with id {ident}")
    match[0][parts[2]] = value


def _set_in_hosts(doc: dict, dotted: str, parts: list[str], value: Any) -> None:
    table = doc.setdefault("hosts", {})
    if not isinstance(table, dict):
        raise TopologyError(f"--set {dotted}: [hosts] is not a table")
    keys = host_keys()
    if parts[2] not in keys:
        raise TopologyError(f"--set {dotted}: unknown key {parts[2]!r} in [hosts.NAME] "
                            f"(known: {', '.join(keys)})")
    entry = table.setdefault(parts[1], {})
    if not isinstance(entry, dict):
        raise TopologyError(f"--set {dotted}: [hosts.{parts[1]}] is not a table")
    entry[parts[2]] = value


def apply_set(doc: dict, assignment: str) -> None:
    """Applies one --set to the parsed topology. Keys: `run.events`,
    `builder.host` (or `builder.<id>.host` of [[builder]] tables), `hub.host`,
    `netns.shaping`, `reader.<id>.host`, `source.<id>.extra`, `hosts.<name>.ssh`,
    or a bare run key (`events`)."""
    if "=" not in assignment:
        raise TopologyError(f"--set {assignment!r}: expected key=value")
    dotted, text = assignment.split("=", 1)
    parts = dotted.strip().split(".")
    value = parse_set_value(text.strip())
    if len(parts) == 1:
        parts = ["run"] + parts
    section, known = parts[0], tables()
    if section == "builder" and len(parts) == 2 and isinstance(doc.get("builder"), list):
        raise TopologyError(f"--set {dotted}: the builders are [[builder]] tables: use "
                            f"builder.ID.{parts[1]}")
    if section in known and len(parts) == 2:
        table = doc.setdefault(section, {})
        if not isinstance(table, dict):
            raise TopologyError(f"--set {dotted}: [{section}] is not a table")
        if parts[1] not in known[section]:
            raise TopologyError(f"--set {dotted}: unknown key {parts[1]!r} in [{section}] "
                                f"(known: {', '.join(known[section])})")
        table[parts[1]] = value
    elif section in ARRAYS and len(parts) == 3:
        _set_in_array(doc, dotted, parts, value)
    elif section == "builder" and len(parts) == 3:
        _set_in_builders(doc, dotted, parts, value)
    elif section == "hosts" and len(parts) == 3:
        _set_in_hosts(doc, dotted, parts, value)
    else:
        single = ["run", "builder", "hub", "deploy", "sources", "output"] + list(option_tables())
        raise TopologyError(f"--set {dotted}: unknown key (use "
                            + ", ".join(f"{n}.KEY" for n in single)
                            + ", builder.ID.KEY, reader.ID.KEY, source.ID.KEY, hosts.NAME.KEY, "
                              "or a bare run key)")


def load_topology(path: str, sets: list[str]) -> Topology:
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise TopologyError(f"cannot read topology {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(f"topology {path}: not valid TOML: {e}") from e
    for assignment in sets:
        apply_set(doc, assignment)
    return resolve_topology(doc, path)
