"""builderd --role builder fed by the real daemons: two sourced and a
readoutd in its one-builder mode (--builder URL, which forwards every
event it is allowed to), with the hub played by hand over real sockets.
The hand-played hub assigns the builder only as many events as its TOKENs
leave room for and lets the reader forward exactly those (a CREDIT of the
assigned end), but tells the reader a few milliseconds before the builder:
the race of two connections with no order between them that
docs/BUILDERS.md's "not yet known" rule is for. The builder then receives
frames of events it has not been assigned yet and holds them in its link
(TCP buffer or shared-memory ring) until the ASSIGN comes. Every event is
built exactly once, under its global ID, nothing expires, and the END's
counters and the TOKENs agree."""

from __future__ import annotations

import queue
import socket
import threading
import time
import uuid

import wire
from fakesource import Link, message, read_message
from harness import E2ETestCase, read_jsonl

RUN = 1
EVENTS = 3000
BATCH = 16
# How much later than the reader the builder hears of an assignment.
BUILDER_LAG_S = 0.005


class MiniHub:
    """The control port of a run of one builder (--role builder --builders
    1), its reader and its sources: greets each, sends the builder its
    routing and assigns batches as its tokens allow, the reader a CREDIT of
    the assigned end first and the builder its ASSIGNs BUILDER_LAG_S later,
    starts the sources once everyone is in, and says BYE once every peer
    has sent its END."""

    def __init__(self, sources: int) -> None:
        self.sources = sources
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.conns: dict[tuple[str, int], Link] = {}
        self.ends: dict[tuple[str, int], dict] = {}
        self.tokens: list[dict] = []
        self.assigns: list[dict] = []
        self.assigned_end = 0
        self.retired_below = 0
        self.started = False
        self.error: BaseException | None = None
        self.later: queue.Queue = queue.Queue()
        threading.Thread(target=self._accept, daemon=True).start()
        threading.Thread(target=self._send_later, daemon=True).start()

    def _send_later(self) -> None:
        """The builder's ASSIGNs, in order, each BUILDER_LAG_S after the
        reader's CREDIT that covers it."""
        while True:
            due, body = self.later.get()
            if body is None:
                return
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                with self.lock:
                    self._send(("builder", 0), body)
            except OSError:
                return

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _send(self, who, body: dict) -> None:
        self.conns[who].send(body)

    def _serve(self, conn: socket.socket) -> None:
        try:
            nonce = wire.nonce()
            conn.sendall(message({"type": "challenge", "nonce": nonce}))
            hello = read_message(conn)
            who = (hello["role"], hello["id"])
            conn.sendall(message({"type": "welcome", "run_id": RUN, "role": "builder", "id": 0}))
            link = Link.listener(conn, nonce, hello)
            with self.lock:
                self.conns[who] = link
                if who[0] == "builder":
                    self._send(who, {"type": "routing", "mode": "static", "builders": 1,
                                     "first_event": 0, "events": EVENTS, "batch": BATCH,
                                     "window_batches": 64})
                elif who[0] == "reader":
                    self._send(who, {"type": "credit", "limit": self.assigned_end,
                                     "sequence": 0})
                self._maybe_start()
            while True:
                m = link.read()
                if m is None:
                    return
                with self.lock:
                    self._on_message(who, m)
        except BaseException as e:  # surfaced by the test
            self.error = e

    def _maybe_start(self) -> None:
        if self.started or len(self.conns) < self.sources + 2:
            return
        self.started = True
        for s in range(self.sources):
            self._send(("source", s), {"type": "start", "delay_ns": 20_000_000,
                                       "at_realtime_ns": 0})

    def _on_message(self, who, m: dict) -> None:
        kind = m.get("type")
        if kind == "token":
            self.tokens.append(m)
            self._assign(m)
        elif kind == "end":
            self.ends[who] = m
            if len(self.ends) == len(self.conns) == self.sources + 2:
                for peer in self.conns:
                    self._send(peer, {"type": "bye", "status": 0})

    def _assign(self, token: dict) -> None:
        """Batches while the builder has the tokens for a whole one."""
        room = token["slots"] - (self.assigned_end - token["decided"])
        # One builder: its decided_below retires every whole batch below.
        self.retired_below = max(self.retired_below, token["decided_below"] // BATCH * BATCH)
        before = self.assigned_end
        while self.assigned_end < EVENTS and room >= BATCH:
            count = min(BATCH, EVENTS - self.assigned_end)
            a = {"type": "assign", "first": self.assigned_end, "count": count, "builder": 0,
                 "retired_below": self.retired_below, "sequence": len(self.assigns)}
            self.later.put((time.monotonic() + BUILDER_LAG_S, a))
            self.assigns.append(a)
            self.assigned_end += count
            room -= count
        if self.assigned_end > before and ("reader", 0) in self.conns:
            self._send(("reader", 0), {"type": "credit", "limit": self.assigned_end,
                                       "sequence": len(self.assigns)})

    def close(self) -> None:
        self.later.put((0, None))
        for s in [self.listener] + list(self.conns.values()):
            try:
                s.close()
            except OSError:
                pass


class BuilderRoleDaemonsTest(E2ETestCase):
    needs_daemons = True

    def run_with(self, transport: str) -> None:
        h = self.h
        hub = MiniHub(sources=2)
        self.addCleanup(hub.close)
        out = h.path("builders", "0", "x").parent
        pf = h.path("ports", "builder-0.port")
        shm = f"brole{uuid.uuid4().hex[:8]}"
        builder = h.daemon("builderd", "builder-0",
                           ["--role", "builder", "--id", 0, "--builders", 1,
                            "--hub", f"127.0.0.1:{hub.port}", "--run", RUN, "--sources", 2,
                            "--readers", 1, "--listen", "127.0.0.1:0", "--out", out,
                            "--port-file", pf, "--max-inflight", 64],
                           shm_listen=shm if transport == "shm" else None)
        data = h.wait_port_file(pf, ("data",), 15, builder)["data"]
        url = f"shm://{shm}" if transport == "shm" else f"tcp://127.0.0.1:{data}"
        rpf = h.path("ports", "reader-0.port")
        reader = h.daemon("readoutd", "reader-0",
                          ["--id", 0, "--run", RUN, "--listen", "127.0.0.1:0",
                           "--port-file", rpf, "--sources", "0,1", "--builder", url,
                           "--control", f"127.0.0.1:{hub.port}"])
        rport = h.wait_port_file(rpf, ("data",), 15, reader)["data"]
        sources = [h.start_source(id=s, run=RUN, seed=2, events=EVENTS, payload=48,
                                  reader_port=rport, builder={"control": hub.port})
                   for s in (0, 1)]
        for p in sources + [reader, builder]:
            self.assertEqual(h.wait(p, 60), 0, p.tail(40))
        self.assertIsNone(hub.error, hub.error)
        end = hub.ends[("builder", 0)]
        totals = end["groups"][""]
        self.assertEqual(end["status"], 0)
        self.assertEqual(totals["events_assigned"], EVENTS)
        self.assertEqual(totals["events_complete"], EVENTS)
        self.assertEqual(totals["events_expired"], 0)
        self.assertEqual(totals["frags_misrouted"], 0)
        self.assertEqual(totals["assignments_received"], len(hub.assigns))
        self.assertEqual(totals["tokens_sent"], len(hub.tokens))
        # The reader heard first: the builder held what was not assigned
        # yet rather than building or dropping it.
        self.assertGreater(totals["frames_held_unassigned"], 0)
        self.assertEqual((hub.tokens[-1]["decided"], hub.tokens[-1]["decided_below"]),
                         (EVENTS, EVENTS))
        for t in hub.tokens:
            self.assertLessEqual(t["decided"], t["decided_below"])
        ids = [e["event"] for e in read_jsonl(out / "events.jsonl")]
        self.assertEqual(sorted(ids), list(range(EVENTS)))
        rtotals = hub.ends[("reader", 0)]["groups"][""]
        self.assertEqual(end["groups"]["reader.0"]["frames_received"],
                         rtotals["frames_forwarded"])
        h.assert_clean()

    def test_tcp_reader_ahead_of_the_assignments(self) -> None:
        self.run_with("tcp")

    def test_shm_reader_ahead_of_the_assignments(self) -> None:
        self.run_with("shm")


if __name__ == "__main__":
    import unittest
    unittest.main()
