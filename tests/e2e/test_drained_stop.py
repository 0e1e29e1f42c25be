"""The operator's drained stop (docs/RUNCONTROL.md, "stop"): SIGUSR2 to a
one-run hub sends every source a STOP with the last event to generate; the
run then ends the normal way, exit 0, its books balanced with the events
past the stop as their own bucket (frags_cut_by_stop), every built event
complete and the reference builder agreeing on the events up to the stop."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

from fakesource import Link, message, read_message
from harness import (TAG_VAR, E2ETestCase, _cmdline, _has_tag, _proc_pids, read_metrics,
                     topology, unbalanced)

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


FRAME_HEADER = 42


class PlayedHub:
    """One sourced's builder control port and reader data port, played by
    the test over real sockets: START once both are greeted, then the STOP
    the test sends, the END report read, BYE. The data port counts the
    fragments that arrive, END aside."""

    def __init__(self, payload: int) -> None:
        self.payload = payload
        self.ctl_srv = socket.create_server(("127.0.0.1", 0))
        self.data_srv = socket.create_server(("127.0.0.1", 0))
        self.ctl_port = self.ctl_srv.getsockname()[1]
        self.data_port = self.data_srv.getsockname()[1]
        self.started = threading.Event()
        self.ended = threading.Event()
        self.data_done = threading.Event()
        self.ctl: socket.socket | None = None
        self.end: dict | None = None
        self.data_bytes = 0
        self.error: BaseException | None = None
        self._greeted = 0
        self._lock = threading.Lock()
        for target in (self._control, self._data):
            threading.Thread(target=target, daemon=True).start()

    def _greet(self, srv: socket.socket, control: bool):
        """The greeting of one connection (the control one sealed); START
        once both are greeted."""
        conn, _ = srv.accept()
        conn.sendall(message({"type": "challenge", "nonce": "00" * 16}))
        hello = read_message(conn)
        conn.sendall(message({"type": "welcome", "run_id": RUN, "role": "builder", "id": 0}))
        if control:
            conn = self.ctl = Link.listener(conn, "00" * 16, hello)
        with self._lock:
            self._greeted += 1
            if self._greeted == 2:
                self.ctl.send({"type": "start", "delay_ns": 20_000_000, "at_realtime_ns": 0})
                self.started.set()
        return conn

    def _control(self) -> None:
        try:
            link = self._greet(self.ctl_srv, control=True)
            while True:
                m = link.read()
                if m is None:
                    return
                if m.get("type") == "end":
                    self.end = m
                    self.ended.set()
                    link.send({"type": "bye", "status": 0})
        except BaseException as e:  # surfaced by the test
            self.error = e

    def _data(self) -> None:
        try:
            conn = self._greet(self.data_srv, control=False)
            while True:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                self.data_bytes += len(chunk)
            self.data_done.set()
        except BaseException as e:
            self.error = e

    def stop_at(self, last_event: int) -> None:
        self.ctl.send({"type": "stop", "source": 2**32 - 1, "last_event": last_event,
                       "reason": "operator stop (test)"})

    def fragments(self) -> int:
        """Fragments on the data stream: whole frames, the END frame aside."""
        body = self.data_bytes - FRAME_HEADER
        assert body % (FRAME_HEADER + self.payload) == 0, self.data_bytes
        return body // (FRAME_HEADER + self.payload)

    def close(self) -> None:
        for s in (self.ctl_srv, self.data_srv):
            s.close()


class SourceDrainTest(E2ETestCase):
    """sourced's side of the drained stop against a hub played by hand."""

    needs_daemons = True
    events, rate, payload = 20000, 2000, 256

    def run_source(self, when_s: float, last_event) -> tuple[dict, PlayedHub]:
        hub = PlayedHub(self.payload)
        self.addCleanup(hub.close)
        src = self.h.start_source(id=0, run=RUN, seed=SEED, events=self.events,
                                  payload=self.payload, reader_port=hub.data_port,
                                  builder={"control": hub.ctl_port}, rate=self.rate)
        self.assertTrue(hub.started.wait(15), src.tail())
        time.sleep(when_s)
        hub.stop_at(last_event(hub) if callable(last_event) else last_event)
        self.assertTrue(hub.ended.wait(30), src.tail())
        self.assertEqual(self.h.wait(src, 15), 0, src.tail())
        self.assertTrue(hub.data_done.wait(5))
        self.assertIsNone(hub.error)
        c = hub.end["groups"][""]
        self.assertEqual(c["frags_abandoned"], 0, c)
        self.assertEqual(c["frags_omitted"] + c["frags_sent"] + c["frags_cut_by_stop"],
                         self.events, c)
        self.assertEqual(hub.fragments(), c["frags_sent"], c)
        return c, src

    def test_generates_up_to_the_boundary(self) -> None:
        """A boundary ahead of the source: it generates exactly up to it."""
        c, src = self.run_source(0.2, 1499)
        self.assertEqual(c["frags_sent"], 1500, c)
        self.assertEqual(c["frags_cut_by_stop"], self.events - 1500, c)
        self.assertIn("drained stop after event 1499 (operator stop (test))", src.log())

    def test_boundary_already_passed(self) -> None:
        """A boundary the source has passed: it stops at once, the events
        beyond it already sent stay sent, the rest is cut by the stop."""
        c, _ = self.run_source(1.0, 10)
        self.assertGreater(c["frags_sent"], 11, c)
        self.assertLess(c["frags_sent"], self.events // 2, c)
        self.assertEqual(c["frags_cut_by_stop"], self.events - c["frags_sent"], c)

    def test_boundary_past_the_run(self) -> None:
        """A boundary beyond the last event, up to 2^64 - 2: nothing is cut."""
        self.events = 1000
        c, _ = self.run_source(0.0, 2**64 - 2)
        self.assertEqual(c["frags_sent"], 1000, c)
        self.assertEqual(c["frags_cut_by_stop"], 0, c)


class SeveralBuildersDrainTest(E2ETestCase):
    """The drained stop of a hub of two builders (--role hub), launched by
    daqrun: SIGUSR2 to the hub mid-run, the books balance over every
    daemon and the union of the builders' records is the reference's up to
    the stop."""

    needs_daemons = True

    def hub_pid(self, timeout_s: float = 30.0) -> int:
        marker = f"{TAG_VAR}={self.h.tag}".encode()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for pid in _proc_pids():
                cmd = _cmdline(pid)
                if "builderd" in cmd and "--role hub" in cmd and _has_tag(pid, marker):
                    return pid
            time.sleep(0.05)
        self.fail("no hub started")

    def test_two_builders(self) -> None:
        events, rate = 40000, 4000
        topo = topology(events=events, payload=1024, rate=rate)
        topo["run"]["batch"] = 64
        topo["hub"] = {"host": "127.0.0.1"}
        topo["builder"] = [{"id": b, "host": "127.0.0.1"} for b in range(2)]
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(
            run=self.h.daqrun(topo, timeout_s=120, args=["--check", "never"])), daemon=True)
        t.start()
        pid = self.hub_pid()
        time.sleep(2.5)   # the daemons' start, then about a second of the run
        os.kill(pid, signal.SIGUSR2)
        t.join(120)
        r = result["run"]
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        last = m["stop_last_event"]
        self.assertIsInstance(last, int)
        generated = last + 1
        self.assertLess(generated, events)
        for s in range(4):
            c = m["counters"][f"source.{s}"]
            self.assertEqual(c["frags_cut_by_stop"], events - generated, c)
            self.assertEqual(c["frags_abandoned"], 0, c)
        b = m["counters"]["builder"]
        self.assertEqual(b["events_complete"], generated, b)
        self.assertEqual(b["events_expired"], 0, b)
        self.assertIsNotNone(m["stop_to_books_ms"])
        ref = self.h.refbuild(r.run_dir, "--events", generated)
        self.assertEqual(ref.returncode, 0, ref.describe())
        self.h.assert_clean()
