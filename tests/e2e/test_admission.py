"""Credit-based admission under overload: unpaced sources, a small window.
With credits every event completes and nothing is evicted; without them the
window evicts events, and every loss is still accounted for."""

from __future__ import annotations

from harness import E2ETestCase, topology, unbalanced

EVENTS = 20000
WINDOW = 64


class AdmissionTest(E2ETestCase):
    needs_daemons = True

    def overload(self, **run):
        return topology(events=EVENTS, payload=64, rate=0, max_inflight=WINDOW,
                        timeout_ms=2000, **run)

    def test_admission_completes_every_event(self) -> None:
        r = self.h.daqrun(self.overload(), timeout_s=240)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        self.assertIn("PASS refbuild", r.output)
        c = m["counters"]["builder"]
        self.assertEqual(c["events_complete"], EVENTS, c)
        self.assertEqual(c["events_expired_window"], 0, c)
        self.assertEqual(c["window_slides"], 0, c)
        self.assertGreater(c["credits_sent"], 0, c)
        # The readers did hold sources back, and say for how long.
        held = [m["counters"][f"reader.{r // 2}.source.{r}"] for r in range(4)]
        self.assertGreater(sum(h["held_count"] for h in held), 0, held)
        self.assertGreater(sum(h["held_ns"] for h in held), 0, held)
        self.h.assert_clean()

    def test_without_admission_losses_are_counted(self) -> None:
        r = self.h.daqrun(self.overload(no_admission=True), timeout_s=240)
        m = r.metrics()
        self.assertTrue(m["balanced"], unbalanced(m))
        c = m["counters"]["builder"]
        self.assertEqual(c["events_complete"] + c["events_expired"] + c["events_unobserved"],
                         EVENTS)
        self.assertEqual(c["frags_unique"], 4 * c["events_complete"] + c["frags_in_expired"])
        # Losses are allowed here, but each lost event is in expired.jsonl.
        lines = (r.run_dir / "expired.jsonl").read_text().splitlines()
        self.assertEqual(len(lines), c["events_expired"])
        self.h.assert_clean()

    def test_missing_fragments_expire_by_timeout(self) -> None:
        """A source that omits fragments cannot stall the others: the
        incomplete events time out and the limit moves on."""
        r = self.h.daqrun(topology(events=EVENTS, payload=64, rate=0, max_inflight=256,
                                   timeout_ms=50, missing_every=7), timeout_s=240)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        self.assertIn("PASS refbuild", r.output)
        c = m["counters"]["builder"]
        self.assertGreater(c["events_expired_timeout"], 0, c)
        self.assertEqual(c["events_expired_window"], 0, c)
        self.h.assert_clean()

    def test_omitted_fragments_are_skipped_not_waited_for(self) -> None:
        """At the default timeouts an event a source omitted expires as
        skipped once the sources it lacks have sent later events, so none
        waits out the full timeout while holding every reader back."""
        r = self.h.daqrun(topology(events=EVENTS, payload=64, rate=0, max_inflight=256,
                                   missing_every=50), timeout_s=240)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        self.assertIn("PASS refbuild", r.output)
        c = m["counters"]["builder"]
        self.assertGreater(c["events_expired_skipped"], 0, c)
        self.assertEqual(c["events_expired_timeout"], 0, c)
        self.assertEqual(c["events_expired_window"], 0, c)
        self.assertEqual(c["frags_late"], 0, c)
        reasons = {line.split('"reason":"')[1].split('"')[0]
                   for line in (r.run_dir / "expired.jsonl").read_text().splitlines()}
        # The last few are still incomplete when every source has ended.
        self.assertLessEqual(reasons, {"skipped", "end_of_run"})
        self.assertIn(f"{c['events_expired_skipped']} skipped", r.output)
        self.h.assert_clean()

    def test_fragment_delayed_past_the_skip_timeout_is_late(self) -> None:
        """The skip timeout's one trade: a fragment its source holds back
        longer than it arrives after its event was skipped, and is counted
        late; with a skip timeout above the delay every event completes.
        Both runs balance their books."""
        delayed = dict(events=3000, payload=64, rate=2000, delay_every=11, delay_ms=60)
        r = self.h.daqrun(topology(skip_timeout_ms=10, **delayed), timeout_s=240)
        self.assertRunOk(r)
        c = self.assertBalanced(r)["counters"]["builder"]
        self.assertGreater(c["events_expired_skipped"], 0, c)
        self.assertGreater(c["frags_late"], 0, c)
        self.assertEqual(c["events_expired_timeout"], 0, c)
        r = self.h.daqrun(topology(skip_timeout_ms=300, **delayed), timeout_s=240)
        self.assertRunOk(r)
        c = self.assertBalanced(r)["counters"]["builder"]
        self.assertEqual(c["events_complete"], 3000, c)
        self.assertEqual(c["frags_late"], 0, c)
        self.h.assert_clean()

    def test_memory_does_not_grow_with_events(self) -> None:
        """With a 100 us filter cost the builder is the bottleneck; held
        fragments stay in bounded buffers, so peak memory of every daemon is
        the same for 4x the events."""
        peaks = []
        for events in (3000, 12000):
            r = self.h.daqrun(topology(events=events, payload=256, rate=0, filter_cost_us=100,
                                       max_inflight=256, timeout_ms=5000), timeout_s=240)
            self.assertRunOk(r)
            m = self.assertBalanced(r)
            peaks.append({(p["role"], p["id"]): p["max_rss_kib"] for p in m["processes"]})
        small, large = peaks
        for who, kib in large.items():
            self.assertLessEqual(kib, small[who] * 1.15 + 1024,
                                 f"{who} peak RSS {small[who]} KiB at 3000 events, "
                                 f"{kib} KiB at 12000")
        self.h.assert_clean()
