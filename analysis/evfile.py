"""Event files (docs/event-file-format.md) with Python's standard library
alone: write them, read them back verifying every CRC, and name the file,
offset and event of any damage.

    import evfile
    for ev in evfile.iter_run_events("runs/local"):
        print(ev.event_id, [len(f.payload) for f in ev.fragments])

`Reader(path)` iterates one file's events; `check_file(path)` verifies a
whole file and returns its counts; `run_files(run_dir)` lists a run's files
in order (every builder's, each by its sequence). A damaged file raises
`EventFileError`, whose message names the file, the offset and the event.
This module is independent of the C codec (common/wire/evfile.c): the
conformance vectors (tests/data/evfile-vectors.json) hold both to the same
bytes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

MAGIC = b"ESEVFILE"
RECORD_MAGIC = b"EVNT"
TRAILER_MAGIC = b"EVFT"
FORMAT_VERSION = 1
HEADER_BYTES = 128
RECORD_HEADER_BYTES = 36
TRAILER_BYTES = 44
FLAG_INCOMPLETE = 0x0001

FRAME_MAGIC = 0x4553
FRAME_HEADER_BYTES = 42
FRAME_MAX_PAYLOAD = 1 << 20

# docs/event-file-format.md §1: magic, version, header_bytes, run, builder,
# sources, file_seq, slice, reserved, created_ns, config_sha256, software,
# reserved; then the CRC.
_HEADER = struct.Struct(">8sHHIHHIII Q32s32s20x")
_RECORD = struct.Struct(">4sIIQHHQ")          # the 32 bytes the record CRC starts with
_TRAILER = struct.Struct(">4sIQQQQ")          # the 40 bytes before file_crc
_FRAME = struct.Struct(">HBBHIQQQI")          # the 38 bytes the frame CRC covers

FILE_SUFFIX = ".dat"
OPEN_SUFFIX = ".writing"


# The names of the C codec's statuses (evf_status_name), so that both
# readers are held to the same verdict by the conformance vectors.
NOT_EVENT_FILE = "not an event file"
VERSION = "unknown format version"
HEADER = "file header damaged"
RECORD_MAGIC_MISSING = "no record where one must start"
RECORD_LENGTH = "record length out of bounds"
RECORD_CRC = "record checksum mismatch"
FRAME = "bad frame in record"
FRAME_MISMATCH = "frame does not belong to its record"
ORDER = "event IDs out of order"
TRUNCATED = "truncated"
TRAILER = "trailer disagrees with the records"
FILE_CRC = "file checksum mismatch"
AFTER_TRAILER = "bytes after the trailer"


class EventFileError(Exception):
    """Damage in an event file: where, what (`status`, one of the names
    above), the details, and which event when known."""

    def __init__(self, path, offset: int, status: str, detail: str = "",
                 event: int | None = None):
        self.path, self.offset, self.status, self.event = str(path), offset, status, event
        self.detail = detail
        where = f"{self.path}: offset {offset}"
        if event is not None:
            where += f", event {event}"
        super().__init__(f"{where}: {status}" + (f" ({detail})" if detail else ""))


@dataclass
class FileHeader:
    run: int
    builder_id: int = 0
    sources: int = 0
    file_seq: int = 0
    slice: int = 0
    created_ns: int = 0
    config_sha256: bytes = bytes(32)
    software: str = ""
    format_version: int = FORMAT_VERSION


@dataclass
class Fragment:
    source_id: int
    event_id: int
    sequence: int
    timestamp_ns: int
    payload: bytes
    run: int = 0
    flags: int = 0

    def frame(self) -> bytes:
        """The fragment as its wire frame (docs/fragment-format.md §1)."""
        head = _FRAME.pack(FRAME_MAGIC, 1, self.flags, self.source_id, self.run, self.event_id,
                           self.sequence, self.timestamp_ns, len(self.payload))
        crc = zlib.crc32(self.payload, zlib.crc32(head))
        return head + struct.pack(">I", crc) + self.payload


@dataclass
class Event:
    run: int
    event_id: int
    fragments: list[Fragment] = field(default_factory=list)
    flags: int = 0
    earliest_ns: int = 0
    offset: int = 0          # where its record starts in its file
    path: str = ""

    @property
    def incomplete(self) -> bool:
        return bool(self.flags & FLAG_INCOMPLETE)

    def record(self) -> bytes:
        """The event's record: its header and its fragments' frames in
        ascending source order."""
        frames = b"".join(f.frame() for f in sorted(self.fragments, key=lambda f: f.source_id))
        earliest = min((f.timestamp_ns for f in self.fragments), default=0)
        head = _RECORD.pack(RECORD_MAGIC, RECORD_HEADER_BYTES + len(frames), self.run,
                            self.event_id, len(self.fragments), self.flags, earliest)
        return head + struct.pack(">I", zlib.crc32(frames, zlib.crc32(head))) + frames


def encode_header(h: FileHeader) -> bytes:
    software = h.software.encode("utf-8")[:32]
    body = _HEADER.pack(MAGIC, h.format_version, HEADER_BYTES, h.run, h.builder_id, h.sources,
                        h.file_seq, h.slice, 0, h.created_ns, h.config_sha256, software)
    return body + struct.pack(">I", zlib.crc32(body))


def encode_trailer(events: list[Event], records_bytes: int, crc_before: int) -> bytes:
    first = events[0].event_id if events else 0
    last = events[-1].event_id if events else 0
    body = _TRAILER.pack(TRAILER_MAGIC, TRAILER_BYTES, len(events), records_bytes, first, last)
    return body + struct.pack(">I", zlib.crc32(body, crc_before))


def encode_file(header: FileHeader, events: list[Event], trailer: bool = True) -> bytes:
    """A whole file's bytes (without its trailer when trailer is False: a
    file cut while open)."""
    records = b"".join(e.record() for e in events)
    data = encode_header(header) + records
    return data + (encode_trailer(events, len(records), zlib.crc32(data)) if trailer else b"")


def parse_frame(buf: bytes, at: int, end: int, path, event: int | None,
                max_payload: int = FRAME_MAX_PAYLOAD) -> tuple[Fragment, int]:
    """The frame at buf[at:], which must end by `end`; with its length."""
    if end - at < FRAME_HEADER_BYTES:
        raise EventFileError(path, at, FRAME, "frame cut short", event)
    (magic, version, flags, source, run, ev, seq, ts, length) = _FRAME.unpack_from(buf, at)
    if magic != FRAME_MAGIC or version != 1 or flags != 0:
        raise EventFileError(path, at, FRAME, f"magic {magic:#06x}, version {version}, "
                                              f"flags {flags:#04x}", event)
    if length > max_payload or at + FRAME_HEADER_BYTES + length > end:
        raise EventFileError(path, at, FRAME, f"frame length {length} out of bounds", event)
    (crc,) = struct.unpack_from(">I", buf, at + 38)
    payload = bytes(buf[at + FRAME_HEADER_BYTES:at + FRAME_HEADER_BYTES + length])
    if zlib.crc32(payload, zlib.crc32(buf[at:at + 38])) != crc:
        raise EventFileError(path, at, FRAME, f"frame checksum mismatch, source {source}", event)
    return Fragment(source, ev, seq, ts, payload, run, flags), FRAME_HEADER_BYTES + length


class Reader:
    """One event file, read and verified as it is iterated.

    `header` is read when the reader is made; iterating yields each Event;
    at the end `trailer` holds the trailer's counts, or an EventFileError
    names the damage. A `.writing` file (still open, or left by a killed
    builder) ends without a trailer: `allow_open=True` stops at its last
    complete record instead of failing, and `complete` then says False."""

    def __init__(self, path, allow_open: bool = False, data: bytes | None = None,
                 max_payload: int = FRAME_MAX_PAYLOAD):
        self.path = Path(path)
        self.allow_open, self.max_payload = allow_open, max_payload
        self.data = self.path.read_bytes() if data is None else data
        self.trailer: dict | None = None
        self.complete = False
        self.good_bytes = 0
        self.header = self._header()
        self.good_bytes = HEADER_BYTES

    def _header(self) -> FileHeader:
        d, p = self.data, self.path
        if len(d) < 8 or d[:8] != MAGIC:
            raise EventFileError(p, 0, NOT_EVENT_FILE, "no ESEVFILE magic")
        if len(d) < 10:
            raise EventFileError(p, len(d), TRUNCATED, "inside the file header")
        (version,) = struct.unpack_from(">H", d, 8)
        if version != FORMAT_VERSION:
            raise EventFileError(p, 8, VERSION, f"format version {version}, this reader "
                                                f"knows {FORMAT_VERSION}")
        if len(d) < HEADER_BYTES:
            raise EventFileError(p, len(d), TRUNCATED, "inside the file header")
        f = _HEADER.unpack_from(d, 0)
        (crc,) = struct.unpack_from(">I", d, 124)
        if f[2] != HEADER_BYTES or zlib.crc32(d[:124]) != crc:
            raise EventFileError(p, 0, HEADER, "header_bytes or its CRC")
        return FileHeader(run=f[3], builder_id=f[4], sources=f[5], file_seq=f[6], slice=f[7],
                          created_ns=f[9], config_sha256=f[10],
                          software=f[11].rstrip(b"\0").decode("utf-8", "replace"),
                          format_version=version)

    def __iter__(self) -> Iterator[Event]:
        d, p, at = self.data, self.path, HEADER_BYTES
        count, records_bytes, first, last = 0, 0, 0, None
        while True:
            if len(d) - at < 4:
                if self.allow_open:
                    return
                raise EventFileError(p, at, TRUNCATED, "no trailer: a file left open; "
                                                       "evdump --recover closes it")
            tag = d[at:at + 4]
            if tag == TRAILER_MAGIC:
                self._trailer(at, count, records_bytes, first, last)
                return
            if tag != RECORD_MAGIC:
                raise EventFileError(p, at, RECORD_MAGIC_MISSING, f"found {tag!r}")
            try:
                ev, size = self._record(at, last)
            except EventFileError as e:
                if self.allow_open and e.status == TRUNCATED:
                    return
                raise
            count += 1
            first = ev.event_id if count == 1 else first
            last = ev.event_id
            records_bytes += size
            at += size
            self.good_bytes = at
            yield ev

    def _record(self, at: int, last: int | None) -> tuple[Event, int]:
        d, p = self.data, self.path
        if len(d) - at < RECORD_HEADER_BYTES:
            raise EventFileError(p, at, TRUNCATED, "inside a record header")
        (_, size, run, event, nfrag, flags, earliest) = _RECORD.unpack_from(d, at)
        if size < RECORD_HEADER_BYTES:
            raise EventFileError(p, at, RECORD_LENGTH, f"record_bytes {size}", event)
        if at + size > len(d):
            raise EventFileError(p, at, TRUNCATED, f"a record of {size} bytes, "
                                                   f"{len(d) - at} left", event)
        (crc,) = struct.unpack_from(">I", d, at + 32)
        if zlib.crc32(d[at + RECORD_HEADER_BYTES:at + size], zlib.crc32(d[at:at + 32])) != crc:
            raise EventFileError(p, at, RECORD_CRC, "", event)
        if run != self.header.run or flags & ~FLAG_INCOMPLETE:
            raise EventFileError(p, at, FRAME_MISMATCH, f"a record of run {run} (flags "
                                                        f"{flags:#x}) in a file of run "
                                                        f"{self.header.run}", event)
        if last is not None and event <= last:
            raise EventFileError(p, at, ORDER, f"after event {last}", event)
        ev = Event(run, event, [], flags, earliest, at, str(p))
        pos, end = at + RECORD_HEADER_BYTES, at + size
        while pos < end:
            try:
                frag, n = parse_frame(d, pos, end, p, event, self.max_payload)
            except EventFileError as e:
                # Named at its record, as the C codec does; the detail says
                # which frame.
                raise EventFileError(p, at, e.status, f"the frame at offset {pos}: {e.detail}",
                                     event) from None
            if frag.run != run or frag.event_id != event:
                raise EventFileError(p, at, FRAME_MISMATCH, f"the frame at offset {pos} is of "
                                                            f"run {frag.run} event "
                                                            f"{frag.event_id}", event)
            ev.fragments.append(frag)
            pos += n
        if len(ev.fragments) != nfrag:
            raise EventFileError(p, at, FRAME_MISMATCH, f"{len(ev.fragments)} frames, the "
                                                        f"record says {nfrag}", event)
        return ev, size

    def _trailer(self, at: int, count: int, records_bytes: int, first: int,
                 last: int | None) -> None:
        d, p = self.data, self.path
        if len(d) - at < TRAILER_BYTES:
            raise EventFileError(p, at, TRUNCATED, "inside the trailer")
        (_, size, events, rbytes, tfirst, tlast) = _TRAILER.unpack_from(d, at)
        (file_crc,) = struct.unpack_from(">I", d, at + 40)
        want = (TRAILER_BYTES, count, records_bytes, first, last or 0)
        if (size, events, rbytes, tfirst, tlast) != want:
            raise EventFileError(p, at, TRAILER, f"it says {events} events, {rbytes} bytes, IDs "
                                        f"{tfirst}..{tlast}; the records hold {count}, "
                                        f"{records_bytes}, {first}..{last or 0}")
        if zlib.crc32(d[:at + 40]) != file_crc:
            raise EventFileError(p, at, FILE_CRC)
        if len(d) > at + TRAILER_BYTES:
            raise EventFileError(p, at, AFTER_TRAILER, f"{len(d) - at - TRAILER_BYTES} bytes")
        self.trailer = {"events": events, "record_bytes": rbytes, "first_event": tfirst,
                        "last_event": tlast, "file_crc": file_crc}
        self.complete = True


def check_file(path, allow_open: bool = False) -> dict:
    """Verifies a whole file; its header, counts and CRC (EventFileError on
    damage)."""
    r = Reader(path, allow_open)
    events = sum(1 for _ in r)
    return {"path": str(path), "header": r.header, "events": events, "complete": r.complete,
            "trailer": r.trailer, "bytes": len(r.data), "good_bytes": r.good_bytes}


def _file_key(p: Path) -> tuple:
    try:
        with open(p, "rb") as f:
            head = f.read(HEADER_BYTES)
        fields = _HEADER.unpack_from(head, 0)
        return (fields[4], fields[6], str(p))
    except (OSError, struct.error):
        return (1 << 16, 0, str(p))


def run_files(run_dir, include_open: bool = False, suffix: str = FILE_SUFFIX,
              key=_file_key) -> list[Path]:
    """A run's event files (named *suffix, and *suffix.writing with
    include_open), every builder's, each builder's by sequence as key(path)
    reads it from the file; h5events lists its HDF5 files with this too."""
    root = Path(run_dir)
    found = [p for p in root.rglob("*" + suffix) if p.is_file()]
    if include_open:
        found += [p for p in root.rglob("*" + suffix + OPEN_SUFFIX) if p.is_file()]
    return sorted(found, key=key)


def iter_run_events(run_dir) -> Iterator[Event]:
    """Every event of a run's closed files, verified as it is read."""
    for path in run_files(run_dir):
        yield from Reader(path)

