"""The shared-memory path between a reader and the builder on one host
(docs/SHM.md): whole runs with both readers on rings and with one ring and
one TCP reader, both checked against the reference builder; backpressure
through a ring smaller than ten frames; a reader killed mid-run; a stale
segment, a damaged ring and every refusal of the handshake, each with its
clear error; and that no segment is ever left in /dev/shm."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from harness import (DAQRUN, E2ETestCase, HarnessError, read_json, read_metrics, topology,
                     wait_for_line)
from wire import challenge, greet, hello, read_message, welcome

SHM_DIR = Path("/dev/shm")


def unique_name() -> str:
    return f"t{os.getpid()}-{uuid.uuid4().hex[:10]}"


def segments(name: str) -> list[str]:
    """Segments of shared-memory NAME still in /dev/shm."""
    return sorted(p.name for p in SHM_DIR.glob(f"es-{name}-r*"))


def greet_shm(name: str, message: bytes) -> tuple[socket.socket, bytes]:
    """Connects to builderd's shared-memory socket, takes its challenge, sends
    message (no proof: the run has no key and the socket is local) and returns
    the socket and the body of the one reply."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(f"\0es-{name}")
    return s, greet(s, message)


def link(metrics: dict, reader: int) -> dict:
    return next(x for x in metrics["reader_links"] if x["id"] == reader)


def errors(metrics: dict) -> str:
    return " | ".join(metrics.get("errors", []))


class ShmMixin:
    """Starting daemons by hand on a shared-memory NAME."""

    def start_builder(self, name: str, sources: int, readers: int, **flags):
        return self.h.start_builder(run=1, sources=sources, readers=readers, shm_listen=name,
                                    **flags)

    def start_reader(self, name: str, rid: int, sources, ports: dict, wait: bool = True,
                     **flags):
        h = self.h
        pf = h.path("ports", f"reader-{rid}.port")
        p = h.daemon("readoutd", f"reader-{rid}",
                     ["--id", rid, "--run", 1, "--listen", "127.0.0.1:0", "--port-file", pf,
                      "--sources", ",".join(map(str, sources)), "--builder", f"shm://{name}",
                      "--control", f"127.0.0.1:{ports['control']}"], **flags)
        port = h.wait_port_file(pf, ("data",), 15, p)["data"] if wait else None
        return p, port

    def start_sources(self, ports: dict, reader_port: int, ids, events: int, payload: int = 64,
                      rate: float = 0):
        return [self.h.start_source(id=s, run=1, seed=1, events=events, payload=payload,
                                    rate=rate, reader_port=reader_port, builder=ports)
                for s in ids]

    def assertNoSegments(self, name: str) -> None:
        self.assertEqual(segments(name), [], f"segments of {name} left in /dev/shm")


class ShmRunTest(ShmMixin, E2ETestCase):
    """Whole runs through deploy/daqrun, whose local topology puts readers on
    the builder's host on shared memory by default."""
    needs_daemons = True

    def check_run(self, topo: dict, transports: list[str]) -> dict:
        r = self.h.daqrun(topo, timeout_s=300)
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output, r.output)
        m = self.assertBalanced(r)
        self.assertRefbuildPasses(r.run_dir)
        self.assertEqual([x["transport"] for x in m["reader_links"]], transports)
        for rid, transport in enumerate(transports):
            fwd = m["counters"][f"reader.{rid}"]
            got = m["counters"][f"builder.from_reader.{rid}"]
            self.assertEqual(fwd["frames_forwarded"], got["frames_received"])
            self.assertEqual(fwd["transport_shm"], 1 if transport == "shm" else 0)
            if transport == "shm":
                # Every frame and END went through the ring, one record each.
                self.assertEqual(fwd["ring_records"], fwd["frames_forwarded"] + got["end_frames"])
                self.assertTrue(link(m, rid)["attached"])
                self.assertFalse(link(m, rid)["died"])
        name = r.params()["shm_name"]
        self.assertIsNotNone(name)
        self.assertNoSegments(name)
        self.h.assert_clean()
        return m

    def test_both_readers_on_shm(self) -> None:
        m = self.check_run(topology(events=20000, payload=64, rate=0), ["shm", "shm"])
        bounds = m["memory_bounds"]
        self.assertEqual(bounds["shm_ring_capacity_bytes"], 4 << 20)
        self.assertEqual(bounds["shm_rings_bytes"], 2 * (192 + (4 << 20)))
        self.assertEqual(link(m, 0)["ring_capacity_bytes"], 4 << 20)

    def test_mixed_shm_and_tcp(self) -> None:
        topo = topology(events=20000, payload=64, rate=0)
        topo["reader"][1]["transport"] = "tcp"
        m = self.check_run(topo, ["shm", "tcp"])
        self.assertIn("address", link(m, 1))

    def test_full_ring_blocks_the_reader(self) -> None:
        """Rings of 8 KiB hold seven 1 KiB fragments: the readers wait on
        them again and again, and nothing is lost or overwritten."""
        topo = topology(events=20000, payload=1024, rate=0, max_fragment=2048, timeout_ms=0,
                        filter_cost_us=2)
        topo["builder"]["shm_capacity"] = 8192
        m = self.check_run(topo, ["shm", "shm"])
        self.assertEqual(m["memory_bounds"]["shm_ring_capacity_bytes"], 8192)
        waits = [m["counters"][f"reader.{i}"]["ring_full_waits"] for i in (0, 1)]
        self.assertGreater(sum(waits), 0, f"no reader ever waited on a full ring: {waits}")

    def test_reader_killed_mid_run(self) -> None:
        """SIGKILL of a reader on shared memory: named by the builder, the
        frames it had passed on counted as received and the rest as lost
        with it, the run fails, and /dev/shm is clean."""
        h = self.h
        topo = h.write_topology(topology(events=40000, payload=64, rate=10000, timeout_ms=300))
        out = h.dir / "killed"
        p = h.start("daqrun-kill", [sys.executable, DAQRUN, topo, "--out", out,
                                    "--bin", h.bin, "--timeout", "120"])
        deadline = time.monotonic() + 30
        pid = None
        while pid is None:
            try:
                procs = read_json(out / "params.json").get("processes", [])
            except HarnessError:
                procs = []
            if len(procs) == 7:
                pid = next(x["pid"] for x in procs if x["name"] == "reader-0")
            elif time.monotonic() > deadline or p.returncode is not None:
                self.fail(f"daqrun did not start every daemon:\n{p.tail()}")
            else:
                time.sleep(0.05)
        time.sleep(1.5)      # a 4 s run: well under way
        os.kill(pid, signal.SIGKILL)
        rc = h.wait(p, 150)
        self.assertNotEqual(rc, 0, p.tail())
        m = read_metrics(out)
        self.assertEqual(m["status"], "failed")
        self.assertRegex(errors(m), rf"Reader 0 \(pid {pid} on [^)]+\) died: shared-memory "
                                    rf"peer gone \(its socket closed\); \d+ frames received")
        dead = link(m, 0)
        self.assertTrue(dead["died"], dead)
        self.assertGreater(dead["frames_received"], 0)
        self.assertEqual(dead["frames_received"],
                         m["counters"]["builder.from_reader.0"]["frames_received"])
        wire = sum(m["counters"][f"source.{s}"]["frames_wire"] for s in (0, 1))
        self.assertEqual(dead["frames_on_wire_from_its_sources"], wire)
        self.assertEqual(dead["frames_lost_with_reader"], wire - dead["frames_received"])
        self.assertFalse(link(m, 1)["died"])
        # The builder's own books still close over what it received.
        for eq in m["equations"]:
            if eq["name"][:2] in ("3 ", "4 ", "6 "):
                self.assertTrue(eq["ok"], eq)
        self.assertNoSegments(read_json(out / "params.json")["shm_name"])
        h.assert_clean()


class ShmFailureTest(ShmMixin, E2ETestCase):
    """Daemons started by hand: damage, stale segments and refusals."""
    needs_daemons = True

    def test_stale_segment_is_replaced_not_read(self) -> None:
        name = unique_name()
        for rid in (0, 1):
            (SHM_DIR / f"es-{name}-r{rid}").write_bytes(b"\xee" * 65536)
        try:
            builder, ports = self.start_builder(name, 4, 2, events=5000)
            readers = [self.start_reader(name, rid, (2 * rid, 2 * rid + 1), ports)
                       for rid in (0, 1)]
            sources = []
            for rid, (_, port) in enumerate(readers):
                sources += self.start_sources(ports, port, (2 * rid, 2 * rid + 1), 5000)
            self.assertEqual(self.h.wait(builder, 60), 0, builder.tail())
            for p in [r for r, _ in readers] + sources:
                self.assertEqual(self.h.wait(p, 30), 0, p.tail())
        finally:
            for rid in (0, 1):
                (SHM_DIR / f"es-{name}-r{rid}").unlink(missing_ok=True)
        for rid in (0, 1):
            self.assertIn(f"Replaced shared-memory segment /es-{name}-r{rid} left by an earlier "
                          f"run or a crashed builder; its contents were not read", builder.log())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], m["equations"])
        self.assertEqual(m["counters"]["builder"]["events_accepted"], 5000)
        r = self.h.refbuild("--events-file", self.h.dir / "run" / "events.jsonl", "--seed", 1,
                            "--run", 1, "--sources", 4, "--events", 5000, "--payload", 64)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_damaged_ring_is_a_clear_error(self) -> None:
        cases = {
            "record": "put a record of 105 bytes in its ring that does not hold exactly one "
                      "frame (106 bytes)",
            "crc": "sent a bad frame: checksum mismatch; closing its data ring",
            "length": "is corrupt: impossible record length or counter in ring",
            "head": "is corrupt: impossible record length or counter in ring",
        }
        for kind, words in cases.items():
            with self.subTest(kind=kind):
                name = unique_name()
                for old in (self.h.dir / "ports").glob("*.port"):
                    old.unlink()
                out = self.h.dir / f"run-{kind}"
                builder, ports = self.start_builder(name, 2, 1, events=5000, out=out,
                                                    peer_timeout_ms=1500)
                reader, port = self.start_reader(name, 0, (0, 1), ports,
                                                 shm_inject=f"{kind}@500")
                sources = self.start_sources(ports, port, (0, 1), 5000)
                self.assertEqual(self.h.wait(builder, 60), 1, builder.tail())
                for p in [reader] + sources:
                    self.h.wait(p, 30)
                m = read_metrics(out)
                self.assertIn(words, errors(m))
                self.assertIn(f"Reader 0 (", errors(m))
                self.assertIn(f"ring /es-{name}-r0" if kind in ("length", "head") else "Reader 0",
                              errors(m))
                self.assertIn("injected", reader.log())
                # What came before the damaged record was taken, and only that;
                # an impossible head discredits the whole ring at once.
                got = m["counters"]["builder.from_reader.0"]["frames_received"]
                if kind == "head":
                    self.assertLessEqual(got, 500)
                else:
                    self.assertEqual(got, 500)
                for eq in m["equations"]:
                    if eq["name"][:2] in ("3 ", "4 ", "6 "):
                        self.assertTrue(eq["ok"], eq)
                self.assertNoSegments(name)
                self.h.assert_clean()

    def test_segment_truncated_while_mapped(self) -> None:
        """A segment cut short under both daemons mid-run (as a confused or
        hostile process with access to it could): no SIGBUS, the builder
        names the ring and the cause, the reader stops, the books of what
        was received close, and nothing is left behind. The segment's name
        is gone once the reader attached, so the test reaches the builder's
        mapping through /proc/PID/map_files (root only)."""
        if os.geteuid() != 0:
            self.skipTest("opening /proc/PID/map_files needs root")
        name = unique_name()
        builder, ports = self.start_builder(name, 2, 1, events=20000, peer_timeout_ms=1500)
        reader, port = self.start_reader(name, 0, (0, 1), ports)
        sources = self.start_sources(ports, port, (0, 1), 20000, rate=4000)
        deadline = time.monotonic() + 20
        while "forwards through shared-memory ring" not in reader.log():
            self.assertLess(time.monotonic(), deadline, reader.tail())
            time.sleep(0.05)
        time.sleep(0.5)      # a 5 s run: well under way
        mapping = next(line.split()[0] for line in
                       Path(f"/proc/{builder.pid}/maps").read_text().splitlines()
                       if f"/es-{name}-r0" in line)
        fd = os.open(f"/proc/{builder.pid}/map_files/{mapping}", os.O_RDWR)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        self.assertEqual(self.h.wait(builder, 60), 1, builder.tail())
        for p in [reader] + sources:
            rc = self.h.wait(p, 30)
            self.assertGreaterEqual(rc, 0, f"{p.name} killed by signal {-rc}:\n{p.tail()}")
        m = read_metrics(self.h.dir / "run")
        # Whether the builder meets the lost pages in the ring's counters or
        # inside a record it is reading, the cause is named.
        self.assertRegex(errors(m), rf"Reader 0 \(pid {reader.pid} on [^)]+\): shared-memory "
                                    rf"ring /es-{name}-r0(: | is corrupt: )segment truncated "
                                    rf"while mapped")
        # The reader meets them itself, or hears first that the builder left.
        self.assertRegex(reader.log(), r"segment truncated while mapped|before our data ended")
        got = m["counters"]["builder.from_reader.0"]["frames_received"]
        self.assertGreater(got, 0)
        self.assertLess(got, 40000)
        for eq in m["equations"]:
            if eq["name"][:2] in ("3 ", "4 ", "6 "):
                self.assertTrue(eq["ok"], eq)
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_strangers_on_the_shm_socket(self) -> None:
        """The shared-memory socket checks HELLOs as the data port does, and
        a peer that greets but then misbehaves is named and its ring
        removed."""
        name = unique_name()
        builder, _ = self.start_builder(name, 1, 1, peer_timeout_ms=1500)
        for message, code in ((hello(role="source"), b"wrong_role"),
                              (hello(run=2), b"wrong_run"),
                              (hello(sources=(5,)), b"bad_sources")):
            s, reply = greet_shm(name, message)
            s.close()
            self.assertIn(b"error", reply)
            self.assertIn(code, reply)
        # Greets well, takes its eventfds, then says something else than
        # "attached" on the socket.
        s, reply = greet_shm(name, hello())
        self.assertIn(b"welcome", reply)
        _, fds, _, _ = socket.recv_fds(s, 1, 2)
        self.assertEqual(len(fds), 2)
        self.assertEqual(segments(name), [f"es-{name}-r0"])
        s.sendall(b"X")
        self.assertEqual(self.h.wait(builder, 30), 1, builder.tail())
        s.close()
        for fd in fds:
            os.close(fd)
        m = read_metrics(self.h.dir / "run")
        self.assertIn(f"Reader 0 (pid {os.getpid()} on e2e-test) sent an unexpected byte 0x58 "
                      f"on its shared-memory socket; closing ring /es-{name}-r0", errors(m))
        self.assertGreaterEqual(m["counters"]["builder"]["refused_connections"], 3)
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_reader_leaves_before_attaching(self) -> None:
        """A peer that greets as reader 0, takes its eventfds and leaves
        before attaching carried nothing: its ring is removed and the slot is
        free for the real reader 0, whose run completes."""
        name = unique_name()
        builder, ports = self.start_builder(name, 1, 1, events=2000)
        s, reply = greet_shm(name, hello())
        self.assertIn(b"welcome", reply)
        _, fds, _, _ = socket.recv_fds(s, 1, 2)
        s.close()
        for fd in fds:
            os.close(fd)
        words = (f"Reader 0's data connection from unix:pid {os.getpid()} (pid {os.getpid()} on "
                 f"e2e-test) left ring /es-{name}-r0 before confirming its attach (its socket "
                 f"closed); it carried nothing, so the slot is free for reader 0 again")
        deadline = time.monotonic() + 15
        while words not in builder.log():
            self.assertLess(time.monotonic(), deadline, builder.tail())
            time.sleep(0.05)
        self.assertNoSegments(name)
        reader, rport = self.start_reader(name, 0, (0,), ports)
        sources = self.start_sources(ports, rport, (0,), 2000)
        self.assertEqual(self.h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(self.h.wait(p, 30), 0, p.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], m["equations"])
        self.assertEqual(m["counters"]["builder"]["events_accepted"], 2000)
        self.assertEqual(errors(m), "")
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_reader_fragment_larger_than_ring(self) -> None:
        """A reader accepting larger fragments than the builder's ring
        holds refuses to start rather than fail mid-run."""
        name = unique_name()
        builder, ports = self.start_builder(name, 2, 1, max_fragment=1000, shm_capacity=4096,
                                            peer_timeout_ms=1500)
        reader, _ = self.start_reader(name, 0, (0, 1), ports, wait=False)
        self.assertEqual(self.h.wait(reader, 30), 1, reader.tail())
        self.assertIn(f"Reader 0: the builder's ring /es-{name}-r0 of 4096 bytes holds frames "
                      f"of up to 2040 bytes, fewer than a fragment of --max-fragment 1048576 "
                      f"needs; raise the builder's --shm-capacity or lower --max-fragment",
                      reader.log())
        self.assertEqual(self.h.wait(builder, 30), 1, builder.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertRegex(errors(m), rf"Reader 0 \(pid {reader.pid} on [^)]+\) left shared-memory "
                                    rf"ring /es-{name}-r0 before confirming its attach")
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_capacity_is_raised_to_hold_two_frames(self) -> None:
        name = unique_name()
        builder, ports = self.start_builder(name, 1, 1, shm_capacity=5000, max_fragment=4000,
                                            events=100)
        reader, port = self.start_reader(name, 0, (0,), ports, max_fragment=4000)
        sources = self.start_sources(ports, port, (0,), 100, payload=4000)
        self.assertEqual(self.h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(self.h.wait(p, 30), 0, p.tail())
        # A record of 4042 bytes takes 4056: two need 8112.
        self.assertIn("Shared-memory ring capacity 5000 bytes raised to 8192: a power of two "
                      "holding two frames of --max-fragment 4000", builder.log())
        m = read_metrics(self.h.dir / "run")
        self.assertEqual(m["memory_bounds"]["shm_ring_capacity_bytes"], 8192)
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_builder_without_shm(self) -> None:
        """A reader told to use shared memory when the builder offers none
        names the socket it waited for."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=1, readers=1, peer_timeout_ms=2000)
        name = unique_name()
        reader, _ = self.start_reader(name, 0, (0,), ports, wait=False, connect_timeout_ms=300)
        self.assertEqual(h.wait(reader, 30), 1, reader.tail())
        self.assertRegex(reader.log(), rf"Gave up connecting to the builder's shared-memory "
                                       rf"socket at @es-{name} after \d+ attempts: "
                                       rf"Connection refused")
        self.assertEqual(h.wait(builder, 30), 1, builder.tail())
        h.assert_clean()

    def test_name_in_use(self) -> None:
        name = unique_name()
        first, _ = self.start_builder(name, 1, 1, peer_timeout_ms=5000)
        second = self.h.daemon("builderd", "builder-1",
                               ["--run", 1, "--sources", 1, "--readers", 1,
                                "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0",
                                "--out", self.h.dir / "run2", "--shm-listen", name])
        self.assertEqual(self.h.wait(second, 30), 1, second.tail())
        self.assertIn(f"Cannot listen on Unix socket @es-{name}: Address already in use "
                      f"(another process on this host uses that name)", second.log())
        self.h.stop(first)
        self.h.assert_clean()

    def test_builder_terminated_mid_run(self) -> None:
        """SIGTERM to the builder: it closes the rings (the readers stop
        forwarding and say so), unlinks everything and ends non-zero."""
        name = unique_name()
        builder, ports = self.start_builder(name, 2, 1, events=100000)
        reader, port = self.start_reader(name, 0, (0, 1), ports)
        sources = self.start_sources(ports, port, (0, 1), 100000, rate=10000)
        deadline = time.monotonic() + 30
        while "starting" not in builder.log():
            self.assertLess(time.monotonic(), deadline, builder.tail())
            time.sleep(0.05)
        time.sleep(1.0)
        os.kill(builder.pid, signal.SIGTERM)
        self.assertEqual(self.h.wait(builder, 30), 1, builder.tail())
        for p in [reader] + sources:
            self.h.wait(p, 30)
        self.assertRegex(reader.log(), rf"ring /es-{name}-r0|shared-memory link")
        self.assertIn("Run 1 stopped: terminated", errors(read_metrics(self.h.dir / "run")))
        self.assertNoSegments(name)
        self.h.assert_clean()


# The segment header of common/io/shmring.h, as a builder lays it out.
RING_MAGIC = 0x4553534852494e47
RING_HEADER_BYTES = 192
RING_READY, RING_CLOSED = 1, 4


def ring_segment(capacity: int = 4096, *, magic: int = RING_MAGIC, version: int = 1,
                 run: int = 1, state: int = RING_READY, head: int = 0, tail: int = 0,
                 consumer_pid: int | None = None, size: int | None = None) -> bytes:
    seg = bytearray(RING_HEADER_BYTES + capacity if size is None else max(size, 192))
    struct.pack_into("<QIIQII", seg, 0, magic, version, RING_HEADER_BYTES, capacity, run, state)
    struct.pack_into("<Q", seg, 64, head)
    struct.pack_into("<Q", seg, 128, tail)
    # consumer_start 0: liveness by pid alone.
    struct.pack_into("<i", seg, 160, os.getpid() if consumer_pid is None else consumer_pid)
    return bytes(seg[:size]) if size is not None else bytes(seg)


def unused_port() -> int:
    """A loopback port nobody listens on: a builder control port the reader
    keeps retrying while the test plays the shared-memory side."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


class FakeRingBuilder:
    """Plays builderd's side of the shared-memory handshake for reader 0 of
    NAME (docs/SHM.md): challenge, WELCOME, the two eventfds, and a segment
    /es-NAME-r0 whose bytes the test chose. Then waits for the reader's 'A'
    or for it to hang up."""

    def __init__(self, name: str, segment: bytes | None):
        self.path = SHM_DIR / f"es-{name}-r0"
        if segment is not None:
            self.path.write_bytes(segment)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(f"\0es-{name}")
        self.listener.listen(1)
        self.listener.settimeout(15)
        self.efds = [os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK) for _ in range(2)]
        self.answer: bytes | None = None
        self.hello = b""
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(15)
            conn.sendall(challenge())
            self.hello = read_message(conn)
            conn.sendall(welcome(1, "builder", 0))
            socket.send_fds(conn, [b"E"], self.efds)
            try:
                self.answer = conn.recv(1)
            except OSError:
                self.answer = b""

    def close(self) -> bytes | None:
        """Stops serving; returns the segment's bytes as the reader left them."""
        self.thread.join(20)
        self.listener.close()
        for fd in self.efds:
            os.close(fd)
        if not self.path.exists():
            return None
        left = self.path.read_bytes()
        self.path.unlink()
        return left


class ShmAttachTest(ShmMixin, E2ETestCase):
    """A reader handed a segment that fails the attach checks (shorter than
    its header, bad magic, another layout version or run, a size that does
    not match its capacity, impossible counters, a closed ring, a builder
    that is gone) names the cause, maps nothing, leaves the segment as it
    found it (removes it when its builder is gone) and exits 1 -- no SIGBUS, no wild read. A well-formed segment
    from the same fake builder is attached, so each refusal is the one
    defect's doing."""
    needs_daemons = True

    def attach(self, segment: bytes | None) -> tuple[int, str, FakeRingBuilder, bytes | None]:
        name = unique_name()
        builder = FakeRingBuilder(name, segment)
        reader, _ = self.start_reader(name, 0, (0,), {"control": unused_port()})
        try:
            rc = self.h.wait(reader, 20)
        except HarnessError:
            rc = None
        if rc is None:
            self.h.stop(reader)
        left = builder.close()
        return rc, reader.log(), builder, left

    def test_well_formed_segment_is_attached(self) -> None:
        name = unique_name()
        builder = FakeRingBuilder(name, ring_segment())
        reader, _ = self.start_reader(name, 0, (0,), {"control": unused_port()},
                                      max_fragment=1024)
        builder.thread.join(20)
        self.assertEqual(builder.answer, b"A", reader.tail())
        self.assertIn(b"reader", builder.hello)
        # The reader logs the ring once it has confirmed the attach, a moment
        # after the fake builder has read its answer.
        wait_for_line(reader, f"forwards through shared-memory ring /es-{name}-r0 (4096 bytes)")
        self.h.stop(reader)
        left = builder.close()
        state, = struct.unpack_from("<I", left, 28)
        self.assertIn(state, (2, 3), "the reader claimed the ring (ATTACHED, then DETACHED)")
        self.h.assert_clean()

    def test_malformed_segments_are_refused(self) -> None:
        cases = {
            "shorter than a header": (ring_segment(size=100),
                                      "corrupt segment header or descriptor message"),
            "bad magic": (ring_segment(magic=RING_MAGIC ^ 1),
                          "corrupt segment header or descriptor message"),
            "other layout version": (ring_segment(version=2), "segment layout version mismatch"),
            "other run": (ring_segment(run=2), "segment of another run"),
            "size below its capacity": (ring_segment(capacity=8192, size=192 + 4096),
                                        "capacity does not match segment size"),
            "capacity not a power of two": (ring_segment(capacity=4000, size=192 + 4000),
                                            "capacity does not match segment size"),
            "tail ahead of head": (ring_segment(head=8, tail=16),
                                   "corrupt segment header or descriptor message"),
            "closed ring": (ring_segment(state=RING_CLOSED), "ring already closed"),
            "builder gone": (ring_segment(consumer_pid=dead_pid()),
                             "the builder that created the segment is no longer running"),
            "no segment": (None, "No such file or directory"),
        }
        for label, (segment, cause) in cases.items():
            with self.subTest(segment=label):
                rc, log, builder, left = self.attach(segment)
                self.assertEqual(rc, 1, log)
                self.assertIn("Reader 0 cannot attach to the builder's ring "
                              f"/{builder.path.name}: {cause}", log)
                self.assertNotEqual(builder.answer, b"A")
                if label == "builder gone":
                    # Its creator is dead and nobody else knows of it: the
                    # reader removes it, unwritten.
                    self.assertIsNone(left, "a dead builder's segment was left in /dev/shm")
                    self.assertIn(f"Reader 0 removed segment /{builder.path.name}: the builder "
                                  "that created it (pid ", log)
                else:
                    self.assertEqual(left, segment, "the refused segment was written to")
        self.h.assert_clean()


class ShmUsageTest(E2ETestCase):
    """Bad flags and topology keys are usage errors that name the key."""
    needs_daemons = True

    def usage(self, role: str, args: list, words: str) -> None:
        r = self.h.run(f"{role}-usage", [self.h.bin / role] + args, timeout_s=10)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn(words, r.output)

    def test_bad_flags(self) -> None:
        reader = ["--id", "0", "--run", "1", "--listen", "127.0.0.1:0", "--sources", "0",
                  "--control", "127.0.0.1:1"]
        builder = ["--run", "1", "--sources", "1", "--readers", "1", "--listen", "127.0.0.1:0",
                   "--control-listen", "127.0.0.1:0", "--out", str(self.h.dir / "o")]
        self.usage("readoutd", reader + ["--builder", "shm://a/b"],
                   "--builder: expected shm://NAME with NAME of 1 to 48 letters")
        self.usage("readoutd", reader + ["--builder", "shm://"],
                   "--builder: expected shm://NAME")
        self.usage("readoutd", reader + ["--builder", "udp://x:1"],
                   "--builder: expected tcp://HOST:PORT or shm://NAME, got 'udp://x:1'")
        self.usage("readoutd", reader + ["--builder", "tcp://127.0.0.1:1", "--shm-inject",
                                         "crc@1"], "--shm-inject needs --builder shm://NAME")
        self.usage("readoutd", reader + ["--builder", "shm://x", "--shm-inject", "oops@1"],
                   "--shm-inject: expected KIND@N with KIND one of record, crc, length, head")
        self.usage("builderd", builder + ["--shm-listen", "../x"],
                   "--shm-listen: expected a NAME of 1 to 48 letters")
        self.usage("builderd", builder + ["--shm-listen", "x" * 49],
                   "--shm-listen: expected a NAME")
        self.usage("builderd", builder + ["--shm-capacity", "8192"],
                   "--shm-capacity needs --shm-listen NAME")
        self.usage("builderd", builder + ["--shm-listen", "x", "--shm-capacity", "100"],
                   "--shm-capacity: expected an integer from 4096 to 1073741824, got '100'")

    def test_topology_errors(self) -> None:
        for key, value, words in (
                ("transport", "udp", "[[reader]] id 0 transport: expected \"shm\" or \"tcp\", "
                                     "got 'udp'"),
                ("host", "127.0.0.2", "[[reader]] id 0 transport: \"shm\" needs the builder's "
                                      "host, but reader host '127.0.0.2' is not builder host "
                                      "'127.0.0.1'")):
            with self.subTest(key=key):
                topo = topology(events=100)
                topo["reader"][0]["transport"] = "shm"
                topo["reader"][0][key] = value
                r = self.h.daqrun(topo, timeout_s=30)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(words, r.output)
        topo = topology(events=100)
        topo["builder"]["shm_capacity"] = 100
        r = self.h.daqrun(topo, timeout_s=30)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("[builder] shm_capacity: expected an integer in 4096..1073741824",
                      r.output)
        self.h.assert_clean()


class ShmAttachWindowTest(ShmMixin, E2ETestCase):
    """The window between the builder's WELCOME with the eventfds and the
    reader's "attached": held open by a local process it ends at the
    handshake timeout, the segment removed and the slot free for the real
    reader; a builder killed -9 inside it leaves a segment that the next
    builder of the name removes at start."""
    needs_daemons = True

    def hold_window(self, name: str) -> tuple[socket.socket, list[int]]:
        s, reply = greet_shm(name, hello())
        self.assertIn(b"welcome", reply)
        _, fds, _, _ = socket.recv_fds(s, 1, 2)
        self.assertEqual(len(fds), 2)
        self.assertEqual(segments(name), [f"es-{name}-r0"])
        return s, fds

    def real_run(self, name: str, builder, ports: dict, events: int) -> dict:
        reader, rport = self.start_reader(name, 0, (0, 1), ports)
        sources = self.start_sources(ports, rport, (0, 1), events)
        self.assertEqual(self.h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(self.h.wait(p, 30), 0, p.tail())
        m = read_metrics(self.h.dir / "run")
        self.assertTrue(m["balanced"], m["equations"])
        self.assertEqual(m["counters"]["builder"]["events_accepted"], events)
        self.assertTrue(link(m, 0)["attached"])
        return m

    def test_attach_has_a_deadline(self) -> None:
        name = unique_name()
        builder, ports = self.start_builder(name, 2, 1, events=3000, handshake_timeout_ms=500)
        s, fds = self.hold_window(name)
        t0 = time.monotonic()
        while segments(name):
            self.assertLess(time.monotonic() - t0, 5, builder.tail())
            time.sleep(0.02)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.assertEqual(s.recv(10), b"", "the link is closed with the segment")
        s.close()
        for fd in fds:
            os.close(fd)
        self.assertIn(f"Reader 0's data connection from unix:pid {os.getpid()} (pid {os.getpid()} "
                      f"on e2e-test) did not confirm its attach to ring /es-{name}-r0 within the "
                      f"handshake timeout (500 ms): segment removed; it carried nothing, so the "
                      f"slot is free for reader 0 again", builder.log())
        m = self.real_run(name, builder, ports, 3000)
        self.assertEqual(m["counters"]["builder"]["greetings_timed_out"], 1)
        self.assertEqual(m["counters"]["builder"]["refused_connections"], 1)
        self.assertEqual(errors(m), "")
        self.assertNoSegments(name)
        self.h.assert_clean()

    def test_builder_killed_in_the_window_leaves_nothing_behind(self) -> None:
        name = unique_name()
        try:
            builder, _ = self.start_builder(name, 2, 1, events=3000)
            s, fds = self.hold_window(name)
            os.kill(builder.pid, signal.SIGKILL)
            self.h.wait(builder, 10)
            s.close()
            for fd in fds:
                os.close(fd)
            # Nobody alive created it, and its builder could not remove it.
            self.assertEqual(segments(name), [f"es-{name}-r0"])
            # The next builder of the name sweeps it at start, whatever
            # reader it was for.
            os.rename(SHM_DIR / f"es-{name}-r0", SHM_DIR / f"es-{name}-r7")
            out = self.h.dir / "run2"
            self.h.path("ports", "builder-0.port").unlink()
            builder2, ports = self.h.start_builder(run=1, sources=2, readers=1, shm_listen=name,
                                                   events=3000, out=out)
            self.assertIn(f"Removed shared-memory segment /es-{name}-r7 left by builder pid "
                          f"{builder.pid}, which is gone", builder2.log())
            self.assertEqual(segments(name), [])
            reader, rport = self.start_reader(name, 0, (0, 1), ports)
            sources = self.start_sources(ports, rport, (0, 1), 3000)
            self.assertEqual(self.h.wait(builder2, 60), 0, builder2.tail())
            for p in [reader] + sources:
                self.assertEqual(self.h.wait(p, 30), 0, p.tail())
            m = read_metrics(out)
            self.assertTrue(m["balanced"], m["equations"])
            self.assertEqual(m["counters"]["builder"]["events_accepted"], 3000)
        finally:
            for p in SHM_DIR.glob(f"es-{name}-r*"):
                p.unlink(missing_ok=True)
        self.assertNoSegments(name)
        self.h.assert_clean()
