"""Peer authentication with a run key: a keyed run works; a peer with
another key, or none, is refused with a reason and counted while the run goes
on; a daemon without a key will not listen off this host."""

from __future__ import annotations

import os
import time

from harness import E2ETestCase, HarnessError, Proc, read_metrics, unbalanced, wait_for_line
from wire import greet_tcp, hello, read_message

EVENTS = 3000


class AuthTest(E2ETestCase):
    needs_daemons = True

    def key(self, name: str) -> str:
        path = self.h.path(name)
        path.write_text(os.urandom(32).hex() + "\n")
        path.chmod(0o600)
        return str(path)

    def test_keyed_run_refuses_wrong_and_missing_keys(self) -> None:
        h = self.h
        key = self.key("run.key")
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=EVENTS,
                                         run_key_file=key)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports,
                                       run_key_file=key)
        sources = [h.start_source(id=s, run=1, seed=1, events=EVENTS, payload=32, rate=3000,
                                  reader_port=rport, builder=ports, run_key_file=key)
                   for s in (0, 1)]
        # Same IDs as the real sources, but no key / another key.
        no_key = h.start_source(id=0, run=1, seed=1, events=10, payload=32,
                                reader_port=rport, builder=ports)
        wrong = h.start_source(id=1, run=1, seed=1, events=10, payload=32,
                               reader_port=rport, builder=ports,
                               run_key_file=self.key("other.key"))
        for stranger in (no_key, wrong):
            self.assertEqual(h.wait(stranger, 30), 1, stranger.tail())
            self.assertIn("did not prove the run key", stranger.log())
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 15), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], EVENTS)
        # Each stranger is refused by whichever listener it reaches first.
        refused = (m["counters"]["builder"]["refused_connections"] +
                   m["counters"]["reader.0"]["refused_connections"])
        self.assertGreaterEqual(refused, 2)
        self.assertIn("did not prove the run key", builder.log() + reader.log())
        h.assert_clean()

    def test_no_key_listens_on_loopback_only(self) -> None:
        h = self.h
        r = h.run("builderd-offhost", [h.bin / "builderd", "--run", 1, "--sources", 1,
                                       "--readers", 1, "--listen", "198.18.0.1:0",
                                       "--control-listen", "127.0.0.1:0",
                                       "--out", h.dir / "x"], 10)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("not a loopback address", r.output)
        self.assertIn("--run-key-file", r.output)
        r = h.run("readoutd-offhost", [h.bin / "readoutd", "--id", 0, "--run", 1,
                                       "--listen", "0.0.0.0:0", "--sources", "0",
                                       "--builder", "tcp://127.0.0.1:1",
                                       "--control", "127.0.0.1:1"], 10)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("not a loopback address", r.output)
        r = h.run("builderd-badkey", [h.bin / "builderd", "--run", 1, "--sources", 1,
                                      "--readers", 1, "--listen", "127.0.0.1:0",
                                      "--control-listen", "127.0.0.1:0", "--out", h.dir / "y",
                                      "--run-key-file", h.dir / "missing.key"], 10)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("Cannot read the run key file", r.output)

    def test_unkeyed_run_says_so(self) -> None:
        h = self.h
        builder, ports = h.start_builder(run=1, sources=1, readers=1, events=100)
        reader, rport = h.start_reader(id=0, run=1, sources=(0,), builder=ports)
        source = h.start_source(id=0, run=1, seed=1, events=100, payload=16,
                                reader_port=rport, builder=ports)
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in (reader, source):
            h.wait(p, 15)
            self.assertIn("No run key: accepting peers on this host only", p.log())
        h.assert_clean()


class DuplicateIdTest(E2ETestCase):
    """A second peer claiming an ID that is already connected, on every
    listener: refused with duplicate_id and the holder's address, counted,
    and the run it tried to join completes with balanced books."""
    needs_daemons = True

    def test_second_claim_to_a_connected_id_is_refused(self) -> None:
        h = self.h
        events = 6000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=events)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=32, rate=2000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        wait_for_line(builder, "all 2 sources and 1 readers connected")
        for s in (0, 1):
            wait_for_line(reader, f"source {s} connected from")
        claims = {
            "builder control, as source 1":
                (ports["control"], hello("source", 1, channel="control", sources=()),
                 b"source 1 is already connected from 127.0.0.1:"),
            "builder control, as reader 0":
                (ports["control"], hello("reader", 0, channel="control", sources=(0, 1)),
                 b"reader 0 is already connected from 127.0.0.1:"),
            "builder data, as reader 0":
                (ports["data"], hello("reader", 0, sources=(0, 1)),
                 b"reader 0 already has a data connection from 127.0.0.1:"),
            "reader data, as source 0":
                (rport, hello("source", 0, sources=()),
                 b"source 0 is already connected to reader 0 from 127.0.0.1:"),
        }
        for where, (port, greeting, words) in claims.items():
            with self.subTest(where=where):
                reply = greet_tcp(port, greeting)
                self.assertIn(b"error", reply)
                self.assertIn(b"duplicate_id", reply)
                self.assertIn(words, reply)
        # A whole daemon under a taken ID gives up with the reason.
        twin = h.daemon("sourced", "source-0-twin",
                        ["--id", 0, "--run", 1, "--seed", 1, "--events", 10, "--payload", 32, "--rate", 0,
                         "--connect", f"127.0.0.1:{rport}",
                         "--control", f"127.0.0.1:{ports['control']}"])
        self.assertEqual(h.wait(twin, 30), 1, twin.tail())
        self.assertIn("already connected", twin.log())
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 15), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], events)
        self.assertEqual(m["counters"]["builder"]["frags_duplicate"], 0)
        self.assertGreaterEqual(m["counters"]["builder"]["refused_connections"], 4)
        self.assertGreaterEqual(m["counters"]["reader.0"]["refused_connections"], 1)
        # Each refusal is logged by the listener with the holder's address.
        for words in ("source 1 is already connected from", "reader 0 is already connected from",
                      "reader 0 already has a data connection from"):
            self.assertIn(words, builder.log())
        self.assertIn("source 0 is already connected to reader 0 from", reader.log())
        h.assert_clean()


class DoorTest(E2ETestCase):
    """Peers that knock but do not greet: a silent one is dropped after the
    handshake timeout, and past one address's share of a listener's
    greetings each newcomer evicts the oldest idle one (told busy); both
    are counted and the run goes on. test_greet has the attacks on the door."""
    needs_daemons = True

    def test_silent_peer_and_too_many_connections(self) -> None:
        import socket
        h = self.h
        events = 20000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=events,
                                         handshake_timeout_ms=300)
        # Long enough that no greeting of the crowd below times out meanwhile.
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports,
                                       handshake_timeout_ms=10000)
        # A silent peer on the builder's control port: challenged, then dropped.
        silent = socket.create_connection(("127.0.0.1", ports["control"]), timeout=5)
        self.assertIn(b"challenge", silent.recv(200))
        t0 = time.monotonic()
        self.assertEqual(silent.recv(200), b"", "a silent peer must be dropped")
        self.assertLess(time.monotonic() - t0, 3)
        silent.close()
        # A crowd from one address at the reader's door: each past its
        # share (a quarter of the door) evicts the oldest idle one.
        crowd = [socket.create_connection(("127.0.0.1", rport), timeout=5) for _ in range(72)]
        challenged = evicted = 0
        for s in crowd:
            challenged += b"challenge" in read_message(s)
        for s in crowd[:72 - 16]:
            data = read_message(s)
            evicted += b"busy" in data and b"the door was full" in data
        for s in crowd:
            s.close()
        self.assertEqual(challenged, 72)
        self.assertEqual(evicted, 72 - 16)
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=32, rate=10000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 15), 0, p.tail())
        self.assertIn("evicted: the door was full and this greeting was the oldest unfinished "
                      "(reader 0's data port holds at most 16 greetings from 127.0.0.1 at once)",
                      reader.log())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["events_accepted"], events)
        self.assertGreaterEqual(m["counters"]["builder"]["refused_connections"], 1)
        self.assertGreaterEqual(m["counters"]["reader.0"]["refused_connections"], 72 - 16)
        self.assertEqual(m["counters"]["reader.0"]["greetings_busy"], 72 - 16)
        self.assertEqual(m["counters"]["reader.0"]["greetings_evicted"], 72 - 16)
        h.assert_clean()
