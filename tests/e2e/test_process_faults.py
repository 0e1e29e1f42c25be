"""Daemons that die or stall mid-run. The builder notices (a lost control
connection, or no answer to its clock probes), names the peer, counts what it
held as lost with it so the books still close, tells the peers that depend on
it to stop or to drop it, and ends the run non-zero without hanging. A
daemon that loses its builder stops and says so."""

from __future__ import annotations

import os
import signal
import time

from harness import E2ETestCase, read_metrics, unbalanced

SOURCES = 4
EVENTS = 40000      # 2 s at the rate below
RATE = 20000


class ProcessFaultTest(E2ETestCase):
    needs_daemons = True

    def start_run(self, source_flags=None, **builder_flags):
        h = self.h
        builder, ports = h.start_builder(run=1, sources=SOURCES, readers=2, events=EVENTS,
                                         timeout_ms=200, stall_timeout_ms=800, **builder_flags)
        readers = [h.start_reader(id=r, run=1, sources=(2 * r, 2 * r + 1), builder=ports)
                   for r in range(2)]
        sources = [h.start_source(id=s, run=1, seed=5, events=EVENTS, payload=64, rate=RATE,
                                  reader_port=readers[s // 2][1], builder=ports,
                                  **(source_flags or {}))
                   for s in range(SOURCES)]
        time.sleep(0.6)   # well into the run
        return builder, [r for r, _ in readers], sources

    def finish(self, builder, others, expect_builder=1):
        t0 = time.monotonic()
        self.assertEqual(self.h.wait(builder, 30), expect_builder, builder.tail(40))
        self.assertLess(time.monotonic() - t0, 15, "the builder took too long to end the run")
        for p in others:
            self.h.wait(p, 20)
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        self.assertEqual(m["status"], "failed")
        self.h.assert_clean()
        return m

    def test_source_killed(self) -> None:
        builder, readers, sources = self.start_run()
        victim = sources[1]
        os.killpg(victim.pid, signal.SIGKILL)
        m = self.finish(builder, readers + sources)
        errors = " | ".join(m["errors"])
        self.assertRegex(errors, rf"Source 1 \([^)]*pid {victim.pid} [^)]*\) lost its control "
                                 r"connection before reporting")
        self.assertEqual(m["losses"]["peers_gone"],
                         [{"role": "source", "id": 1, "pid": victim.pid, "how": "died"}])
        self.assertGreater(m["losses"]["fragments_lost_with_sources"], 0)
        self.assertGreater(m["counters"]["builder"]["events_expired"], 0)
        for s in (0, 2, 3):
            self.assertEqual(sources[s].returncode, 0, sources[s].tail())

    def test_source_killed_while_sending_duplicates(self) -> None:
        """Its reader saw more frames than fragments (the copies): the loss
        is counted in fragments the builder got once each, not in frames.
        (Found by make soak.)"""
        builder, readers, sources = self.start_run(source_flags={"duplicate_every": 5,
                                                                 "missing_every": 31})
        os.killpg(sources[3].pid, signal.SIGKILL)
        m = self.finish(builder, readers + sources)
        gone = [e for e in m["equations"] if "source 3 (gone)" in e["name"]]
        self.assertEqual(len(gone), 1, m["equations"])
        self.assertTrue(gone[0]["ok"], gone)
        self.assertGreater(m["counters"]["reader.1.source.3"]["frames_received"],
                           gone[0]["rhs"] - m["losses"]["fragments_lost_with_sources"])

    def test_source_stalled(self) -> None:
        builder, readers, sources = self.start_run()
        victim = sources[2]
        os.killpg(victim.pid, signal.SIGSTOP)
        try:
            rc = self.h.wait(builder, 30)
        finally:
            os.killpg(victim.pid, signal.SIGCONT)
        self.assertEqual(rc, 1, builder.tail(40))
        m = self.finish(builder, readers + sources)
        self.assertIn("Source 2", " | ".join(m["errors"]))
        self.assertIn("stalled: no answer for", " | ".join(m["errors"]))
        self.assertEqual(m["losses"]["peers_gone"][0]["how"], "stalled")
        # Its reader dropped it at the builder's request and still reported.
        self.assertEqual(m["counters"]["reader.1.source.2"]["err_dropped"], 1)
        self.assertIn("dropped at the builder's request", readers[1].log())

    def test_reader_killed(self) -> None:
        builder, readers, sources = self.start_run()
        victim = readers[0]
        os.killpg(victim.pid, signal.SIGKILL)
        m = self.finish(builder, readers + sources)
        self.assertRegex(" | ".join(m["errors"]), rf"Reader 0 \([^)]*pid {victim.pid} ")
        self.assertEqual(m["losses"]["peers_gone"][0]["role"], "reader")
        gone = [e for e in m["equations"] if "reader 0 (gone)" in e["name"]]
        self.assertEqual(len(gone), 1, m["equations"])
        self.assertTrue(gone[0]["ok"], gone)
        self.assertEqual(m["losses"]["frames_lost_with_readers"], gone[0]["lhs"] -
                         m["counters"]["builder.from_reader.0"]["frames_received"])
        # Its sources stopped (told by the builder, or on the reset
        # connection, whichever came first) and reported.
        for s in (0, 1):
            log = sources[s].log()
            self.assertTrue("stopping at the builder's request" in log or
                            "data connection to reader" in log, log)
            self.assertIn(f"source.{s}", m["counters"])

    def test_reader_stalled(self) -> None:
        builder, readers, sources = self.start_run()
        victim = readers[1]
        os.killpg(victim.pid, signal.SIGSTOP)
        try:
            rc = self.h.wait(builder, 30)
        finally:
            os.killpg(victim.pid, signal.SIGCONT)
        self.assertEqual(rc, 1, builder.tail(40))
        m = self.finish(builder, readers + sources)
        self.assertIn("Reader 1", " | ".join(m["errors"]))
        self.assertEqual(m["losses"]["peers_gone"][0]["how"], "stalled")
        # Woken up, it finds its builder gone and says so.
        self.assertIn("lost the builder's control connection", victim.log())

    def test_builder_killed(self) -> None:
        builder, readers, sources = self.start_run()
        os.killpg(builder.pid, signal.SIGKILL)
        t0 = time.monotonic()
        for p in readers + sources:
            self.assertEqual(self.h.wait(p, 20), 1, p.tail())
            self.assertIn("lost the builder's control connection", p.log())
        self.assertLess(time.monotonic() - t0, 15)
        self.h.assert_clean()


class LauncherFaultTest(E2ETestCase):
    """deploy/daqrun --fault: a daemon killed or stopped at a chosen moment."""
    needs_daemons = True

    def run_with_fault(self, fault: str):
        from harness import topology
        topo = topology(events=60000, payload=64, rate=20000, timeout_ms=200)
        topo["builder"]["extra"] = ["--stall-timeout-ms", "800"]
        r = self.h.daqrun(topo, timeout_s=120, args=["--fault", fault])
        self.assertNotEqual(r.returncode, 0, r.output)
        self.assertIn(f"fault: sending SIG{fault.split(':')[2].split('@')[0]}", r.output)
        m = r.metrics()
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        self.h.assert_clean()
        return m

    def test_reader_killed_by_the_launcher(self) -> None:
        m = self.run_with_fault("reader:0:KILL@1")
        gone = m["losses"]["peers_gone"]
        self.assertEqual([(g["role"], g["id"], g["how"]) for g in gone], [("reader", 0, "died")])

    def test_source_stopped_by_the_launcher(self) -> None:
        m = self.run_with_fault("source:1:STOP@1")
        gone = m["losses"]["peers_gone"]
        self.assertEqual([(g["role"], g["id"], g["how"]) for g in gone], [("source", 1, "stalled")])

    def test_bad_fault_is_a_usage_error(self) -> None:
        from harness import topology
        r = self.h.daqrun(topology(events=100), timeout_s=60, args=["--fault", "reader:0:HUP"])
        self.assertEqual(r.returncode, 2, r.output)
        self.assertIn("expected ROLE:ID:SIGNAL@SECONDS", r.output)
