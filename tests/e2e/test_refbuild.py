"""analysis/refbuild.py: its self-check, and that it catches every kind of
difference in an events.jsonl, or in the records of several builders
(builders/B/), where no event may appear twice. The reference run is the
"run" section of tests/data/vectors.json, whose accepted list was computed
independently of refbuild; no daemon is needed."""

from __future__ import annotations

import json
import random
import re
import sys
import time

from harness import REFBUILD, VECTORS, E2ETestCase, read_json

sys.path.insert(0, str(REFBUILD.parent))
import refbuild  # noqa: E402


class RunDir(E2ETestCase):
    """A run directory of the reference run, and refbuild's verdict on it."""

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


class RefbuildTest(RunDir):
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


class RefbuildBuildersTest(RunDir):
    """A run of several builders: RUN_DIR/builders/B/{events,expired}.jsonl,
    checked as one run, no event ID twice; constructed run directories."""

    BATCH = 16

    def setUp(self) -> None:
        super().setUp()
        p = self.params
        # Expected from the one-at-a-time reference (spec §2), not refbuild's
        # fast path: events some sources omitted and others sent.
        self.partial = [e for e in range(p["first_event"], p["first_event"] + p["events"])
                        if 0 < sum(refbuild.is_omitted(p["seed"], p["run"], e, s,
                                                       p["missing_every"])
                                   for s in range(p["sources"])) < p["sources"]]
        self.assertTrue(self.partial)
        self.write_params("static")

    def write_params(self, routing: str, builders: int = 2) -> None:
        run = dict(self.params, routing=routing, batch=self.BATCH)
        (self.run_dir / "params.json").write_text(json.dumps({
            "run": run, "builders": [{"id": b, "out": f"builders/{b}"}
                                     for b in range(builders)]}))

    def owner(self, event: int) -> int:
        return (event // self.BATCH) % 2

    def write_builders(self, events: dict[int, list[tuple[int, int]]],
                       expired: dict[int, list[int]]) -> None:
        bytes_per_event = self.params["sources"] * self.params["payload"]
        for b in sorted(set(events) | set(expired)):
            d = self.run_dir / "builders" / str(b)
            d.mkdir(parents=True, exist_ok=True)
            (d / "events.jsonl").write_text("".join(
                json.dumps({"run": self.params["run"], "event": e, "crc": c,
                            "bytes": bytes_per_event, "latency_ns": 1000}) + "\n"
                for e, c in events.get(b, [])))
            (d / "expired.jsonl").write_text("".join(
                json.dumps({"run": self.params["run"], "event": e, "reason": "timeout",
                            "missing": [0]}) + "\n" for e in expired.get(b, [])))

    def split(self) -> tuple[dict, dict]:
        """The reference's records, each in its static builder."""
        events: dict[int, list] = {0: [], 1: []}
        expired: dict[int, list] = {0: [], 1: []}
        for e, c in self.accepted:
            events[self.owner(e)].append((e, c))
        for e in self.partial:
            expired[self.owner(e)].append(e)
        return events, expired

    def test_union_matches(self) -> None:
        events, expired = self.split()
        self.write_builders(events, expired)
        out = self.check(0, matched=len(self.accepted), missing=0, duplicate=0,
                         expired_mismatch=0, misplaced=0)
        self.assertIn(f"builder 0: {len(events[0])} events, {len(expired[0])} expired", out)
        self.assertIn(f"builder 1: {len(events[1])} events, {len(expired[1])} expired", out)
        self.assertIn("static routing, batch 16", out)
        self.assertIn("PASS refbuild", out)
        self.assertIn("(2 builders)", out)

    def test_manager_routing_takes_any_split(self) -> None:
        self.write_params("manager")
        rng = random.Random(3)
        events: dict[int, list] = {0: [], 1: []}
        expired: dict[int, list] = {0: [], 1: []}
        for e, c in self.accepted:
            events[rng.randrange(2)].append((e, c))
        for e in self.partial:
            expired[rng.randrange(2)].append(e)
        self.write_builders(events, expired)
        out = self.check(0, matched=len(self.accepted), misplaced=0)
        self.assertNotIn("static routing", out)

    def test_event_recorded_by_two_builders(self) -> None:
        events, expired = self.split()
        twice = events[0][2]
        events[1].append(twice)
        self.write_builders(events, expired)
        out = self.check(1, matched=len(self.accepted), duplicate=1, missing=0)
        self.assertIn(f"duplicate: event {twice[0]}: recorded by builder 0 (line 3) and "
                      f"recorded by builder 1 (line {len(events[1])})", out)
        self.assertIn("FAIL refbuild", out)

    def test_event_recorded_and_expired(self) -> None:
        events, expired = self.split()
        e = events[1][0][0]
        expired[0].append(e)
        self.write_builders(events, expired)
        out = self.check(1, duplicate=1, missing=0, expired_mismatch=0)
        self.assertRegex(out, rf"duplicate: event {e}: recorded by builder 1 \(line 1\) and "
                              rf"expired by builder 0 \(line \d+\)")

    def test_event_missing_from_every_builder(self) -> None:
        events, expired = self.split()
        gone = events[1].pop(0)
        self.write_builders(events, expired)
        out = self.check(1, matched=len(self.accepted) - 1, missing=1)
        self.assertIn(f"missing: event {gone[0]} (crc {gone[1]}) not in any builder's "
                      f"events.jsonl", out)

    def test_incomplete_event_not_expired(self) -> None:
        events, expired = self.split()
        gone = expired[0].pop()
        self.write_builders(events, expired)
        out = self.check(1, matched=len(self.accepted), expired_mismatch=1)
        self.assertIn(f"event {gone} lacks fragments of some sources but no builder expired it",
                      out)

    def test_complete_event_expired(self) -> None:
        events, expired = self.split()
        e, _ = events[0].pop(0)
        expired[0].append(e)
        self.write_builders(events, expired)
        out = self.check(1, missing=1, expired_mismatch=1)
        self.assertIn(f"event {e} expired, but every source sent it or none did", out)

    def test_static_routing_wrong_builder(self) -> None:
        events, expired = self.split()
        moved = events[0].pop(0)
        events[1].append(moved)
        self.write_builders(events, expired)
        out = self.check(1, matched=len(self.accepted), misplaced=1)
        self.assertIn(f"misplaced: event {moved[0]} recorded by builder 1; static routing "
                      f"gives it to builder 0", out)
        # The same records under manager routing are a correct run.
        self.write_params("manager")
        self.check(0, misplaced=0)

    def test_missing_builder_folder(self) -> None:
        events, expired = self.split()
        self.write_builders({0: events[0]}, {0: expired[0]})
        r = self.h.refbuild(self.run_dir)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("no folder of builder 1 (a run of 2 builders has builders/0 .. "
                      "builders/1)", r.output)

    def test_builder_without_events_file(self) -> None:
        events, expired = self.split()
        self.write_builders(events, expired)
        (self.run_dir / "builders" / "1" / "events.jsonl").unlink()
        r = self.h.refbuild(self.run_dir)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("builder 1 wrote no events.jsonl", r.output)

    def test_malformed_expired_line(self) -> None:
        events, expired = self.split()
        self.write_builders(events, expired)
        with open(self.run_dir / "builders" / "0" / "expired.jsonl", "a") as f:
            f.write('{"run": 1, "reason": "timeout"}\n')
        r = self.h.refbuild(self.run_dir)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("expired.jsonl:", r.output)
        self.assertIn("field 'event' missing", r.output)

    # A builder the hub gave up (docs/BUILDERS.md, "A given-up builder is
    # fenced"): metrics.json names it with the decided_below of its last
    # token and the events the books count lost with it.

    def give_up_builder_1(self, short_by: int | None = None) -> tuple[int, int, int]:
        """Builder 1 keeps every record, as a killed builder would, but the
        hub gave it up at the middle of its IDs: (fence, its records past
        the fence, the books' lost: all its IDs from the fence on, or its
        records past the fence less short_by)."""
        events, expired = self.split()
        self.write_builders(events, expired)
        own = sorted(e for e, _ in events[1]) + sorted(expired[1])
        fence = sorted(own)[len(own) // 2]
        past = sum(1 for e in own if e >= fence)
        p = self.params
        lost = sum(1 for e in range(fence, p["first_event"] + p["events"])
                   if self.owner(e) == 1) if short_by is None else past - short_by
        (self.run_dir / "metrics.json").write_text(json.dumps({"builders": {
            "0": {"lost_reason": None, "decided_below": 0, "lost": 0},
            "1": {"lost_reason": "died", "decided_below": fence, "lost": lost}}}))
        return fence, past, lost

    def test_given_up_builder_counts_below_its_fence(self) -> None:
        fence, past, lost = self.give_up_builder_1()
        out = self.check(0, missing=0, duplicate=0, expired_mismatch=0, past_fence=past,
                         lost_with_builders=past)
        self.assertIn(f"builder 1 was given up: its records count below event {fence}; the "
                      f"books count {lost} of its events lost", out)
        self.assertRegex(out, rf"past-fence: event {fence} (recorded|expired) by builder 1, "
                              rf"given up at event {fence}: not counted")
        self.assertIn("PASS refbuild", out)

    def test_given_up_builder_loss_too_small(self) -> None:
        """The books' loss cannot cover what is absent: nothing is excused,
        every absent event is missing."""
        fence, past, lost = self.give_up_builder_1(short_by=1)
        out = self.check(1, past_fence=past, lost_with_builders=0)
        self.assertGreater(self.counts(out)["missing"], 0)
        self.assertIn("FAIL refbuild", out)

    def test_a_run_in_progress_is_refused(self) -> None:
        events, expired = self.split()
        self.write_builders(events, expired)
        (self.run_dir / "builders" / "1" / "running.json").write_text('{"state": "running"}')
        r = self.h.refbuild(self.run_dir)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn(f"FAIL refbuild {self.run_dir}: {self.run_dir}/builders/1/running.json "
                      "says the run is in progress", r.output)
