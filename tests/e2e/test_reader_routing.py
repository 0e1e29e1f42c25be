"""readoutd with one link per builder (docs/BUILDERS.md, "The reader's
side"): real sourced processes feed a real readoutd started with
`--builder 0=tcp://... --builder 1=tcp://...`; a Python hub on its control
port sends `routing`, `assign` and `lost` as the hub of a run of several
builders would, and two Python data sinks greet the reader as builders'
data ports do and count which event IDs reach them.

Each test checks where every ID went (exactly its assigned builder), the
reader's END report (per source: received = forwarded + rejected + held at
end + late + lost with a builder; per builder the `builder.B` group), and
the reader's exit status and error text where the hub's messages are
wrong."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.request

import wire
from fakesource import Link, unpack
from harness import E2ETestCase
from wire import challenge, welcome

RUN = 3
PAYLOAD = 32
FRAME_HEADER = struct.Struct(">HBBHIQQQI")   # then the crc32: 42 bytes
HEADER_BYTES = FRAME_HEADER.size + 4
FLAG_END = 0x01


def accept_greeted(listener: socket.socket, run: int, role: str, id: int):
    """Accepts one connection, challenges it and welcomes its HELLO;
    returns (socket, the HELLO, the challenge's nonce)."""
    s, _ = listener.accept()
    s.settimeout(30)
    nonce = wire.nonce()
    s.sendall(challenge(nonce))
    head = s.recv(4, socket.MSG_WAITALL)
    body = s.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL)
    hello = unpack(body)[0]
    s.sendall(welcome(run, role, id))
    return s, hello, nonce


class Sink(threading.Thread):
    """A builder's data port: one reader's connection, every frame's
    (source, event) kept in arrival order, END frames counted."""

    def __init__(self, builder: int) -> None:
        super().__init__(daemon=True)
        self.builder = builder
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frames: list[tuple[int, int]] = []
        self.ends = 0
        self.eof = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        try:
            s, hello, _ = accept_greeted(self.listener, RUN, "builder", self.builder)
        except (OSError, struct.error, IndexError):
            self.eof.set()   # the reader gave the link up while greeting
            return
        try:
            if hello.get("channel") != "data" or hello.get("role") != "reader":
                self.error = f"unexpected hello {hello}"
            buf = b""
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                pos = 0
                while len(buf) - pos >= HEADER_BYTES:
                    f = FRAME_HEADER.unpack_from(buf, pos)
                    size = HEADER_BYTES + f[8]
                    if len(buf) - pos < size:
                        break
                    if f[2] & FLAG_END:
                        self.ends += 1
                    else:
                        self.frames.append((f[3], f[5]))
                    pos += size
                buf = buf[pos:]
            if buf:
                self.error = f"{len(buf)} bytes of a cut frame at the end"
        except OSError as e:
            self.error = str(e)
        finally:
            self.eof.set()


class Hub(threading.Thread):
    """The control port of a hub: welcomes the reader and the sources,
    sends what the test asks, answers every END with BYE and keeps the
    reader's END report."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.reader: Link | None = None
        self.reader_up = threading.Event()
        self.sources: list[Link] = []
        self.report: dict | None = None
        self.reported = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                s, hello, nonce = accept_greeted(self.listener, RUN, "builder", 0)
            except OSError:
                return
            s.settimeout(None)
            link = Link.listener(s, nonce, hello)
            threading.Thread(target=self.serve, args=(link, hello), daemon=True).start()

    def serve(self, s: Link, hello: dict) -> None:
        if hello.get("role") == "reader":
            self.reader = s
            self.reader_up.set()
        else:
            with self.lock:
                self.sources.append(s)
        try:
            while True:
                m = s.read()
                if m is None:
                    return
                if m.get("type") == "end":
                    if hello.get("role") == "reader":
                        self.report = m
                        self.reported.set()
                    self.send(s, {"type": "bye", "status": 0})
        except (OSError, ValueError):
            return

    def send(self, s: Link, body: dict) -> None:
        with self.lock:
            s.send(body)

    def to_reader(self, *bodies: dict) -> None:
        assert self.reader_up.wait(15), "the reader never dialled the hub"
        for b in bodies:
            self.send(self.reader, b)

    def start_sources(self, count: int) -> None:
        deadline = time.monotonic() + 15
        while len(self.sources) < count:
            assert time.monotonic() < deadline, "the sources never dialled the hub"
            time.sleep(0.02)
        for s in list(self.sources):
            self.send(s, {"type": "start", "delay_ns": 0, "at_realtime_ns": 0})


def routing(builders: int, events: int, batch: int, first: int = 0, window: int = 4096) -> dict:
    return {"type": "routing", "mode": "static", "builders": builders, "first_event": first,
            "events": events, "batch": batch, "window_batches": window}


def assigns(first: int, end: int, batch: int, builders: int, seq: int = 1,
            retired_below: int = 0) -> list[dict]:
    """The static records of the batches covering [first, end)."""
    out = []
    for k, lo in enumerate(range(first, end, batch)):
        out.append({"type": "assign", "first": lo, "count": min(batch, end - lo),
                    "builder": (lo // batch) % builders, "retired_below": retired_below,
                    "sequence": seq + k})
    return out


class ReaderRoutingTest(E2ETestCase):
    needs_daemons = True

    def setUp(self) -> None:
        super().setUp()
        self.hub = Hub()
        self.hub.start()
        self.addCleanup(self.hub.listener.close)

    def start(self, *, events: int, sources: int = 2, builders: int = 2,
              with_sources: bool = True, **flags):
        """The sinks, the reader dialling them and the hub, and the sources."""
        self.sinks = [Sink(b) for b in range(builders)]
        for k in self.sinks:
            k.start()
            self.addCleanup(k.listener.close)
        links = []
        for b, k in enumerate(self.sinks):
            links += ["--builder", f"{b}=tcp://127.0.0.1:{k.port}"]
        pf = self.h.path("ports", "reader-0.port")
        self.reader = self.h.daemon(
            "readoutd", "reader-0",
            ["--id", 0, "--run", RUN, "--listen", "127.0.0.1:0", "--port-file", pf,
             "--sources", ",".join(str(s) for s in range(sources)),
             "--control", f"127.0.0.1:{self.hub.port}"] + links, **flags)
        ports = self.h.wait_port_file(pf, ("data",), 15, self.reader)
        rport = ports["data"]
        self.metrics_port = ports.get("metrics", 0)
        self.sources = [self.h.start_source(id=s, run=RUN, seed=1, events=events,
                                            payload=PAYLOAD, rate=20000, reader_port=rport,
                                            builder={"control": self.hub.port})
                        for s in range(sources if with_sources else 0)]
        self.assertTrue(self.hub.reader_up.wait(15), self.reader.tail())

    def finish(self, status: int = 0) -> dict:
        """Waits for the reader's END and exit; returns its report's groups."""
        self.assertTrue(self.hub.reported.wait(60), self.reader.tail())
        self.assertEqual(self.h.wait(self.reader, 30), status, self.reader.tail())
        for s in self.sources:
            self.h.wait(s, 30)
        for k in self.sinks:
            self.assertTrue(k.eof.wait(15))
            self.assertIsNone(k.error, k.error)
        groups = self.hub.report["groups"]
        self.assert_books(groups)
        return groups

    def assert_books(self, groups: dict) -> None:
        """Per source the reader's hop equation with routing's fates, and
        the link groups against what the sinks counted."""
        for name, g in groups.items():
            if not name.startswith("source."):
                continue
            parts = (g["frames_forwarded"] + g["frames_rejected"] + g["frames_held_at_end"]
                     + g["frames_late"] + g["frames_lost_builder"])
            self.assertEqual(g["frames_received"], parts, (name, g))
        for k in self.sinks:
            link = groups[f"builder.{k.builder}"]
            self.assertEqual(link["frames_forwarded"], len(k.frames), link)
            self.assertEqual(link["end_frames"], k.ends, link)
            self.assertEqual(link["transport_shm"], 0)

    def assert_routed(self, events_of: dict[int, range], batch: int, builders: int) -> None:
        """Each sink got exactly the IDs of its batches, once per source."""
        for k in self.sinks:
            want = sorted((s, e) for s, ids in events_of.items() for e in ids
                          if (e // batch) % builders == k.builder)
            self.assertEqual(sorted(k.frames), want, f"builder {k.builder}")

    # -- the plan followed ---------------------------------------------------
    def test_each_id_reaches_its_assigned_builder(self) -> None:
        """Static batches of 64 alternate between two builders; every frame
        of a source goes to its batch's builder, in order, and each builder
        gets every source's END."""
        events, batch = 2000, 64
        self.start(events=events)
        self.hub.to_reader(routing(2, events, batch), *assigns(0, events, batch, 2))
        self.hub.start_sources(2)
        groups = self.finish()
        self.assert_routed({0: range(events), 1: range(events)}, batch, 2)
        for k in self.sinks:
            self.assertEqual(k.ends, 2)
            for s in (0, 1):
                ids = [e for src, e in k.frames if src == s]
                self.assertEqual(ids, sorted(ids), "a source's frames keep their order")
        for s in (0, 1):
            g = groups[f"source.{s}"]
            self.assertEqual(g["frames_forwarded"], events, g)
            self.assertEqual(g["frames_late"] + g["frames_lost_builder"] + g["err_event_id"], 0)
        total = groups[""]
        self.assertEqual(total["frames_forwarded"], 2 * events)
        self.assertEqual(sum(groups[f"builder.{b}"]["frames_forwarded"] for b in (0, 1)),
                         2 * events)
        self.assertGreater(groups["builder.0"]["pending_frames_max"], 0)
        self.assertIn("routes events 0 .. 1999 to 2 builders", self.reader.log())

    def test_held_until_assigned(self) -> None:
        """Only the first half is assigned when the sources start: nothing
        past it leaves the reader, the sources are held; the rest goes
        once its assignments come."""
        events, batch, half = 2048, 64, 1024
        self.start(events=events, metrics_listen="127.0.0.1:0")
        self.hub.to_reader(routing(2, events, batch), *assigns(0, half, batch, 2))
        self.hub.start_sources(2)
        deadline = time.monotonic() + 30
        while sum(len(k.frames) for k in self.sinks) < 2 * half:
            self.assertLess(time.monotonic(), deadline, self.reader.tail())
            time.sleep(0.02)
        time.sleep(0.3)
        self.assertEqual(sum(len(k.frames) for k in self.sinks), 2 * half)
        self.assertTrue(all(e < half for k in self.sinks for _, e in k.frames))
        self.check_live_metrics(half)
        self.hub.to_reader(*assigns(half, events, batch, 2, seq=half // batch + 1))
        groups = self.finish()
        self.assert_routed({0: range(events), 1: range(events)}, batch, 2)
        for s in (0, 1):
            self.assertGreaterEqual(groups[f"source.{s}"]["held_count"], 1)

    def check_live_metrics(self, half: int) -> None:
        """/status and /metrics while held: the assigned end as the
        admission limit, each builder link's counters."""
        base = f"http://127.0.0.1:{self.metrics_port}"
        with urllib.request.urlopen(base + "/status", timeout=5) as r:
            status = json.load(r)
        self.assertEqual(status["admission_limit"], half)
        self.assertEqual([b["builder"] for b in status["builders"]], [0, 1])
        for b in status["builders"]:
            self.assertEqual(b["frames_forwarded"], half, b)
            self.assertEqual(b["pending_frames"], 0, b)
            self.assertFalse(b["closed"])
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            text = r.read().decode()
        for b in (0, 1):
            self.assertIn(f'es_reader_link_frames_forwarded_total{{builder="{b}"}} {half}', text)
        self.assertIn('es_reader_held{source="0"} 1', text)
        promtool = shutil.which("promtool")
        if promtool is not None:
            r = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                               capture_output=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_small_pending_queues_push_back_without_loss(self) -> None:
        """Queues of 4 frames: the sources pause at the limit (pending_full),
        nothing is dropped and every ID still reaches its builder."""
        events, batch = 1500, 64
        self.start(events=events, pending_frames=4)
        self.hub.to_reader(routing(2, events, batch), *assigns(0, events, batch, 2))
        self.hub.start_sources(2)
        groups = self.finish()
        self.assert_routed({0: range(events), 1: range(events)}, batch, 2)
        for b in (0, 1):
            link = groups[f"builder.{b}"]
            self.assertLessEqual(link["pending_frames_max"], 4, link)

    # -- fates other than send -----------------------------------------------
    def test_retired_ids_are_late(self) -> None:
        """The hub's first record says the IDs below 64 are retired (as the
        hub would once their builder decided them): whenever the sources'
        frames of them arrive, they are counted frames_late and go nowhere."""
        events, batch, retired = 1000, 64, 64
        self.start(events=events)
        records = assigns(0, events, batch, 2, retired_below=retired)
        self.hub.to_reader(routing(2, events, batch), *records)
        self.hub.start_sources(2)
        groups = self.finish()
        self.assert_routed({0: range(retired, events), 1: range(retired, events)}, batch, 2)
        for s in (0, 1):
            g = groups[f"source.{s}"]
            self.assertEqual(g["frames_late"], retired, g)
            self.assertEqual(g["frames_forwarded"], events - retired, g)

    def test_ids_outside_the_run_are_rejected(self) -> None:
        """Sources send 1000 events of a run the hub says has 600: the 400
        above are counted err_event_id and rejected, the rest routed; the
        reader exits 1 naming the source and the run's IDs."""
        events, run_events, batch = 1000, 600, 64
        self.start(events=events)
        self.hub.to_reader(routing(2, run_events, batch), *assigns(0, run_events, batch, 2))
        self.hub.start_sources(2)
        groups = self.finish(status=1)
        self.assert_routed({0: range(run_events), 1: range(run_events)}, batch, 2)
        for s in (0, 1):
            g = groups[f"source.{s}"]
            self.assertEqual(g["err_event_id"], events - run_events, g)
            self.assertEqual(g["frames_rejected"], events - run_events, g)
        self.assertIn("sent event 600, outside the run's IDs 0 .. 599", self.reader.log())
        self.assertNotEqual(self.hub.report["status"], 0)

    def test_lost_builder_frames_are_counted_and_its_link_closed(self) -> None:
        """Builder 1 is lost before the sources start: its frames are
        counted frames_lost_builder, its link closes, builder 0 gets all of
        its own and every END."""
        events, batch = 1000, 64
        self.start(events=events)
        self.hub.to_reader(routing(2, events, batch), *assigns(0, events, batch, 2),
                           {"type": "lost", "builder": 1, "reason": "killed in a test"})
        self.assertTrue(self.sinks[1].eof.wait(15), self.reader.tail())
        self.hub.start_sources(2)
        groups = self.finish()
        ones = sum(1 for e in range(events) if (e // batch) % 2 == 1)
        self.assertEqual(self.sinks[1].frames, [])
        self.assertEqual(self.sinks[0].ends, 2)
        self.assertEqual(sorted(self.sinks[0].frames),
                         sorted((s, e) for s in (0, 1) for e in range(events) if (e // batch) % 2 == 0))
        for s in (0, 1):
            self.assertEqual(groups[f"source.{s}"]["frames_lost_builder"], ones)
        self.assertIn("the hub lost builder 1 (killed in a test)", self.reader.log())

    def test_lost_builder_mid_run_balances(self) -> None:
        """Builder 1 is lost while frames flow: what it had queued and what
        comes after are counted lost, and the books still balance."""
        events, batch = 20000, 64
        self.start(events=events)
        self.hub.to_reader(routing(2, events, batch), *assigns(0, events, batch, 2))
        self.hub.start_sources(2)
        deadline = time.monotonic() + 30
        while len(self.sinks[1].frames) < 500:
            self.assertLess(time.monotonic(), deadline, self.reader.tail())
            time.sleep(0.01)
        self.hub.to_reader({"type": "lost", "builder": 1, "reason": "stalled"})
        groups = self.finish()
        for s in (0, 1):
            g = groups[f"source.{s}"]
            to_one = sum(1 for e in range(events) if (e // batch) % 2 == 1)
            got = sum(1 for src, _ in self.sinks[1].frames if src == s)
            self.assertEqual(got + g["frames_lost_builder"], to_one, g)

    # -- the hub and the reader disagree -------------------------------------
    def refused(self, messages: list[dict], text: str) -> None:
        """The reader fails the run by name and reports; its sources never
        came (they would only be closed)."""
        self.start(events=100, with_sources=False)
        self.hub.to_reader(*messages)
        self.assertTrue(self.hub.reported.wait(30), self.reader.tail())
        self.assertEqual(self.h.wait(self.reader, 30), 1, self.reader.tail())
        self.assertNotEqual(self.hub.report["status"], 0)
        self.assertIn(text, self.reader.log())

    def test_assignment_with_a_gap_fails_the_run(self) -> None:
        a = assigns(0, 256, 64, 2)
        self.refused([routing(2, 1000, 64), a[0], a[2]],
                     "refuses the hub's assignment: assignment of events 128..+64 to builder 0 "
                     "does not start at 64, where the assigned IDs end: a gap; the run fails")

    def test_assignment_given_twice_fails_the_run(self) -> None:
        a = assigns(0, 256, 64, 2)
        self.refused([routing(2, 1000, 64), a[0], a[1], a[1]],
                     "does not start at 128, where the assigned IDs end: IDs assigned twice")

    def test_assignment_to_an_unknown_builder_fails_the_run(self) -> None:
        bad = dict(assigns(0, 64, 64, 2)[0], builder=5)
        self.refused([routing(2, 1000, 64), bad],
                     "names builder 5 but the run has 2")

    def test_plan_of_other_builders_is_refused(self) -> None:
        self.refused([routing(3, 1000, 64)],
                     "refuses the hub's routing plan: the run has 3 builders but this reader "
                     "has --builder links to 2 (0 .. 1)")

    def test_assignment_before_the_plan_fails_the_run(self) -> None:
        self.refused(assigns(0, 64, 64, 2), "an assignment before the routing plan")

    def test_credit_is_ignored_with_a_warning(self) -> None:
        """A CREDIT in routing mode admits nothing: only the assignments do."""
        events, batch = 500, 64
        self.start(events=events)
        self.hub.to_reader(routing(2, events, batch),
                           {"type": "credit", "limit": 100000, "sequence": 1},
                           *assigns(0, events, batch, 2))
        self.hub.start_sources(2)
        self.finish()
        self.assert_routed({0: range(events), 1: range(events)}, batch, 2)
        self.assertIn("ignoring CREDIT (limit 100000) from the hub", self.reader.log())
