#!/usr/bin/python3
"""evdump: the event files of a run (docs/event-file-format.md).

    analysis/evdump.py RUN_DIR|FILE ...           list the files: builder, sequence,
                                                  slice, events, IDs, bytes, state
    analysis/evdump.py --check RUN_DIR|FILE ...   verify every byte and CRC; exit 1
                                                  naming the file, offset and event
    analysis/evdump.py --show EVENT RUN_DIR|FILE  one event: its record and fragments
    analysis/evdump.py --recover FILE.writing ... close a file a killed builder left
                                                  open: cut it after its last complete
                                                  record, write the trailer, fsync,
                                                  rename, write its manifest; an
                                                  HDF5 one (NAME.h5.writing) cut back
                                                  to its last whole event

Standard library only, but for HDF5 files (h5events: h5py; and h5clear,
Debian's hdf5-tools, to recover one). Exit status: 0 all good, 1 damage found (or an
event not found), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import evfile  # noqa: E402

MANIFEST_FORMAT = "esdq-event-file-manifest/1"


def files_of(targets: list[str], include_open: bool) -> list[Path]:
    out: list[Path] = []
    for t in targets:
        p = Path(t)
        if p.is_dir():
            out += evfile.run_files(p, include_open)
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"{t}: no such file or directory")
    return out


def describe(path: Path) -> str:
    is_open = path.name.endswith(evfile.OPEN_SUFFIX)
    try:
        info = evfile.check_file(path, allow_open=is_open)
    except evfile.EventFileError as e:
        return f"{path}: DAMAGED: {e.status}" + (f" ({e.detail})" if e.detail else "") + \
            f" at offset {e.offset}" + (f", event {e.event}" if e.event is not None else "")
    h = info["header"]
    ids = ""
    if info["events"]:
        first = info["trailer"]["first_event"] if info["trailer"] else None
        last = info["trailer"]["last_event"] if info["trailer"] else None
        ids = f", events {first}..{last}" if first is not None else ""
    state = "closed" if info["complete"] else \
        f"open: {info['events']} complete records in {info['good_bytes']} of {info['bytes']} bytes"
    return (f"{path}: run {h.run}, builder {h.builder_id}, file {h.file_seq}, slice {h.slice}, "
            f"{info['events']} events{ids}, {info['bytes']} bytes, {state}")


def check(paths: list[Path]) -> int:
    bad = 0
    events = 0
    for p in paths:
        try:
            info = evfile.check_file(p)
            events += info["events"]
        except evfile.EventFileError as e:
            print(f"evdump: {e}", file=sys.stderr)
            bad += 1
    print(f"evdump: {len(paths)} files, {events} events verified, {bad} damaged")
    return 1 if bad else 0


def show(event_id: int, paths: list[Path]) -> int:
    for p in paths:
        for ev in evfile.Reader(p, allow_open=p.name.endswith(evfile.OPEN_SUFFIX)):
            if ev.event_id != event_id:
                continue
            print(f"event {ev.event_id} of run {ev.run} in {p} at offset {ev.offset}: "
                  f"{len(ev.fragments)} fragments"
                  + (", incomplete" if ev.incomplete else "")
                  + f", earliest source timestamp {ev.earliest_ns} ns")
            for f in ev.fragments:
                print(f"  source {f.source_id}: {len(f.payload)} bytes, sequence {f.sequence}, "
                      f"timestamp {f.timestamp_ns} ns, payload {f.payload[:16].hex()}"
                      + ("..." if len(f.payload) > 16 else ""))
            return 0
    print(f"evdump: event {event_id} is in none of {len(paths)} files", file=sys.stderr)
    return 1


def fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(path: Path, info: dict, recovered: bool) -> Path:
    """NAME.json beside the closed file NAME, written to a temporary name,
    fsynced and renamed."""
    h = info["header"]
    t = info["trailer"]
    doc = {"format": MANIFEST_FORMAT, "name": path.name, "bytes": info["bytes"],
           "event_count": t["events"], "first_event": t["first_event"],
           "last_event": t["last_event"], "file_crc": t["file_crc"], "run": h.run,
           "builder": h.builder_id, "file_seq": h.file_seq, "slice": h.slice,
           "recovered": recovered}
    manifest = path.with_name(path.name + ".json")
    tmp = manifest.with_name(manifest.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, manifest)
    fsync_dir(path.parent)
    return manifest


H5_OPEN_SUFFIX = ".h5" + evfile.OPEN_SUFFIX


def recover_h5(path: Path) -> int:
    """Closes one `.h5.writing` file (h5events.recover_file), renames it,
    writes its manifest."""
    import h5events    # h5py: needed for HDF5 files only
    try:
        got = h5events.recover_file(path)
        info = h5events.check_file(path)     # whole now, or it keeps its name
    except evfile.EventFileError as e:
        print(f"evdump: {e}; not recovered", file=sys.stderr)
        return 1
    with open(path, "r+b") as f:
        os.fdatasync(f.fileno())
    closed = path.with_name(path.name[:-len(evfile.OPEN_SUFFIX)])
    os.replace(path, closed)
    fsync_dir(closed.parent)
    data = closed.read_bytes()
    info["trailer"] = {"events": got["events"], "first_event": got["first_event"],
                       "last_event": got["last_event"], "file_crc": zlib.crc32(data)}
    manifest = write_manifest(closed, info, recovered=True)
    print(f"evdump: {closed}: kept {got['events']} events"
          + (f" ({got['first_event']}..{got['last_event']})" if got["events"] else "")
          + f", the reading ended at: {got['stop']}; manifest {manifest.name}")
    return 0


def recover(path: Path) -> int:
    """Closes one `.writing` file: its complete records kept, the rest cut."""
    if path.name.endswith(H5_OPEN_SUFFIX):
        return recover_h5(path)
    if not path.name.endswith(evfile.OPEN_SUFFIX):
        print(f"evdump: {path}: not a file left open (its name does not end in "
              f"{evfile.OPEN_SUFFIX})", file=sys.stderr)
        return 1
    full = path.read_bytes()
    if not full:
        # Killed between creating the file and writing its header (one
        # write, which a kill does not cut): it never held an event.
        path.unlink()
        fsync_dir(path.parent)
        print(f"evdump: {path}: empty: the builder was killed as it opened it; it held no "
              f"event and is removed")
        return 0
    try:
        r = evfile.Reader(path, allow_open=True, data=full)
        records = [ev.event_id for ev in r]
    except evfile.EventFileError as e:
        if e.offset < evfile.HEADER_BYTES:
            print(f"evdump: {e}; nothing recovered", file=sys.stderr)
            return 1
        # Damage inside: keep what comes before it, as after a torn write.
        print(f"evdump: {e}; kept what precedes it", file=sys.stderr)
        r = evfile.Reader(path, allow_open=True, data=full[:e.offset])
        records = [ev.event_id for ev in r]
    if r.complete:
        print(f"evdump: {path}: already has its trailer; renaming only", file=sys.stderr)
        good, trailer = len(full), b""
    else:
        good = r.good_bytes
        kept = [evfile.Event(r.header.run, eid) for eid in records]
        trailer = evfile.encode_trailer(kept, good - evfile.HEADER_BYTES, zlib.crc32(full[:good]))
    dropped = len(full) - good
    with open(path, "r+b") as f:
        f.truncate(good)
        f.seek(good)
        f.write(trailer)
        f.flush()
        os.fdatasync(f.fileno())
    closed = path.with_name(path.name[:-len(evfile.OPEN_SUFFIX)])
    os.replace(path, closed)
    fsync_dir(closed.parent)
    info = evfile.check_file(closed)
    manifest = write_manifest(closed, info, recovered=True)
    print(f"evdump: {closed}: kept {info['events']} events"
          + (f" ({records[0]}..{records[-1]})" if records else "")
          + f", cut {dropped} bytes of an unfinished record; manifest {manifest.name}")
    return 0


def manifest_missing(path: Path) -> int:
    """A closed file whose builder was killed between its rename and its
    manifest: the file is whole (checked), and gets the manifest it lacks."""
    try:
        info = evfile.check_file(path)
    except evfile.EventFileError as e:
        print(f"evdump: {e}; no manifest written", file=sys.stderr)
        return 1
    manifest = write_manifest(path, info, recovered=True)
    print(f"evdump: {path}: closed whole ({info['events']} events) but without its manifest; "
          f"manifest {manifest.name} written")
    return 0


def recover_dir(root: Path) -> list:
    """What a killed builder may leave in a run directory, every builder's:
    files left open, and closed files without their manifest."""
    open_files = sorted(root.rglob("*" + evfile.FILE_SUFFIX + evfile.OPEN_SUFFIX)) + \
        sorted(root.rglob("*" + H5_OPEN_SUFFIX))
    bare = [p for p in sorted(root.rglob("*" + evfile.FILE_SUFFIX))
            if not p.with_name(p.name + ".json").exists()]
    return [(recover, p) for p in open_files] + [(manifest_missing, p) for p in bare]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="evdump", description=__doc__.split("\n\n")[0],
                                 epilog="docs/event-file-format.md; docs/RECORDING.md")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="verify every file and CRC")
    what.add_argument("--show", type=int, metavar="EVENT", help="print one event")
    what.add_argument("--recover", action="store_true",
                      help="close the .writing files a killed builder left, and give a "
                           "closed file without its manifest one (a FILE, or every one "
                           "in a RUN_DIR)")
    ap.add_argument("targets", nargs="+", metavar="RUN_DIR|FILE")
    args = ap.parse_args(argv)
    try:
        if args.recover:
            work = []
            for t in map(Path, args.targets):
                if not t.exists():
                    ap.error(f"no such file or directory: {t}")
                work += recover_dir(t) if t.is_dir() else [(recover, t)]
            if not work:
                print(f"evdump: no file left open in {' '.join(args.targets)}: nothing to recover")
                return 0
            return max(fn(p) for fn, p in work)
        paths = files_of(args.targets, include_open=not args.check)
    except FileNotFoundError as e:
        ap.error(str(e))
    if not paths:
        print(f"evdump: no event files in {' '.join(args.targets)}", file=sys.stderr)
        return 1
    if args.check:
        return check(paths)
    if args.show is not None:
        return show(args.show, paths)
    for p in paths:
        print(describe(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
