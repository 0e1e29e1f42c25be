"""The recorded data of a run against the deterministic generator: every
payload byte of every written event (docs/RECORDING.md, "What refbuild
checks").

A run that records (builderd --record raw|hdf5) leaves event files beside
each builder's events.jsonl. Every file is read with its CRCs verified
(evfile.py, h5events.py); each fragment's payload must equal the
generator's payload of (event, source) (spec §2), every event must be one
the builder's events.jsonl records, written once, and every record of
events.jsonl must be in the files (a given-up builder's only below its
fence). The manifests' event counts must add up to the events read.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import evfile
from refgen import MASK64, SALTS, mix64, mix64_many, payloads_many

BATCH_EVENTS = 2048


@dataclass
class DataCheck:
    files: int = 0
    events: int = 0
    fragments: int = 0
    bytes: int = 0
    payload_mismatch: int = 0    # fragments whose bytes are not the generator's
    not_recorded: int = 0        # events.jsonl records absent from the files
    unexpected: int = 0          # file events no events.jsonl records
    duplicate: int = 0           # an event written twice
    manifest_mismatch: int = 0   # manifests whose counts differ from the files'
    slice_mismatch: int = 0      # end-of-slice documents that are not their files' sum,
                                 # or an end-of-run document that is not the slices' sum
    slices: int = 0
    damaged: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.payload_mismatch or self.not_recorded or self.unexpected
                    or self.duplicate or self.manifest_mismatch or self.slice_mismatch
                    or self.damaged)

    def counts(self) -> str:
        return (f"data: files={self.files} events={self.events} fragments={self.fragments} "
                f"bytes={self.bytes} payload-mismatch={self.payload_mismatch} "
                f"not-recorded={self.not_recorded} unexpected={self.unexpected} "
                f"duplicate={self.duplicate} manifest-mismatch={self.manifest_mismatch} "
                f"slices={self.slices} slice-mismatch={self.slice_mismatch} "
                f"damaged={len(self.damaged)}")


def event_files(folder: str) -> list[Path]:
    """A builder's closed event files of both formats, in order."""
    raw = evfile.run_files(folder)
    h5 = sorted(Path(folder).glob("*.h5"))
    return [p for p in raw if p.parent == Path(folder)] + h5


def _events_of(path: Path):
    if path.suffix == ".h5":
        try:
            import h5events   # needs h5py: only for a run that wrote HDF5
        except ImportError as e:
            raise evfile.EventFileError(path, 0, "unreadable",
                                        f"HDF5 files need h5py, which {sys.executable} "
                                        f"lacks (Debian: python3-h5py): {e}") from None
        return h5events.Reader(path)
    return evfile.Reader(path)


def _check_batch(c: DataCheck, seed: int, run: int, batch: list, report: int) -> None:
    """Compares each fragment of a batch of events with the generator."""
    k = mix64(mix64(seed ^ SALTS["payload"]) ^ run)
    by_length: dict[int, list] = {}
    for ev in batch:
        for fr in ev.fragments:
            by_length.setdefault(len(fr.payload), []).append((ev, fr))
    for length, pairs in by_length.items():
        keys = mix64_many(mix64((k ^ ev.event_id) & MASK64) ^ fr.source_id for ev, fr in pairs)
        want = payloads_many(keys, length)
        got = b"".join(fr.payload for _, fr in pairs)
        if got == want:
            continue
        for i, (ev, fr) in enumerate(pairs):
            if fr.payload != want[i * length:(i + 1) * length]:
                c.payload_mismatch += 1
                if len(c.examples) < report:
                    c.examples.append(f"event {ev.event_id} source {fr.source_id}: payload differs "
                                      f"from the generator's ({ev.path}, offset {ev.offset})")


def recorded_events(events_jsonl: str, below: int | None = None) -> set[int]:
    """The event IDs a builder's events.jsonl records (below its fence)."""
    out = set()
    with open(events_jsonl, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                e = json.loads(line)["event"]
                if below is None or e < below:
                    out.add(e)
    return out


def check_folder(c: DataCheck, folder: str, seed: int, run: int, below: int | None,
                 report: int, data: str | None = None) -> None:
    """One builder's files (in data, by default its folder) against its
    events.jsonl."""
    want = recorded_events(os.path.join(folder, "events.jsonl"), below)
    seen: set[int] = set()
    batch: list = []
    manifests: list[dict] = []
    events_read = 0
    for path in event_files(data or folder):
        c.files += 1
        count = 0
        try:
            for ev in _events_of(path):
                count += 1
                c.fragments += len(ev.fragments)
                c.bytes += sum(len(fr.payload) for fr in ev.fragments)
                if below is not None and ev.event_id >= below:
                    continue          # past the fence: the books count it lost
                if ev.event_id in seen:
                    c.duplicate += 1
                    continue
                seen.add(ev.event_id)
                if ev.event_id not in want:
                    c.unexpected += 1
                    if len(c.examples) < report:
                        c.examples.append(f"event {ev.event_id} in {path} is not in events.jsonl")
                batch.append(ev)
                if len(batch) >= BATCH_EVENTS:
                    _check_batch(c, seed, run, batch, report)
                    batch = []
        except evfile.EventFileError as e:
            c.damaged.append(str(e))
            continue
        c.events += count
        events_read += count
        manifest = Path(str(path) + ".json")
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
            manifests.append(doc)
            if doc.get("event_count") != count:
                c.manifest_mismatch += 1
                c.examples.append(f"{manifest}: event_count {doc.get('event_count')}, "
                                  f"the file holds {count}")
        except (OSError, ValueError):
            c.manifest_mismatch += 1
            c.examples.append(f"{manifest}: missing or not JSON")
    if batch:
        _check_batch(c, seed, run, batch, report)
    if below is None:      # a fenced builder writes no end documents
        check_slices(c, data or folder, manifests, events_read)
    missing = want - seen
    c.not_recorded += len(missing)
    for e in sorted(missing)[:max(0, report - len(c.examples))]:
        c.examples.append(f"event {e} is in {folder}/events.jsonl but in no event file")


SUMMED = ("event_count", "bytes", "files")


def check_slices(c: DataCheck, folder: str, manifests: list[dict], events_read: int) -> None:
    """A builder's end-of-slice documents against its files' manifests, and
    its end-of-run document against the slices (docs/RECORDING.md)."""
    root = Path(folder)
    eor_paths = list(root.glob("*.eor.json"))
    eos = {}
    for p in root.glob("*.eos.json"):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
            eos[int(doc["slice"])] = (p, doc)
        except (OSError, ValueError, KeyError, TypeError):
            c.slice_mismatch += 1
            c.examples.append(f"{p}: not an end-of-slice document")
    if not eor_paths:
        if eos:
            c.slice_mismatch += 1
            c.examples.append(f"{folder}: end-of-slice documents but no end-of-run document")
        return
    c.slices += len(eos)
    for s, (p, doc) in sorted(eos.items()):
        mine = [m for m in manifests if m.get("slice") == s]
        for key, field_ in (("event_count", "event_count"), ("bytes", "bytes")):
            total = sum(m.get(field_, 0) for m in mine)
            if doc.get(key) != total:
                c.slice_mismatch += 1
                c.examples.append(f"{p}: {key} {doc.get(key)}, its files' manifests say {total}")
        if doc.get("files") != len(mine):
            c.slice_mismatch += 1
            c.examples.append(f"{p}: files {doc.get('files')}, {len(mine)} manifests of slice {s}")
    try:
        eor = json.loads(eor_paths[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        c.slice_mismatch += 1
        c.examples.append(f"{eor_paths[0]}: not JSON")
        return
    for key in (*SUMMED, "expired", "unwritten"):
        total = sum(doc.get(key, 0) for _, doc in eos.values())
        if eor.get(key) != total:
            c.slice_mismatch += 1
            c.examples.append(f"{eor_paths[0]}: {key} {eor.get(key)}, the slices' sum is {total}")
    if eor.get("slices") != len(eos) or sorted(eos) != list(range(len(eos))):
        c.slice_mismatch += 1
        c.examples.append(f"{eor_paths[0]}: slices {eor.get('slices')}, documents of slices "
                          f"{sorted(eos)}")
    if eor.get("event_count") != events_read:
        c.slice_mismatch += 1
        c.examples.append(f"{eor_paths[0]}: event_count {eor.get('event_count')}, the files hold "
                          f"{events_read}")


def data_dirs(run_dir: str) -> dict[int, str]:
    """{builder: the folder of its event files} as params.json's "output"
    names them (daqrun's [output] directory, relative to the run directory
    or absolute); {} without one (the files are beside events.jsonl)."""
    try:
        with open(os.path.join(run_dir, "params.json"), encoding="utf-8") as f:
            out = (json.load(f).get("output") or {}).get("directories") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return {int(b): os.path.join(run_dir, d) for b, d in out.items()}


def has_data(run_dir: str) -> bool:
    roots = [Path(run_dir)] + [Path(d) for d in data_dirs(run_dir).values()]
    return any(any(root.rglob("*" + evfile.FILE_SUFFIX)) or any(root.rglob("*.h5")) or
               any(root.rglob("*.writing")) for root in roots)


def check_run(run_dir: str, seed: int, run: int, fences: dict, report: int = 10) -> DataCheck:
    """Every builder's files of a run (RUN_DIR, or RUN_DIR/builders/B/, or
    the directories params.json's "output" names); fences: builder ->
    refbuild.Fence of the given-up ones."""
    c = DataCheck()
    top = os.path.join(run_dir, "builders")
    data = data_dirs(run_dir)
    if os.path.isdir(top):
        for b in sorted(int(n) for n in os.listdir(top) if n.isdigit()):
            fence = fences.get(b)
            check_folder(c, os.path.join(top, str(b)), seed, run,
                         fence.below if fence else None, report, data.get(b))
    else:
        check_folder(c, run_dir, seed, run, None, report, data.get(0))
    return c


def print_check(c: DataCheck, run_dir: str) -> bool:
    for line in c.damaged + c.examples:
        print(f"refbuild: {line}")
    print(c.counts())
    print(f"{'PASS' if c.ok else 'FAIL'} refbuild data {run_dir}: every payload byte of "
          f"{c.events} written events checked against the generator")
    return c.ok
