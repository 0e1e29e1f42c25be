#!/usr/bin/env python3
"""Independent reference builder: checks a run's events.jsonl event by event.

It re-implements, in plain Python and independently of the C code, the parts
of docs/fragment-format.md that decide which events a run must accept:

  §2  mix64, key(seed, salt, run, event, source), the payload of every
      (event, source) and the omitted / duplicated / delayed predicates;
  §3  the filter: an event is complete when no source omitted it, and
      accepted when CRC-32 over its payloads in ascending source order
      % filter_modulo == 0.

Given a run's parameters it computes the accepted event IDs and their CRCs
and compares them with the run's events.jsonl: every expected event must be
there exactly once with the right crc (and run and bytes), and nothing else.

A run of several builders (RUN_DIR/builders/B/ for each builder B) is
checked as a whole: the union of every builder's events.jsonl must be the
expected accepted events, every expired.jsonl together the events that
retire incomplete (some sources omitted them, others sent them), and no
event ID may appear twice, within a builder or across them (the ID and
both builders are named). With static routing (params.json run.routing),
each event must also be in the builder of its batch, (ID / batch) mod M.

Usage:
  refbuild.py RUN_DIR                     # RUN_DIR/params.json + events.jsonl
                                          # (or builders/*/events.jsonl)
  refbuild.py --seed 7 --run 1 --sources 4 --events 200 --payload 64 \\
              --missing-every 11 --filter-modulo 3 --events-file F
  refbuild.py --vectors tests/data/vectors.json   # self-check
  refbuild.py RUN_DIR --dump expected.jsonl       # write what is expected

Exit status: 0 when the run matches exactly (or every vector passes),
1 when it does not, 2 on a usage or input error.

The generator itself (mix64, the keys, the payloads) is analysis/refgen.py.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import zlib
from array import array
from dataclasses import dataclass, field, fields
from typing import Iterator

import refdata
from refgen import (MASK64, SALTS, key, keys_many, mix64, mix64_many,  # noqa: F401
                    payload, payloads_many)


FRAME_MAGIC = 0x4553
FRAME_VERSION = 1
FRAME_HEADER = struct.Struct(">HBBHIQQQI")   # bytes 0..37; the crc32 follows

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class InputError(Exception):
    """A problem with the inputs (parameters, files) rather than the run."""


# --------------------------------------------------------------------------
# Spec §2's predicates, on the generator's keys (refgen.py).

def is_omitted(seed: int, run: int, event: int, source: int, missing_every: int) -> bool:
    return (missing_every > 0
            and key(seed, SALTS["missing"], run, event, source) % missing_every == 0)


def is_duplicated(seed: int, run: int, event: int, source: int, duplicate_every: int,
                  missing_every: int = 0) -> bool:
    """Sent twice; an omitted fragment is never duplicated."""
    return (duplicate_every > 0
            and key(seed, SALTS["duplicate"], run, event, source) % duplicate_every == 0
            and not is_omitted(seed, run, event, source, missing_every))


def is_delayed(seed: int, run: int, event: int, source: int, delay_every: int) -> bool:
    return delay_every > 0 and key(seed, SALTS["delay"], run, event, source) % delay_every == 0


def filter_crc(seed: int, run: int, event: int, sources: int, length: int) -> int:
    """CRC-32 over the payloads of an event in ascending source order (§3)."""
    crc = 0
    for source in range(sources):
        crc = zlib.crc32(payload(seed, run, event, source, length), crc)
    return crc


def encode_frame(source: int, run: int, event: int, sequence: int, timestamp_ns: int,
                 flags: int, body: bytes) -> bytes:
    """A frame of spec §1 (used only to check the frame vectors)."""
    header = FRAME_HEADER.pack(FRAME_MAGIC, FRAME_VERSION, flags, source, run, event,
                               sequence, timestamp_ns, len(body))
    crc = zlib.crc32(body, zlib.crc32(header))
    return header + struct.pack(">I", crc) + body


# --------------------------------------------------------------------------
# The expected outcome of a run.

@dataclass
class RunParams:
    """What decides a run's accepted events. Defaults are the daemons'."""
    seed: int
    run: int
    sources: int
    events: int
    payload: int
    first_event: int = 0
    missing_every: int = 0
    filter_modulo: int = 1

    def check(self) -> None:
        limits = {"seed": 64, "run": 32, "first_event": 64, "events": 64,
                  "missing_every": 64, "filter_modulo": 32, "payload": 20, "sources": 16}
        for name, bits in limits.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> bits:
                raise InputError(f"parameter {name} must be an integer in 0..2^{bits}-1, "
                                 f"got {value!r}")
        if self.sources < 1:
            raise InputError("parameter sources must be at least 1")
        if self.filter_modulo < 1:
            raise InputError("parameter filter_modulo must be at least 1")
        if self.payload > 1048576:
            raise InputError(f"parameter payload must be at most 1048576 bytes, got {self.payload}")
        if self.first_event + self.events > 1 << 64:
            raise InputError("first_event + events exceeds 2^64")

    def describe(self) -> str:
        last = self.first_event + self.events - 1
        return (f"run {self.run} seed {self.seed}: {self.sources} sources, events "
                f"{self.first_event}..{last} ({self.events}), payload {self.payload} B, "
                f"missing_every {self.missing_every}, filter_modulo {self.filter_modulo}")


@dataclass
class Expected:
    accepted: dict[int, int]     # event ID -> filter CRC
    complete: int                # complete events (accepted + filtered)
    bytes_per_event: int
    # Events some sources omitted and others sent: each retires incomplete,
    # one line of expired.jsonl (an event every source omitted is never
    # observed and has none).
    partial: set[int] = field(default_factory=set)


def expected_events(p: RunParams, events_per_chunk: int | None = None) -> Expected:
    """The accepted events of a run and their CRCs."""
    p.check()
    S = p.sources
    if events_per_chunk is None:
        words = max(1, (p.payload + 7) // 8)
        events_per_chunk = max(1, (1 << 19) // (words * S))
    accepted: dict[int, int] = {}
    partial: set[int] = set()
    complete = 0
    length = p.payload
    for chunk_first in range(p.first_event, p.first_event + p.events, events_per_chunk):
        count = min(events_per_chunk, p.first_event + p.events - chunk_first)
        ids = range(chunk_first, chunk_first + count)
        if p.missing_every:
            miss = keys_many(p.seed, SALTS["missing"], p.run, chunk_first, count, S)
            m = p.missing_every
            sent = [sum(1 for s in range(S) if miss[i * S + s] % m) for i in range(count)]
            partial.update(e for i, e in enumerate(ids) if 0 < sent[i] < S)
            ids = [e for i, e in enumerate(ids) if sent[i] == S]
        if not ids:
            continue
        complete += len(ids)
        k = mix64(mix64(p.seed ^ SALTS["payload"]) ^ p.run)
        per_event = mix64_many((k ^ e) & MASK64 for e in ids)
        pair_keys = mix64_many(ke ^ s for ke in per_event for s in range(S))
        data = payloads_many(pair_keys, length)
        span = S * length
        for i, e in enumerate(ids):
            crc = zlib.crc32(data[i * span:(i + 1) * span])
            if crc % p.filter_modulo == 0:
                accepted[e] = crc
    return Expected(accepted, complete, S * length, partial)


# --------------------------------------------------------------------------
# Comparison with a run's events.jsonl.

@dataclass
class Comparison:
    matched: int = 0
    missing: int = 0
    unexpected: int = 0
    crc_mismatch: int = 0
    duplicate: int = 0
    field_mismatch: int = 0      # wrong run or bytes on an otherwise matching line
    lines: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.crc_mismatch
                    or self.duplicate or self.field_mismatch)

    def counts(self) -> str:
        return (f"matched={self.matched} missing={self.missing} unexpected={self.unexpected} "
                f"crc-mismatch={self.crc_mismatch} duplicate={self.duplicate} "
                f"field-mismatch={self.field_mismatch}")


def read_events(path: str, required: tuple[str, ...] = ("event", "crc")
                ) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each non-blank line of an events.jsonl (or,
    with required=("event",), an expired.jsonl)."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read events file {path}: {e.strerror}") from e
    with f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{number}: not JSON: {e.msg}") from e
            if not isinstance(record, dict):
                raise InputError(f"{path}:{number}: not a JSON object")
            for name in required:
                value = record.get(name)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise InputError(f"{path}:{number}: field {name!r} missing or not an "
                                     f"unsigned integer")
            yield number, record


class Notes:
    """Up to `report` examples of each kind of difference, printed as found."""

    def __init__(self, report: int, out) -> None:
        self.report, self.out = report, out
        self.shown: dict[str, int] = {}

    def __call__(self, kind: str, text: str) -> None:
        self.shown[kind] = self.shown.get(kind, 0) + 1
        if self.shown[kind] <= self.report:
            print(f"  {kind}: {text}", file=self.out)

    def close(self) -> None:
        for kind, n in self.shown.items():
            if n > self.report:
                print(f"  {kind}: ... {n - self.report} more", file=self.out)


def check_record(c: Comparison, expected: Expected, p: RunParams, rec: dict, where: str,
                 note: Notes) -> None:
    """Counts one recorded event that is not a duplicate: matched, or how
    it differs from the expected one."""
    event, crc = rec["event"], rec["crc"]
    want = expected.accepted.get(event)
    if want is None:
        c.unexpected += 1
        note("unexpected", f"{where}: event {event} (crc {crc}) should not be accepted")
        return
    if crc != want:
        c.crc_mismatch += 1
        note("crc-mismatch", f"{where}: event {event} crc {crc}, expected {want}")
        return
    bad = []
    if "run" in rec and rec["run"] != p.run:
        bad.append(f"run {rec['run']}, expected {p.run}")
    if "bytes" in rec and rec["bytes"] != expected.bytes_per_event:
        bad.append(f"bytes {rec['bytes']}, expected {expected.bytes_per_event}")
    if bad:
        c.field_mismatch += 1
        note("field-mismatch", f"{where}: event {event}: " + "; ".join(bad))
        return
    c.matched += 1


def note_missing(c: Comparison, expected: Expected, seen, what: str, note: Notes) -> None:
    absent = [e for e in expected.accepted if e not in seen]
    c.missing = len(absent)
    for e in sorted(absent)[:note.report]:
        note("missing", f"event {e} (crc {expected.accepted[e]}) not in {what}")


def compare(expected: Expected, p: RunParams, path: str, report: int = 10,
            out=sys.stdout) -> Comparison:
    """Compares events.jsonl at path with the expected events; prints up to
    `report` examples of each kind of difference."""
    c = Comparison()
    seen: set[int] = set()
    note = Notes(report, out)
    for number, rec in read_events(path):
        c.lines += 1
        event = rec["event"]
        if event in seen:
            c.duplicate += 1
            note("duplicate", f"line {number}: event {event} appears again")
            continue
        seen.add(event)
        check_record(c, expected, p, rec, f"line {number}", note)
    note_missing(c, expected, seen, os.path.basename(path), note)
    note.close()
    return c


# --------------------------------------------------------------------------
# A run of several builders: builders/B/events.jsonl and expired.jsonl.

@dataclass
class Fence:
    """A builder the hub gave up (metrics.json builders.B, docs/BUILDERS.md,
    "A given-up builder is fenced"): its records count below `below` (its
    last token's decided_below); `lost` of its events the books count lost."""
    below: int
    lost: int


def fences_of(run_dir: str) -> dict[int, Fence]:
    """The given-up builders of a run of several, from its metrics.json
    (none when it has no such section)."""
    try:
        with open(os.path.join(run_dir, "metrics.json"), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}
    section = doc.get("builders") if isinstance(doc, dict) else None
    out = {}
    for b, s in (section or {}).items() if isinstance(section, dict) else ():
        if isinstance(s, dict) and s.get("lost_reason") is not None and str(b).isdigit():
            out[int(b)] = Fence(max(0, int(s.get("decided_below") or 0)),
                                max(0, int(s.get("lost") or 0)))
    return out


@dataclass
class BuilderFiles:
    builder: int
    events: str
    expired: str | None          # None: the builder wrote no expired.jsonl


@dataclass
class BuildersComparison(Comparison):
    """The union of every builder's records against the reference."""
    expired_mismatch: int = 0    # expired where the reference says complete, or a partial
                                 # event no builder expired
    misplaced: int = 0           # static routing: an event not in its batch's builder
    past_fence: int = 0          # records of a given-up builder the books count lost
    lost_excused: int = 0        # expected events absent, lost with a given-up builder
    per_builder: dict[int, tuple[int, int]] = field(default_factory=dict)  # events, expired

    @property
    def ok(self) -> bool:
        return super().ok and not (self.expired_mismatch or self.misplaced)

    def counts(self) -> str:
        return (super().counts() + f" expired-mismatch={self.expired_mismatch} "
                f"misplaced={self.misplaced}"
                + (f" past-fence={self.past_fence} lost-with-builders={self.lost_excused}"
                   if self.past_fence or self.lost_excused else ""))


def builder_files(run_dir: str, builders: int | None = None) -> list[BuilderFiles] | None:
    """Every builder's record files in RUN_DIR/builders/B/, None when the run
    has no builders/ (one builder, its records in RUN_DIR). builders: how
    many params.json says there are, when it says."""
    top = os.path.join(run_dir, "builders")
    if not os.path.isdir(top):
        return None
    ids = sorted(int(n) for n in os.listdir(top) if n.isdigit())
    expected_ids = list(range(builders)) if builders is not None else ids
    absent = [b for b in expected_ids if b not in ids]
    if absent or not ids:
        raise InputError(f"{top}: no folder of builder {(absent or [0])[0]} (a run of "
                         f"{len(expected_ids) or 'several'} builders has builders/0 .. "
                         f"builders/{max(len(expected_ids), 1) - 1})")
    out = []
    for b in ids:
        events = os.path.join(top, str(b), "events.jsonl")
        if not os.path.exists(events):
            raise InputError(f"builder {b} wrote no events.jsonl ({events})")
        expired = os.path.join(top, str(b), "expired.jsonl")
        out.append(BuilderFiles(b, events, expired if os.path.exists(expired) else None))
    return out


def static_owner(event: int, batch: int, builders: int) -> int:
    """The builder static routing gives an event: its batch mod M (docs/BUILDERS.md)."""
    return (event // batch) % builders


def compare_builders(expected: Expected, p: RunParams, files: list[BuilderFiles],
                     report: int = 10, out=sys.stdout,
                     static_batch: int | None = None,
                     fences: dict[int, Fence] | None = None) -> BuildersComparison:
    """Compares the union of every builder's events.jsonl with the expected
    events and every expired.jsonl with the events that retire incomplete;
    no event ID may appear twice, in one builder or across them. With
    static_batch (static routing), each event must be in its batch's builder.
    fences: the builders the hub gave up. Their records at or past the
    fence do not count (the books call those events lost), and expected
    events absent from every record, from the lowest fence on, are excused
    as lost up to the books' total lost with them."""
    c = BuildersComparison()
    fences = fences or {}
    where_seen: dict[int, str] = {}        # event -> "builder B line N (recorded|expired)"
    recorded: set[int] = set()
    note = Notes(report, out)
    builders = max(f.builder for f in files) + 1

    def first_sighting(event: int, here: str) -> bool:
        if event in where_seen:
            c.duplicate += 1
            note("duplicate", f"event {event}: {where_seen[event]} and {here}")
            return False
        where_seen[event] = here
        return True

    def placed(event: int, b: int, what: str) -> None:
        if static_batch is not None and static_owner(event, static_batch, builders) != b:
            c.misplaced += 1
            note("misplaced", f"event {event} {what} by builder {b}; static routing gives it "
                              f"to builder {static_owner(event, static_batch, builders)}")

    # Every builder's records first, then every expired.jsonl: an event
    # both recorded and expired is counted recorded, and its expiry the
    # duplicate.
    n_events = {f.builder: 0 for f in files}

    def past_fence(b: int, event: int, what: str) -> bool:
        if b not in fences or event < fences[b].below:
            return False
        c.past_fence += 1
        note("past-fence", f"event {event} {what} by builder {b}, given up at event "
                           f"{fences[b].below}: not counted (the books count it lost)")
        return True

    for f in files:
        for number, rec in read_events(f.events):
            c.lines += 1
            event = rec["event"]
            if past_fence(f.builder, event, "recorded"):
                continue
            n_events[f.builder] += 1
            if first_sighting(event, f"recorded by builder {f.builder} (line {number})"):
                recorded.add(event)
                placed(event, f.builder, "recorded")
                check_record(c, expected, p, rec, f"builder {f.builder} line {number}", note)
    for f in files:
        n_expired = 0
        for number, rec in read_events(f.expired, ("event",)) if f.expired else ():
            event = rec["event"]
            if past_fence(f.builder, event, "expired"):
                continue
            n_expired += 1
            if first_sighting(event, f"expired by builder {f.builder} (line {number})"):
                placed(event, f.builder, "expired")
                if event not in expected.partial:
                    c.expired_mismatch += 1
                    note("expired-mismatch", f"builder {f.builder} line {number}: event {event} "
                                             f"expired, but every source sent it or none did")
        c.per_builder[f.builder] = (n_events[f.builder], n_expired)
    lost_room = sum(fn.lost for fn in fences.values())
    lowest = min((fn.below for fn in fences.values()), default=None)
    absent = sorted(e for e in set(expected.accepted) | expected.partial
                    if e not in where_seen and lowest is not None and e >= lowest)
    # All or nothing: which absent events are the lost ones cannot be told
    # apart, so a loss that does not cover them all excuses none.
    c.lost_excused = len(absent) if len(absent) <= lost_room else 0
    excused = set(absent) if c.lost_excused else set()
    note_missing(c, expected, recorded | excused, "any builder's events.jsonl", note)
    unexpired = sorted(e for e in expected.partial if e not in where_seen and e not in excused)
    c.expired_mismatch += len(unexpired)
    for e in unexpired[:report]:
        note("expired-mismatch", f"event {e} lacks fragments of some sources but no builder "
                                 f"expired it")
    note.close()
    return c


# --------------------------------------------------------------------------
# Self-check against vectors.json.

class VectorCheck:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def expect(self, what: str, got, want) -> None:
        if got == want:
            self.passed += 1
        else:
            self.failed += 1
            print(f"vector FAIL {what}: got {got!r}, expected {want!r}")


def check_vectors(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            v = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read vectors {path}: {e}") from e
    chk = VectorCheck()
    try:
        sections = ["mix64", "salts", "key", "payload", "faults", "filter", "run", "frames"]
        missing = [s for s in sections if s not in v]
        if missing:
            raise InputError(f"{path}: missing sections {', '.join(missing)}")

        for i, t in enumerate(v["mix64"]):
            chk.expect(f"mix64[{i}] in={t['in']}", mix64(t["in"]), t["out"])
        chk.expect("mix64 many", list(mix64_many(t["in"] for t in v["mix64"])),
                   [t["out"] for t in v["mix64"]])

        for name, value in v["salts"].items():
            chk.expect(f"salt {name}", SALTS.get(name), value)

        for i, t in enumerate(v["key"]):
            got = key(t["seed"], SALTS[t["salt"]], t["run"], t["event"], t["source"])
            chk.expect(f"key[{i}] {t['salt']}", got, t["key"])
            many = keys_many(t["seed"], SALTS[t["salt"]], t["run"], t["event"], 1,
                             t["source"] + 1)[t["source"]]
            chk.expect(f"key[{i}] {t['salt']} (many)", many, t["key"])

        for i, t in enumerate(v["payload"]):
            args = (t["seed"], t["run"], t["event"], t["source"], t["length"])
            chk.expect(f"payload[{i}]", payload(*args).hex(), t["hex"])
            pk = array("Q", [key(t["seed"], SALTS["payload"], t["run"], t["event"], t["source"])])
            chk.expect(f"payload[{i}] (many)", payloads_many(pk, t["length"]).hex(), t["hex"])

        for i, t in enumerate(v["faults"]):
            e0, e1 = t["events"]
            s0, s1 = t["sources"]
            every = t["every"]
            pred = {
                "missing": lambda e, s: is_omitted(t["seed"], t["run"], e, s, every),
                "duplicate": lambda e, s: is_duplicated(t["seed"], t["run"], e, s, every),
                "delay": lambda e, s: is_delayed(t["seed"], t["run"], e, s, every),
            }.get(t["kind"])
            if pred is None:
                chk.expect(f"faults[{i}] kind", t["kind"], "missing|duplicate|delay")
                continue
            hits = [[e, s] for e in range(e0, e1 + 1) for s in range(s0, s1 + 1) if pred(e, s)]
            chk.expect(f"faults[{i}] {t['kind']} every {every}", hits, t["hits"])

        t = v["filter"]
        crc = filter_crc(t["seed"], t["run"], t["event"], t["sources"], t["length"])
        chk.expect("filter crc", crc, t["crc"])
        chk.expect("filter modulo 3", crc % 3 == 0, t["accepted_modulo_3"])
        chk.expect("filter modulo 1", crc % 1 == 0, t["accepted_modulo_1"])
        fast = expected_events(RunParams(seed=t["seed"], run=t["run"], sources=t["sources"],
                                         events=1, first_event=t["event"], payload=t["length"]))
        chk.expect("filter crc (many)", fast.accepted.get(t["event"]), t["crc"])

        t = v["run"]
        p = RunParams(seed=t["seed"], run=t["run"], sources=t["sources"],
                      first_event=t["first_event"], events=t["events"], payload=t["payload"],
                      missing_every=t["missing_every"], filter_modulo=t["filter_modulo"])
        want = {a["event"]: a["crc"] for a in t["accepted"]}
        chk.expect("run accepted_count", len(want), t["accepted_count"])
        for per_chunk in (None, 1, 7):   # chunking must not change the result
            got = expected_events(p, events_per_chunk=per_chunk).accepted
            chk.expect(f"run accepted (chunk {per_chunk})", got, want)
        slow = {}
        for e in range(p.first_event, p.first_event + p.events):
            if any(is_omitted(p.seed, p.run, e, s, p.missing_every) for s in range(p.sources)):
                continue
            crc = filter_crc(p.seed, p.run, e, p.sources, p.payload)
            if crc % p.filter_modulo == 0:
                slow[e] = crc
        chk.expect("run accepted (one at a time)", slow, want)

        for i, t in enumerate(v["frames"]):
            body = bytes.fromhex(t["payload_hex"])
            frame = encode_frame(t["source"], t["run"], t["event"], t["sequence"],
                                 t["timestamp_ns"], t["flags"], body)
            chk.expect(f"frames[{i}]", frame.hex(), t["frame_hex"])
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: malformed vectors ({type(e).__name__}: {e})") from e

    status = "PASS" if chk.failed == 0 else "FAIL"
    print(f"vectors: {chk.passed} passed, {chk.failed} failed")
    print(f"{status} refbuild vectors {path}")
    return EXIT_PASS if chk.failed == 0 else EXIT_FAIL


# --------------------------------------------------------------------------
# Command line.

PARAM_FLAGS = [f.name for f in fields(RunParams)]


def load_params(path: str) -> dict:
    """Run parameters from a params.json: its "run" object (as the launcher
    writes it) or, failing that, its top level."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError(f"cannot read parameters {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a JSON object")
    run = doc.get("run")
    return run if isinstance(run, dict) else doc


def build_params(args: argparse.Namespace) -> tuple[RunParams, str]:
    values: dict = {}
    origin = "flags"
    params_path = args.params
    if params_path is None and args.run_dir:
        candidate = os.path.join(args.run_dir, "params.json")
        if os.path.exists(candidate):
            params_path = candidate
    if params_path:
        loaded = load_params(params_path)
        values.update({k: loaded[k] for k in PARAM_FLAGS if k in loaded})
        origin = params_path
    for name in PARAM_FLAGS:
        flag = getattr(args, name)
        if flag is not None:
            values[name] = flag
    absent = [n for n in ("seed", "run", "sources", "events", "payload") if n not in values]
    if absent:
        where = f" in {params_path}" if params_path else ""
        raise InputError("missing run parameters" + where + ": "
                         + ", ".join("--" + n.replace("_", "-") for n in absent))
    # The launcher may record "sources" as a list of IDs; the count is what matters.
    if isinstance(values.get("sources"), list):
        ids = values["sources"]
        if sorted(ids) != list(range(len(ids))):
            raise InputError(f"source IDs must be 0..S-1, got {ids}")
        values["sources"] = len(ids)
    p = RunParams(**values)
    p.check()
    return p, origin


DEFAULT_BATCH = 64               # builderd's --batch


def run_in_progress(run_dir: str) -> str | None:
    """builderd's running.json in RUN_DIR or a builders/B/ (docs/METRICS.md,
    "A run in progress"): the run is still going or was killed, and its
    records are partial. A sentence saying so, or None."""
    paths = [os.path.join(run_dir, "running.json")]
    top = os.path.join(run_dir, "builders")
    if os.path.isdir(top):
        paths += [os.path.join(top, b, "running.json") for b in sorted(os.listdir(top))]
    for path in paths:
        if os.path.exists(path):
            return (f"{path} says the run is in progress: it is still running or was killed "
                    f"before its end; its records are partial")
    return None


def layout_of(run_dir: str) -> tuple[int | None, int | None]:
    """(how many builders params.json names, the batch of static routing or
    None) of a run of several builders; (None, None) when it does not say."""
    path = os.path.join(run_dir, "params.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None, None
    if not isinstance(doc, dict):
        return None, None
    builders = doc.get("builders")
    count = len(builders) if isinstance(builders, list) and builders else None
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    static = run.get("routing") == "static"
    return count, (run.get("batch") or DEFAULT_BATCH) if static else None


def check_builders(run_dir: str, exp: Expected, p: RunParams, files: list[BuilderFiles],
                   report: int) -> int:
    """The union of the builders' records against the reference: the
    outcome of a run of several builders."""
    static_batch = layout_of(run_dir)[1]
    fences = fences_of(run_dir)
    for b, fn in sorted(fences.items()):
        print(f"refbuild: builder {b} was given up: its records count below event {fn.below}; "
              f"the books count {fn.lost} of its events lost")
    c = compare_builders(exp, p, files, report=report, static_batch=static_batch,
                         fences=fences)
    for b, (events, expired) in sorted(c.per_builder.items()):
        print(f"refbuild: builder {b}: {events} events, {expired} expired "
              f"({os.path.join(run_dir, 'builders', str(b))})")
    print(f"refbuild: {len(files)} builders: {c.lines} lines"
          + (f", static routing, batch {static_batch}" if static_batch else ""))
    print(c.counts())
    print(f"{'PASS' if c.ok else 'FAIL'} refbuild {os.path.join(run_dir, 'builders')} "
          f"({len(files)} builders)")
    return EXIT_PASS if c.ok else EXIT_FAIL


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="refbuild.py",
        description="Independent reference builder: computes the events a run must accept "
                    "(spec §2, §3) and compares them with the run's events.jsonl.",
        epilog="Exit status: 0 exact match (or all vectors pass), 1 mismatch, 2 usage/input error.")
    ap.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                    help="run directory with params.json and events.jsonl, or builders/B/ "
                         "for each builder of several (from deploy/daqrun)")
    ap.add_argument("--vectors", metavar="FILE",
                    help="check this implementation against vectors.json and exit")
    ap.add_argument("--params", metavar="FILE",
                    help="params.json to read (default RUN_DIR/params.json)")
    ap.add_argument("--events-file", metavar="FILE",
                    help="events.jsonl to check (default RUN_DIR/events.jsonl)")
    ap.add_argument("--dump", metavar="FILE",
                    help="write the expected accepted events as JSON lines ('-' = stdout)")
    ap.add_argument("--report", type=int, default=10, metavar="N",
                    help="examples shown per kind of difference (default 10)")
    g = ap.add_argument_group("run parameters (override params.json)")
    for name in PARAM_FLAGS:
        g.add_argument("--" + name.replace("_", "-"), dest=name, type=int, metavar="N")
    return ap.parse_args(argv)


def data_status(args: argparse.Namespace, p: RunParams, status: int) -> int:
    """With a run directory that holds event files (builderd --record), every
    payload byte of every written event checked too (analysis/refdata.py)."""
    if not args.run_dir or args.events_file:
        return status
    if not refdata.has_data(args.run_dir):
        return status
    t0 = time.monotonic()
    c = refdata.check_run(args.run_dir, p.seed, p.run, fences_of(args.run_dir), args.report)
    ok = refdata.print_check(c, args.run_dir)
    print(f"refbuild: data checked in {time.monotonic() - t0:.2f} s")
    return status if ok else EXIT_FAIL


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.vectors:
            return check_vectors(args.vectors)
        p, origin = build_params(args)
        events_file = args.events_file or (os.path.join(args.run_dir, "events.jsonl")
                                           if args.run_dir else None)
        if events_file is None and args.dump is None:
            raise InputError("nothing to do: give RUN_DIR, --events-file or --dump")
        print(f"refbuild: {p.describe()} (from {origin})")
        t0 = time.monotonic()
        exp = expected_events(p)
        print(f"refbuild: expect {len(exp.accepted)} accepted of {exp.complete} complete "
              f"events ({time.monotonic() - t0:.2f} s)")
        if args.dump:
            out = sys.stdout if args.dump == "-" else open(args.dump, "w", encoding="utf-8")
            try:
                for e in sorted(exp.accepted):
                    out.write(json.dumps({"run": p.run, "event": e, "crc": exp.accepted[e],
                                          "bytes": exp.bytes_per_event}) + "\n")
            finally:
                if out is not sys.stdout:
                    out.close()
        unfinished = run_in_progress(args.run_dir) if args.run_dir else None
        if unfinished:
            print(f"FAIL refbuild {args.run_dir}: {unfinished}")
            return EXIT_FAIL
        files = None if args.events_file or not args.run_dir else \
            builder_files(args.run_dir, layout_of(args.run_dir)[0])
        if files is not None:
            status = check_builders(args.run_dir, exp, p, files, args.report)
            return data_status(args, p, status)
        if events_file is None:
            return EXIT_PASS
        c = compare(exp, p, events_file, report=args.report)
        print(f"refbuild: {events_file}: {c.lines} lines")
        print(c.counts())
        print(f"{'PASS' if c.ok else 'FAIL'} refbuild {events_file}")
        return data_status(args, p, EXIT_PASS if c.ok else EXIT_FAIL)
    except InputError as e:
        print(f"refbuild: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
