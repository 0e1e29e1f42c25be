"""Daemons that die or stall mid-run. The builder notices (a lost control
connection, or no answer to its clock probes), names the peer, counts what it
held as lost with it so the books still close, tells the peers that depend on
it to stop or to drop it, and ends the run non-zero without hanging. A
daemon that loses its builder stops and says so."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from harness import E2ETestCase, read_jsonl, read_metrics, topology, unbalanced

REPORT = Path(__file__).resolve().parents[2] / "analysis" / "report.py"

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


class KilledInAnEarlierRunTest(E2ETestCase):
    """A run killed in the output directory of an earlier, balanced run
    (docs/METRICS.md, "A run in progress"): builderd removes the earlier
    metrics.json and writes running.json as it starts, so the crashed run
    can never pass for a complete one; daqrun, report.py and refbuild say
    it is in progress or was killed."""
    needs_daemons = True

    def earlier_balanced_run(self) -> Path:
        r = self.h.daqrun(topology(events=2000, payload=64, rate=0), timeout_s=120)
        self.assertRunOk(r)
        self.assertBalanced(r)
        self.assertFalse((r.run_dir / "running.json").exists(), "a finished run left running.json")
        return r.run_dir

    def test_builderd_killed_in_an_earlier_runs_directory(self) -> None:
        run_dir = self.earlier_balanced_run()
        h = self.h
        # Run 2 by hand (as a service manager would start it), same --out.
        builder, ports = h.start_builder(run=2, sources=2, readers=1, events=200000, out=run_dir,
                                         stall_timeout_ms=800)
        reader, rport = h.start_reader(id=0, run=2, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=2, seed=5, events=200000, payload=64, rate=20000,
                                  reader_port=rport, builder=ports) for s in range(2)]
        deadline = time.monotonic() + 20
        while len(read_jsonl(run_dir / "events.jsonl")) < 1000:
            self.assertLess(time.monotonic(), deadline, builder.tail())
            time.sleep(0.05)
        os.killpg(builder.pid, signal.SIGKILL)
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 20), 1, p.tail())
        self.assertFalse((run_dir / "metrics.json").exists(),
                         "the earlier run's metrics.json sits beside run 2's records")
        marker = json.loads((run_dir / "running.json").read_text())
        self.assertEqual((marker["state"], marker["run"], marker["pid"], marker["end_document"]),
                         ("running", 2, builder.pid, "metrics.json"), marker)
        self.assertEqual({r["run"] for r in read_jsonl(run_dir / "events.jsonl")}, {2})
        rep = h.run("report", [sys.executable, REPORT, run_dir], 60)
        self.assertEqual(rep.returncode, 1, rep.output)
        self.assertIn(f"report: no report of an unfinished run: {run_dir}/running.json says run 2 "
                      f"is in progress (builder 0, pid {builder.pid} on", rep.output)
        self.assertIn("it is still running or was killed before writing its metrics.json",
                      rep.output)
        ref = h.refbuild(run_dir)
        self.assertEqual(ref.returncode, 1, ref.output)
        self.assertIn(f"FAIL refbuild {run_dir}: {run_dir}/running.json says the run is in "
                      "progress", ref.output)
        h.assert_clean()

    def test_daqrun_says_a_killed_run_did_not_finish(self) -> None:
        run_dir = self.earlier_balanced_run()
        r = self.h.daqrun(topology(events=200000, payload=64, rate=20000), timeout_s=120,
                          out=run_dir, args=["--fault", "builder:0:KILL@1"])
        self.assertNotEqual(r.returncode, 0, r.output)
        self.assertFalse((run_dir / "metrics.json").exists())
        self.assertIn(f"daqrun: the run did not finish: {run_dir}/running.json says run 1 is in "
                      "progress (builder 0, pid", r.output)
        self.assertIn("run in progress or killed", r.output)
        self.assertIn("says the run is in progress", r.output)   # refbuild's refusal
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
