"""Rails at the builder (docs/BUILDERS.md, "Rails: several TCP connections
per link"): builderd listening on two loopback addresses (127.0.0.1 and
127.0.0.2, one port) and a reader played by hand that opens one data
connection per rail and sends each source's fragments on their lanes
(core/rails.h). With one builder (--role both) the lanes are spans of 64
global IDs; with several (--role builder, a hub played by hand as in
test_builder_role.py) the builder's k-th batch is on rail k mod rails.
Events are built, metrics.json's and the END report's per-rail groups sum
to the link's; a fragment on the wrong rail is counted and fails the run by
name; HELLOs with a rail the link cannot have are refused with the
sentence, and the real rails then lose nothing; the skip rule waits for the
lane that carries the event."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import fakesource
import wire
from fakesource import message, read_message
from harness import E2ETestCase, read_jsonl, read_metrics
from test_builder_role import FakeHub, batches

RUN = 1
SEED = 3
PAYLOAD = 32
HOSTS = ("127.0.0.1", "127.0.0.2")
SPAN = 64          # RAILS_SPAN_EVENTS: one builder's lane span
RAIL_COUNTERS = ("frames_received", "bytes_received", "read_calls")


def rail_hello(rail: int, rails: int, sources=(0, 1), reader: int = 0) -> bytes:
    return message({"type": "hello", "role": "reader", "id": reader, "channel": "data",
                    "run_id": RUN, "protocol": wire.PROTOCOL, "pid": 1, "host": "e2e",
                    "sources": list(sources), "rail": rail, "rails": rails,
                    "nonce": wire.nonce(), "proof": ""})


def greet_rail(host: str, port: int, greeting: bytes) -> tuple[socket.socket, dict]:
    """Connects to host:port, takes the challenge, greets; the socket and the
    reply."""
    s = socket.create_connection((host, port), timeout=10)
    challenge = read_message(s)
    assert challenge and challenge.get("type") == "challenge", challenge
    s.sendall(greeting)
    return s, read_message(s)


class RailReader:
    """Reader 0's link of rails connections, one to each rail's address;
    lane(event) says which carries an event."""

    def __init__(self, port: int, lane, rails: int = 2, sources=(0, 1)) -> None:
        self.lane = lane
        self.sources = list(sources)
        self.socks = []
        for k in range(rails):
            s, reply = greet_rail(HOSTS[k], port, rail_hello(k, rails, sources))
            assert reply and reply.get("type") == "welcome", reply
            s.settimeout(None)
            self.socks.append(s)
        self.sequence = {s: 0 for s in self.sources}

    def frame(self, source: int, event: int, flags: int = 0) -> bytes:
        body = b"" if flags else fakesource.refbuild.payload(SEED, RUN, event, source, PAYLOAD)
        seq = self.sequence[source]
        self.sequence[source] += 1
        return fakesource.refbuild.encode_frame(source, RUN, event, seq, time.time_ns(), flags,
                                                body)

    def send(self, frames) -> None:
        """(source, event) pairs, each on its lane's connection, or
        (source, event, rail) on the one given."""
        out = [b"" for _ in self.socks]
        for f in frames:
            rail = f[2] if len(f) > 2 else self.lane(f[1])
            out[rail] += self.frame(f[0], f[1])
        for s, data in zip(self.socks, out):
            if data:
                s.sendall(data)

    def send_events(self, events) -> None:
        self.send([(s, e) for e in events for s in self.sources])

    def end(self, events: int) -> None:
        """Every source's END frame on every rail, then each closed."""
        for s in self.socks:
            s.sendall(b"".join(self.frame(src, events, flags=1) for src in self.sources))
            s.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        for s in self.socks:
            s.close()


def rails_sum(groups: dict, link: str, rails: int, name: str) -> int:
    return sum(groups[f"{link}.rail.{k}"][name] for k in range(rails))


def equation(metrics: dict, name: str) -> dict:
    found = [e for e in metrics["equations"] if e.get("name") == name]
    assert len(found) == 1, (name, [e.get("name") for e in metrics["equations"]])
    return found[0]


SUMS = "builder 0 from reader 0: the rails' frames received = the link's"
WRONG = "builder 0 from reader 0: frames on the wrong rail = 0"


class BuilderRailsTest(E2ETestCase):
    needs_daemons = True

    # -- one builder (--role both) -------------------------------------------

    def start_both(self, events: int, **flags):
        """The hub and its one builder on two rails; no control peer ever
        comes, so the run ends at --peer-timeout-ms as failed: these tests
        look at the data side alone."""
        out = self.h.path("run", "x").parent
        pf = self.h.path("ports", "builder.port")
        flags.setdefault("peer_timeout_ms", 3000)
        proc = self.h.daemon("builderd", "builder",
                             ["--run", RUN, "--sources", 2, "--readers", 1, "--events", events,
                              "--listen", f"{HOSTS[0]}:0", "--listen", f"{HOSTS[1]}:0",
                              "--control-listen", "127.0.0.1:0", "--out", out,
                              "--port-file", pf], **flags)
        keys = ("data", "control") + (("metrics",) if "metrics_listen" in flags else ())
        return proc, self.h.wait_port_file(pf, keys, 15, proc), out

    def both_metrics(self, proc, out) -> dict:
        self.assertEqual(self.h.wait(proc, 30), 1, proc.tail(40))
        return read_metrics(out)

    def test_both_two_rails_build_and_sum(self) -> None:
        """256 events on two rails in spans of 64: every one built, each
        rail's counters in builder.from_reader.0.rail.K, summing to the
        link's; socket buffers read back; nothing on a wrong rail."""
        proc, ports, out = self.start_both(256)
        reader = RailReader(ports["data"], lambda e: (e // SPAN) % 2)
        reader.send_events(range(256))
        reader.end(256)
        m = self.both_metrics(proc, out)
        c = m["counters"]
        self.assertEqual(c["builder"]["events_complete"], 256, proc.tail(40))
        self.assertEqual(c["builder"]["events_expired"], 0)
        link = "builder.from_reader.0"
        self.assertEqual(c[link]["frames_received"], 512)
        self.assertEqual(c[link]["end_frames"], 4)
        for name in RAIL_COUNTERS:
            self.assertEqual(rails_sum(c, link, 2, name), c[link][name], name)
        for k in range(2):
            rail = c[f"{link}.rail.{k}"]
            self.assertEqual(rail["frames_received"], 256)
            self.assertEqual(rail["frames_wrong_rail"], 0)
            self.assertGreater(rail["socket_buffer_bytes"], 0)
        self.assertNotIn(f"{link}.rail.2", c)
        self.assertFalse([e for e in m["errors"] if "rail" in e], m["errors"])
        self.assertTrue(equation(m, SUMS)["ok"], equation(m, SUMS))
        self.assertEqual((equation(m, SUMS)["lhs"], equation(m, SUMS)["rhs"]), (512, 512))
        self.assertTrue(equation(m, WRONG)["ok"], equation(m, WRONG))
        self.assertEqual(len(read_jsonl(out / "events.jsonl")), 256)
        log = proc.log()
        self.assertIn("rail 0 of 2", log)
        self.assertIn("rail 1 of 2", log)

    def test_both_wrong_rail_is_counted_and_fails(self) -> None:
        """Event 70 (lane 1) of source 0 sent on rail 0: counted
        frames_wrong_rail on rail 0, named in the errors, and still built."""
        proc, ports, out = self.start_both(128)
        reader = RailReader(ports["data"], lambda e: (e // SPAN) % 2)
        frames = [(s, e) for e in range(128) for s in (0, 1)]
        frames[frames.index((0, 70))] = (0, 70, 0)
        reader.send(frames)
        reader.end(128)
        m = self.both_metrics(proc, out)
        c = m["counters"]
        self.assertEqual(c["builder.from_reader.0.rail.0"]["frames_wrong_rail"], 1)
        self.assertEqual(c["builder.from_reader.0.rail.1"]["frames_wrong_rail"], 0)
        self.assertEqual(c["builder"]["events_complete"], 128)
        sentence = ("Reader 0 sent a fragment of event 70 (source 0) on rail 0 of 2, but its "
                    "lane is rail 1: reader and builder disagree on the lanes (frames_wrong_rail)")
        self.assertIn(sentence, m["errors"])
        self.assertIn(sentence, proc.log())
        self.assertFalse(equation(m, WRONG)["ok"], equation(m, WRONG))
        self.assertEqual(equation(m, WRONG)["lhs"], 1)

    def test_both_bad_rails_are_refused(self) -> None:
        """With rail 0 of 2 connected: rail 0 of 1 (rails disagree), rail 0
        of 2 again (already connected), rail 2 of 3 (beyond the builder's two
        addresses), rail 1 at rail 0's address (URLs crossed) are refused
        with the sentence; the real rails then build every event."""
        proc, ports, out = self.start_both(128)
        port = ports["data"]
        first, reply = greet_rail(HOSTS[0], port, rail_hello(0, 2))
        self.assertEqual(reply["type"], "welcome", reply)
        held = "%s:%d" % first.getsockname()
        refusals = [
            (rail_hello(0, 1), "bad_rail",
             "reader 0 greeted rail 0 of 1, but its earlier connections said 2 rails"),
            (rail_hello(0, 2), "duplicate_id",
             f"reader 0's rail 0 of 2 is already connected from {held}"),
            (rail_hello(2, 3), "bad_rail",
             "reader 0 greeted rail 2 of 3, but the builder listens on 2 addresses"),
        ]
        for greeting, code, text in refusals:
            s, reply = greet_rail(HOSTS[1], port, greeting)
            s.close()
            self.assertEqual(reply["type"], "error", reply)
            self.assertEqual(reply["code"], code, reply)
            self.assertEqual(reply["reason"], text, reply)
        # Rail 1 at rail 0's address: the reader's rail URLs crossed.
        s, reply = greet_rail(HOSTS[0], port, rail_hello(1, 2))
        s.close()
        self.assertEqual((reply["type"], reply["code"], reply["reason"]),
                         ("error", "bad_rail", "reader 0 greeted rail 1 of 2 on the builder's "
                                               "rail 0 address: its rails' URLs are crossed"))
        second, reply = greet_rail(HOSTS[1], port, rail_hello(1, 2))
        self.assertEqual(reply["type"], "welcome", reply)
        reader = RailReader.__new__(RailReader)
        reader.lane, reader.sources = (lambda e: (e // SPAN) % 2), [0, 1]
        reader.socks, reader.sequence = [first, second], {0: 0, 1: 0}
        reader.send_events(range(128))
        reader.end(128)
        m = self.both_metrics(proc, out)
        c = m["counters"]
        self.assertEqual(c["builder"]["refused_connections"], 4)
        self.assertEqual(c["builder"]["events_complete"], 128)
        self.assertEqual(c["builder.from_reader.0"]["frames_received"], 256)

    def test_both_skip_waits_for_the_events_lane(self) -> None:
        """Source 1 omits event 10 (lane 0) while its lane 1 runs on to 127:
        event 10 is not skipped, however long past the skip timeout, until
        source 1 passes it on lane 0; then it is, with source 1 missing."""
        proc, ports, out = self.start_both(128, metrics_listen="127.0.0.1:0",
                                           timeout_ms=20000, skip_timeout_ms=50)
        reader = RailReader(ports["data"], lambda e: (e // SPAN) % 2)
        reader.send_events(range(64, 128))
        reader.send([(0, e) for e in range(11)] + [(1, e) for e in range(10)])
        status = self.wait_status(ports["metrics"], lambda s: s["events_complete"] >= 64 + 10)
        time.sleep(0.5)
        status = self.wait_status(ports["metrics"], lambda s: True)
        self.assertEqual(status["events_expired"], 0, status)
        self.assertEqual(status["oldest_pending"], 10, status)
        reader.send([(s, e) for e in range(11, 64) for s in (0, 1)])
        status = self.wait_status(ports["metrics"], lambda s: s["events_expired"] == 1)
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics']}/metrics",
                                    timeout=5) as r:
            prom = r.read().decode()
        self.assertIn('es_builder_rail_frames_total{reader="0",rail="1"} 128', prom)
        self.assertIn('es_builder_rail_frames_wrong_rail_total{reader="0",rail="0"} 0', prom)
        reader.end(128)
        m = self.both_metrics(proc, out)
        self.assertEqual(m["counters"]["builder"]["events_expired_skipped"], 1)
        self.assertEqual(m["counters"]["builder"]["events_complete"], 127)
        expired = read_jsonl(out / "expired.jsonl")
        self.assertEqual([(x["event"], x["reason"], x["missing"]) for x in expired],
                         [(10, "skipped", [1])])

    def wait_status(self, port: int, ok, timeout_s: float = 15) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
                s = json.loads(r.read())
            if ok(s) or time.monotonic() > deadline:
                self.assertTrue(ok(s), s)
                return s
            time.sleep(0.05)

    def test_a_rail_address_that_cannot_be_bound(self) -> None:
        """The port taken on rail 1's address by someone else: the builder
        says which rail's address cannot take it, and exits 1; option
        mistakes are named at once."""
        taken = socket.socket()
        taken.bind((HOSTS[1], 0))
        taken.listen(1)
        self.addCleanup(taken.close)
        port = taken.getsockname()[1]
        proc = self.h.daemon("builderd", "builder",
                             ["--run", RUN, "--sources", 2, "--readers", 1,
                              "--listen", f"{HOSTS[0]}:{port}", "--listen", f"{HOSTS[1]}:{port}",
                              "--control-listen", "127.0.0.1:0",
                              "--out", self.h.path("run", "x").parent])
        self.assertEqual(self.h.wait(proc, 20), 1, proc.tail())
        self.assertIn(f"Rail 1's data address {HOSTS[1]} cannot take port {port}, which rail 0 "
                      f"({HOSTS[0]}) listens on", proc.log())
        for listens, text in (
                (("127.0.0.1:0", "127.0.0.2:7100"),
                 "--listen: every rail's address takes the same port: the first has 0, "
                 "'127.0.0.2:7100' has 7100"),
                (("127.0.0.1:0", "127.0.0.1:0"),
                 "--listen: address 127.0.0.1 is given twice; each rail listens on its own"),
                (tuple(f"127.0.0.{i}:0" for i in range(1, 6)),
                 "--listen: given more than 4 times; it takes one address per rail, at most 4")):
            args = ["--run", RUN, "--sources", 2, "--readers", 1, "--control-listen",
                    "127.0.0.1:0", "--out", self.h.path("bad", "x").parent]
            for a in listens:
                args += ["--listen", a]
            bad = self.h.daemon("builderd", "builder-bad", args)
            self.assertEqual(self.h.wait(bad, 10), 2, bad.tail())
            self.assertIn(text, bad.log())

    # -- one builder of several (--role builder) -----------------------------

    def start_builder(self, **flags):
        self.hub = FakeHub()
        self.addCleanup(self.hub.close)
        out = self.h.path("builders", "0", "x").parent
        pf = self.h.path("ports", "builder-0.port")
        proc = self.h.daemon("builderd", "builder-0",
                             ["--role", "builder", "--id", 0, "--builders", 2,
                              "--hub", f"127.0.0.1:{self.hub.port}", "--run", RUN,
                              "--sources", 2, "--readers", 1,
                              "--listen", f"{HOSTS[0]}:0", "--listen", f"{HOSTS[1]}:0",
                              "--out", out, "--port-file", pf, "--timeout-ms", 300], **flags)
        ports = self.h.wait_port_file(pf, ("data",), 15, proc)
        self.assertTrue(self.hub.greeted.wait(15), proc.tail())
        return proc, ports, out

    def builder_run(self, wrong=None) -> tuple:
        """Builder 0 of 2, static batches of 8 over 64 events; its k-th
        batch on rail k mod 2. wrong: (source, event) sent on the other
        rail."""
        proc, ports, out = self.start_builder()
        plan = batches(64, 8, 2)
        self.hub.routing(builders=2, events=64, batch=8)
        mine = [e for f, c, b in plan if b == 0 for e in range(f, f + c)]
        lane = {e: (i // 8) % 2 for i, e in enumerate(mine)}
        reader = RailReader(ports["data"], lambda e: lane[e])
        self.hub.wait_for("token")
        for rec in plan:
            self.hub.assign(*rec)
        frames = [(s, e) for e in mine for s in (0, 1)]
        if wrong is not None:
            frames[frames.index(wrong)] = wrong + (1 - lane[wrong[1]],)
        reader.send(frames)
        reader.end(64)
        end = self.hub.wait_for("end")[0]
        self.hub.send({"type": "bye", "status": 0})
        return proc, end, out, mine

    def test_builder_two_rails_build_and_sum(self) -> None:
        """Its 32 events built over two rails; END groups reader.0.rail.K
        sum to reader.0; status 0."""
        proc, end, out, mine = self.builder_run()
        self.assertEqual(self.h.wait(proc, 20), 0, proc.tail(40))
        g = end["groups"]
        self.assertEqual(end["status"], 0)
        self.assertEqual(g[""]["events_complete"], 32)
        self.assertEqual(g["reader.0"]["frames_received"], 64)
        self.assertEqual(g["reader.0"]["end_frames"], 4)
        for name in RAIL_COUNTERS:
            self.assertEqual(rails_sum(g, "reader.0", 2, name), g["reader.0"][name], name)
        for k in range(2):
            self.assertEqual(g[f"reader.0.rail.{k}"]["frames_received"], 32)
            self.assertEqual(g[f"reader.0.rail.{k}"]["frames_wrong_rail"], 0)
            self.assertGreater(g[f"reader.0.rail.{k}"]["socket_buffer_bytes"], 0)
        self.assertEqual(sorted(e["event"] for e in read_jsonl(out / "events.jsonl")), mine)

    def test_builder_holds_per_rail(self) -> None:
        """Its batch 2 (global 32..39, rail 0) arrives before its assign:
        rail 0 holds it (frames_held_unassigned) while rail 1 goes on and
        its batch 1 (16..23) is built; the assign then lets rail 0 on."""
        proc, ports, out = self.start_builder(metrics_listen="127.0.0.1:0")
        pf = self.h.path("ports", "builder-0.port")
        mports = self.h.wait_port_file(pf, ("metrics",), 15, proc)
        plan = batches(64, 8, 2)
        self.hub.routing(builders=2, events=64, batch=8)
        mine = [e for f, c, b in plan if b == 0 for e in range(f, f + c)]
        lane = {e: (i // 8) % 2 for i, e in enumerate(mine)}
        reader = RailReader(ports["data"], lambda e: lane[e])
        self.hub.wait_for("token")
        for rec in plan[:2]:
            self.hub.assign(*rec)
        reader.send_events(list(range(0, 8)) + list(range(32, 40)))
        self.wait_status(mports["metrics"], lambda s: s["events_complete"] == 8 and
                         s["frames_held_unassigned"] >= 1)
        self.hub.assign(*plan[2])
        reader.send_events(range(16, 24))
        status = self.wait_status(mports["metrics"], lambda s: s["events_complete"] == 16)
        self.assertEqual(status["events_assigned"], 16)
        for rec in plan[3:]:
            self.hub.assign(*rec)
        reader.send_events(range(48, 56))
        reader.end(64)
        end = self.hub.wait_for("end")[0]
        self.hub.send({"type": "bye", "status": 0})
        self.assertEqual(self.h.wait(proc, 20), 0, proc.tail(40))
        g = end["groups"]
        self.assertEqual(g[""]["events_complete"], 32)
        self.assertGreaterEqual(g[""]["frames_held_unassigned"], 1)
        self.assertEqual(g["reader.0.rail.0"]["frames_received"], 32)
        self.assertEqual(g["reader.0.rail.1"]["frames_received"], 32)
        self.assertEqual(sorted(e["event"] for e in read_jsonl(out / "events.jsonl")), mine)

    def test_builder_first_batch_short(self) -> None:
        """A run from event 5 in batches of 8: the first batch, 5..7, is
        short and builder 0's. Its batches in order still go to rails 0, 1,
        0, 1, 0 (5..7, 16..23, 32..39, 48..55, 64..68): none on a wrong
        rail, every one built."""
        proc, ports, out = self.start_builder()
        first, events, batch = 5, 64, 8
        end = first + events
        plan = [(max(k * batch, first), min((k + 1) * batch, end) - max(k * batch, first), k % 2)
                for k in range(first // batch, (end - 1) // batch + 1)]
        self.hub.routing(builders=2, events=events, batch=batch, first=first)
        own = [(f, c) for f, c, b in plan if b == 0]
        lane = {e: k % 2 for k, (f, c) in enumerate(own) for e in range(f, f + c)}
        mine = sorted(lane)
        reader = RailReader(ports["data"], lambda e: lane[e])
        self.hub.wait_for("token")
        for rec in plan:
            self.hub.assign(*rec, retired=first)
        reader.send_events(mine)
        reader.end(events)
        report = self.hub.wait_for("end")[0]
        self.hub.send({"type": "bye", "status": 0})
        self.assertEqual(self.h.wait(proc, 20), 0, proc.tail(40))
        g = report["groups"]
        self.assertEqual(g[""]["events_complete"], len(mine))
        for k in range(2):
            self.assertEqual(g[f"reader.0.rail.{k}"]["frames_wrong_rail"], 0)
        self.assertEqual(g["reader.0.rail.0"]["frames_received"], 2 * (3 + 8 + 5))
        self.assertEqual(sorted(e["event"] for e in read_jsonl(out / "events.jsonl")), mine)

    def test_builder_wrong_rail_fails_the_run(self) -> None:
        """Global event 32 (its batch 2, rail 0) of source 1 on rail 1:
        counted, the run fails by name, the event still built."""
        proc, end, out, mine = self.builder_run(wrong=(1, 32))
        self.assertEqual(self.h.wait(proc, 20), 1, proc.tail(40))
        g = end["groups"]
        self.assertEqual(end["status"], 1)
        self.assertEqual(g["reader.0.rail.1"]["frames_wrong_rail"], 1)
        self.assertEqual(g["reader.0.rail.0"]["frames_wrong_rail"], 0)
        self.assertEqual(g[""]["events_complete"], 32)
        self.assertIn("Reader 0 sent a fragment of event 32 (source 1) on rail 1 of 2, but its "
                      "lane is rail 0: reader and builder disagree on the lanes "
                      "(frames_wrong_rail)", proc.log())


if __name__ == "__main__":
    import unittest
    unittest.main()
