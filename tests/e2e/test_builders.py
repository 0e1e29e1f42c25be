"""Several builders on one host, real daemons end to end (docs/BUILDERS.md):
a hub (builderd --role hub), M builders (--role builder), readers with one
link per builder, the event manager and static routing, every fragment fault,
mixed shared-memory and TCP links, and a builder killed or stopped mid-run.
Each run's books must balance over every daemon, each event must be recorded
by exactly one builder, and where the accepted events follow from the
parameters alone the reference builder must agree with the union."""

from __future__ import annotations

import json

from harness import E2ETestCase, read_jsonl, topology, unbalanced

EVENTS = 6000
BATCH = 64


def builders_topology(builders: int, routing: str = "manager", batch: int = BATCH,
                      events: int = EVENTS, **run) -> dict:
    topo = topology(events=events, payload=64, rate=0, **run)
    topo["run"]["routing"] = routing
    topo["run"]["batch"] = batch
    topo["hub"] = {"host": "127.0.0.1"}
    topo["builder"] = [{"id": b, "host": "127.0.0.1"} for b in range(builders)]
    return topo


class SeveralBuildersTest(E2ETestCase):
    needs_daemons = True

    def records_by_builder(self, run_dir, builders: int) -> dict[int, list[int]]:
        ids = {}
        for b in range(builders):
            d = run_dir / "builders" / str(b)
            ids[b] = [r["event"] for r in read_jsonl(d / "events.jsonl")]
            ids[b] += [r["event"] for r in read_jsonl(d / "expired.jsonl")]
        return ids

    def assertEachEventOnce(self, ids: dict[int, list[int]]) -> None:
        seen: dict[int, int] = {}
        for b, events in ids.items():
            for e in events:
                self.assertNotIn(e, seen, f"event {e} recorded by builders {seen.get(e)} and {b}")
                seen[e] = b

    def run_builders(self, topo: dict, builders: int, *, refbuild: bool, timeout_s: float = 240):
        r = self.h.daqrun(topo, timeout_s=timeout_s)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        if refbuild:
            self.assertIn("PASS refbuild", r.output, r.output)
        sections = m["builders"]
        self.assertEqual(sorted(sections), [str(b) for b in range(builders)], sections.keys())
        self.assertEqual(sum(s["assigned"] for s in sections.values()), topo["run"]["events"])
        for b, s in sections.items():
            self.assertGreater(s["assigned"], 0, f"builder {b} was given nothing: {s}")
            self.assertEqual(s["misrouted"], 0, s)
        ids = self.records_by_builder(r.run_dir, builders)
        self.assertEachEventOnce(ids)
        self.h.assert_clean()
        return m, ids

    def test_two_builders_every_fault_with_reorder(self) -> None:
        topo = builders_topology(2, missing_every=7, duplicate_every=5, reorder=True,
                                 timeout_ms=300, max_inflight=8192)
        m, ids = self.run_builders(topo, 2, refbuild=True)
        c = m["counters"]["builder"]
        self.assertGreater(c["frags_duplicate"], 0)
        self.assertGreater(c["events_expired"], 0)

    def test_three_builders_every_fault_with_reorder(self) -> None:
        topo = builders_topology(3, missing_every=7, duplicate_every=5, reorder=True,
                                 timeout_ms=300, max_inflight=8192)
        m, ids = self.run_builders(topo, 3, refbuild=True)
        self.assertGreater(m["counters"]["builder"]["frags_duplicate"], 0)

    def test_three_builders_with_delays_too(self) -> None:
        """Delays make the accepted events depend on timing: the books and
        the union's uniqueness are checked, the reference is not."""
        topo = builders_topology(3, missing_every=7, duplicate_every=5, delay_every=11,
                                 delay_ms=5, reorder=True, timeout_ms=300, max_inflight=8192)
        m, ids = self.run_builders(topo, 3, refbuild=False)
        c = m["counters"]["builder"]
        self.assertEqual(c["events_complete"] + c["events_expired"] + c["events_unobserved"],
                         EVENTS, c)

    def test_static_routing_follows_the_formula(self) -> None:
        topo = builders_topology(2, routing="static", batch=32)
        m, ids = self.run_builders(topo, 2, refbuild=True)
        for b, events in ids.items():
            wrong = [e for e in events if (e // 32) % 2 != b]
            self.assertEqual(wrong, [], f"builder {b} recorded events of the other")
        self.assertEqual(m["routing"]["mode"], "static")

    def test_mixed_shm_and_tcp_links(self) -> None:
        topo = builders_topology(2)
        topo["reader"][0]["transport"] = "shm"
        topo["reader"][1]["transport"] = "tcp"
        m, ids = self.run_builders(topo, 2, refbuild=True)
        links = {(p["role"], p["id"]): p for p in m["processes"]}
        self.assertIn(("builder", 0), links)

    def test_one_builder_behind_a_hub(self) -> None:
        topo = builders_topology(1)
        self.run_builders(topo, 1, refbuild=True)


class BuilderFaultTest(E2ETestCase):
    """A builder killed or stopped mid-run: named, given no further events,
    its share counted lost in its own bucket; the others finish; the run
    fails with balanced books and leaves nothing behind."""
    needs_daemons = True

    def run_with_fault(self, fault: str, how: str) -> dict:
        topo = builders_topology(2, events=60000, timeout_ms=200)
        topo["run"]["rate"] = 20000
        for b in topo["builder"]:
            b["extra"] = ["--stall-timeout-ms", "800"]
        r = self.h.daqrun(topo, timeout_s=150, args=["--fault", fault])
        self.assertNotEqual(r.returncode, 0, r.output)
        m = r.metrics()
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        gone = [(g["role"], g["id"], g["how"]) for g in m["losses"]["peers_gone"]]
        self.assertEqual(gone, [("builder", 1, how)], m["losses"])
        lost = m["builders"]["1"]["lost"]
        self.assertGreater(lost, 0, m["builders"]["1"])
        survivor = m["builders"]["0"]
        self.assertGreater(survivor["counters"]["builder"]["events_complete"], 0, survivor)
        self.assertTrue(any("builder 1" in e.lower() for e in m["errors"]), m["errors"])
        self.h.assert_clean()
        return m

    def test_builder_killed(self) -> None:
        self.run_with_fault("builder:1:KILL@1", "died")

    def test_builder_stopped(self) -> None:
        self.run_with_fault("builder:1:STOP@1", "stalled")


class FencedBuilderTest(E2ETestCase):
    """A builder stopped past the hub's stall limit, then continued while
    the run goes on (docs/BUILDERS.md, "A given-up builder is fenced"): the
    hub names it and books its loss; the resumed builder writes nothing
    more, its records are exactly what the books call decided, and the
    reference builder agrees with what was recorded, the lost events
    excused by the books' count."""
    needs_daemons = True

    def test_stopped_builder_resumed_mid_run_is_fenced(self) -> None:
        # 8 s of events; the hub's stall limit (2 s by default) gives
        # builder 1 up at about 3.5 s, and it resumes at 5.5 s, mid-run.
        topo = builders_topology(2, events=160000, timeout_ms=200)
        topo["run"]["rate"] = 20000
        r = self.h.daqrun(topo, timeout_s=180, args=["--fault", "builder:1:STOP@1.5",
                                                     "--fault", "builder:1:CONT@5.5"])
        self.assertNotEqual(r.returncode, 0, r.output)
        self.assertIn("fault: sending SIGCONT to builder-1", r.output)
        self.assertLess(r.output.index("fault: sending SIGCONT to builder-1"),
                        r.output.index("hub exited with status"), "resumed after the run ended")
        m = r.metrics()
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        gone = [(g["role"], g["id"], g["how"]) for g in m["losses"]["peers_gone"]]
        self.assertEqual(gone, [("builder", 1, "stalled")], m["losses"])
        b1 = m["builders"]["1"]
        self.assertGreater(b1["lost"], 0, b1)
        self.assertEqual(b1["assigned"], b1["decided"] + b1["lost"], b1)
        out = r.run_dir / "builders" / "1"
        # The hub's fence is the last token it read. The builder cuts its
        # files at its own last token: the same one, or, when a token was
        # on the wire as the hub gave it up, a later one, whose records the
        # rule leaves out (docs/BUILDERS.md).
        fence = b1["decided_below"]
        events = [x["event"] for x in read_jsonl(out / "events.jsonl") if x["event"] < fence]
        expired = [x["event"] for x in read_jsonl(out / "expired.jsonl") if x["event"] < fence]
        # No fault but the stop: every decided event is recorded, once.
        self.assertEqual(len(events) + len(expired), b1["decided"], b1)
        self.assertEqual(len(set(events + expired)), b1["decided"])
        doc = json.loads((out / "builder.json").read_text())
        self.assertEqual(doc["status"], "fenced", doc)
        self.assertGreaterEqual(doc["fence"]["below"], fence, doc)
        past = doc["fence"]["events_kept"] + doc["fence"]["expired_kept"] - b1["decided"]
        self.assertGreaterEqual(past, 0, doc)
        self.assertTrue(doc["fence"]["cut"], doc)
        log = (r.run_dir / "logs" / "builder-1.log").read_text()
        self.assertRegex(log, rf"Builder 1 (was given up by its hub|lost its hub's control connection) \(.*\): "
                              rf"fenced at event "
                              rf"{doc['fence']['below']} \(its last token: {b1['decided'] + past} "
                              r"events decided\).*it writes nothing more for run 1")
        # The survivor took everything else, and the reference agrees with
        # what was recorded once the books' loss is excused.
        self.assertEqual(m["builders"]["0"]["assigned"] + b1["assigned"], 160000)
        self.assertIn(f"builder 1 was given up: its records count below event "
                      f"{b1['decided_below']}; the books count {b1['lost']} of its events lost",
                      r.output)
        self.assertRegex(r.output, rf"past-fence=\d+ lost-with-builders={b1['lost']}\b")
        self.assertIn("PASS refbuild", r.output)
        self.assertRegex(r.output, rf"builder 1 \(127.0.0.1\): {len(events)} events recorded, "
                                   rf"{len(expired)} expired, given up \(stalled\): records "
                                   rf"count below event {b1['decided_below']}")
        self.h.assert_clean()
