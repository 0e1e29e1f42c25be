"""A source that speaks the protocols correctly and then lies or gets stuck,
against the real readoutd and builderd (tests/e2e/fakesource.py plays it
beside a real sourced on the same reader):

- its END reports counters that cannot be true, sums that wrap modulo 2^64
  so that its equation would balance: refused by name, the run fails;
- it sticks inside a frame (one byte every 10 ms) or its data path stops
  delivering, while its control link keeps answering the clock probes: the
  reader's inactivity limit gives it up, or, with that limit off, the
  builder's watchdog does and still gathers the reader's final counters.

Each checks the named error, the counter, and that the books of the
legitimate source balance."""

from __future__ import annotations

import time

from fakesource import FakeSource
from harness import E2ETestCase, read_metrics, unbalanced

SEED = 5
PAYLOAD = 64


class HostileSourceTest(E2ETestCase):
    needs_daemons = True

    def start(self, *, events: int, builder_flags=None, reader_flags=None, **fake):
        """Builder for 2 sources and 1 reader; source 0 is the real sourced,
        source 1 the fake."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, timeout_ms=300,
                                         **(builder_flags or {}))
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports,
                                       **(reader_flags or {}))
        source = h.start_source(id=0, run=1, seed=SEED, events=events, payload=PAYLOAD,
                                reader_port=rport, builder=ports)
        f = FakeSource(id=1, run=1, seed=SEED, payload=PAYLOAD, reader_port=rport,
                       control_port=ports["control"], **fake).start()
        self.addCleanup(f.stop)
        return builder, reader, source, f

    def assert_legitimate_books(self, m: dict) -> None:
        """Every equation of source 0 and the builder's own balance."""
        for e in m["equations"]:
            if "source 1" in e["name"] or e["name"].startswith("2 all sources"):
                continue
            self.assertTrue(e["ok"], e)

    # -- impossible counters ---------------------------------------------
    def test_absurd_end_counters_fail_the_run_by_name(self) -> None:
        """frags_omitted = 2^64 - 1 and frags_sent = events + 1: equation 1
        holds modulo 2^64. The run fails with both named."""
        events = 300
        builder, reader, source, f = self.start(
            events=events, mode="absurd", frames=events,
            report={"frags_omitted": 2 ** 64 - 1, "frags_sent": events + 1})
        self.assertEqual(self.h.wait(builder, 30), 1, builder.tail(40))
        self.assertIsNone(f.error, f.error)
        m = read_metrics(self.h.dir / "run")
        self.assertFalse(m["balanced"])
        self.assertEqual(m["status"], "failed")
        want = [f"Impossible counters: source 1's frags_omitted = {2 ** 64 - 1} "
                f"exceeds source 1's events = {events}",
                f"Impossible counters: source 1's frags_sent = {events + 1} "
                f"exceeds source 1's events = {events}",
                "Impossible counters: source 1's frags_omitted + frags_sent + frags_abandoned "
                "+ frags_cut_by_stop overflows 2^64"]
        for text in want:
            self.assertIn(text, m["errors"])
            self.assertIn(text, m["impossible_counters"])
            self.assertIn(f"error: {text}", builder.log())
        eq1 = [e for e in m["equations"] if e["name"].startswith("1 source 1:")][0]
        self.assertFalse(eq1["ok"], eq1)
        self.assertIn("overflows 2^64", eq1["note"])
        self.assertRegex(builder.log(), r"equations: \d+ of \d+ balanced; 3 impossible counters")
        self.assertIn("status: FAILED", builder.log())
        # Source 0 and everything it sent balance; every event completed.
        self.assert_legitimate_books(m)
        self.assertEqual(m["counters"]["builder"]["events_complete"], events)
        self.assertEqual(self.h.wait(source, 15), 0, source.tail())
        self.h.wait(reader, 15)
        r = self.h.refbuild("--seed", SEED, "--run", 1, "--sources", 2, "--events", events,
                            "--payload", PAYLOAD, self.h.dir / "run")
        self.assertEqual(r.returncode, 0, r.describe())

    # -- stuck data paths -------------------------------------------------
    def run_stuck(self, mode: str, *, reader_limit_ms: int, peer_timeout_ms: int) -> dict:
        events, good = 400, 300
        t0 = time.monotonic()
        builder, reader, source, f = self.start(
            events=events, mode=mode, frames=good,
            builder_flags={"peer_timeout_ms": peer_timeout_ms},
            reader_flags={"source_idle_timeout_ms": reader_limit_ms})
        self.assertEqual(self.h.wait(builder, 60), 1, builder.tail(40))
        elapsed = time.monotonic() - t0
        self.assertIsNone(f.error, f.error)
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        self.assertEqual(m["status"], "failed")
        self.assertEqual([(g["role"], g["id"], g["how"]) for g in m["losses"]["peers_gone"]],
                         [("source", 1, "stuck")])
        # The fake source was alive on its control link all along.
        self.assertGreater(f.pongs, 0)
        if mode == "dribble":
            self.assertGreater(f.dribbled, 0)
        # The loss is named and counted: source 1 generated as many IDs as
        # source 0 (the only report there is), the builder got 300.
        self.assertEqual(m["losses"]["fragments_lost_with_sources"], events - good)
        gone = [e for e in m["equations"] if "source 1 (gone)" in e["name"]]
        self.assertEqual(len(gone), 1, m["equations"])
        self.assertTrue(gone[0]["ok"], gone)
        # The reader reported: source 0's books balance, with its counters.
        self.assertIn("reader.0.source.0", m["counters"])
        self.assertEqual(m["counters"]["reader.0.source.0"]["frames_received"], events)
        self.assertEqual(m["counters"]["source.0"]["frames_wire"], events)
        self.assert_legitimate_books(m)
        c = m["counters"]["builder"]
        self.assertEqual(c["events_complete"], good)
        self.assertEqual(c["events_complete"] + c["events_expired"], events)
        self.assertEqual(self.h.wait(source, 15), 0, source.tail())
        self.h.wait(reader, 15)
        f.stop()
        self.h.assert_clean()
        m["elapsed_s"] = elapsed
        return m

    def test_reader_gives_up_a_source_stuck_inside_a_frame(self) -> None:
        m = self.run_stuck("dribble", reader_limit_ms=1000, peer_timeout_ms=30000)
        errors = " | ".join(m["errors"])
        self.assertRegex(errors, r"Source 1 \([^)]*\) was given up by reader 0: its data "
                                 r"connection delivered no complete frame within the reader's "
                                 r"inactivity limit while its control link was alive")
        self.assertEqual(m["counters"]["reader.0.source.1"]["err_idle"], 1)
        self.assertIn("Reader 0 rejected source 1: 1 connections given up with no complete "
                      "frame within the inactivity limit (err_idle)", m["errors"])
        self.assertLess(m["elapsed_s"], 15, "the reader's limit, not the watchdog, ended it")

    def test_reader_gives_up_a_blackholed_data_path(self) -> None:
        m = self.run_stuck("blackhole", reader_limit_ms=1000, peer_timeout_ms=30000)
        self.assertIn("was given up by reader 0", " | ".join(m["errors"]))
        self.assertEqual(m["counters"]["reader.0.source.1"]["err_idle"], 1)
        self.assertLess(m["elapsed_s"], 15)

    def watchdog_case(self, mode: str) -> None:
        """The reader's limit off: the builder's no-progress watchdog names
        the stuck source, has its reader drop it and still gets the
        reader's final counters."""
        m = self.run_stuck(mode, reader_limit_ms=0, peer_timeout_ms=2000)
        errors = " | ".join(m["errors"])
        self.assertRegex(errors, r"Source 1 \([^)]*\) is stuck: no final counters after "
                                 r"2000 ms without progress, though its control link "
                                 r"still answers")
        self.assertEqual(m["counters"]["reader.0.source.1"]["err_dropped"], 1)
        self.assertEqual(m["counters"]["reader.0.source.1"]["err_idle"], 0)

    def test_watchdog_gathers_counters_past_a_source_stuck_inside_a_frame(self) -> None:
        self.watchdog_case("dribble")

    def test_watchdog_gathers_counters_past_a_blackholed_data_path(self) -> None:
        self.watchdog_case("blackhole")


class StalledSourcedTest(E2ETestCase):
    """The same with the real sourced and its --stall test hook (also in
    make soak's fault mix): its data stream stops delivering after 300
    frames while its event loop, and so its control link, goes on."""
    needs_daemons = True

    def run_stall(self, stall: str, reader_limit_ms: int) -> dict:
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, timeout_ms=300,
                                         peer_timeout_ms=2000)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports,
                                       source_idle_timeout_ms=reader_limit_ms)
        sources = [h.start_source(id=s, run=1, seed=SEED, events=2000, payload=PAYLOAD,
                                  rate=20000, reader_port=rport, builder=ports,
                                  stall=f"{stall}@300" if s == 1 else None)
                   for s in range(2)]
        self.assertEqual(h.wait(builder, 60), 1, builder.tail(40))
        self.assertEqual(h.wait(sources[0], 15), 0, sources[0].tail())
        self.assertEqual(h.wait(sources[1], 15), 1, sources[1].tail())
        h.wait(reader, 15)
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        self.assertEqual([(g["role"], g["id"], g["how"]) for g in m["losses"]["peers_gone"]],
                         [("source", 1, "stuck")])
        self.assertEqual(m["counters"]["builder.from_reader.0"]["frames_received"], 2000 + 300)
        self.assertEqual(m["losses"]["fragments_lost_with_sources"], 2000 - 300)
        self.assertIn(f"the data stream stalls after 300 frames (--stall {stall})",
                      sources[1].log())
        self.assertIn("lost", sources[1].log())
        h.assert_clean()
        return m

    def test_dribbling_sourced_given_up_by_its_reader(self) -> None:
        m = self.run_stall("dribble", 1000)
        self.assertEqual(m["counters"]["reader.0.source.1"]["err_idle"], 1)
        self.assertIn("was given up by reader 0", " | ".join(m["errors"]))

    def test_blackholed_sourced_given_up_by_the_watchdog(self) -> None:
        m = self.run_stall("blackhole", 0)
        # The builder tells the reader to drop source 1 and the source to
        # stop over two connections: the reader either closes the data
        # connection on the builder's word (err_dropped) or sees the source
        # close it first (err_no_end). Exactly one of the two, once.
        c = m["counters"]["reader.0.source.1"]
        self.assertEqual((c["err_dropped"], c["err_no_end"]) in ((1, 0), (0, 1)), True, c)
        self.assertIn("Source 1", " | ".join(m["errors"]))
        self.assertIn("is stuck: no final counters after 2000 ms", " | ".join(m["errors"]))


class StalledForwardingTest(E2ETestCase):
    """Reader 1's data path to the builder stops delivering (readoutd
    --forward-stall) while its control link answers and its source, held up
    behind it by TCP, is healthy: the watchdog names the reader, not the
    source, tells the source to stop, gathers its final counters and closes
    the reader's books with what it held as lost."""
    needs_daemons = True

    def test_watchdog_names_a_reader_whose_forwarding_stalled(self) -> None:
        h = self.h
        events, payload = 10000, 1024
        builder, ports = h.start_builder(run=1, sources=2, readers=2, timeout_ms=300,
                                         peer_timeout_ms=2000)
        readers = [h.start_reader(id=r, run=1, sources=(r,), builder=ports,
                                  max_fragment=payload, batch_bytes=16384,
                                  forward_stall=20000 if r == 1 else None)
                   for r in range(2)]
        sources = [h.start_source(id=s, run=1, seed=SEED, events=events, payload=payload,
                                  reader_port=readers[s][1], builder=ports)
                   for s in range(2)]
        self.assertEqual(h.wait(builder, 60), 1, builder.tail(40))
        for p in sources + [r for r, _ in readers]:
            h.wait(p, 15)
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        self.assertEqual([(g["role"], g["id"], g["how"]) for g in m["losses"]["peers_gone"]],
                         [("reader", 1, "stuck")])
        errors = " | ".join(m["errors"])
        self.assertRegex(errors, r"Reader 1 \([^)]*\) is stuck: its data path to the builder "
                                 r"stopped delivering \(it verified \d+ frames, the builder "
                                 r"received \d+\)")
        self.assertNotRegex(errors, r"Source 1 \([^)]*\) (is stuck|was given up)")
        self.assertIn("forwarding stalls after", readers[1][0].log())
        # Source 1 stopped and reported; what it put on the wire beyond what
        # reached the builder is lost with the reader. The builder tells
        # reader 1 to close its sources and source 1 to stop, over two
        # connections: the source stops on the builder's word or on its
        # reader's close, whichever comes first.
        self.assertRegex(sources[1].log(), r"stopping at the builder's request|"
                                           r"data connection to reader \S+ failed")
        self.assertIn("source.1", m["counters"])
        wire = m["counters"]["source.1"]["frames_wire"]
        got = m["counters"]["builder.from_reader.1"]["frames_received"]
        self.assertLess(got, wire)
        self.assertEqual(m["losses"]["frames_lost_with_readers"], wire - got)
        gone = [e for e in m["equations"] if "reader 1 (gone)" in e["name"]]
        self.assertTrue(gone and gone[0]["ok"], gone)
        # Source 0 and reader 0 balance with their own counters.
        self.assertEqual(sources[0].returncode, 0, sources[0].tail())
        self.assertEqual(m["counters"]["reader.0.source.0"]["frames_forwarded"], events)
        for e in m["equations"]:
            if "source 0" in e["name"] or "reader 0" in e["name"]:
                self.assertTrue(e["ok"], e)
        h.assert_clean()
