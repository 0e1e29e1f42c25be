"""builderd --probe-period-ms (docs/CLOCKS.md): between bursts the hub
exchanges one clock probe per peer over its UDP probe socket this often, so
a run of the same length at a period ten times longer sends about a tenth
of the probes, still balanced and with every estimate kept; a period out of
range is a usage error naming the flag."""

from __future__ import annotations

from harness import E2ETestCase, topology


def pings_per_second(metrics: dict) -> float:
    """The mean UDP and PING exchanges per peer per second of the run."""
    peers = metrics["clocks"]["peers"]
    pings = sum(p["inband"]["pings"] for p in peers) / len(peers)
    return pings / metrics["rates"]["build_duration_s"]


class ProbePeriodTest(E2ETestCase):
    def run_with(self, extra: list[str]) -> dict:
        doc = topology(events=6000, rate=2000)
        doc["builder"]["extra"] = extra
        r = self.h.daqrun(doc, timeout_s=120)
        self.assertRunOk(r)
        return self.assertBalanced(r)

    def test_a_longer_period_sends_fewer_probes(self) -> None:
        fast = pings_per_second(self.run_with([]))
        slow = pings_per_second(self.run_with(["--probe-period-ms", "100"]))
        # 10 ms: about 100 a second (and the bursts); 100 ms: about 10.
        self.assertGreater(fast, 50, fast)
        self.assertLess(slow, 25, slow)
        self.assertGreater(fast, 4 * slow, (fast, slow))

    def test_out_of_range_is_a_usage_error(self) -> None:
        r = self.h.run("builderd-bad", [self.h.bin / "builderd", "--probe-period-ms", "0"], 10)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("--probe-period-ms", r.output)
