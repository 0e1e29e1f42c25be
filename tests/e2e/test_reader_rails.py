"""readoutd with links of two rails (docs/BUILDERS.md, "Rails"): real
sourced processes feed a real readoutd whose link to each builder is two
TCP connections, `--builder B=tcp://127.0.0.1:P --builder
B=tcp://127.0.0.2:P` (or the bare URL twice for the one builder of a
CREDIT run). The test plays the hub (or the one builder's control port) by
hand, as test_reader_routing does, and each builder's data port on both
loopback addresses, one listener per rail.

Each test checks every connection's HELLO (its rail and the link's rails),
that every frame arrives exactly once, on the connection of its lane
(core/rails.h: the k-th batch of builder b on rail k mod 2, or with one
builder event e on rail (e / 64) mod 2), in ID order per source on each
connection, that each connection gets every source's END, and that the
END report's `builder.B.rail.K` groups sum to the link's figures. A rail
the builder refuses fails the run as one connection's refusal does, and
bad `--builder` combinations exit 2 naming the flag."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import test_reader_routing as rr
from fakesource import message, unpack
from harness import E2ETestCase
from wire import challenge, welcome

RUN = rr.RUN
RAILS = 2
SPAN_EVENTS = 64          # RAILS_SPAN_EVENTS: a lane's events with one builder
ADDRESSES = ("127.0.0.1", "127.0.0.2")


def rail_listeners() -> tuple[list[socket.socket], int]:
    """One listener per rail, all on one port (as a builder's --listen once
    per rail), the first on a free one."""
    first = socket.create_server((ADDRESSES[0], 0))
    port = first.getsockname()[1]
    return [first] + [socket.create_server((a, port)) for a in ADDRESSES[1:RAILS]], port


class RailSink(threading.Thread):
    """One rail of a builder's data port: one reader connection, its HELLO
    kept, every frame's (source, event) in arrival order, its bytes and END
    frames counted. refuse: answer the HELLO with that error code;
    close_after: close the connection once that many frames came."""

    def __init__(self, builder: int, rail: int, listener: socket.socket,
                 refuse: str | None = None, close_after: int | None = None) -> None:
        super().__init__(daemon=True)
        self.builder, self.rail, self.listener, self.refuse = builder, rail, listener, refuse
        self.close_after = close_after
        self.hello: dict | None = None
        self.frames: list[tuple[int, int]] = []
        self.bytes = 0
        self.ends = 0
        self.eof = threading.Event()
        self.error: str | None = None

    def greet(self) -> socket.socket:
        s, _ = self.listener.accept()
        s.settimeout(30)
        s.sendall(challenge())
        head = s.recv(4, socket.MSG_WAITALL)
        self.hello = unpack(s.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL))[0]
        if self.refuse:
            s.sendall(message({"type": "error", "code": self.refuse,
                               "reason": f"rail {self.rail} refused in a test"}))
        else:
            s.sendall(welcome(RUN, "builder", self.builder))
        return s

    def run(self) -> None:
        try:
            s = self.greet()
        except (OSError, struct.error, IndexError):
            self.eof.set()   # the reader gave the link up while greeting
            return
        try:
            buf = b""
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                self.bytes += len(chunk)
                buf += chunk
                pos = 0
                while len(buf) - pos >= rr.HEADER_BYTES:
                    f = rr.FRAME_HEADER.unpack_from(buf, pos)
                    size = rr.HEADER_BYTES + f[8]
                    if len(buf) - pos < size:
                        break
                    if f[2] & rr.FLAG_END:
                        self.ends += 1
                    else:
                        self.frames.append((f[3], f[5]))
                    pos += size
                buf = buf[pos:]
                if self.close_after is not None and len(self.frames) >= self.close_after:
                    return   # the connection breaks: closed with data unread
            if buf:
                self.error = f"{len(buf)} bytes of a cut frame at the end"
        except OSError as e:
            self.error = str(e)
        finally:
            s.close()
            self.eof.set()


class ReaderRailsTest(E2ETestCase):
    needs_daemons = True

    def setUp(self) -> None:
        super().setUp()
        self.hub = rr.Hub()
        self.hub.start()
        self.addCleanup(self.hub.listener.close)

    def start(self, *, events: int, builders: int, routing: bool, sources: int = 2,
              refuse: dict[tuple[int, int], str] | None = None,
              close_after: dict[tuple[int, int], int] | None = None, **flags) -> None:
        """Each builder's rail listeners and sinks, the reader dialling them
        and the hub, and the sources."""
        self.sinks: dict[tuple[int, int], RailSink] = {}
        links = []
        for b in range(builders):
            listeners, port = rail_listeners()
            for k, lst in enumerate(listeners):
                self.addCleanup(lst.close)
                sink = RailSink(b, k, lst, (refuse or {}).get((b, k)),
                                (close_after or {}).get((b, k)))
                sink.start()
                self.sinks[(b, k)] = sink
                url = f"tcp://{ADDRESSES[k]}:{port}"
                links += ["--builder", f"{b}={url}" if routing else url]
        pf = self.h.path("ports", "reader-0.port")
        self.reader = self.h.daemon(
            "readoutd", "reader-0",
            ["--id", 0, "--run", RUN, "--listen", "127.0.0.1:0", "--port-file", pf,
             "--sources", ",".join(str(s) for s in range(sources)),
             "--control", f"127.0.0.1:{self.hub.port}"] + links, **flags)
        rport = self.h.wait_port_file(pf, ("data",), 15, self.reader)["data"]
        self.sources = [self.h.start_source(id=s, run=RUN, seed=1, events=events,
                                            payload=rr.PAYLOAD, rate=20000, reader_port=rport,
                                            builder={"control": self.hub.port})
                        for s in range(sources)]
        self.assertTrue(self.hub.reader_up.wait(15), self.reader.tail())

    def finish(self, status: int = 0, broken: tuple[int, ...] = ()) -> dict:
        """Waits for the reader's END and exit; returns its report's groups.
        The links to the builders broken may end inside a frame."""
        self.assertTrue(self.hub.reported.wait(60), self.reader.tail())
        self.assertEqual(self.h.wait(self.reader, 30), status, self.reader.tail())
        for s in self.sources:
            self.h.wait(s, 30)
        for k in self.sinks.values():
            self.assertTrue(k.eof.wait(15))
            if k.builder not in broken:
                self.assertIsNone(k.error, k.error)
        return self.hub.report["groups"]

    def assert_lanes(self, lane_of, events: int, sources: int) -> None:
        """Every connection's HELLO names its rail; every frame arrives once,
        on its lane's connection, in ID order per source; END on each."""
        for (b, k), sink in self.sinks.items():
            self.assertEqual(sink.hello["channel"], "data", sink.hello)
            self.assertEqual(sink.hello["role"], "reader", sink.hello)
            self.assertEqual((sink.hello["rail"], sink.hello["rails"]), (k, RAILS), sink.hello)
            want = [(s, e) for s in range(sources) for e in range(events) if lane_of(e) == (b, k)]
            self.assertGreater(len(want), 0, "each lane has events")
            self.assertEqual(sorted(sink.frames), want, f"builder {b} rail {k}")
            for s in range(sources):
                ids = [e for src, e in sink.frames if src == s]
                self.assertEqual(ids, sorted(ids), f"source {s} in order on rail {k}")
            self.assertEqual(sink.ends, sources, f"END on builder {b} rail {k}")
        arrived = [f for sink in self.sinks.values() for f in sink.frames]
        self.assertEqual(len(arrived), len(set(arrived)), "a frame arrived twice")
        self.assertEqual(len(arrived), sources * events)

    def assert_rail_groups(self, groups: dict, b: int, link: dict) -> None:
        """builder.B.rail.K against what rail K's sink counted, and the
        rails' sums against the link's figures."""
        rails = [groups[f"builder.{b}.rail.{k}"] for k in range(RAILS)]
        for k, g in enumerate(rails):
            sink = self.sinks[(b, k)]
            self.assertEqual(g["frames_forwarded"], len(sink.frames), g)
            self.assertEqual(g["bytes_forwarded"], sink.bytes, g)
            self.assertGreater(g["writev_calls"], 0, g)
            self.assertGreater(g["socket_buffer_bytes"], 0, g)
        self.assertNotIn(f"builder.{b}.rail.{RAILS}", groups)
        for name in ("frames_forwarded", "bytes_forwarded", "writev_calls"):
            self.assertEqual(sum(g[name] for g in rails), link[name], (name, link, rails))

    def test_routing_lanes_per_builder(self) -> None:
        """Two builders of two rails each, batches of 32 assigned in an
        irregular order: the k-th batch of builder b goes on b's rail
        k mod 2, whatever the batches of the other builder between them."""
        events, batch, builders = 3000, 32, 2
        rng = random.Random(7)
        owner = [rng.choice((0, 0, 1)) for _ in range(-(-events // batch))]
        ordinal, lane = [0] * builders, []
        for b in owner:
            lane.append((b, ordinal[b] % RAILS))
            ordinal[b] += 1
        self.start(events=events, builders=builders, routing=True, socket_buffer=65536)
        records = [{"type": "assign", "first": lo, "count": min(batch, events - lo),
                    "builder": owner[lo // batch], "retired_below": 0, "sequence": 1 + lo // batch}
                   for lo in range(0, events, batch)]
        self.hub.to_reader(rr.routing(builders, events, batch), *records)
        self.hub.start_sources(2)
        groups = self.finish()
        self.assert_lanes(lambda e: lane[e // batch], events, 2)
        for b in range(builders):
            link = groups[f"builder.{b}"]
            self.assertEqual(link["end_frames"], 2 * RAILS, link)
            self.assert_rail_groups(groups, b, link)
        for s in (0, 1):
            g = groups[f"source.{s}"]
            self.assertEqual(g["frames_forwarded"], events, g)
            self.assertEqual(g["frames_received"], g["frames_forwarded"], g)

    def test_small_pending_queues_per_connection(self) -> None:
        """Queues of 4 frames per connection: each rail's sources pause at
        its own limit and nothing is lost."""
        events, batch = 1500, 64
        self.start(events=events, builders=2, routing=True, pending_frames=4)
        self.hub.to_reader(rr.routing(2, events, batch), *rr.assigns(0, events, batch, 2))
        self.hub.start_sources(2)
        groups = self.finish()
        self.assert_lanes(lambda e: ((e // batch) % 2, (e // batch // 2) % RAILS), events, 2)
        for b in (0, 1):
            self.assertLessEqual(groups[f"builder.{b}"]["pending_frames_max"], 4)

    def test_one_builder_credit_lanes(self) -> None:
        """The one builder of a CREDIT run over two rails: event e on rail
        (e / 64) mod 2; the rails' groups are builder.0.rail.K and sum to
        the reader's totals."""
        events = 2000
        self.start(events=events, builders=1, routing=False)
        self.hub.to_reader({"type": "credit", "limit": events, "sequence": 1})
        self.hub.start_sources(2)
        groups = self.finish()
        self.assert_lanes(lambda e: (0, (e // SPAN_EVENTS) % RAILS), events, 2)
        self.assertNotIn("builder.0", groups)
        self.assert_rail_groups(groups, 0, groups[""])

    def test_refused_rail_fails_the_link(self) -> None:
        """The builder refuses rail 1 of its one link: the reader fails as
        when its one connection is refused, naming the rail."""
        self.start(events=100, builders=1, routing=False, sources=1,
                   refuse={(0, 1): "bad_rail"})
        self.assertEqual(self.h.wait(self.reader, 30), 1, self.reader.tail())
        self.assertIn("the builder (rail 1 of 2) did not accept our data connection: "
                      "rail 1 refused in a test (bad_rail)", self.reader.log())
        for s in self.sources:
            self.h.stop(s)

    def test_broken_rail_breaks_the_link(self) -> None:
        """Builder 1's rail 1 breaks mid-run: the reader says so naming the
        rail, closes the link's other rail too, and waits for the hub to
        give builder 1 up, as for a link of one connection; builder 0 gets
        all of its frames and the books balance."""
        events, batch = 20000, 64
        self.start(events=events, builders=2, routing=True, close_after={(1, 1): 300})
        self.hub.to_reader(rr.routing(2, events, batch), *rr.assigns(0, events, batch, 2))
        self.hub.start_sources(2)
        deadline = time.monotonic() + 30
        warning = ("the link to builder 1 broke (its rail 1 of 2, so the link's every rail); "
                   "its frames wait for the hub to give it up while the other builders go on")
        while warning not in self.reader.log():
            self.assertLess(time.monotonic(), deadline, self.reader.tail())
            time.sleep(0.02)
        self.assertTrue(self.sinks[(1, 0)].eof.wait(15), "builder 1's rail 0 stays open")
        self.assertIn("data connection to builder 1 (rail 1 of 2) 127.0.0.2:", self.reader.log())
        self.hub.to_reader({"type": "lost", "builder": 1, "reason": "its rail broke"})
        groups = self.finish(broken=(1,))
        for s in (0, 1):
            g = groups[f"source.{s}"]
            parts = (g["frames_forwarded"] + g["frames_rejected"] + g["frames_held_at_end"]
                     + g["frames_late"] + g["frames_lost_builder"])
            self.assertEqual(g["frames_received"], parts, g)
        for k in range(RAILS):
            want = [(s, e) for s in (0, 1) for e in range(events)
                    if (e // batch) % 2 == 0 and (e // batch // 2) % RAILS == k]
            self.assertEqual(sorted(self.sinks[(0, k)].frames), want)
        self.assert_rail_groups(groups, 0, groups["builder.0"])
        link = groups["builder.1"]
        self.assertEqual(sum(groups[f"builder.1.rail.{k}"]["frames_forwarded"]
                             for k in range(RAILS)), link["frames_forwarded"])

    def test_bad_rail_options_exit_2(self) -> None:
        base = ["--id", "0", "--run", "1", "--listen", "127.0.0.1:0", "--sources", "0",
                "--control", "127.0.0.1:2"]
        tcp = [f"tcp://127.0.0.{k + 1}:7100" for k in range(5)]
        cases = [
            ([a for u in tcp for a in ("--builder", u)],
             "--builder: 'tcp://127.0.0.5:7100': the builder has more than 4 URLs; a link is "
             "at most 4 TCP connections, one per rail"),
            ([a for u in tcp for a in ("--builder", f"1={u}")],
             "--builder: '1=tcp://127.0.0.5:7100': builder 1 has more than 4 URLs; a link is "
             "at most 4 TCP connections, one per rail"),
            (["--builder", "shm://r", "--builder", "shm://r"],
             "--builder: 'shm://r': the builder is given again, but a shared-memory link is one "
             "ring whatever the rails: it takes one shm://NAME and no other URL"),
            (["--builder", tcp[0], "--builder", "shm://r"],
             "--builder: 'shm://r': the builder is given again, but a shared-memory link is one "
             "ring whatever the rails: it takes one shm://NAME and no other URL"),
            (["--builder", "0=shm://r", "--builder", f"0={tcp[1]}"],
             f"--builder: '0={tcp[1]}': builder 0 is given again, but a shared-memory link is "
             "one ring whatever the rails: it takes one shm://NAME and no other URL"),
            (["--builder", f"0={tcp[0]}", "--builder", f"0={tcp[1]}", "--builder",
              f"2={tcp[0]}", "--builder", f"2={tcp[1]}"],
             "readoutd: --builder: no link for builder 1; the links given go up to builder 2, "
             "so each of 0 .. 2 needs one"),
        ]
        for links, text in cases:
            with self.subTest(links=links):
                r = self.h.run(f"readoutd-rails-{self.h._next()}",
                               [self.h.bin / "readoutd", *base, *links], 10)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertEqual(r.output.strip(), text, r.describe())
