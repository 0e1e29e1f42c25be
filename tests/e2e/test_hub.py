"""builderd --role hub (docs/BUILDERS.md, "Interfaces between the daemons")
against peers played by this test over real sockets: sources, a reader
and builders that speak the control protocol by hand. The hub greets
builders (and refuses a taken id, an id outside the run, a builder at a
--role both builderd), sends routing after WELCOME, starts the run once
every builder joined with its first token, turns tokens into assignments
to every reader and builder, closes the books from the builders' END
reports, and names a lost builder, tells everyone and still balances.
Each builder gets every source's clock against its own (`clock`)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from harness import E2ETestCase, read_metrics, unbalanced
import wire
from fakesource import greet_control, message, read_message

RUN = 1
EVENTS = 128
BATCH = 64
SLOTS = 1024   # above the manager's high water mark, 4 batches


def hello(role: str, id: int, sources=(), channel: str = "control", run: int = RUN) -> bytes:
    return message({"type": "hello", "role": role, "id": id, "channel": channel, "run_id": run,
                    "protocol": wire.PROTOCOL, "pid": os.getpid(), "host": socket.gethostname(),
                    "sources": list(sources), "rail": 0, "rails": 1, "nonce": wire.nonce(),
                    "proof": ""})


def refusal(port: int, greeting: bytes) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert read_message(s)["type"] == "challenge"
        s.sendall(greeting)
        return read_message(s)


class Peer:
    """A control link to the hub: greeted, every PING answered, every
    message kept; send() and end() speak for the peer."""

    def __init__(self, port: int, role: str, id: int, sources=()):
        self.role, self.id = role, id
        self.link = greet_control(port, hello(role, id, sources))
        self.sock = self.link.sock
        self.messages: list[dict] = []
        self.cond = threading.Condition()
        self.closed = False
        self.muted = False      # True: answers nothing, as a stopped process
        self.lock = threading.Lock()
        self.send({"type": "stats", "status": 0,
                   "groups": {"clock": {"injected_offset_ns": 0, "injected_offset_negative": 0},
                              "chrony": {"available": 0}}})
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def send(self, body: dict) -> None:
        with self.lock:
            self.link.send(body)

    def _loop(self) -> None:
        try:
            while True:
                m = self.link.read()
                if m is None:
                    break
                if m.get("type") == "ping":
                    if self.muted:
                        continue
                    self.send({"type": "pong", "sequence": m["sequence"], "t1_ns": m["t1_ns"],
                               "t2_ns": time.time_ns(), "t3_ns": time.time_ns()})
                    continue
                with self.cond:
                    self.messages.append(m)
                    self.cond.notify_all()
                if m.get("type") == "bye":
                    break
        except (OSError, ValueError):
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def of(self, kind: str) -> list[dict]:
        with self.cond:
            return [m for m in self.messages if m.get("type") == kind]

    def wait_for(self, kind: str, count: int = 1, timeout_s: float = 20) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while len([m for m in self.messages if m.get("type") == kind]) < count:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError(f"{self.role} {self.id}: {count} {kind} expected, got "
                                         f"{[m.get('type') for m in self.messages]}")
                self.cond.wait(left)
            return [m for m in self.messages if m.get("type") == kind]

    def wait_closed(self, timeout_s: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.closed, timeout_s)

    def end(self, groups: dict, status: int = 0) -> None:
        groups = dict(groups)
        groups.setdefault("clock", {"injected_offset_ns": 0, "injected_offset_negative": 0})
        self.send({"type": "end", "status": status, "groups": groups})

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


def source_end(events: int) -> dict:
    return {"": {"events": events, "frags_omitted": 0, "frags_sent": events,
                 "frags_duplicated": 0, "frags_delayed": 0, "frags_abandoned": 0,
                 "frames_wire": events, "frames_bad_injected": 0}}


def reader_end(sources: int, events: int, per_builder: dict[int, int]) -> dict:
    groups = {}
    for s in range(sources):
        groups[f"source.{s}"] = {"frames_received": events, "frames_forwarded": events,
                                 "frames_verified": events, "frames_rejected": 0,
                                 "frames_held_at_end": 0, "end_frames": 1, "frames_late": 0,
                                 "frames_lost_builder": 0, "err_event_id": 0}
    groups[""] = {"frames_received": sources * events, "frames_forwarded": sources * events}
    for b, frames in per_builder.items():
        groups[f"builder.{b}"] = {"frames_forwarded": frames, "end_frames": sources}
    return groups


def builder_end(events: int, sources: int, latency_ns: int = 150_000) -> dict:
    """A builder that completed every one of its events from every source,
    with one latency sample per event, all in one bucket."""
    frags = events * sources
    core = {"frags_received": frags, "frags_unique": frags, "frags_duplicate": 0,
            "frags_late": 0, "frags_invalid": 0, "frags_in_expired": 0,
            "events_created": events, "events_complete": events, "events_accepted": events,
            "events_filtered": 0, "events_expired": 0, "events_unobserved": 0,
            "frames_read": frags, "events_written": events,
            "events_assigned": events, "ids_decided": events, "frags_misrouted": 0}
    bucket = hist_bucket(latency_ns)
    return {"": core,
            "reader.0": {"frames_received": frags, "end_frames": sources},
            "unique.0": {f"s{s}": events for s in range(sources)},
            "hist": {"hist_samples": events, "hist_min_ns": latency_ns,
                     "hist_max_ns": latency_ns, "hist_sum_ns": events * latency_ns},
            "hist.0": {f"b{bucket}": events}}


def hist_bucket(v: int) -> int:
    """core/hist's bucket of v: 16 linear, then 16 per power of two."""
    if v < 16:
        return v
    e = v.bit_length() - 1
    return 16 + (e - 4) * 16 + ((v >> (e - 4)) & 15)


class HubTest(E2ETestCase):
    needs_daemons = True

    def start_hub(self, *, sources=2, readers=1, builders=2, **flags):
        h = self.h
        out = h.dir / "run"
        out.mkdir(parents=True, exist_ok=True)
        pf = h.path("ports", "hub.port")
        flags.setdefault("peer_timeout_ms", 5000)
        hub = h.daemon("builderd", "hub",
                       ["--role", "hub", "--builders", builders, "--run", RUN,
                        "--sources", sources, "--readers", readers, "--events", EVENTS,
                        "--batch", BATCH, "--control-listen", "127.0.0.1:0", "--out", out,
                        "--port-file", pf], **flags)
        ports = h.wait_port_file(pf, ("control",), 15, hub)
        self.assertNotIn("data", ports)
        return hub, ports["control"]

    def test_builder_greetings(self) -> None:
        """A builder id taken is refused duplicate_id, one outside the run
        unknown_peer, and a builder greeting a --role both builderd is
        refused with why; a welcomed builder gets routing."""
        hub, port = self.start_hub()
        b0 = Peer(port, "builder", 0)
        routing = b0.wait_for("routing")[0]
        self.assertEqual(routing, {"type": "routing", "mode": "manager", "builders": 2,
                                   "first_event": 0, "events": EVENTS, "batch": BATCH,
                                   "window_batches": 4096})
        dup = refusal(port, hello("builder", 0))
        self.assertEqual(dup["code"], "duplicate_id")
        self.assertIn("builder 0 is already connected from 127.0.0.1:", dup["reason"])
        # A session link (a daemon serving many runs, docs/RUNCONTROL.md)
        # does not belong on a run's control port.
        session = refusal(port, hello("reader", 0, channel="session", run=0))
        self.assertEqual(session["code"], "wrong_run")
        session = refusal(port, hello("reader", 0, channel="session"))
        self.assertEqual(session["code"], "wrong_channel")
        self.assertEqual(session["reason"],
                         "reader 0 greeted the control port as a session connection")
        far = refusal(port, hello("builder", 2))
        self.assertEqual(far["code"], "unknown_peer")
        self.assertEqual(far["reason"],
                         "builder 2 is not part of run 1 (2 sources, 1 readers, 2 builders)")
        b0.close()
        self.h.stop(hub)
        self.assertIn("Builder 0", hub.log())

        both, ports = self.h.start_builder(run=RUN, sources=1, readers=1, events=10)
        data = refusal(ports["data"], hello("reader", 0, sources=(0,), channel="session"))
        self.assertEqual(data["code"], "wrong_channel")
        self.assertEqual(data["reason"], "reader 0 greeted the data port as a session connection")
        wrong = refusal(ports["control"], hello("builder", 0))
        self.assertEqual(wrong["code"], "unknown_peer")
        self.assertEqual(wrong["reason"],
                         "builder 0 greeted the builder of run 1, which builds the run itself "
                         "(--role both); builders connect to a --role hub")
        self.h.stop(both)

    def join(self, port: int):
        sources = [Peer(port, "source", s) for s in range(2)]
        reader = Peer(port, "reader", 0, sources=(0, 1))
        builders = [Peer(port, "builder", b) for b in range(2)]
        for p in [reader] + builders:
            p.wait_for("routing")
        for s in sources:
            self.assertEqual(s.of("routing"), [])
        for b in builders:
            b.send({"type": "token", "slots": SLOTS, "decided": 0, "decided_below": 0,
                    "sequence": 1})
        for s in sources:
            s.wait_for("start")
        return sources, reader, builders

    def test_run_of_two_builders(self) -> None:
        """Two builders join with their tokens; the hub starts the sources,
        assigns the two batches round-robin to every reader and builder
        alike, in order, takes the builders' last tokens and END reports
        and closes balanced books from them, with the routing, manager and
        builders sections, and BYE to everyone."""
        hub, port = self.start_hub()
        sources, reader, builders = self.join(port)
        want = [{"type": "assign", "first": 0, "count": BATCH, "builder": 0, "retired_below": 0,
                 "sequence": 1},
                {"type": "assign", "first": BATCH, "count": BATCH, "builder": 1,
                 "retired_below": 0, "sequence": 2}]
        for p in [reader] + builders:
            self.assertEqual(p.wait_for("assign", 2), want)
        for b, peer in enumerate(builders):
            peer.send({"type": "token", "slots": SLOTS, "decided": BATCH,
                       "decided_below": (b + 1) * BATCH, "sequence": 2})
        for s in sources:
            s.end(source_end(EVENTS))
        reader.end(reader_end(2, EVENTS, {0: 2 * BATCH, 1: 2 * BATCH}))
        for b in builders:
            b.end(builder_end(BATCH, 2))
        for p in sources + [reader] + builders:
            self.assertEqual(p.wait_for("bye")[0]["status"], 0)
        self.assertEqual(self.h.wait(hub, 20), 0, hub.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["errors"], [])
        names = [e["name"] for e in m["equations"]]
        for name in ("hop reader 0 to builder 0: forwarded = received by builder",
                     "hop reader 0 to builder 1: forwarded = received by builder",
                     "builder 0: assigned = complete + expired + never observed + lost",
                     "builder 1: misrouted = 0",
                     "run: event IDs assigned = event IDs generated"):
            self.assertIn(name, names)
        self.assertEqual(m["routing"]["mode"], "manager")
        self.assertEqual(m["manager"]["assignments"], 2)
        self.assertEqual(m["manager"]["events_assigned"], EVENTS)
        self.assertEqual(m["manager"]["tokens_received"], 4)
        self.assertGreater(m["manager"]["memory_bytes"], 0)
        self.assertEqual(m["builders"]["1"]["assigned"], BATCH)
        self.assertEqual(m["builders"]["1"]["decided"], BATCH)
        self.assertEqual(m["builders"]["0"]["lost"], 0)
        self.assertGreater(m["builders"]["0"]["events_per_s"], 0)
        roles = [(p["role"], p["id"]) for p in m["processes"]]
        self.assertEqual(roles[0], ("hub", 0))
        self.assertIn(("builder", 0), roles)
        self.assertIn(("builder", 1), roles)
        self.assertEqual(m["counters"]["builder"]["events_complete"], EVENTS)
        self.assertEqual(m["latency"]["samples"], EVENTS)
        self.assertFalse((self.h.dir / "run" / "events.jsonl").exists())
        # Each builder got every source's clock against its own: one host,
        # nothing injected, so offset 0 and bound 0; nobody else gets one.
        for b in builders:
            clocks = {c["source"]: c for c in b.of("clock")}
            self.assertEqual(sorted(clocks), [0, 1])
            for c in clocks.values():
                self.assertEqual((c["offset_ns"], c["bound_ns"]), (0, 0), c)
        for p in sources + [reader]:
            self.assertEqual(p.of("clock"), [])

    def test_refused_token_fails_the_run_naming_the_builder(self) -> None:
        """A builder whose slots do not exceed the high water mark cannot
        join: the run fails and says which builder and why."""
        hub, port = self.start_hub(peer_timeout_ms=1500)
        b0 = Peer(port, "builder", 0)
        b0.wait_for("routing")
        b0.send({"type": "token", "slots": 4 * BATCH, "decided": 0, "decided_below": 0,
                 "sequence": 1})
        self.assertEqual(self.h.wait(hub, 30), 1, hub.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(any("Builder 0 (pid" in e and "refused" in e and "high water mark of 256"
                            in e for e in m["errors"]), m["errors"])
        self.assertEqual(m["manager"]["tokens_refused"], 1)
        b0.close()

    def test_lost_builder_is_named_and_the_books_balance(self) -> None:
        """Builder 1 drops its control link holding its whole batch: the
        hub names it with its loss, sends lost to the reader and builder 0,
        the others finish, and the run ends non-zero with balanced books:
        its 64 events and the 128 frames forwarded to it are its loss."""
        hub, port = self.start_hub()
        sources, reader, builders = self.join(port)
        for p in [reader] + builders:
            p.wait_for("assign", 2)
        builders[1].close()
        for p in (reader, builders[0]):
            lost = p.wait_for("lost")[0]
            self.assertEqual(lost["builder"], 1)
            self.assertIn("builder 1 died", lost["reason"])
        builders[0].send({"type": "token", "slots": SLOTS, "decided": BATCH,
                          "decided_below": BATCH, "sequence": 2})
        for s in sources:
            s.end(source_end(EVENTS))
        reader.end(reader_end(2, EVENTS, {0: 2 * BATCH, 1: 2 * BATCH}))
        builders[0].end(builder_end(BATCH, 2))
        self.assertEqual(self.h.wait(hub, 20), 1, hub.tail())
        self.assertIn("Builder 1 is lost with 64 events in flight", hub.log())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertTrue(any(e.startswith("Builder 1 (") and "lost its control connection" in e
                            for e in m["errors"]), m["errors"])
        self.assertEqual(m["builders"]["1"]["lost"], BATCH)
        self.assertEqual(m["builders"]["1"]["status"], "died")
        self.assertEqual(m["losses"]["events_lost_with_builders"], BATCH)
        self.assertEqual(m["losses"]["frames_lost_with_builders"], 2 * BATCH)
        self.assertEqual(m["manager"]["builders_lost"], 1)

    def stalled_case(self, *, silent: bool, why: str) -> dict:
        """A builder stops mid-run. silent: builder 0 decides its batch,
        says so, then answers nothing (a stopped process): the watchdog's
        clock probes find it, with nothing in flight. Else builder 1
        answers clock probes but sends no token while it holds its batch.
        Either is named stalled, lost to everyone, its link closed, and
        the other finishes with balanced books."""
        hub, port = self.start_hub(stall_timeout_ms=600)
        sources, reader, builders = self.join(port)
        for p in [reader] + builders:
            p.wait_for("assign", 2)
        gone, alive = (0, 1) if silent else (1, 0)
        if silent:
            builders[gone].send({"type": "token", "slots": SLOTS, "decided": BATCH,
                                 "decided_below": BATCH, "sequence": 2})
            time.sleep(0.2)
            builders[gone].muted = True
        builders[alive].send({"type": "token", "slots": SLOTS, "decided": BATCH,
                              "decided_below": (alive + 1) * BATCH, "sequence": 2})
        for p in (reader, builders[alive]):
            self.assertEqual(p.wait_for("lost")[0]["builder"], gone)
        for s in sources:
            s.end(source_end(EVENTS))
        reader.end(reader_end(2, EVENTS, {0: 2 * BATCH, 1: 2 * BATCH}))
        builders[alive].end(builder_end(BATCH, 2))
        self.assertEqual(self.h.wait(hub, 20), 1, hub.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertTrue(any(e.startswith(f"Builder {gone} (") and why in e for e in m["errors"]),
                        m["errors"])
        b = m["builders"][str(gone)]
        self.assertEqual(b["status"], "stalled")
        self.assertEqual(b["lost"], 0 if silent else BATCH)
        self.assertTrue(builders[gone].wait_closed(10),
                        "the hub did not close the stalled builder's link")
        return m

    def test_silent_builder_is_stalled(self) -> None:
        self.stalled_case(silent=True, why="stalled: no answer for")

    def test_builder_without_tokens_is_stalled(self) -> None:
        self.stalled_case(silent=False, why="stalled: it holds events but sent no token for 1600 ms "
                                                   "(--stall-timeout-ms 600 past --timeout-ms 1000)")

    def test_sources_starting_late_stall_no_builder(self) -> None:
        """Builders that joined long before the sources (a slow start)
        owe no token for that wait: their silence counts from START, and
        the run ends balanced with no builder stalled."""
        hub, port = self.start_hub(stall_timeout_ms=600)
        reader = Peer(port, "reader", 0, sources=(0, 1))
        builders = [Peer(port, "builder", b) for b in range(2)]
        for p in [reader] + builders:
            p.wait_for("routing")
        for b in builders:
            b.send({"type": "token", "slots": SLOTS, "decided": 0, "decided_below": 0,
                    "sequence": 1})
        time.sleep(1.5)                    # over twice the stall timeout
        sources = [Peer(port, "source", s) for s in range(2)]
        for s in sources:
            s.wait_for("start")
        for p in [reader] + builders:
            p.wait_for("assign", 2)
        time.sleep(0.15)                   # within the stall timeout of START
        for b, peer in enumerate(builders):
            peer.send({"type": "token", "slots": SLOTS, "decided": BATCH,
                       "decided_below": (b + 1) * BATCH, "sequence": 2})
        for s in sources:
            s.end(source_end(EVENTS))
        reader.end(reader_end(2, EVENTS, {0: 2 * BATCH, 1: 2 * BATCH}))
        for b in builders:
            b.end(builder_end(BATCH, 2))
        self.assertEqual(self.h.wait(hub, 20), 0, hub.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["errors"], [])
        self.assertEqual([b["status"] for b in m["builders"].values()], ["reported"] * 2)
        self.assertEqual(reader.of("lost"), [])


if __name__ == "__main__":
    import unittest
    unittest.main()
