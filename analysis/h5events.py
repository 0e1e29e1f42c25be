"""HDF5 event files (docs/hdf5-layout.md) read as the same `Event` objects
analysis/evfile.py yields for the raw format, so a tool reads either:

    import h5events
    for ev in h5events.iter_run_events("runs/local"):
        print(ev.event_id, [len(f.payload) for f in ev.fragments])

Every frame is rebuilt from its row of /source_N/frames and its bytes of
/source_N/payload and checked against its own CRC, every event's record
CRC (the raw format's, docs/event-file-format.md §2) is made again from
those frames, and the counts the writer left at close are compared with
the tables. Damage raises evfile.EventFileError, naming the file, the
event and (for a frame) the source, with evfile's status names. Needs h5py
and numpy (python3-h5py); evfile.py stays with the standard library.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Iterator

import h5py

import evfile
from evfile import Event, EventFileError, FileHeader, Fragment

FORMAT = "esdq-event-hdf5"
FORMAT_VERSION = 1
FILE_SUFFIX = ".h5"
OPEN_SUFFIX = ".writing"
# Payload bytes read from a source's dataset at once: a file of any size
# is walked in bounded memory.
WINDOW_BYTES = 64 << 20


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class _PayloadWindow:
    """A source's payload dataset, read WINDOW_BYTES at a time."""

    def __init__(self, dataset):
        self.ds, self.start, self.data = dataset, 0, b""

    def get(self, offset: int, length: int) -> bytes:
        if offset < self.start or offset + length > self.start + len(self.data):
            end = min(max(offset + length, offset + WINDOW_BYTES), self.ds.shape[0])
            self.start, self.data = offset, self.ds[offset:end].tobytes()
        at = offset - self.start
        return self.data[at:at + length]


class Reader:
    """One HDF5 event file, read and verified as it is iterated.

    `header` (an evfile.FileHeader) is read when the reader is made;
    iterating yields each Event in file order. A file the writer did not
    close (NAME.h5.writing) lacks the closing counts: `allow_open=True`
    reads what its tables hold, and `complete` then says False."""

    def __init__(self, path, allow_open: bool = False):
        self.path = Path(path)
        try:
            self.file = h5py.File(self.path, "r")
        except OSError as e:
            raise EventFileError(self.path, 0, evfile.NOT_EVENT_FILE, f"not HDF5: {e}") from None
        a = self.file.attrs
        if _text(a.get("format", "")) != FORMAT:
            raise EventFileError(self.path, 0, evfile.NOT_EVENT_FILE,
                                 f"format attribute {a.get('format')!r}")
        if int(a["format_version"]) != FORMAT_VERSION:
            raise EventFileError(self.path, 0, evfile.VERSION,
                                 f"format version {int(a['format_version'])}, this reader knows "
                                 f"{FORMAT_VERSION}")
        self.header = FileHeader(run=int(a["run"]), builder_id=int(a["builder_id"]),
                                 sources=int(a["sources"]), file_seq=int(a["file_seq"]),
                                 slice=int(a["slice"]), created_ns=int(a["created_ns"]),
                                 config_sha256=bytes.fromhex(_text(a["config_sha256"])),
                                 software=_text(a["software"]), format_version=FORMAT_VERSION)
        self.complete = "event_count" in a
        if not self.complete and not allow_open:
            raise EventFileError(self.path, 0, evfile.TRUNCATED,
                                 "no event_count attribute: a file the writer did not close")
        self.trailer = ({"events": int(a["event_count"]), "first_event": int(a["first_event"]),
                         "last_event": int(a["last_event"])} if self.complete else None)

    def close(self) -> None:
        self.file.close()

    def _fragment(self, s: int, row, payloads: _PayloadWindow, event: int) -> Fragment:
        (ev_id, seq, ts, offset, run, length, crc, source, version, flags) = row
        payload = payloads.get(offset, length)
        if len(payload) != length or source != s or version != 1:
            raise EventFileError(self.path, 0, evfile.FRAME,
                                 f"source {s}: payload {offset}+{length} of "
                                 f"{payloads.ds.shape[0]} bytes, source_id {source}, "
                                 f"version {version}", event)
        frag = Fragment(source, ev_id, seq, ts, payload, run, flags)
        if int.from_bytes(frag.frame()[38:42], "big") != crc:
            raise EventFileError(self.path, 0, evfile.FRAME,
                                 f"frame checksum mismatch, source {s}", event)
        if run != self.header.run:
            raise EventFileError(self.path, 0, evfile.FRAME_MISMATCH,
                                 f"source {s}: a frame of run {run}", event)
        return frag

    def __iter__(self) -> Iterator[Event]:
        f, run = self.file, self.header.run
        rows = [f[f"source_{s}/frames"][:].tolist() for s in range(self.header.sources)]
        payloads = [_PayloadWindow(f[f"source_{s}/payload"]) for s in range(self.header.sources)]
        next_row = [0] * self.header.sources
        last = None
        events = f["events"][:].tolist()
        for index, (event_id, earliest, record_crc, flags, fragments) in enumerate(events):
            if last is not None and event_id <= last:
                raise EventFileError(self.path, index, evfile.ORDER, f"after event {last}",
                                     event_id)
            ev = Event(run, event_id, [], flags, earliest, index, str(self.path))
            for s in range(self.header.sources):
                i = next_row[s]
                if i < len(rows[s]) and rows[s][i][0] == event_id:
                    ev.fragments.append(self._fragment(s, rows[s][i], payloads[s], event_id))
                    next_row[s] += 1
            if len(ev.fragments) != fragments:
                raise EventFileError(self.path, index, evfile.FRAME_MISMATCH,
                                     f"{len(ev.fragments)} frames, the event says {fragments}",
                                     event_id)
            if record_crc_of(ev) != record_crc:
                raise EventFileError(self.path, index, evfile.RECORD_CRC, "", event_id)
            last = event_id
            yield ev
        for s in range(self.header.sources):
            if next_row[s] != len(rows[s]):
                raise EventFileError(self.path, next_row[s], evfile.FRAME_MISMATCH,
                                     f"source {s}: a frame of event {rows[s][next_row[s]][0]} "
                                     f"no event holds")
        if self.complete:
            want = (self.trailer["events"], self.trailer["first_event"], self.trailer["last_event"])
            have = (len(events), events[0][0] if events else 0, last or 0)
            if want != have:
                raise EventFileError(self.path, len(events), evfile.TRAILER,
                                     f"attributes say {want[0]} events, IDs {want[1]}..{want[2]}; "
                                     f"the table holds {have[0]}, {have[1]}..{have[2]}")


def record_crc_of(ev: Event) -> int:
    """The raw format's record CRC of an event (docs/event-file-format.md
    §2), its header with the event's own earliest_ns."""
    frames = b"".join(f.frame() for f in sorted(ev.fragments, key=lambda f: f.source_id))
    head = evfile._RECORD.pack(evfile.RECORD_MAGIC, evfile.RECORD_HEADER_BYTES + len(frames),
                               ev.run, ev.event_id, len(ev.fragments), ev.flags, ev.earliest_ns)
    return zlib.crc32(frames, zlib.crc32(head))


def check_file(path, allow_open: bool = False) -> dict:
    """Verifies a whole file (EventFileError on damage) and, when its
    manifest is beside it, the manifest's counts, size and file CRC."""
    path = Path(path)
    r = Reader(path, allow_open)
    try:
        events = sum(1 for _ in r)
    finally:
        r.close()
    data = path.read_bytes()
    manifest = path.with_name(path.name + ".json")
    if manifest.exists():
        m = json.loads(manifest.read_text())
        have = (m["bytes"], m["event_count"], m["file_crc"])
        want = (len(data), events, zlib.crc32(data))
        if have != want:
            raise EventFileError(path, 0, evfile.FILE_CRC,
                                 f"manifest says bytes, events, CRC {have}; the file {want}")
    return {"path": str(path), "header": r.header, "events": events, "complete": r.complete,
            "trailer": r.trailer, "bytes": len(data)}


def recover_file(path) -> dict:
    """Closes NAME.h5.writing a killed builder left, in place: its open
    flag cleared (`h5clear -s`, hdf5-tools: libhdf5 refuses a file marked
    open for writing), every event read and checked up to the first that
    is not whole (the writer flushes the tables after every batch, so the
    last batch before the kill is whole), the tables cut back to those
    events, the closing attributes written. Returns the events kept, their
    first and last IDs, and what ended the reading. The caller renames the
    file and writes its manifest. EventFileError when not even the file's
    structure can be read."""
    path = Path(path)
    import shutil
    import subprocess
    import numpy as np
    if shutil.which("h5clear") is None:
        raise EventFileError(path, 0, evfile.NOT_EVENT_FILE,
                             "h5clear (Debian's hdf5-tools) is needed to recover an HDF5 file")
    r = subprocess.run(["h5clear", "-s", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise EventFileError(path, 0, evfile.NOT_EVENT_FILE,
                             f"h5clear -s failed: {(r.stderr or r.stdout).strip()[:200]}")
    kept, stop = [], "every event whole"
    reader = Reader(path, allow_open=True)
    try:
        for ev in reader:
            kept.append(ev.event_id)
    except EventFileError as e:
        stop = str(e)
    except (OSError, KeyError, ValueError) as e:     # tables the kill left unreadable
        stop = f"{path}: {e}"
    finally:
        reader.close()
    with h5py.File(path, "r+") as f:
        last = kept[-1] if kept else None
        f["events"].resize((len(kept),))
        for s in range(int(f.attrs["sources"])):
            frames, payload = f[f"source_{s}/frames"], f[f"source_{s}/payload"]
            rows = frames[:] if frames.shape[0] else None
            n = 0 if last is None or rows is None else \
                int(np.searchsorted(rows["event_id"], last, side="right"))
            end = 0 if n == 0 else \
                int(rows["payload_offset"][n - 1]) + int(rows["payload_len"][n - 1])
            frames.resize((n,))
            payload.resize((end,))
        f.attrs["event_count"] = np.uint64(len(kept))
        f.attrs["first_event"] = np.uint64(kept[0] if kept else 0)
        f.attrs["last_event"] = np.uint64(last or 0)
    return {"events": len(kept), "first_event": kept[0] if kept else 0,
            "last_event": last or 0, "stop": stop}


def _file_key(p: Path) -> tuple:
    try:
        with h5py.File(p, "r") as f:
            return (int(f.attrs["builder_id"]), int(f.attrs["file_seq"]), str(p))
    except (OSError, KeyError):
        return (1 << 16, 0, str(p))


def run_files(run_dir, include_open: bool = False) -> list[Path]:
    """A run's HDF5 event files, every builder's, each builder's by sequence."""
    return evfile.run_files(run_dir, include_open, suffix=FILE_SUFFIX, key=_file_key)


def iter_run_events(run_dir) -> Iterator[Event]:
    """Every event of a run's closed HDF5 files, verified as it is read."""
    for path in run_files(run_dir):
        r = Reader(path)
        try:
            yield from r
        finally:
            r.close()
