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
        self.assertIn(f"Run {RUN}: operator stop (SIGUSR2) proposed at event", log)
        self.assertIn(f"Run {RUN}: operator stop at event {m['stop_last_event']} (proposed", log)
        self.assertIn("operator stop (SIGUSR2) ignored: already stopping", log)
        self.h.assert_clean()

    def test_source_past_the_proposal(self) -> None:
        """Source 0 frozen across the stop: the hub's proposal follows the
        events it decided, which wait for source 0, so source 1 is past it
        when the proposal comes. Source 1 answers where it is, source 0
        catches up to that once thawed, and every event up to the final
        stop is built complete: none expires, none is cut half-sent."""
        out, builder, others = self.start_run()
        self.wait_for_log(builder, "starting")
        time.sleep(1.0)
        frozen = others[1]
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            time.sleep(0.4)
            os.kill(builder.pid, signal.SIGUSR2)
            self.wait_for_log(builder, "operator stop (SIGUSR2) proposed at event")
            time.sleep(0.2)
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        m = self.finish(out, builder, others)
        self.check_cut(m, out)
        self.assertGreater(m["stop_last_event"], m["stop_proposed_event"],
                           "source 1 was not past the proposal")
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
        self.answers: list[dict] = []
        self.answered = threading.Event()
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
                if m.get("type") == "stop":
                    self.answers.append(m)
                    self.answered.set()
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

    def stop_at(self, last_event: int, confirm: bool = False) -> None:
        self.ctl.send({"type": "stop", "source": 2**32 - 1, "last_event": last_event,
                       "confirm": confirm, "reason": "operator stop (test)"})

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
        if callable(last_event):
            last_event(hub)
        else:
            hub.stop_at(last_event)
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


    def propose_then_stop(self, proposal: int, raise_by: int):
        """The hub's two steps: the proposal, the source's answer, a check
        that the source holds (no END) once it got there, then the final
        stop raise_by events past the answer. Returns the answer's box."""
        box: dict = {}

        def stop(hub: PlayedHub) -> None:
            hub.stop_at(proposal, confirm=True)
            self.assertTrue(hub.answered.wait(10), "no answer to the proposal")
            answer = hub.answers[0]
            box["answer"] = answer["last_event"]
            # Where the answer puts it is reached within (answer / rate) s;
            # past that and a second more, it holds without END.
            time.sleep(max(0.0, (answer["last_event"] + 1) / self.rate - 0.2) + 1.0)
            self.assertFalse(hub.ended.is_set(), "the source ended at a proposal")
            hub.stop_at(answer["last_event"] + raise_by)
        return stop, box

    def test_proposal_passed_is_answered_where_it_is(self) -> None:
        """A proposal the source has passed: it answers with the last event
        it generated, stops there, holds, and the final stop past it raises
        its limit: it generates exactly up to the final stop."""
        stop, box = self.propose_then_stop(10, 300)
        c, src = self.run_source(1.0, stop)
        self.assertGreater(box["answer"], 10)
        self.assertEqual(c["frags_sent"], box["answer"] + 301, c)
        self.assertEqual(c["frags_cut_by_stop"], self.events - c["frags_sent"], c)
        self.assertIn("drained stop after event 10 (operator stop (test)), proposed", src.log())

    def test_proposal_ahead_is_answered_with_it(self) -> None:
        """A proposal ahead of the source: the answer is the proposal, the
        source generates up to it and holds; the final stop at the
        proposal itself ends it there."""
        stop, box = self.propose_then_stop(1499, 0)
        c, _ = self.run_source(0.2, stop)
        self.assertEqual(box["answer"], 1499)
        self.assertEqual(c["frags_sent"], 1500, c)
        self.assertEqual(c["frags_cut_by_stop"], self.events - 1500, c)


class SeveralBuildersDrainTest(E2ETestCase):
    """The drained stop of a hub of two builders (--role hub), launched by
    daqrun: SIGUSR2 to the hub mid-run, the books balance over every
    daemon and the union of the builders' records is the reference's up to
    the stop."""

    needs_daemons = True

    def hub_pid(self) -> int:
        return self.daemon_pid("builderd|--role hub")

    def daemon_pid(self, words: str, timeout_s: float = 30.0) -> int:
        marker = f"{TAG_VAR}={self.h.tag}".encode()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for pid in _proc_pids():
                cmd = _cmdline(pid)
                if all(w in cmd for w in words.split("|")) and _has_tag(pid, marker):
                    return pid
            time.sleep(0.05)
        self.fail(f"no process with {words}")

    def test_two_builders(self) -> None:
        self.drain_run(freeze_source=False)

    def test_source_past_the_proposal(self) -> None:
        """Source 0 frozen across the stop: the others are past the hub's
        proposal when it comes (it follows the builders' tokens, which
        wait for source 0), answer where they are, and source 0 catches up
        to them. No reader is left holding a frame of an event the manager
        never assigns, and every event up to the final stop is complete."""
        self.drain_run(freeze_source=True)

    def drain_run(self, freeze_source: bool) -> None:
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
        frozen = self.daemon_pid("sourced|--id 0 ") if freeze_source else None
        time.sleep(2.5)   # the daemons' start, then about a second of the run
        if frozen is not None:
            os.kill(frozen, signal.SIGSTOP)
            time.sleep(0.4)
        try:
            os.kill(pid, signal.SIGUSR2)
            if frozen is not None:
                time.sleep(0.2)
        finally:
            if frozen is not None:
                os.kill(frozen, signal.SIGCONT)
        t.join(120)
        r = result["run"]
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        last = m["stop_last_event"]
        self.assertIsInstance(last, int)
        if frozen is not None:
            self.assertGreater(last, m["stop_proposed_event"], "no source was past the proposal")
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
