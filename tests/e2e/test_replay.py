"""sourced --replay RUN_DIR: real sources send what a run recorded
(docs/event-file-format.md) through a real reader to a real builder. The
recording is written with analysis/evfile.py from the deterministic
generator's payloads, as two builders record a run of missing_every=7 (only
complete events, batches of 64 alternating between builders/0 and
builders/1), so refbuild, which knows the generator, checks every replayed
event's payload CRC: the replay is byte for byte the original. And the bad
recordings: a damaged file, a file left open, a payload over --payload, no
event file, a fault option beside --replay, each refused by name before
anything is sent."""

from __future__ import annotations

import sys
from pathlib import Path

from harness import E2ETestCase

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
import evfile  # noqa: E402
import refbuild  # noqa: E402

SEED, RUN, SOURCES, EVENTS, PAYLOAD, MISSING, BATCH = 9, 5, 2, 3000, 64, 7, 64


def record_run(root: Path, payload: int = PAYLOAD) -> int:
    """Writes the recording; returns how many events it holds."""
    per_builder: dict[int, list[evfile.Event]] = {0: [], 1: []}
    for e in range(EVENTS):
        if any(refbuild.is_omitted(SEED, RUN, e, s, MISSING) for s in range(SOURCES)):
            continue
        frags = [evfile.Fragment(s, e, e, 1000 + e, refbuild.payload(SEED, RUN, e, s, payload),
                                 run=RUN) for s in range(SOURCES)]
        per_builder[(e // BATCH) % 2].append(evfile.Event(RUN, e, frags))
    for b, events in per_builder.items():
        d = root / "builders" / str(b)
        d.mkdir(parents=True)
        # Two files per builder, as a roll at a size would make them.
        half = len(events) // 2
        for seq, part in enumerate((events[:half], events[half:])):
            header = evfile.FileHeader(run=RUN, builder_id=b, sources=SOURCES, file_seq=seq)
            (d / f"run{RUN:06d}_b{b}_s0000_f{seq:04d}.dat").write_bytes(
                evfile.encode_file(header, part))
    return sum(len(v) for v in per_builder.values())


class ReplayTest(E2ETestCase):
    needs_daemons = True

    def run_replay(self, recording: Path, events=EVENTS, payload=PAYLOAD):
        h = self.h
        builder, ports = h.start_builder(run=RUN, sources=SOURCES, readers=1, events=events)
        reader, rport = h.start_reader(id=0, run=RUN, sources=range(SOURCES), builder=ports)
        sources = [h.start_source(id=s, run=RUN, seed=1, events=events, payload=payload,
                                  rate=20000, reader_port=rport, builder=ports,
                                  replay=recording) for s in range(SOURCES)]
        return builder, reader, sources

    def test_a_replayed_run_is_the_recorded_one_byte_for_byte(self):
        recording = self.h.path("recorded")
        held = record_run(recording)
        builder, reader, sources = self.run_replay(recording)
        self.assertEqual(self.h.wait(builder, 60), 0, builder.tail())
        for p in [reader, *sources]:
            self.assertEqual(self.h.wait(p, 15), 0, p.tail())
        self.assertIn(f"replays {recording}: {held} of its fragments", sources[0].log())
        self.assertIn(f"in {held} records of 4 files", sources[0].log())
        # refbuild computes the original run's events from the generator: the
        # replayed ones must have its payloads (their CRCs) exactly.
        no_params = self.h.path("no-params.json")
        no_params.write_text("{}")
        r = self.h.refbuild(self.h.dir / "run", "--params", no_params,
                            "--seed", SEED, "--run", RUN, "--sources", SOURCES, "--events",
                            EVENTS, "--payload", PAYLOAD, "--missing-every", MISSING)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(f"matched={held} missing=0 unexpected=0 crc-mismatch=0", r.output)
        self.h.assert_clean()

    def refused(self, recording: Path, message: str, payload=PAYLOAD):
        h = self.h
        builder, ports = h.start_builder(run=RUN, sources=1, readers=1, events=EVENTS)
        reader, rport = h.start_reader(id=0, run=RUN, sources=(0,), builder=ports)
        source = h.start_source(id=0, run=RUN, seed=1, events=EVENTS, payload=payload,
                                rate=20000, reader_port=rport, builder=ports,
                                replay=recording)
        self.assertNotEqual(h.wait(source, 30), 0)
        self.assertIn(message, source.log())
        for p in (builder, reader):
            h.stop(p)

    def test_a_damaged_recording_is_refused_by_name(self):
        recording = self.h.path("recorded")
        record_run(recording)
        f = recording / "builders" / "1" / f"run{RUN:06d}_b1_s0000_f0001.dat"
        data = bytearray(f.read_bytes())
        data[400] ^= 0x10
        f.write_bytes(bytes(data))
        self.refused(recording, f"--replay: {f}: record checksum mismatch at offset")

    def test_a_file_left_open_is_refused(self):
        recording = self.h.path("recorded")
        record_run(recording)
        f = recording / "builders" / "0" / f"run{RUN:06d}_b0_s0000_f0000.dat"
        f.write_bytes(f.read_bytes()[:-evfile.TRAILER_BYTES])
        self.refused(recording, f"--replay: {f}: truncated at offset")

    def test_a_payload_over_the_limit_is_refused(self):
        recording = self.h.path("recorded")
        record_run(recording)
        self.refused(recording, "holds a payload of 64 bytes, over --payload 32", payload=32)

    def test_no_recording_is_refused(self):
        empty = self.h.path("empty")
        empty.mkdir()
        self.refused(empty, f"--replay: {empty}: no event file (*.dat) in it")

    def test_faults_beside_replay_are_refused(self):
        r = self.h.run("sourced-faults", [self.h.bin / "sourced", "--id", 0, "--run", 1,
                                        "--events", 10, "--payload", 8, "--rate", 0,
                                        "--connect", "127.0.0.1:1", "--control", "127.0.0.1:1",
                                        "--replay", self.h.dir, "--missing-every", 3], 30)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("--replay sends what was recorded: it takes none of --missing-every",
                      r.output)
