"""Whole runs of the real daemons through deploy/daqrun, checked against the
independent reference builder. Skipped when the binaries are not built."""

from __future__ import annotations

import sys

from harness import REPO, E2ETestCase, read_jsonl, read_metrics, topology, unbalanced

sys.path.insert(0, str(REPO / "analysis"))
import refbuild  # noqa: E402

EVENTS = 20000
PAYLOAD = 64
SOURCES = 4


class RunTest(E2ETestCase):
    needs_daemons = True

    def run_checked(self, **run_keys):
        """A 4-source, 2-reader unpaced run that must succeed, balance, match
        refbuild and leave nothing behind."""
        r = self.h.daqrun(topology(events=EVENTS, payload=PAYLOAD, rate=0, **run_keys),
                          timeout_s=300)
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output, "daqrun did not run refbuild:\n" + r.output)
        metrics = self.assertBalanced(r)
        self.assertRefbuildPasses(r.run_dir)
        self.h.assert_clean()
        return r, metrics

    def check_processes(self, metrics: dict) -> None:
        procs = metrics.get("processes")
        self.assertIsInstance(procs, list, "metrics.json has no processes list")
        roles = sorted(p.get("role") for p in procs)
        self.assertEqual(roles, ["builder"] + ["reader"] * 2 + ["source"] * SOURCES,
                         f"processes in metrics.json: {procs}")

    def test_clean_run(self) -> None:
        r, metrics = self.run_checked()
        events = read_jsonl(r.run_dir / "events.jsonl")
        self.assertEqual(len(events), EVENTS)
        self.assertEqual(read_jsonl(r.run_dir / "expired.jsonl"), [])
        for e in events[:100]:
            self.assertEqual(e.get("bytes"), SOURCES * PAYLOAD, e)
        self.check_processes(metrics)

    def test_missing_every_7(self) -> None:
        # Incomplete events wait for timeout_ms; a large window keeps the
        # admission limit from stalling the run on them for long.
        r, metrics = self.run_checked(missing_every=7, timeout_ms=1000, max_inflight=8192)
        self.check_processes(metrics)
        # Every incomplete event that any source sent must retire as expired,
        # missing exactly the sources that omitted it (spec §2).
        omitted = {}
        for e in range(EVENTS):
            gone = [s for s in range(SOURCES) if refbuild.is_omitted(1, 1, e, s, 7)]
            if gone and len(gone) < SOURCES:
                omitted[e] = gone
        expired = {x["event"]: x for x in read_jsonl(r.run_dir / "expired.jsonl")}
        self.assertEqual(sorted(expired), sorted(omitted),
                         "expired.jsonl does not hold exactly the incomplete events")
        wrong = [(e, expired[e].get("missing"), m) for e, m in omitted.items()
                 if expired[e].get("missing") != m][:10]
        self.assertEqual(wrong, [], "expired events with wrong missing lists "
                                    "(event, listed, expected)")

    def test_started_by_hand(self) -> None:
        """The harness's own start helpers (no daqrun): builder, then two
        readers, then four sources, each on ephemeral ports."""
        h, events = self.h, 5000
        out = h.dir / "run"
        out.mkdir()
        builder, bports = h.start_builder(run=3, sources=SOURCES, readers=2, out=out,
                                          events=events, first_event=0)
        readers = [h.start_reader(id=i, run=3, sources=srcs, builder=bports)
                   for i, srcs in enumerate(((0, 1), (2, 3)))]
        sources = [h.start_source(id=s, run=3, seed=9, events=events, payload=32,
                                  reader_port=readers[s // 2][1], builder=bports)
                   for s in range(SOURCES)]
        self.assertEqual(h.wait(builder, 120), 0, builder.tail())
        for p in [r for r, _ in readers] + sources:
            self.assertEqual(h.wait(p, 30), 0, f"{p.name}:\n{p.tail()}")
        m = read_metrics(out)
        self.assertTrue(m["balanced"], unbalanced(m))
        r = h.refbuild("--events-file", out / "events.jsonl", "--seed", 9, "--run", 3,
                       "--sources", SOURCES, "--events", events, "--payload", 32)
        self.assertEqual(r.returncode, 0, r.describe())
        h.assert_clean()
