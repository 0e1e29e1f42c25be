"""The topology's keys, each declared once: kind, default, range and the
sentence docs/TOPOLOGY.md shows for it. Validation, --set and the
documentation tables (daqlib.doctables) all read these tables; a backend
declares its own keys the same way (backends/base.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

U16, U32, U64 = (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1
# Bounds of several builders, as builderd's (common/core/evm.h, wire/control):
# builder ids 0 .. MAX_BUILDERS - 1, batch and window_batches 1 .. MAX_BATCH.
MAX_BUILDERS, MAX_BATCH = 256, 1 << 20
# Network interfaces (rails) a host may have: [hosts.NAME] addresses, [netns] rails.
MAX_RAILS = 4
ROUTINGS = ("manager", "static")
# builderd's defaults the launcher's checks need: a builder's slots
# (--max-inflight) and the hub's IDs per batch; the hub's high water mark is
# HIGH_WATER_BATCHES batches, and every builder's slots must exceed it.
DEFAULT_SLOTS, DEFAULT_BATCH, HIGH_WATER_BATCHES = 4096, 64, 4
DEFAULT_TIMEOUT_MS = 1000   # builderd's --timeout-ms


class TopologyError(Exception):
    """A topology or --set problem; the message names the key."""


@dataclass(frozen=True)
class Key:
    kind: str                    # "int", "number", "bool", "str", "strlist", "intlist"
    default: Any = None          # None: not set (the daemon's default applies)
    lo: int = 0
    hi: int = U64
    doc: str = ""                # its meaning, for docs/TOPOLOGY.md
    shown: str | None = None     # the default as the docs show it, when not `default`
    used_by: str | None = None   # [hosts.NAME] keys: the backends that read it


RUN_KEYS = {
    "run": Key("int", 1, 0, U32, "run number: `--run` of every daemon"),
    "seed": Key("int", 1, 0, U64, "generator seed: sources' `--seed`"),
    "events": Key("int", 10000, 1, U64, "event IDs per source: sources' and builder's "
                                        "`--events`"),
    "first_event": Key("int", 0, 0, U64, "first event ID: sources' and builder's "
                                         "`--first-event`"),
    "payload": Key("int", 256, 0, 1048576, "payload bytes per fragment: sources' `--payload`"),
    "rate": Key("number", 0, 0, 10**9, "events/s per source, 0 = unpaced: sources' `--rate`"),
    "missing_every": Key("int", 0, 0, U64, "omit fault, 0 = off: sources' `--missing-every`"),
    "duplicate_every": Key("int", 0, 0, U64, "duplicate fault: sources' `--duplicate-every`"),
    "delay_every": Key("int", 0, 0, U64, "delay fault: sources' `--delay-every` (needs "
                                         "`delay_ms` > 0)"),
    "delay_ms": Key("int", 0, 0, U32, "delay of a delayed fragment: sources' `--delay-ms`"),
    "reorder": Key("bool", False, doc="send IDs in swapped pairs: sources' `--reorder`"),
    "filter_modulo": Key("int", 1, 1, U32, "accept when crc % modulo == 0: builder's "
                                           "`--filter-modulo`"),
    "filter_cost_us": Key("int", 0, 0, U32, "builder CPU time per event: builder's "
                                            "`--filter-cost-us`"),
    "max_inflight": Key("int", None, 1, U32, "builder window (events): builder's "
                                             "`--max-inflight`"),
    "timeout_ms": Key("int", None, 0, U32, "event timeout, 0 = never: builder's "
                                           "`--timeout-ms`"),
    "skip_timeout_ms": Key("int", None, 0, U32, "timeout of an event its missing sources "
                                                "went past, 0 = only `timeout_ms`: builder's "
                                                "`--skip-timeout-ms`"),
    "peer_timeout_ms": Key("int", None, 0, U32, "dead-peer timeout: builder's "
                                                "`--peer-timeout-ms`"),
    "no_admission": Key("bool", False, doc="readers ignore the admission limit: builder's "
                                           "`--no-admission`"),
    "max_fragment": Key("int", None, 0, 1048576, "largest payload accepted (≥ `payload`): "
                                                 "builder's and readers' `--max-fragment`"),
    "connect_timeout_ms": Key("int", None, 0, U32, "readers' and sources' "
                                                   "`--connect-timeout-ms`"),
    "routing": Key("str", None, doc="`\"manager\"` (batches round-robin to the builders "
                                    "holding tokens) or `\"static\"` (batch k to builder k mod "
                                    "M): the hub's `--routing`; only with `[[builder]]` tables",
                   shown="`\"manager\"` (builderd's default)"),
    "batch": Key("int", None, 1, MAX_BATCH, "event IDs per assignment: the hub's `--batch`; "
                                            "only with `[[builder]]` tables; each builder's "
                                            "`max_inflight` must exceed 4 × batch",
                 shown="`64` (builderd's default)"),
    "window_batches": Key("int", None, 1, MAX_BATCH, "batches assigned and not yet decided, at "
                                                     "most: the hub's `--window-batches`; only "
                                                     "with `[[builder]]` tables",
                          shown="`4096` (builderd's default)"),
    "socket_buffer": Key("int", None, 0, 64 << 20, "kernel send and receive buffers of "
                                                   "every TCP data connection (bytes; 0 = the "
                                                   "kernel's autotuning): readers' and builders' "
                                                   "`--socket-buffer`",
                         shown="auto: twice the bandwidth-delay product or a batch's bytes "
                               "(each rail carries whole batches), whichever is larger, with several builders; the "
                               "kernel's autotuning with one (deploy/daqlib/sockbuf.py)"),
    "run_key_file": Key("str", None, doc="the run's secret, the same file on every host: "
                                         "every daemon's `--run-key-file` (docs/PROTOCOL.md, "
                                         "*Authentication*)",
                        shown="a new `run.key` (32 random bytes, mode 600) in the run "
                              "directory, copied to every ssh host"),
}
DEPLOY_KEYS = {
    "backend": Key("str", "local", doc="how daemons are started: {backends} "
                                       "([DEPLOY.md](DEPLOY.md)); `--backend NAME` overrides "
                                       "it. {backends_with_hosts} need `[hosts.NAME]`"),
    "timeout_s": Key("number", None, 1, 10**7, "overall time limit; `--timeout` overrides it",
                     shown="300 + 2 × events / rate (300 when unpaced)"),
    "start_timeout_s": Key("number", 15, 1, 3600, "how long a daemon may take to write its "
                                                  "port file"),
    "grace_s": Key("number", 15, 0, 3600, "how long readers and sources may outlive builderd "
                                          "before they are stopped (and the run fails)"),
}
_HOST_DOC = ("without `[hosts]`: the address it listens on and the others connect to; with "
             "`[hosts]`: the name of its host")
BUILDER_KEYS = {
    "host": Key("str", None, doc=_HOST_DOC,
                shown="`\"127.0.0.1\"`; with `[hosts]`, the only host if there is one"),
    "data_port": Key("int", 0, 0, U16, "data listener (`--listen`); 0 = ephemeral"),
    "control_port": Key("int", 0, 0, U16, "control listener (`--control-listen`); "
                                          "0 = ephemeral"),
    "shm_capacity": Key("int", None, 4096, 1 << 30,
                        "`--shm-capacity`: bytes of each reader's shared-memory ring (rounded "
                        "up to a power of two holding two largest frames)",
                        shown="daemon default (4 MiB)"),
    "flush_every": Key("int", None, 1, U32, "`--flush-every`"),
    "quiet": Key("bool", False, doc="`--quiet`"),
    "extra": Key("strlist", [], doc="further builderd arguments, appended as given"),
    "cpus": Key("str", None, doc="CPUs it may run on, e.g. `\"2-3\"` (`taskset -c`)",
                shown="any"),
    "rtprio": Key("int", None, 1, 99, "SCHED_FIFO priority (`chrt -f`)", shown="none"),
}
# [[builder]]: one builder of several (--role builder); the [builder] keys
# but the control port, which is the hub's ([hub] control_port).
BUILDER_ARRAY_KEYS = {
    "id": Key("int", None, 0, MAX_BUILDERS - 1, "builder number (`--id`): the ids are 0 … M−1, "
                                                "each once", shown="required"),
    **{k: v for k, v in BUILDER_KEYS.items() if k != "control_port"},
}
BUILDER_ARRAY_KEYS["shm_capacity"] = Key("int", None, 4096, 1 << 30,
                                         "`--shm-capacity`: bytes of each co-located reader's "
                                         "ring to this builder", shown="daemon default (4 MiB)")
# [hub] (optional, only with [[builder]]): the hub of several builders
# (--role hub), which builds nothing.
HUB_KEYS = {
    "host": Key("str", None, doc=_HOST_DOC, shown="the host of builder 0"),
    "control_port": Key("int", 0, 0, U16, "control listener of the run (`--control-listen`), "
                                          "which every daemon dials; 0 = ephemeral"),
    "quiet": Key("bool", False, doc="`--quiet`"),
    "extra": Key("strlist", [], doc="further builderd arguments, appended as given"),
    "cpus": Key("str", None, doc="CPUs it may run on, e.g. `\"2-3\"` (`taskset -c`)",
                shown="any"),
    "rtprio": Key("int", None, 1, 99, "SCHED_FIFO priority (`chrt -f`)", shown="none"),
}
READER_KEYS = {
    "id": Key("int", None, 0, U32, "reader number (`--id`), unique", shown="required"),
    "sources": Key("intlist", None, 0, U16, "source IDs this reader serves (`--sources 0,1`)",
                   shown="required"),
    "host": Key("str", None, doc="its host (" + _HOST_DOC + "); its sources connect there",
                shown="as for `[builder]`"),
    "port": Key("int", 0, 0, U16, "data port (`--listen`); 0 = ephemeral"),
    "transport": Key("str", None, doc="how the reader forwards to the builder: `\"shm\"`, a "
                                      "shared-memory ring (`--builder shm://NAME`, "
                                      "[SHM.md](SHM.md)), or `\"tcp\"` (`--builder "
                                      "tcp://HOST:PORT`). `\"shm\"` on another host than the "
                                      "builder's is an error. With `[[builder]]` tables: "
                                      "`\"shm\"` to every builder on its host and TCP to the "
                                      "others, `\"tcp\"` to all of them",
                     shown="`\"shm\"` when `host` equals `[builder] host` (with `[[builder]]`: "
                           "a builder's host), else `\"tcp\"`"),
    "extra": Key("strlist", [], doc="further readoutd arguments"),
    "cpus": Key("str", None, doc="CPUs it may run on, e.g. `\"2-3\"` (`taskset -c`)",
                shown="any"),
    "rtprio": Key("int", None, 1, 99, "SCHED_FIFO priority (`chrt -f`)", shown="none"),
}
SOURCES_KEYS = {                 # [sources]: defaults for every source
    "host": Key("str", None, doc="where the sources run (a `[hosts]` name when hosts are "
                                 "named)", shown="the reader's host"),
    "extra": Key("strlist", [], doc="further sourced arguments, before a `[[source]]`'s own"),
    "cpus": Key("str", None, doc="CPUs it may run on, e.g. `\"2-3\"` (`taskset -c`)",
                shown="any"),
    "rtprio": Key("int", None, 1, 99, "SCHED_FIFO priority (`chrt -f`)", shown="none"),
}
SOURCE_KEYS = {                  # [[source]]: one source's overrides
    "id": Key("int", None, 0, U16, "the source ID", shown="required"),
    "host": Key("str", None, doc="where this source runs",
                shown="`[sources] host`, else the reader's host"),
    "rate": Key("number", None, 0, 10**9, "this source's pace", shown="`[run] rate`"),
    "extra": Key("strlist", [], doc="further sourced arguments, after `[sources] extra`"),
    "cpus": Key("str", None, doc="CPUs it may run on, e.g. `\"2-3\"` (`taskset -c`)",
                shown="any"),
    "rtprio": Key("int", None, 1, 99, "SCHED_FIFO priority (`chrt -f`)", shown="none"),
}
# [output]: what every builder records of its accepted events (builderd
# --record, docs/RECORDING.md); builderd's bounds.
OUTPUT_FORMATS = ("raw", "hdf5", "none")
OUTPUT_SYNCS = ("close", "batch", "never")
OUTPUT_IOS = ("buffered", "direct")
OUTPUT_KEEPS = ("copy", "in-place")
MAX_PAYLOAD = 1048576            # FRM_MAX_PAYLOAD_BYTES
OUTPUT_KEYS = {
    "format": Key("str", "none", doc="`\"raw\"` (docs/event-file-format.md), `\"hdf5\"` "
                                    "(docs/hdf5-layout.md) or `\"none\"`: every builder's "
                                    "`--record`",
                  shown="`\"none\"` without `[output]` (deploy/topologies/local.toml: "
                        "`\"raw\"`)"),
    "directory": Key("str", None, doc="where the event files go; a relative path is under the "
                                      "run directory (with `--runs N`, each run's); with "
                                      "`[[builder]]` tables builder B writes to "
                                      "DIRECTORY/builders/B: every builder's `--record-dir`",
                     shown="the run directory (several builders: `builders/B/`)"),
    "max_file_bytes": Key("int", None, 1 << 20, U64, "a file rolls before it passes this: "
                                                     "`--record-max-file-bytes`",
                          shown="`268435456` (builderd's default)"),
    "sync": Key("str", None, doc="`\"close\"` (fdatasync each file at its close), "
                                 "`\"batch\"` (after every batch too) or `\"never\"` (for "
                                 "measurements): `--record-sync`",
                shown="`\"close\"` (builderd's default)"),
    "io": Key("str", None, doc="`\"buffered\"` (raw files through the page cache) or "
                               "`\"direct\"` (their whole blocks by direct I/O past it: less "
                               "CPU per byte, but each write waits for the disk; "
                               "docs/RECORDING.md, \"Direct I/O\"): `--record-io`",
              shown="`\"buffered\"` (builderd's default)"),
    "keep": Key("str", None, doc="`\"copy\"` (each fragment copied into the window's cells "
                                 "as it comes) or `\"in-place\"` (from a shared-memory ring, "
                                 "kept in it until written; measured no cheaper here: "
                                 "docs/RECORDING.md, \"Kept in the ring, or copied\"): "
                                 "`--record-keep`",
                shown="`\"copy\"` (builderd's default)"),
    "slice_ms": Key("int", None, 0, 86400000, "a slice's length from the builder's first "
                                              "event, 0 = not by time (docs/RECORDING.md, "
                                              "\"Slices\"): `--record-slice-ms`",
                    shown="`10000` (builderd's default)"),
    "slice_events": Key("int", None, 0, U64, "a slice ends after this many events written, "
                                             "0 = not by count: `--record-slice-events`",
                        shown="`0` (builderd's default)"),
    "max_payload": Key("int", None, 1, MAX_PAYLOAD, "largest payload recorded; each builder "
                                                    "keeps window × sources fragments of this "
                                                    "size: `--record-max-payload`; not below "
                                                    "`payload`",
                       shown="the run's largest payload: `max_fragment` if set, else "
                             "`payload` (at least 1)"),
}
HOST_KEYS = {                    # [hosts.NAME]: what every backend may read
    "address": Key("str", None, doc="address its daemons listen on and are reached at",
                   shown="local: `\"127.0.0.1\"`; ssh: the host part of `ssh`",
                   used_by="local, ssh"),
    "addresses": Key("strlist", None, doc=f"one address per rail (network interface), at "
                                          f"most {MAX_RAILS}, each once: the first is "
                                          f"`address`, the others its further rails "
                                          f"(params.json `rails`); a single `address` is "
                                          f"one rail",
                     shown="`[address]`", used_by="local, ssh"),
    "bin": Key("str", None, doc="where the daemons already are on that host",
               shown="ssh: copied to WORKDIR/NAME/bin", used_by="ssh (and local)"),
    "chrony_socket": Key("str", None, doc="`ES_CHRONY_SOCKET` for daemons on that host",
                         shown="none (netns: its own chronyd)", used_by="all"),
    "env": Key("strlist", [], doc="`NAME=VALUE` added to its daemons' environment",
               shown="none", used_by="all"),
}
CORE_TABLES = {"deploy": DEPLOY_KEYS, "run": RUN_KEYS, "builder": BUILDER_KEYS,
               "hub": HUB_KEYS, "sources": SOURCES_KEYS, "output": OUTPUT_KEYS}
ARRAYS = {"reader": READER_KEYS, "source": SOURCE_KEYS}
TRANSPORTS = ("shm", "tcp")


def bound(n: int) -> str:
    return {U64: "2^64-1", U32: "2^32-1"}.get(n, str(n))


def check_value(where: str, name: str, spec: Key, value: Any) -> Any:
    def bad(expected: str) -> TopologyError:
        return TopologyError(f"{where} {name}: expected {expected}, got {value!r}")

    if spec.kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad("an integer")
        if not spec.lo <= value <= spec.hi:
            raise bad(f"an integer in {spec.lo}..{bound(spec.hi)}")
    elif spec.kind == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise bad("a number")
        if not spec.lo <= value <= spec.hi:
            raise bad(f"a number in {spec.lo}..{spec.hi}")
    elif spec.kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
    elif spec.kind == "str":
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
    elif spec.kind == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("a list of strings")
    elif spec.kind == "intlist":
        if (not isinstance(value, list) or not value
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            raise bad("a non-empty list of integers")
        if not all(spec.lo <= v <= spec.hi for v in value):
            raise bad(f"integers in {spec.lo}..{bound(spec.hi)}")
    return value


def default_of(spec: Key) -> Any:
    return list(spec.default) if isinstance(spec.default, list) else spec.default


def resolve_table(where: str, table: Any, keys: dict[str, Key]) -> dict:
    """Checks a table against its keys; every key absent gets its default."""
    if not isinstance(table, dict):
        raise TopologyError(f"{where} must be a table")
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise TopologyError(f"{where} unknown key {unknown[0]!r} (known: {', '.join(keys)})")
    return {name: check_value(where, name, spec, table[name]) if name in table
            else default_of(spec) for name, spec in keys.items()}
