"""The operator's drained stop (docs/RUNCONTROL.md, "stop"): SIGUSR2 to a
one-run hub sends every source a STOP with the last event to generate; the
run then ends the normal way, exit 0, its books balanced with the events
past the stop as their own bucket (frags_cut_by_stop), every built event
complete and the reference builder agreeing on the events up to the stop."""

from __future__ import annotations

import os
import signal
import time

from harness import E2ETestCase, read_metrics, unbalanced

SOURCES = 2
EVENTS = 40000
RATE = 4000
PAYLOAD = 2048
SEED = 23
RUN = 9


class DrainedStopTest(E2ETestCase):
    needs_daemons = True

    def start_run(self, **builder_flags):
        h = self.h
        out = h.dir / "run"
        builder, ports = h.start_builder(run=RUN, sources=SOURCES, readers=1, out=out,
                                         events=EVENTS, first_event=0, **builder_flags)
        reader, rport = h.start_reader(id=0, run=RUN, sources=range(SOURCES), builder=ports)
        sources = [h.start_source(id=s, run=RUN, seed=SEED, events=EVENTS, payload=PAYLOAD,
                                  reader_port=rport, builder=ports, rate=RATE)
                   for s in range(SOURCES)]
        return out, builder, [reader] + sources

    def wait_for_log(self, proc, words, timeout_s=30.0):
        deadline = time.monotonic() + timeout_s
        while words not in proc.log():
            self.assertIsNone(proc.returncode, f"{proc.name} exited:\n{proc.tail()}")
            self.assertLess(time.monotonic(), deadline, f"no '{words}' in {proc.name}")
            time.sleep(0.05)

    def finish(self, out, builder, others) -> dict:
        h = self.h
        self.assertEqual(h.wait(builder, 60), 0, builder.tail(60))
        for p in others:
            self.assertEqual(h.wait(p, 30), 0, f"{p.name}:\n{p.tail()}")
        m = read_metrics(out)
        self.assertTrue(m["balanced"], unbalanced(m))
        return m

    def check_cut(self, m, out) -> int:
        """Every source generated up to the stop's event and no further, the
        rest counted cut by the stop; the built events are exactly those."""
        last = m["stop_last_event"]
        self.assertIsInstance(last, int)
        generated = last + 1
        cut = EVENTS - generated
        for s in range(SOURCES):
            c = m["counters"][f"source.{s}"]
            self.assertEqual(c["frags_cut_by_stop"], cut, c)
            self.assertEqual(c["frags_abandoned"], 0, c)
            self.assertEqual(c["frags_sent"], generated, c)
        self.assertEqual(m["losses"]["fragments_cut_by_stop"], SOURCES * cut)
        b = m["counters"]["builder"]
        self.assertEqual(b["events_complete"], generated, b)
        self.assertEqual(b["events_expired"], 0, b)
        self.assertEqual(b["events_unobserved"], cut, b)
        self.assertIsNotNone(m["stop_to_books_ms"])
        self.assertGreater(m["start_to_first_event_ms"], 0)
        r = self.h.refbuild("--events-file", out / "events.jsonl", "--seed", SEED, "--run", RUN,
                            "--sources", SOURCES, "--events", generated, "--payload", PAYLOAD)
        self.assertEqual(r.returncode, 0, r.describe())
        return cut

    def test_stop_mid_run(self) -> None:
        """Stopped after about a second of a ten-second run; a second
        SIGUSR2 is ignored."""
        out, builder, others = self.start_run()
        self.wait_for_log(builder, "starting")
        time.sleep(1.0)
        os.kill(builder.pid, signal.SIGUSR2)
        self.wait_for_log(builder, "operator stop at event")
        os.kill(builder.pid, signal.SIGUSR2)
        m = self.finish(out, builder, others)
        cut = self.check_cut(m, out)
        self.assertGreater(cut, EVENTS // 2)
        log = builder.log()
        self.assertIn(f"Run {RUN}: operator stop at event {m['stop_last_event']} (SIGUSR2)", log)
        self.assertIn("operator stop (SIGUSR2) ignored: already stopping", log)
        self.h.assert_clean()

    def test_no_stop(self) -> None:
        """A run without a stop says so: null stop fields, nothing cut."""
        h = self.h
        out = h.dir / "run"
        builder, ports = h.start_builder(run=RUN, sources=1, readers=1, out=out, events=500,
                                         first_event=0)
        reader, rport = h.start_reader(id=0, run=RUN, sources=[0], builder=ports)
        source = h.start_source(id=0, run=RUN, seed=SEED, events=500, payload=64,
                                reader_port=rport, builder=ports)
        m = self.finish(out, builder, [reader, source])
        self.assertIsNone(m["stop_to_books_ms"])
        self.assertIsNone(m["stop_last_event"])
        self.assertEqual(m["losses"]["fragments_cut_by_stop"], 0)
        self.assertEqual(m["counters"]["source.0"]["frags_cut_by_stop"], 0)
