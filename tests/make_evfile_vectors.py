#!/usr/bin/env python3
"""Writes tests/data/evfile-vectors.json: the conformance vectors of
docs/event-file-format.md, made with analysis/evfile.py from payloads of
the deterministic generator (docs/fragment-format.md §2).

    tests/make_evfile_vectors.py [OUT]     (default tests/data/evfile-vectors.json)

The C codec's unit test (tests/unit/test_evfile.c) encodes the same fields
and must produce the same bytes, and scans every file to the same verdict;
tests/e2e/test_evfile.py holds the Python reader to them. Run it again only
when the format changes (and then the format version changes too).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "analysis"))
import evfile  # noqa: E402
from refbuild import payload  # noqa: E402

SEED, RUN = 11, 42
T0 = 1_764_000_000_000_000_000


def fragment(event: int, source: int, length: int) -> evfile.Fragment:
    return evfile.Fragment(source, event, sequence=event * 2 + source,
                           timestamp_ns=T0 + event * 1000 + 7 * source,
                           payload=payload(SEED, RUN, event, source, length), run=RUN)


def event(event_id: int, sources: int, length: int, missing=(), flags=0) -> evfile.Event:
    return evfile.Event(RUN, event_id, [fragment(event_id, s, length) for s in range(sources)
                                        if s not in missing], flags)


def header(**kw) -> evfile.FileHeader:
    fields = dict(run=RUN, builder_id=1, sources=3, file_seq=7, slice=2, created_ns=T0,
                  config_sha256=hashlib.sha256(b"run 42 configuration").digest(),
                  software="esdaq 0.30")
    fields.update(kw)
    return evfile.FileHeader(**fields)


def header_entry(h: evfile.FileHeader) -> dict:
    return {"run": h.run, "builder_id": h.builder_id, "sources": h.sources,
            "file_seq": h.file_seq, "slice": h.slice, "created_ns": h.created_ns,
            "config_sha256_hex": h.config_sha256.hex(), "software": h.software,
            "hex": evfile.encode_header(h).hex()}


def record_entry(e: evfile.Event) -> dict:
    return {"run": e.run, "event_id": e.event_id, "flags": e.flags,
            "frames_hex": b"".join(f.frame() for f in e.fragments).hex(),
            "fragments": len(e.fragments),
            "earliest_ns": min(f.timestamp_ns for f in e.fragments),
            "hex": e.record().hex()}


def verdict(name: str, data: bytes, max_payload: int = 1 << 20) -> dict:
    """What a reader must say of data: the status, where, the event, the
    counts of the records before the problem."""
    entry = {"name": name, "hex": data.hex(), "max_payload": max_payload, "status": "ok",
             "bad_offset": 0, "bad_event": 0, "bad_event_known": False, "events": 0,
             "good_bytes": 0, "complete": False}
    r = None
    try:
        r = evfile.Reader(f"/vectors/{name}", data=data, max_payload=max_payload)
        for _ in r:
            entry["events"] += 1
        entry["complete"] = r.complete
    except evfile.EventFileError as e:
        entry.update(status=e.status, bad_offset=e.offset, bad_event=e.event or 0,
                     bad_event_known=e.event is not None)
    entry["good_bytes"] = r.good_bytes if r is not None else 0
    return entry


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1:]


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests" / "data" / "evfile-vectors.json"
    h = header()
    events = [event(100, 3, 24), event(101, 3, 0), event(103, 3, 57),
              event(104, 3, 16, missing=(1,), flags=evfile.FLAG_INCOMPLETE)]
    good = evfile.encode_file(h, events)
    first_record = evfile.HEADER_BYTES
    second_record = first_record + len(events[0].record())
    third_record = second_record + len(events[1].record())
    cut = evfile.encode_file(h, events, trailer=False)
    v2 = evfile.encode_header(header(format_version=2)) + good[evfile.HEADER_BYTES:]
    swapped = evfile.encode_file(h, [events[1], events[0]])
    files = [
        verdict("good", good),
        verdict("empty", evfile.encode_file(h, [])),
        verdict("open, no trailer", cut),
        verdict("cut inside the third record", cut[:third_record + 50]),
        verdict("payload byte flipped in the third record",
                flip(good, third_record + evfile.RECORD_HEADER_BYTES + 42 + 42 + 57 + 5)),
        verdict("record header's timestamp flipped", flip(good, first_record + 28)),
        verdict("trailer count wrong", good[:-36] + bytes([good[-36] ^ 1]) + good[-35:]),
        verdict("file CRC wrong", flip(good, len(good) - 1)),
        verdict("format version 2", v2),
        verdict("not an event file", b"PK\x03\x04" + good[4:]),
        verdict("IDs out of order", swapped),
        verdict("bytes after the trailer", good + b"\0"),
        verdict("payload over the reader's limit", good, max_payload=40),
    ]
    doc = {
        "about": "Conformance vectors of docs/event-file-format.md, written by "
                 "tests/make_evfile_vectors.py with analysis/evfile.py. Integers are decimal, "
                 "bytes hex. file_header: the fields and the 128 bytes they encode to; record: an "
                 "event's frames and fields and its record's bytes; file: whole files and what a "
                 "reader must say of each (status as the C codec names it, the offset of the "
                 "record or trailer at fault, the event when known, the valid records before it, "
                 "the bytes they end at).",
        "file_header": [header_entry(h), header_entry(header(builder_id=0, sources=1, file_seq=0,
                                                             slice=0, software=""))],
        "record": [record_entry(e) for e in events],
        "file": files,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{out}: {len(doc['file_header'])} headers, {len(doc['record'])} records, "
          f"{len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
