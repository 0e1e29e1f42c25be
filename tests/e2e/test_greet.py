"""Hostile and broken peers at the door (docs/PROTOCOL.md, "Greeting"):
idle connections piled on the builder's data port, a HELLO dribbled a byte
at a time, a flood of refused greetings, a source HELLO of another protocol
version at a reader, a peer that takes a reader's slot and leaves. Each
attack runs against real daemons; each checks the clear error, its counter,
and that the legitimate run started after (or during) it completes with
balanced books."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import sys
import threading
import time
import urllib.request

from harness import E2ETestCase, HarnessError, Proc, read_metrics, unbalanced, wait_for_line
from wire import PROTOCOL, greet, greet_tcp, hello, message, read_message

EVENTS = 3000
CAP = 64          # greetings a listener holds at once (common/io/handshake.h)
SHARE = CAP // 4  # of them, from one address


class GreetTest(E2ETestCase):
    needs_daemons = True

    def legit_run(self, builder: Proc, ports: dict, **flags) -> dict:
        """One reader and two sources of EVENTS events (flags to all three):
        all exit 0, the books balance and every event is accepted. Returns
        metrics.json."""
        h = self.h
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports, **flags)
        sources = [h.start_source(id=s, run=1, seed=1, events=EVENTS, payload=32, rate=5000,
                                  reader_port=rport, builder=ports, **flags) for s in (0, 1)]
        self.assertEqual(h.wait(builder, 90), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 20), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], EVENTS)
        self.reader = reader
        return m

    def test_idle_crowd_on_the_data_port(self) -> None:
        """64 silent connections to the builder's data port, held 3 s, less
        than the handshake deadline (5 s) and more than the builder's peer
        timeout (1.5 s): each newcomer past one address's share evicts the
        oldest idle greeting, so the reader's data greeting gets in at once,
        the run starts while the crowd is still held, and it completes
        with balanced books."""
        self.idle_crowd({})

    def test_idle_crowd_against_a_keyed_run(self) -> None:
        """The same with a run key: the door holds before any proof is
        checked."""
        key = self.h.path("run.key")
        key.write_text(os.urandom(32).hex() + "\n")
        key.chmod(0o600)
        self.idle_crowd({"run_key_file": key})

    def idle_crowd(self, flags: dict) -> None:
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS,
                                         peer_timeout_ms=1500, **flags)
        t0 = time.monotonic()
        crowd = [socket.create_connection(("127.0.0.1", ports["data"]), timeout=10)
                 for _ in range(CAP)]
        try:
            for s in crowd:
                self.assertIn(b"challenge", read_message(s))
            # Each newcomer past the share put out the oldest idle one.
            self.assertEqual(readable(crowd), list(range(CAP - SHARE)))
            reply = read_message(crowd[0])
            self.assertIn(b"busy", reply)
            self.assertIn(b"evicted: the door was full and this greeting was the oldest "
                          b"unfinished (the builder's data port holds at most 16 greetings "
                          b"from 127.0.0.1 at once); retry later", reply)
            reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports, **flags)
            sources = [h.start_source(id=s, run=1, seed=1, events=EVENTS, payload=32,
                                      rate=5000, reader_port=rport, builder=ports, **flags)
                       for s in (0, 1)]
            wait_for_line(builder, "connected; starting", timeout_s=3)
            started = time.monotonic() - t0
            print(f"\n  run started {started:.2f} s after the crowd came", file=sys.stderr)
            self.assertLess(started, 3, "the run starts while the crowd is held")
            # The reader's data greeting took the place of the oldest idle
            # one left; the rest of the crowd is still in.
            self.assertEqual(readable(crowd[CAP - SHARE:]), [0])
            time.sleep(max(0.0, 3 - (time.monotonic() - t0)))
        finally:
            for s in crowd:
                s.close()
        self.assertEqual(h.wait(builder, 90), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 20), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], EVENTS)
        c = m["counters"]["builder"]
        self.assertEqual(c["greetings_evicted"], CAP - SHARE + 1)
        self.assertEqual(c["greetings_busy"], CAP - SHARE + 1)
        self.assertEqual(c["greetings_timed_out"], 0)
        # The evicted, and those left when the crowd went if the run was
        # still on.
        self.assertGreaterEqual(c["refused_connections"], CAP - SHARE + 1)
        self.assertNotIn("Greeting with the builder's data port", reader.log())
        blog = builder.log()
        self.assertIn("Refused 127.0.0.1:", blog)
        self.assertIn("evicted: the door was full", blog)
        self.assertNotIn("the builder's control port holds", blog)
        h.assert_clean()

    def test_eviction_order(self) -> None:
        """At a full share the idle greeting goes before one that has sent
        part of its HELLO, the oldest first; with none idle, the oldest
        partial one. Counted on /metrics; a run started after still gets
        in and balances."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS,
                                         handshake_timeout_ms=60000,
                                         metrics_listen="127.0.0.1:0")
        ports = h.wait_port_file(h.path("ports", "builder-0.port"), ("metrics",), 15, builder)
        part = hello("reader", 0, sources=(0, 1))[:3]
        held: list[socket.socket] = []

        def come(partial: bool) -> socket.socket:
            s = socket.create_connection(("127.0.0.1", ports["data"]), timeout=10)
            self.assertIn(b"challenge", read_message(s))
            if partial:
                s.sendall(part)
            held.append(s)
            return s

        def evicted_by_newcomer(partial: bool = False) -> list[socket.socket]:
            """Who of those held was put out by one more connection."""
            time.sleep(0.05)  # the builder has read the partial bytes
            before = list(held)
            come(partial)
            gone = [before[i] for i in readable(before)]
            for s in gone:
                self.assertIn(b"evicted: the door was full", read_message(s))
                held.remove(s)
                s.close()
            return gone

        try:
            oldest = come(partial=True)
            idle = [come(partial=False) for _ in range(SHARE - 1)]
            for s in idle:
                self.assertEqual(evicted_by_newcomer(partial=True), [s],
                                 "the oldest idle one, not the older partial one")
            self.assertEqual(len(held), SHARE)
            self.assertEqual(evicted_by_newcomer(partial=True), [oldest],
                             "none idle: the oldest partial one")
            with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics']}/metrics",
                                        timeout=5) as r:
                scrape = r.read().decode()
            self.assertIn(f"\nes_builder_greetings_evicted_total {SHARE}\n", scrape)
            self.assertIn(f"\nes_builder_greetings_busy_total {SHARE}\n", scrape)
            # The reader gets in past the partial crowd: it puts out the
            # oldest of it, not waiting for the 60 s deadline.
            m = self.legit_run(builder, ports)
        finally:
            for s in held:
                s.close()
        self.assertEqual(m["counters"]["builder"]["greetings_evicted"], SHARE + 1)
        self.assertEqual(m["counters"]["builder"]["greetings_timed_out"], 0)
        h.assert_clean()

    def test_a_peer_that_gives_up_says_what_it_was_told(self) -> None:
        """A reader kept out longer than its connect timeout (by a data port
        that answers every greeting busy) ends with the listener's last
        words, not "greeting failed", after retrying with backoff."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=1, readers=1, events=10)
        with busy_door("the data port has no room; retry later") as port:
            reader, _ = h.start_reader(id=0, run=1, sources=(0,),
                                       builder=dict(ports, data=port),
                                       connect_timeout_ms=1500)
            self.assertEqual(h.wait(reader, 20), 1, reader.tail())
        self.assertRegex(reader.log(),
                         r"Gave up greeting the builder's data port at 127\.0\.0\.1:\d+ after "
                         r"\d+ attempts in 1\.\d s; it said last: the data port has no room; "
                         r"retry later \(busy\)")
        attempts = int(re.search(r"after (\d+) attempts", reader.log()).group(1))
        self.assertGreater(attempts, 3, "retried with backoff")
        self.assertLess(attempts, 20, "backoff, not a busy loop")
        h.stop(builder)
        h.assert_clean()

    def test_dribbled_hello_is_dropped_at_the_deadline(self) -> None:
        """A HELLO sent a byte per 10 ms is cut at the handshake timeout from
        the accept, however steadily its bytes come."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS,
                                         handshake_timeout_ms=1000,
                                         metrics_listen="127.0.0.1:0")
        ports = h.wait_port_file(h.path("ports", "builder-0.port"), ("metrics",), 15, builder)
        greeting = hello("source", 0, channel="control", sources=(), host="d" * 200)
        s = socket.create_connection(("127.0.0.1", ports["control"]), timeout=10)
        t0 = time.monotonic()
        self.assertIn(b"challenge", read_message(s))
        closed_after = None
        for i, byte in enumerate(greeting):
            try:
                s.send(bytes([byte]))
            except OSError:
                closed_after = time.monotonic() - t0
                break
            if select.select([s], [], [], 0.01)[0]:
                if s.recv(100) == b"":
                    closed_after = time.monotonic() - t0
                    break
        s.close()
        self.assertIsNotNone(closed_after, f"all {len(greeting)} bytes were taken")
        self.assertLess(i, len(greeting) - 1)
        print(f"\n  dribbled HELLO closed after {closed_after:.3f} s and {i} of "
              f"{len(greeting)} bytes", file=sys.stderr)
        self.assertGreaterEqual(closed_after, 0.9)
        self.assertLess(closed_after, 2.0)
        wait_for_line(builder, "failed: no complete greeting within the handshake timeout "
                               "(1000 ms)")
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics']}/metrics",
                                    timeout=5) as r:
            scrape = r.read().decode()
        self.assertIn("\nes_builder_greetings_timed_out_total 1\n", scrape)
        self.assertIn("\nes_builder_greetings_busy_total 0\n", scrape)
        m = self.legit_run(builder, ports)
        self.assertEqual(m["counters"]["builder"]["greetings_timed_out"], 1)
        self.assertEqual(m["counters"]["builder"]["refused_connections"], 1)
        h.assert_clean()

    def test_a_flood_of_refusals_is_counted_not_logged(self) -> None:
        """1,000 greetings refused (another run's) in a second or two: every
        one counted, a few lines logged, the rest summed up in a line."""
        h = self.h
        flood = 1000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS)
        t0 = time.monotonic()
        for _ in range(flood):
            reply = greet_tcp(ports["control"], hello("source", 0, run=2, channel="control",
                                                      sources=()))
            self.assertIn(b"wrong_run", reply)
        elapsed = time.monotonic() - t0
        wait_for_line(builder, "more in the last second, not logged one by one")
        m = self.legit_run(builder, ports)
        self.assertEqual(m["counters"]["builder"]["refused_connections"], flood)
        log = builder.log()
        lines = log.count("source 0 is in run 2 but the builder is in run 1")
        summed = sum(int(n) for n in re.findall(
            r"Greetings refused or failed on the builder's control port: (\d+) more in the "
            r"last second", log))
        print(f"\n  {flood} refusals in {elapsed:.2f} s: {lines} lines logged, {summed} summed up",
              file=sys.stderr)
        self.assertEqual(lines + summed, flood, "every refusal is logged or summed up")
        # At most 5 lines a second, plus the second under way at each end.
        self.assertLessEqual(lines, 5 * (int(elapsed) + 2))
        h.assert_clean()

    def test_wrong_protocol_at_the_reader(self) -> None:
        """readoutd refuses a source HELLO of another protocol version with
        the builder's words (one check for every listener)."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        reply = greet_tcp(rport, hello("source", 0, sources=(), protocol=999))
        self.assertIn(b"wrong_protocol", reply)
        self.assertIn(f"source 0 speaks protocol 999, reader 0 speaks {PROTOCOL}".encode(), reply)
        reply = greet_tcp(ports["data"], hello("reader", 0, sources=(0, 1), protocol=999))
        self.assertIn(f"reader 0 speaks protocol 999, the builder speaks {PROTOCOL}".encode(), reply)
        sources = [h.start_source(id=s, run=1, seed=1, events=EVENTS, payload=32, rate=5000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        self.assertEqual(h.wait(builder, 90), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 20), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], EVENTS)
        self.assertEqual(m["counters"]["reader.0"]["refused_connections"], 1)
        self.assertEqual(m["counters"]["builder"]["refused_connections"], 1)
        self.assertIn("Refused 127.0.0.1:", reader.log())
        self.assertIn(f"source 0 speaks protocol 999, reader 0 speaks {PROTOCOL}", reader.log())
        h.assert_clean()

    def test_slot_of_a_peer_that_left_is_free_again(self) -> None:
        """A peer greets the builder's data port as reader 0, or the reader's
        as source 0, and leaves without a byte: the slot is free for the real
        one, and a later claim while the real one streams names the real
        one's address, not the one gone."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS * 4)
        with socket.create_connection(("127.0.0.1", ports["data"]), timeout=10) as s:
            gone = "%s:%d" % s.getsockname()
            self.assertIn(b"welcome", greet(s, hello("reader", 0, sources=(0, 1))))
        wait_for_line(builder, f"Reader 0's data connection from {gone} closed; it carried "
                               "nothing, so the slot is free for reader 0 again")
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        # The same at the reader's door, as source 0.
        with socket.create_connection(("127.0.0.1", rport), timeout=10) as s:
            gone_source = "%s:%d" % s.getsockname()
            self.assertIn(b"welcome", greet(s, hello("source", 0, sources=())))
        wait_for_line(reader, f"Reader 0: source 0's connection from {gone_source} closed; it "
                              "carried nothing, so the slot is free for source 0 again")
        sources = [h.start_source(id=s, run=1, seed=1, events=EVENTS * 4, payload=32, rate=4000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        deadline = time.monotonic() + 15
        while len(re.findall(r"Reader 0 data connected from", builder.log())) < 2:
            self.assertLess(time.monotonic(), deadline, builder.tail())
            time.sleep(0.05)
        held = re.findall(r"Reader 0 data connected from (\S+) ", builder.log())[-1]
        self.assertNotEqual(held, gone)
        reply = greet_tcp(ports["data"], hello("reader", 0, sources=(0, 1)))
        self.assertIn(b"duplicate_id", reply)
        self.assertIn(f"reader 0 already has a data connection from {held}".encode(), reply)
        self.assertNotIn(gone.encode(), reply)
        self.assertEqual(h.wait(builder, 90), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 20), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], EVENTS * 4)
        self.assertEqual(m["counters"]["builder"]["refused_connections"], 1)
        self.assertEqual(m["counters"]["reader.0"]["refused_connections"], 0)
        self.assertEqual(m["counters"]["reader.0"]["err_no_end"], 0)
        h.assert_clean()

    def test_reader_lost_while_kept_at_the_door(self) -> None:
        """A reader whose data greeting is kept out (a data port that
        answers busy), and that is killed meanwhile, is lost before the run
        starts: the others start without it, and the run ends with the loss
        named and the books balanced."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=4, readers=2, events=EVENTS)
        reader0, rport0 = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        wait_for_line(builder, "Reader 0 data connected from")
        with busy_door("kept out; retry later") as port:
            reader1, rport1 = h.start_reader(id=1, run=1, sources=(2, 3),
                                             builder=dict(ports, data=port),
                                             connect_timeout_ms=60000)
            sources = [h.start_source(id=s, run=1, seed=1, events=EVENTS, payload=32,
                                      rate=5000, reader_port=rport0 if s < 2 else rport1,
                                      builder=ports) for s in range(4)]
            wait_for_line(builder, "Reader 1 joined run 1")
            wait_for_line(reader1, "Greeting with the builder's data port")
            for s in range(4):
                wait_for_line(builder, f"Source {s} joined run 1")
            self.assertNotIn("starting", builder.log())
            os.killpg(reader1.pid, signal.SIGKILL)
            self.assertEqual(h.wait(builder, 90), 1, builder.tail())
        for p in [reader0] + sources[:2]:
            self.assertEqual(h.wait(p, 20), 0, p.tail())
        for p in sources[2:]:
            h.wait(p, 20)
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_complete"], 0)
        errors = " | ".join(m["errors"])
        self.assertRegex(errors, r"Reader 1 \(127\.0\.0\.1:\d+, pid \d+ on [^)]+\) lost its "
                                 r"control connection before reporting")
        self.assertIn("Run 1: all 4 sources and 2 readers connected; starting", builder.log())
        h.assert_clean()


def readable(socks: list[socket.socket], timeout_s: float = 0.2) -> list[int]:
    """The indices of those of socks the listener has said something more
    on (or closed), waiting up to timeout_s for the first."""
    ready = set(select.select(socks, [], [], timeout_s)[0])
    if ready:
        time.sleep(0.05)  # the others sent in the same turn of the loop
        ready = set(select.select(socks, [], [], 0)[0])
    return sorted(i for i, s in enumerate(socks) if s in ready)


@contextlib.contextmanager
def busy_door(reason: str):
    """A listener on a loopback port that answers every connection with an
    ERROR busy in place of the challenge, as a full door used to: yields
    its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(message({"type": "error", "code": "busy", "reason": reason}))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        t.join()
        listener.close()
