"""analysis/refbuild.py: its self-check, and that it catches every kind of
difference in an events.jsonl. The reference run is the "run" section of
tests/data/vectors.json, whose accepted list was computed independently of
refbuild; no daemon is needed."""

from __future__ import annotations

import json
import random
import re
import time

from harness import VECTORS, E2ETestCase, read_json


class RefbuildTest(E2ETestCase):
    def setUp(self) -> None:
        super().setUp()
        v = read_json(VECTORS)["run"]
        self.params = {k: v[k] for k in ("seed", "run", "sources", "first_event", "events",
                                         "payload", "missing_every", "filter_modulo")}
        self.accepted = [(a["event"], a["crc"]) for a in v["accepted"]]
        self.run_dir = self.h.dir / "run"
        self.run_dir.mkdir()
        (self.run_dir / "params.json").write_text(json.dumps({"run": self.params}))

    def write_events(self, events: list[tuple[int, int]], extra: list[str] = ()) -> None:
        bytes_per_event = self.params["sources"] * self.params["payload"]
        lines = [json.dumps({"run": self.params["run"], "event": e, "crc": c,
                             "bytes": bytes_per_event, "latency_ns": 1000})
                 for e, c in events]
        (self.run_dir / "events.jsonl").write_text("\n".join(lines + list(extra)) + "\n")

    def counts(self, output: str) -> dict[str, int]:
        line = next((l for l in output.splitlines() if l.startswith("matched=")), None)
        self.assertIsNotNone(line, f"no counts line in:\n{output}")
        return {k: int(v) for k, v in re.findall(r"([a-z-]+)=(\d+)", line)}

    def check(self, expect_rc: int, **expect_counts: int) -> str:
        r = self.h.refbuild(self.run_dir)
        self.assertEqual(r.returncode, expect_rc, r.describe())
        if expect_counts:
            got = self.counts(r.output)
            for k, v in expect_counts.items():
                self.assertEqual(got[k.replace("_", "-")], v, f"{k} in:\n{r.output}")
        return r.output

    def test_vectors(self) -> None:
        r = self.h.refbuild("--vectors", VECTORS)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("0 failed", r.output)
        self.assertIn("PASS", r.output)

    def test_exact_match_in_any_order(self) -> None:
        events = list(self.accepted)
        random.Random(1).shuffle(events)
        self.write_events(events)
        out = self.check(0, matched=len(events), missing=0, unexpected=0, crc_mismatch=0)
        self.assertIn("PASS", out)

    def test_missing_event(self) -> None:
        self.write_events(self.accepted[:5] + self.accepted[6:])
        out = self.check(1, matched=len(self.accepted) - 1, missing=1)
        self.assertIn(f"event {self.accepted[5][0]}", out)
        self.assertIn("FAIL", out)

    def test_unexpected_event(self) -> None:
        ids = {e for e, _ in self.accepted}
        extra = next(e for e in range(self.params["events"]) if e not in ids)
        self.write_events(self.accepted + [(extra, 12345)])
        self.check(1, matched=len(self.accepted), unexpected=1, missing=0)

    def test_wrong_crc(self) -> None:
        events = list(self.accepted)
        events[3] = (events[3][0], events[3][1] ^ 1)
        self.write_events(events)
        self.check(1, matched=len(events) - 1, crc_mismatch=1, missing=0, unexpected=0)

    def test_duplicate_line(self) -> None:
        self.write_events(self.accepted + [self.accepted[0]])
        self.check(1, matched=len(self.accepted), duplicate=1)

    def test_wrong_bytes_field(self) -> None:
        self.write_events(self.accepted[1:], extra=[json.dumps(
            {"run": self.params["run"], "event": self.accepted[0][0],
             "crc": self.accepted[0][1], "bytes": 1})])
        self.check(1, field_mismatch=1)

    def test_empty_run_fails(self) -> None:
        self.write_events([])
        self.check(1, matched=0, missing=len(self.accepted))

    def test_malformed_line_is_an_input_error(self) -> None:
        self.write_events(self.accepted, extra=["{not json"])
        r = self.h.refbuild(self.run_dir)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("events.jsonl:", r.output)

    def test_parameters_from_flags(self) -> None:
        self.write_events(self.accepted)
        (self.run_dir / "params.json").unlink()
        flags = []
        for k, v in self.params.items():
            flags += ["--" + k.replace("_", "-"), v]
        r = self.h.refbuild("--events-file", self.run_dir / "events.jsonl", *flags)
        self.assertEqual(r.returncode, 0, r.describe())
        # Another filter modulo changes the expected set: the same file fails.
        flags[flags.index("--filter-modulo") + 1] = 1
        r = self.h.refbuild("--events-file", self.run_dir / "events.jsonl", *flags)
        self.assertEqual(r.returncode, 1, r.describe())

    def test_missing_parameter_named(self) -> None:
        r = self.h.refbuild("--events-file", self.run_dir / "events.jsonl", "--seed", 1)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("--sources", r.output)

    def test_speed_200k_events(self) -> None:
        """200000 events x 4 sources x 256 B: expected set well under a minute."""
        t0 = time.monotonic()
        r = self.h.refbuild("--seed", 1, "--run", 1, "--sources", 4, "--events", 200000,
                            "--payload", 256, "--dump", self.h.dir / "expected.jsonl")
        elapsed = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("expect 200000 accepted", r.output)
        self.assertLess(elapsed, 30, f"refbuild took {elapsed:.1f} s")
