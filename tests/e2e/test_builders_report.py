"""What the hub of several builders reports (docs/BUILDERS.md, docs/METRICS.md):
real daemons on one host, two builders behind a hub. A source whose clock
is 5 ms behind has its latencies corrected by each builder with the clock
the hub sends it, the uncertainty merged into metrics.json; the rates and
CPU cost come from every process; the summary names the hub and each
builder; the builders' sections carry a latency summary, not raw buckets."""

from __future__ import annotations

import json

from harness import E2ETestCase, read_jsonl
from test_builders import builders_topology

INJECTED_NS = 5_000_000   # source 1's clock behind the others' by this


class HubReportTest(E2ETestCase):
    needs_daemons = True

    def test_a_source_clock_offset_corrected_per_builder(self) -> None:
        topo = builders_topology(2, events=6000, timeout_ms=10000)
        topo["run"]["rate"] = 4000   # paced: the clock rounds run while events flow
        topo["source"] = [{"id": 1, "extra": ["--clock-offset-ns", str(-INJECTED_NS)]}]
        r = self.h.daqrun(topo, timeout_s=240)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        for b in range(2):
            d = r.run_dir / "builders" / str(b)
            lat = [e["latency_ns"] for e in read_jsonl(d / "events.jsonl")]
            self.assertTrue(lat, f"builder {b} recorded nothing")
            # Source 1's timestamps are the earliest of every event:
            # uncorrected, every latency would be 5 ms too long.
            lat.sort()
            self.assertLess(lat[len(lat) // 2], INJECTED_NS // 2, f"builder {b}")
            self.assertGreater(lat[0], 0, f"builder {b}")
            self.assertNotIn("ignoring unexpected clock", (r.run_dir / "logs" /
                                                           f"builder-{b}.log").read_text())
            own = m["builders"][str(b)]["counters"]["builder"]
            self.assertEqual(own["negative_latencies"], 0, own)
            self.assertGreater(own["clocks_received"], 0, own)
        lat = m["latency"]
        self.assertEqual(lat["unbounded_samples"], 0, lat)
        self.assertIsNotNone(lat["uncertainty_ns"], lat)
        self.assertLess(lat["uncertainty_ns"], INJECTED_NS // 10, lat)
        self.assertTrue(lat["clock_corrected"], lat)
        self.assertLess(lat["max_ns"], 1_000_000_000, lat)
        self.assertRegex(r.output, r"latency: p50 .*\(\+/- [0-9.]+ [num]?s")
        self.check_rates_and_cpu(m, r.output)
        self.check_builder_sections(m, r.run_dir)
        self.assertRegex(r.output, r"peak RSS: hub [0-9.]+ MiB, .*builder 0 [0-9.]+ MiB, "
                                   r"builder 1 [0-9.]+ MiB")
        self.h.assert_clean()

    def check_rates_and_cpu(self, m: dict, output: str) -> None:
        rates = m["rates"]
        self.assertGreater(rates["build_duration_s"], 0.5, rates)   # 6000 events at 4000/s
        self.assertGreater(rates["accepted_events_per_s"], 0, rates)
        self.assertAlmostEqual(rates["accepted_events_per_s"] * rates["build_duration_s"],
                               m["counters"]["builder"]["events_accepted"], delta=2)
        self.assertNotIn("accepted 0 events/s", output)
        cpu, procs = m["cpu"], m["processes"]
        self.assertTrue(cpu["all_processes_reported"], procs)
        roles = sorted(p["role"] for p in procs)
        self.assertEqual(roles, ["builder", "builder", "hub", "reader", "reader"] + ["source"] * 4)
        total = sum(p["cpu_user_s"] + p["cpu_sys_s"] for p in procs)
        self.assertAlmostEqual(cpu["total_s"], total, delta=0.001 * len(procs))
        self.assertEqual(cpu["fragments"], 4 * 6000)
        self.assertAlmostEqual(cpu["us_per_fragment"], total * 1e6 / cpu["fragments"], delta=0.01)

    def check_builder_sections(self, m: dict, run_dir) -> None:
        for b, section in m["builders"].items():
            groups = section["counters"]
            self.assertFalse([g for g in groups if g == "hist" or g.startswith("hist.")], groups)
            self.assertIn("builder", groups)
            self.assertIn("reader.0", groups)
            lat = section["latency"]
            self.assertEqual(lat["samples"], groups["builder"]["events_written"], lat)
            self.assertLessEqual(lat["p50_ns"], lat["p99_ns"])
            self.assertLessEqual(lat["p99_ns"], lat["max_ns"] * 1.07)
            self.assertIsNotNone(lat["uncertainty_ns"], lat)
            full = json.loads((run_dir / "builders" / b / "builder.json").read_text())
            self.assertIn("hist.0", full["groups"])
