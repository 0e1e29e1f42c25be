"""The HDF5 output (common/sys/h5writer.c, docs/hdf5-layout.md) read from
outside the writer: tests/unit/evrecord_both.c hands the same events
(small, large and empty payloads, incomplete events, files rolled at a size
and at a slice) to both writers; analysis/h5events.py, through h5py, must
yield from the HDF5 files exactly the events analysis/evfile.py yields from
the raw ones, every frame rebuilt bit for bit and its CRC checked
(zlib.crc32), each event's record CRC equal to the raw record's; the root
attributes say the run, builder, sources, slice and sequence; every
manifest's size, count and file CRC hold; h5dump reads every header. A
payload byte flipped on disk is named by file, event and source. No daemon
is needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

from harness import E2ETestCase

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(os.environ.get("ES_TEST_PROGRAMS", REPO / "build" / "tests"))
BOTH = PROGRAMS / "evrecord_both"
sys.path.insert(0, str(REPO / "analysis"))
import evfile  # noqa: E402

try:
    import h5py  # noqa: F401
    import h5events  # noqa: E402
    H5PY_MISSING = None
except ImportError as e:  # python3-h5py is in scripts/deps.sh's test set
    H5PY_MISSING = f"h5py is not installed ({e}); scripts/deps.sh test installs python3-h5py"

RUN, BUILDER, SOURCES = 7, 1, 3


class H5WriterTest(E2ETestCase):
    def setUp(self) -> None:
        super().setUp()
        if H5PY_MISSING:
            self.skipTest(H5PY_MISSING)
        if not BOTH.exists():
            self.skipTest(f"no {BOTH} (make all, or set ES_TEST_PROGRAMS)")
        self.raw, self.hdf5 = self.h.dir / "raw", self.h.dir / "hdf5"
        self.raw.mkdir()
        self.hdf5.mkdir()

    def write(self, *args) -> dict:
        p = subprocess.run([str(BOTH), "--raw", str(self.raw), "--hdf5", str(self.hdf5), *args],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_every_event_reads_back_as_the_raw_format_holds_it(self):
        out = self.write("--events", "3000", "--sources", str(SOURCES), "--slice-at", "2100",
                         "--max-file-bytes", "3000000", "--seed", "11")
        self.assertEqual((out["raw_events"], out["hdf5_events"]), (3000, 3000))
        raw = list(evfile.iter_run_events(self.raw))
        h5 = list(h5events.iter_run_events(self.hdf5))
        self.assertEqual(len(h5), 3000)
        self.assertGreater(sum(1 for e in h5 if e.incomplete), 400)
        self.assertGreater(sum(1 for e in h5 for f in e.fragments if len(f.payload) > 20000), 50)
        raw_bytes: dict[str, bytes] = {}
        for a, b in zip(raw, h5):
            self.assertEqual((a.event_id, a.flags, a.earliest_ns), (b.event_id, b.flags,
                                                                   b.earliest_ns))
            self.assertEqual([f.frame() for f in a.fragments], [f.frame() for f in b.fragments],
                             f"event {a.event_id}")
            for f in b.fragments:
                frame = f.frame()
                self.assertEqual(zlib.crc32(frame[:38] + frame[42:]),
                                 int.from_bytes(frame[38:42], "big"))
            # The reader held the events table's record CRC to the frames;
            # it is the raw record's, as the raw file has it.
            data = raw_bytes.setdefault(a.path, Path(a.path).read_bytes())
            self.assertEqual(h5events.record_crc_of(b),
                             int.from_bytes(data[a.offset + 32:a.offset + 36], "big"))

    def test_attributes_manifests_and_h5dump(self):
        out = self.write("--events", "1500", "--slice-at", "1000", "--max-file-bytes", "2000000")
        files = h5events.run_files(self.hdf5)
        self.assertEqual(len(files), out["hdf5_files"])
        self.assertGreater(len(files), 2)
        slices, total = [], 0
        for seq, path in enumerate(files):
            with h5py.File(path, "r") as f:
                a = f.attrs
                self.assertEqual(a["format"], b"esdq-event-hdf5")
                self.assertEqual((int(a["format_version"]), int(a["run"]), int(a["builder_id"]),
                                  int(a["sources"]), int(a["file_seq"])),
                                 (1, RUN, BUILDER, SOURCES, seq))
                self.assertEqual(a["config_sha256"].decode(),
                                 bytes((i * 7 + 1) & 0xff for i in range(32)).hex())
                self.assertEqual(a["software"], b"evrecord_both")
                slices.append(int(a["slice"]))
                self.assertEqual(f["events"].maxshape, (None,))
            info = h5events.check_file(path)
            manifest = json.loads(path.with_name(path.name + ".json").read_text())
            self.assertEqual((manifest["name"], manifest["bytes"], manifest["file_crc"],
                              manifest["event_count"], manifest["file_seq"], manifest["slice"]),
                             (path.name, path.stat().st_size, zlib.crc32(path.read_bytes()),
                              info["events"], seq, slices[-1]))
            total += info["events"]
            if shutil.which("h5dump"):
                p = subprocess.run(["h5dump", "-H", str(path)], capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn('DATASET "payload"', p.stdout)
        self.assertEqual(total, 1500)
        self.assertEqual(slices, sorted(slices))
        self.assertEqual((slices[0], slices[-1]), (0, 1))
        self.assertEqual(list(self.hdf5.glob("*.writing")), [])
        if not shutil.which("h5dump"):
            self.skipTest("h5dump is not installed (hdf5-tools); the rest was checked")

    def test_a_flipped_payload_byte_is_named(self):
        self.write("--events", "200", "--seed", "3")
        path = h5events.run_files(self.hdf5)[0]
        with h5py.File(path, "r") as f:
            rows = f["source_2/frames"][:]
            victim = next(r for r in rows if r["payload_len"] > 0)
            chunk = f["source_2/payload"].id.get_chunk_info_by_coord((0,))
            at = chunk.byte_offset + int(victim["payload_offset"])
        data = bytearray(path.read_bytes())
        data[at] ^= 0x40
        path.write_bytes(bytes(data))
        with self.assertRaises(evfile.EventFileError) as caught:
            list(h5events.Reader(path))
        e = caught.exception
        self.assertEqual((e.status, e.event), (evfile.FRAME, int(victim["event_id"])))
        self.assertIn("frame checksum mismatch, source 2", str(e))
        self.assertIn(path.name, str(e))
        with self.assertRaises(evfile.EventFileError) as caught:
            h5events.check_file(path)
