"""One builder of a run of several (builderd --role builder, docs/BUILDERS.md)
against a hub played by hand over a real socket (the control protocol of
docs/PROTOCOL.md: greeting, routing, assign, token, END, BYE) and a reader
played by hand on its real data port (data HELLO, frames of
docs/fragment-format.md, END frames): it builds exactly the events the hub
assigned it and writes them with their global IDs, joins with its first
TOKEN once the reader's data path is up and tokens on, holds a frame of an
event not yet assigned until the assign comes, counts a fragment of
another builder's event as misrouted and fails the run by name, refuses a
plan that is not its own, stops when its hub goes, and ends with the END
report of the contract and a builder.json."""

from __future__ import annotations

import json
import socket
import threading
import time

from fakesource import Link, greet, hello as peer_hello, message, read_message
import wire
from harness import E2ETestCase, read_jsonl
import fakesource

RUN = 1
SEED = 3
PAYLOAD = 32


class FakeHub:
    """The hub's control port, for one builder: greets it, records what it
    sends, and sends what the test says."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.received: list[dict] = []
        self.hello: dict | None = None
        self.conn: socket.socket | None = None
        self.closed = threading.Event()
        self.greeted = threading.Event()
        self._lock = threading.Lock()
        self._seq = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
            conn.settimeout(None)
            nonce = wire.nonce()
            conn.sendall(message({"type": "challenge", "nonce": nonce}))
            self.hello = read_message(conn)
            conn.sendall(message({"type": "welcome", "run_id": RUN, "role": "builder", "id": 0}))
            self.conn = Link.listener(conn, nonce, self.hello)
            self.greeted.set()
            while True:
                m = self.conn.read()
                if m is None:
                    break
                with self._lock:
                    self.received.append(m)
        except (OSError, ValueError):
            pass
        self.closed.set()

    def send(self, body: dict) -> None:
        self.conn.send(body)

    def routing(self, *, builders: int, events: int, batch: int, first: int = 0,
                window: int = 64) -> None:
        self.send({"type": "routing", "mode": "static", "builders": builders,
                   "first_event": first, "events": events, "batch": batch,
                   "window_batches": window})

    def assign(self, first: int, count: int, builder: int, retired: int = 0) -> None:
        self.send({"type": "assign", "first": first, "count": count, "builder": builder,
                   "retired_below": retired, "sequence": self._seq})
        self._seq += 1

    def of_type(self, kind: str) -> list[dict]:
        with self._lock:
            return [m for m in self.received if m.get("type") == kind]

    def wait_for(self, kind: str, count: int = 1, timeout_s: float = 20) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = self.of_type(kind)
            if len(got) >= count:
                return got
            if self.closed.is_set():
                break
            time.sleep(0.02)
        raise AssertionError(f"no {count} {kind} from the builder; got "
                             f"{[m.get('type') for m in self.received]}")

    def close(self) -> None:
        for s in (self.conn, self.listener):
            if s is not None:
                try:
                    if s is self.conn:
                        s.sock.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass


class FakeReader:
    """Reader 0's data path: greets the builder's data port and sends the
    frames it is told to, then END frames and the close."""

    def __init__(self, port: int, sources=(0, 1)) -> None:
        self.sources = list(sources)
        greeting = fakesource.message({"type": "hello", "role": "reader", "id": 0,
                                       "channel": "data", "run_id": RUN,
                                       "protocol": wire.PROTOCOL, "pid": 1, "host": "e2e",
                                       "sources": self.sources, "rail": 0, "rails": 1,
                                       "nonce": wire.nonce(), "proof": ""})
        self.sock = greet(port, greeting)
        self.sequence = {s: 0 for s in self.sources}

    def frame(self, source: int, event: int, flags: int = 0) -> bytes:
        body = b"" if flags else fakesource.refbuild.payload(SEED, RUN, event, source, PAYLOAD)
        seq = self.sequence[source]
        self.sequence[source] += 1
        return fakesource.refbuild.encode_frame(source, RUN, event, seq, time.time_ns(), flags,
                                                body)

    def send_events(self, events) -> None:
        self.sock.sendall(b"".join(self.frame(s, e) for e in events for s in self.sources))

    def end(self, events: int) -> None:
        self.sock.sendall(b"".join(self.frame(s, events, flags=1) for s in self.sources))
        self.sock.shutdown(socket.SHUT_WR)


def batches(events: int, batch: int, builders: int):
    """The static plan: (first, count, builder) of each batch."""
    return [(k, min(batch, events - k), (k // batch) % builders) for k in range(0, events, batch)]


def groups_of(end: dict) -> dict:
    return end["groups"]


class BuilderRoleTest(E2ETestCase):
    needs_daemons = True

    def start(self, *, builders: int = 2, id: int = 0, **flags):
        self.hub = FakeHub()
        self.addCleanup(self.hub.close)
        out = self.h.path("builders", str(id), "x").parent
        pf = self.h.path("ports", f"builder-{id}.port")
        proc = self.h.daemon("builderd", f"builder-{id}",
                             ["--role", "builder", "--id", id, "--builders", builders,
                              "--hub", f"127.0.0.1:{self.hub.port}", "--run", RUN,
                              "--sources", 2, "--readers", 1, "--listen", "127.0.0.1:0",
                              "--out", out, "--port-file", pf, "--timeout-ms", 300], **flags)
        ports = self.h.wait_port_file(pf, ("data",), 15, proc)
        self.assertTrue(self.hub.greeted.wait(15), proc.tail())
        self.assertEqual(self.hub.hello["role"], "builder")
        self.assertEqual(self.hub.hello["id"], id)
        self.assertEqual(self.hub.hello["channel"], "control")
        return proc, ports, out

    def finish(self, proc, status: int = 0) -> dict:
        end = self.hub.wait_for("end")[0]
        self.hub.send({"type": "bye", "status": 0})
        self.assertEqual(self.h.wait(proc, 20), status, proc.tail(40))
        return end

    def test_builds_exactly_its_assigned_ids(self) -> None:
        """Builder 0 of 2, static batches of 8 over 64 events: it joins once
        the reader is up (slots = --max-inflight, decided 0), builds its 32
        events and no other, writes them under their global IDs, sends a
        last TOKEN with all decided, then its END with the contract's
        groups; builder.json says the same."""
        proc, ports, out = self.start(max_inflight=1024)
        plan = batches(64, 8, 2)
        self.hub.routing(builders=2, events=64, batch=8)
        reader = FakeReader(ports["data"])
        first = self.hub.wait_for("token")[0]
        self.assertEqual((first["slots"], first["decided"], first["decided_below"]),
                         (1024, 0, 0))
        for rec in plan:
            self.hub.assign(*rec)
        mine = [e for f, c, b in plan if b == 0 for e in range(f, f + c)]
        reader.send_events(mine)
        reader.end(64)
        end = self.finish(proc)
        g = groups_of(end)
        self.assertEqual(end["status"], 0)
        totals = g[""]
        self.assertEqual(totals["events_assigned"], 32)
        self.assertEqual(totals["events_complete"], 32)
        self.assertEqual(totals["events_unobserved"], 0)
        self.assertEqual(totals["frags_misrouted"], 0)
        self.assertEqual(totals["assignments_received"], 8)
        self.assertEqual(totals["ids_decided"], 32)
        self.assertEqual(totals["frames_read"], 64)
        self.assertEqual(g["reader.0"]["frames_received"], 64)
        self.assertEqual(g["reader.0"]["end_frames"], 2)
        self.assertEqual(g["unique.0"], {"s0": 32, "s1": 32})
        self.assertEqual(g["hist"]["hist_samples"], 32)
        buckets = sum(v for name, grp in g.items() if name.startswith("hist.")
                      for v in grp.values())
        self.assertEqual(buckets, 32)
        self.assertIn("process", g)
        self.assertIn("clock", g)
        tokens = self.hub.of_type("token")
        self.assertEqual(totals["tokens_sent"], len(tokens))
        self.assertEqual([t["sequence"] for t in tokens], list(range(len(tokens))))
        # Every ID of its own decided; below the assigned end it knew of
        # then, at least the end of its last batch (the hub's last assign,
        # of builder 1's batch, may come after the reader's END).
        self.assertEqual(tokens[-1]["decided"], 32)
        self.assertIn(tokens[-1]["decided_below"], (56, 64))
        decided = [t["decided"] for t in tokens]
        self.assertEqual(decided, sorted(decided))
        events = read_jsonl(out / "events.jsonl")
        self.assertEqual(sorted(e["event"] for e in events), mine)
        self.assertEqual(read_jsonl(out / "expired.jsonl"), [])
        human = json.loads((out / "builder.json").read_text())
        self.assertEqual(human["groups"][""]["events_complete"], 32)
        self.assertEqual(human["status"], "ok")

    def test_holds_a_frame_until_its_assign(self) -> None:
        """Frames of batch 2 arrive before its assign: the builder keeps
        them in the connection's buffer (frames_held_unassigned), builds
        batch 0 meanwhile, and builds batch 2 once the assign comes."""
        proc, ports, out = self.start(metrics_listen="127.0.0.1:0")
        pf = self.h.path("ports", "builder-0.port")
        mports = self.h.wait_port_file(pf, ("metrics",), 15, proc)
        plan = batches(32, 8, 2)
        self.hub.routing(builders=2, events=32, batch=8)
        reader = FakeReader(ports["data"])
        self.hub.wait_for("token")
        self.hub.assign(*plan[0])
        self.hub.assign(*plan[1])
        reader.send_events(list(range(0, 8)) + list(range(16, 24)))
        status = self.wait_status(mports["metrics"],
                                  lambda s: s["events_complete"] == 8 and
                                  s["frames_held_unassigned"] >= 1)
        self.assertEqual(status["events_assigned"], 8)
        self.hub.assign(*plan[2])
        self.hub.assign(*plan[3])
        reader.end(32)
        end = self.finish(proc)
        totals = groups_of(end)[""]
        self.assertEqual(totals["events_complete"], 16)
        self.assertGreaterEqual(totals["frames_held_unassigned"], 1)
        self.assertEqual(sorted(e["event"] for e in read_jsonl(out / "events.jsonl")),
                         list(range(0, 8)) + list(range(16, 24)))

    def wait_status(self, port: int, ok, timeout_s: float = 15) -> dict:
        import urllib.request
        deadline = time.monotonic() + timeout_s
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
                s = json.loads(r.read())
            if ok(s) or time.monotonic() > deadline:
                self.assertTrue(ok(s), s)
                return s
            time.sleep(0.05)

    def test_misrouted_fragment_fails_the_run(self) -> None:
        """A fragment of builder 1's event at builder 0: counted
        frags_misrouted, not built, and the run fails with the sentence
        naming both builders."""
        proc, ports, out = self.start()
        plan = batches(32, 8, 2)
        self.hub.routing(builders=2, events=32, batch=8)
        reader = FakeReader(ports["data"])
        self.hub.wait_for("token")
        for rec in plan:
            self.hub.assign(*rec)
        reader.send_events(list(range(0, 8)) + [9] + list(range(16, 24)))
        reader.end(32)
        end = self.finish(proc, status=1)
        totals = groups_of(end)[""]
        self.assertEqual(end["status"], 1)
        self.assertEqual(totals["frags_misrouted"], 2)
        self.assertEqual(totals["events_complete"], 16)
        self.assertIn("Reader 0 forwarded a fragment of event 9 (source 0) to builder 0, but "
                      "the hub assigned that event to builder 1", proc.log())
        events = sorted(e["event"] for e in read_jsonl(out / "events.jsonl"))
        self.assertNotIn(9, events)

    def test_refuses_a_plan_not_its_own(self) -> None:
        """A routing of 3 builders for a builder of --builders 2: refused by
        name, exit 1."""
        proc, ports, out = self.start()
        self.hub.routing(builders=3, events=32, batch=8)
        self.assertEqual(self.h.wait(proc, 20), 1, proc.tail())
        self.assertIn("Builder 0 refuses run 1: the hub's routing has 3 builders, but this is "
                      "builder 0 of --builders 2", proc.log())

    def test_refuses_an_assignment_out_of_order(self) -> None:
        """An assign that leaves a gap: the hub and the builder disagree on
        the plan. Refused by name; the builder reports what it has (status
        1) and the run fails."""
        proc, ports, out = self.start()
        self.hub.routing(builders=2, events=32, batch=8)
        reader = FakeReader(ports["data"])
        self.hub.wait_for("token")
        self.hub.assign(0, 8, 0)
        self.hub.assign(16, 8, 0)
        end = self.finish(proc, status=1)
        self.assertEqual(end["status"], 1)
        self.assertEqual(groups_of(end)[""]["events_assigned"], 8)
        self.assertIn("Builder 0 refuses the hub's assignment of events 16..+8 to builder 0 "
                      "does not start at 8, where the assigned IDs end: a gap", proc.log())
        reader.sock.close()

    def test_given_up_by_the_hub(self) -> None:
        """lost naming another builder is noted; naming this one fences it
        (docs/BUILDERS.md, "A given-up builder is fenced"): no END, its
        records cut back to the events below its last token's
        decided_below (those the hub's books count decided), builder.json
        says fenced, exit 1."""
        proc, ports, out = self.start()
        self.hub.routing(builders=2, events=32, batch=8)
        reader = FakeReader(ports["data"])
        self.hub.wait_for("token")
        self.hub.assign(0, 8, 0)
        reader.send_events(range(8))
        deadline = time.monotonic() + 10
        while not any(t["decided"] == 8 for t in self.hub.of_type("token")):
            self.assertLess(time.monotonic(), deadline, self.hub.received)
            time.sleep(0.02)
        self.hub.assign(8, 8, 1)
        self.hub.assign(16, 8, 0)
        # 17..19 complete above the undecided 16: recorded, not decided.
        reader.send_events(range(17, 20))
        while len(read_jsonl(out / "events.jsonl")) < 11:
            self.assertLess(time.monotonic(), deadline, proc.tail())
            time.sleep(0.02)
        self.hub.send({"type": "lost", "builder": 1, "reason": "stalled for 2000 ms"})
        self.hub.send({"type": "lost", "builder": 0, "reason": "no token for 2000 ms"})
        self.assertEqual(self.h.wait(proc, 20), 1, proc.tail())
        self.assertEqual(self.hub.of_type("end"), [])
        self.assertEqual(max(t["decided"] for t in self.hub.of_type("token")), 8)
        self.assertEqual([r["event"] for r in read_jsonl(out / "events.jsonl")], list(range(8)))
        doc = json.loads((out / "builder.json").read_text())
        self.assertEqual((doc["status"], doc["fence"]["below"], doc["fence"]["decided"],
                          doc["fence"]["events_kept"], doc["fence"]["records_removed"]),
                         ("fenced", 8, 8, 8, 3), doc)
        self.assertFalse((out / "running.json").exists())
        log = proc.log()
        self.assertIn("Builder 0: the hub gave builder 1 up (stalled for 2000 ms)", log)
        self.assertIn("Builder 0 was given up by its hub (no token for 2000 ms): fenced at "
                      "event 8 (its last token: 8 events decided); its records keep 8 events "
                      "and 0 expired below it, 3 records past it removed", log)
        reader.sock.close()

    def test_signal_reports_what_arrived(self) -> None:
        """SIGTERM mid-run: the builder cuts its data paths, reports the
        events it built (status 1) and leaves at the hub's BYE."""
        proc, ports, out = self.start()
        self.hub.routing(builders=2, events=32, batch=8)
        reader = FakeReader(ports["data"])
        self.hub.wait_for("token")
        self.hub.assign(0, 8, 0)
        reader.send_events(range(8))
        deadline = time.monotonic() + 10
        while len(read_jsonl(out / "events.jsonl")) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.popen.send_signal(15)
        end = self.finish(proc, status=1)
        self.assertEqual(groups_of(end)[""]["events_complete"], 8)
        self.assertIn("Builder 0 stopped: terminated", proc.log())
        reader.sock.close()

    def test_no_hub(self) -> None:
        """Nobody at --hub: the builder says whom it could not join and
        exits 1 after --peer-timeout-ms."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        pf = self.h.path("ports", "builder-0.port")
        proc = self.h.daemon("builderd", "builder-0",
                             ["--role", "builder", "--id", 0, "--builders", 2,
                              "--hub", f"127.0.0.1:{port}", "--run", RUN, "--sources", 2,
                              "--readers", 1, "--listen", "127.0.0.1:0",
                              "--out", self.h.path("b0", "x").parent, "--port-file", pf,
                              "--peer-timeout-ms", 500])
        self.assertEqual(self.h.wait(proc, 20), 1, proc.tail())
        self.assertIn(f"Builder 0 could not join its hub at 127.0.0.1:{port}", proc.log())
        self.h.assert_clean()

    def test_lost_hub_stops_the_builder(self) -> None:
        """The hub's connection closes mid-run: the builder says so and
        exits 1."""
        proc, ports, out = self.start()
        self.hub.routing(builders=2, events=32, batch=8)
        reader = FakeReader(ports["data"])
        self.hub.wait_for("token")
        self.hub.close()
        self.assertEqual(self.h.wait(proc, 20), 1, proc.tail())
        # Mid-run, the builder cannot tell a hub that gave it up from one
        # that died: either way it is fenced at its last token.
        self.assertIn("Builder 0 lost its hub's control connection (", proc.log())
        self.assertIn("fenced at event 0 (its last token: 0 events decided)", proc.log())
        reader.sock.close()
        self.h.assert_clean()


if __name__ == "__main__":
    import unittest
    unittest.main()
