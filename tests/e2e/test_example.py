"""examples/minimal_source.c against real daemons: it takes the place of a
sourced in a run of builderd and readoutd, beside a real sourced or alone,
and the run must balance and the reference builder agree."""

from __future__ import annotations

import os
from pathlib import Path

from harness import REPO, E2ETestCase, read_metrics, unbalanced

EXAMPLES = Path(os.environ.get("ES_EXAMPLES", REPO / "build" / "examples"))
EXAMPLE = EXAMPLES / "minimal_source"
EVENTS = 3000
PAYLOAD = 48
SEED = 11


class MinimalSourceTest(E2ETestCase):
    needs_daemons = True

    def setUp(self) -> None:
        super().setUp()
        if not os.access(EXAMPLE, os.X_OK):
            self.skipTest(f"no {EXAMPLE} (make examples, or set ES_EXAMPLES)")

    def run_with_example(self, real_sources: int) -> tuple[dict, str]:
        """A run of real_sources sourced (ids 0..) and the example as the last
        source, all behind one readoutd; returns metrics.json and the
        example's log."""
        h, run = self.h, 5
        sources = real_sources + 1
        out = h.dir / "run"
        out.mkdir()
        builder, bports = h.start_builder(run=run, sources=sources, readers=1, out=out,
                                          events=EVENTS, first_event=0)
        reader, rport = h.start_reader(id=0, run=run, sources=range(sources), builder=bports)
        real = [h.start_source(id=s, run=run, seed=SEED, events=EVENTS, payload=PAYLOAD,
                               reader_port=rport, builder=bports) for s in range(real_sources)]
        example = h.start("example", [EXAMPLE, "--id", real_sources, "--run", run,
                                      "--events", EVENTS, "--payload", PAYLOAD, "--seed", SEED,
                                      "--data", f"127.0.0.1:{rport}",
                                      "--control", f"127.0.0.1:{bports['control']}"])
        self.assertEqual(h.wait(builder, 120), 0, builder.tail(60))
        for p in [reader, example] + real:
            self.assertEqual(h.wait(p, 30), 0, f"{p.name}:\n{p.tail()}")
        m = read_metrics(out)
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_complete"], EVENTS, m["counters"]["builder"])
        r = h.refbuild("--events-file", out / "events.jsonl", "--seed", SEED, "--run", run,
                       "--sources", sources, "--events", EVENTS, "--payload", PAYLOAD)
        self.assertEqual(r.returncode, 0, r.describe())
        h.assert_clean()
        return m, example.log()

    def test_beside_a_real_source(self) -> None:
        m, log = self.run_with_example(real_sources=1)
        self.assertIn(f"Source 1: {EVENTS} fragments sent; END reported", log)
        self.assertIn("the builder ended the run with status 0", log)
        names = [e["name"] for e in m["equations"]]
        self.assertIn("1 source 1: generated = omitted + sent + abandoned + cut by stop", names)
        self.assertIn("2 source 1: frames on wire = received by reader 0", names)

    def test_alone(self) -> None:
        _, log = self.run_with_example(real_sources=0)
        self.assertIn(f"Source 0: {EVENTS} fragments sent; END reported", log)

    def test_refused_without_the_run_key(self) -> None:
        """A builder with a run key refuses the example's control HELLO when
        the example has none, and the example says so and fails."""
        h = self.h
        key = h.path("run.key")
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        builder, bports = h.start_builder(run=5, sources=1, readers=1, events=10, first_event=0,
                                          run_key_file=key, peer_timeout_ms=3000)
        example = h.start("example", [EXAMPLE, "--id", 0, "--run", 5, "--events", 10,
                                      "--data", "127.0.0.1:9", "--control",
                                      f"127.0.0.1:{bports['control']}"])
        self.assertEqual(h.wait(example, 30), 1, example.tail())
        self.assertIn("auth_failed", example.log())
        h.stop(builder)
        h.assert_clean()
