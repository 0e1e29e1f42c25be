"""The event file format (docs/event-file-format.md) from Python's side:
analysis/evfile.py reproduces every conformance vector of
tests/data/evfile-vectors.json (which the C codec's unit test reproduces
too), and analysis/evdump.py lists, checks, shows and recovers files, naming
the file, offset and event of every kind of damage: a truncated file, a
flipped byte, a file of another format version, a file that is not an event
file, a file left open by a killed writer. No daemon is needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness import E2ETestCase

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "tests" / "data" / "evfile-vectors.json"
EVDUMP = REPO / "analysis" / "evdump.py"
sys.path.insert(0, str(REPO / "analysis"))
import evfile  # noqa: E402


def vectors() -> dict:
    return json.loads(VECTORS.read_text())


def evdump(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EVDUMP), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


class VectorsTest(E2ETestCase):
    def test_headers_and_records_encode_to_the_vectors(self):
        v = vectors()
        for entry in v["file_header"]:
            h = evfile.FileHeader(run=entry["run"], builder_id=entry["builder_id"],
                                  sources=entry["sources"], file_seq=entry["file_seq"],
                                  slice=entry["slice"], created_ns=entry["created_ns"],
                                  config_sha256=bytes.fromhex(entry["config_sha256_hex"]),
                                  software=entry["software"])
            self.assertEqual(evfile.encode_header(h).hex(), entry["hex"])
        for entry in v["record"]:
            frames = bytes.fromhex(entry["frames_hex"])
            frags, at = [], 0
            while at < len(frames):
                f, n = evfile.parse_frame(frames, at, len(frames), "vector", entry["event_id"])
                frags.append(f)
                at += n
            e = evfile.Event(entry["run"], entry["event_id"], frags, entry["flags"])
            self.assertEqual(e.record().hex(), entry["hex"])

    def test_every_file_vector_gets_its_verdict(self):
        for entry in vectors()["file"]:
            with self.subTest(entry["name"]):
                data = bytes.fromhex(entry["hex"])
                status, offset, event, count, r = "ok", 0, None, 0, None
                try:
                    r = evfile.Reader("vector", data=data, max_payload=entry["max_payload"])
                    for _ in r:
                        count += 1
                except evfile.EventFileError as e:
                    status, offset, event = e.status, e.offset, e.event
                self.assertEqual(status, entry["status"])
                self.assertEqual(offset, entry["bad_offset"])
                self.assertEqual(event is not None, entry["bad_event_known"])
                if event is not None:
                    self.assertEqual(event, entry["bad_event"])
                self.assertEqual(count, entry["events"])
                self.assertEqual(r.good_bytes if r else 0, entry["good_bytes"])
                self.assertEqual(bool(r and r.complete), entry["complete"])


class EvdumpTest(E2ETestCase):
    def setUp(self):
        super().setUp()
        self.good = bytes.fromhex(vectors()["file"][0]["hex"])
        self.run_dir = self.h.dir / "run"
        self.files = self.run_dir / "builders" / "0"
        self.files.mkdir(parents=True)

    def put(self, name: str, data: bytes) -> Path:
        p = self.files / name
        p.write_bytes(data)
        return p

    def test_lists_checks_and_shows_a_good_run(self):
        self.put("run000042_b0_f0000.dat", self.good)
        r = evdump(self.run_dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("4 events, events 100..104, 1053 bytes, closed", r.stdout)
        r = evdump("--check", self.run_dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 files, 4 events verified, 0 damaged", r.stdout)
        r = evdump("--show", 103, self.run_dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("event 103 of run 42", r.stdout)
        self.assertEqual(r.stdout.count("  source "), 3)
        r = evdump("--show", 102, self.run_dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("event 102 is in none of 1 files", r.stderr)

    def test_a_flipped_payload_byte_names_the_file_offset_and_event(self):
        damaged = bytearray(self.good)
        damaged[524 + 36 + 42 + 10] ^= 0x01          # a payload byte of event 103
        p = self.put("run000042_b0_f0000.dat", bytes(damaged))
        r = evdump("--check", self.run_dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{p}: offset 524, event 103: record checksum mismatch", r.stderr)
        self.assertIn("1 damaged", r.stdout)

    def test_a_truncated_file_is_named_and_not_taken_for_whole(self):
        self.put("run000042_b0_f0000.dat", self.good[:700])
        r = evdump("--check", self.run_dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("offset 524, event 103: truncated", r.stderr)

    def test_another_format_version_is_refused_by_name(self):
        v2 = evfile.encode_header(evfile.FileHeader(run=42, format_version=2)) + \
            self.good[evfile.HEADER_BYTES:]
        self.put("run000042_b0_f0000.dat", v2)
        r = evdump("--check", self.run_dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("unknown format version (format version 2, this reader knows 1)",
                      r.stderr)

    def test_not_an_event_file(self):
        self.put("run000042_b0_f0000.dat", b"\x89PNG\r\n\x1a\n" + bytes(200))
        r = evdump("--check", self.run_dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not an event file", r.stderr)

    def test_recover_keeps_the_complete_records_of_a_file_left_open(self):
        open_file = self.put("run000042_b0_f0001.dat.writing", self.good[:-evfile.TRAILER_BYTES - 25])
        r = evdump(self.run_dir)
        self.assertIn("open: 3 complete records", r.stdout)
        r = evdump("--recover", open_file)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept 3 events (100..103)", r.stdout)
        closed = self.files / "run000042_b0_f0001.dat"
        self.assertFalse(open_file.exists())
        info = evfile.check_file(closed)
        self.assertEqual(info["events"], 3)
        self.assertTrue(info["complete"])
        manifest = json.loads((self.files / "run000042_b0_f0001.dat.json").read_text())
        self.assertEqual((manifest["event_count"], manifest["first_event"], manifest["last_event"],
                          manifest["bytes"], manifest["recovered"]),
                         (3, 100, 103, closed.stat().st_size, True))
        self.assertEqual(manifest["file_crc"], info["trailer"]["file_crc"])
        # What recovery closed is byte for byte what a writer closing after
        # those three events writes.
        events = [e for e in evfile.Reader("good", data=self.good)][:3]
        header = evfile.Reader("good", data=self.good).header
        self.assertEqual(closed.read_bytes(), evfile.encode_file(header, events))

    def test_recover_refuses_a_closed_file_and_a_file_without_a_header(self):
        closed = self.put("run000042_b0_f0000.dat", self.good)
        r = evdump("--recover", closed)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a file left open", r.stderr)
        headless = self.put("run000042_b0_f0002.dat.writing", self.good[:60])
        r = evdump("--recover", headless)
        self.assertEqual(r.returncode, 1)
        self.assertIn("nothing recovered", r.stderr)
        self.assertTrue(headless.exists(), "left as it was")

    def test_usage_errors(self):
        r = evdump(self.h.dir / "nowhere")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such file or directory", r.stderr)
        r = evdump(self.run_dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no event files", r.stderr)
