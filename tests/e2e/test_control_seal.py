"""An on-path attacker on a control link (docs/PROTOCOL.md, "Sealed control
messages"): real daemons over real sockets, a hub of two builders, two
readers of two sources each, under a run key; reader 0's control connection
goes through a proxy of this test on loopback, which knows no key. It
passes the greeting through, then, once the run is going,

- injects a forged `lost` of builder 0 (what used to make a reader drop
  hundreds of builder 0's frames while the hub ended "OK"),
- reorders two of the hub's messages,
- replays one of them,
- or flips a byte of one of the reader's messages to the hub.

Each is refused by name by the receiver, which gives the connection up as
a dead peer's; the hub names the reader lost, closes its books with the
loss and ends non-zero. A proxy that changes nothing lets the run end OK,
so the proxy itself is not what fails the others."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

from fakesource import pack
from harness import E2ETestCase, read_metrics, unbalanced
from wire import SEAL_HEADER

RUN = 1
EVENTS = 4000
RATE = 1000          # events/s per source: the run lasts about 4 s
# The proxy tampers with the first message of its direction once this long
# has passed since the greeting: mid-run, every data path carrying frames.
TAMPER_AFTER_S = 1.5


def read_exact(s: socket.socket, n: int) -> bytes:
    data = s.recv(n, socket.MSG_WAITALL) if n else b""
    if len(data) < n:
        raise EOFError
    return data


class Proxy(threading.Thread):
    """Between the reader (which dials us) and the hub's control port. The
    greeting goes through as it is (the hub's challenge and welcome, the
    reader's hello); of the sealed messages after it, the first in
    direction `where` ("down": hub to reader, "up": reader to hub) once
    TAMPER_AFTER_S have passed is tampered with as `mode` says (with the
    next one, for a swap); its sequence number is kept in `at`."""

    def __init__(self, hub_port: int, mode: str, where: str) -> None:
        super().__init__(daemon=True)
        self.hub_port, self.mode, self.where = hub_port, mode, where
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.tampered = threading.Event()
        self.at: int | None = None
        self.held: bytes | None = None
        self.greeted_at = 0.0
        self.sealed = {"down": 0, "up": 0}     # sealed messages seen each way

    def run(self) -> None:
        try:
            reader, _ = self.listener.accept()
        except OSError:
            return
        hub = socket.create_connection(("127.0.0.1", self.hub_port))
        self.greeted_at = time.monotonic()
        up = threading.Thread(target=self.pump, args=(reader, hub, "up", 1), daemon=True)
        up.start()
        self.pump(hub, reader, "down", 2)
        up.join(10)
        for s in (reader, hub):
            s.close()

    def pump(self, src: socket.socket, dst: socket.socket, where: str, greeting: int) -> None:
        """Copies whole messages: greeting ones (length, body), then sealed
        ones (sequence, tag, length, body)."""
        try:
            for _ in range(greeting):
                head = read_exact(src, 4)
                dst.sendall(head + read_exact(src, struct.unpack(">I", head)[0]))
            while True:
                head = read_exact(src, SEAL_HEADER + 4)
                msg = head + read_exact(src, struct.unpack(">I", head[SEAL_HEADER:])[0])
                k = self.sealed[where]
                self.sealed[where] += 1
                due = time.monotonic() - self.greeted_at >= TAMPER_AFTER_S
                if where == self.where and due and not self.tampered.is_set():
                    dst.sendall(b"".join(self.tamper(k, msg)))
                else:
                    dst.sendall(msg)
        except (EOFError, OSError):
            pass
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def tamper(self, k: int, msg: bytes) -> list[bytes]:
        """What goes on in the place of sealed message k."""
        if self.mode == "pass":
            return [msg]
        if self.at is None:
            self.at = k
        if self.mode == "inject":
            # A well-formed LOST of builder 0 in the place of the next
            # sealed message: its sequence right, its tag a guess.
            body = pack({"type": "lost", "builder": 0, "reason": "forged on the path"})
            forged = struct.pack(">Q", k + 1) + os.urandom(16) + struct.pack(">I", len(body)) + body
            self.tampered.set()
            return [msg, forged]
        if self.mode == "reorder":
            if self.held is None:
                self.held = msg                 # until the next one has gone
                return []
            self.tampered.set()
            return [msg, self.held]
        if self.mode == "replay":
            self.tampered.set()
            return [msg, msg]
        flipped = bytearray(msg)                # "flip": the body's last byte
        flipped[-1] ^= 0x01
        self.tampered.set()
        return [bytes(flipped)]

    def close(self) -> None:
        self.listener.close()


class ControlSealTest(E2ETestCase):
    needs_daemons = True

    def start_run(self, mode: str, where: str = "down", run_key: bool = True):
        """The hub, two builders, reader 0 (sources 0 and 1) behind the
        proxy, reader 1 (sources 2 and 3) straight to the hub; under a run
        key unless run_key is false (every daemon on loopback)."""
        h = self.h
        key = h.path("run.key")
        key.write_text(os.urandom(32).hex() + "\n")
        key.chmod(0o600)
        keyed = ["--run-key-file", key] if run_key else []
        common = ["--run", RUN, "--sources", 4, "--readers", 2, "--first-event", 0,
                  "--events", EVENTS] + keyed
        out = h.dir / "run"
        hub_pf = h.path("ports", "hub.port")
        hub = h.daemon("builderd", "hub", ["--role", "hub", "--builders", 2,
                                           "--control-listen", "127.0.0.1:0", "--out", out,
                                           "--port-file", hub_pf, "--routing", "manager",
                                           "--batch", 64] + common)
        control = h.wait_port_file(hub_pf, ("control",), 15, hub)["control"]
        links = []
        for b in range(2):
            pf = h.path("ports", f"builder-{b}.port")
            records = out / "builders" / str(b)
            records.mkdir(parents=True, exist_ok=True)
            p = h.daemon("builderd", f"builder-{b}",
                         ["--role", "builder", "--id", b, "--builders", 2,
                          "--hub", f"127.0.0.1:{control}", "--listen", "127.0.0.1:0",
                          "--out", records, "--port-file", pf] + common)
            links += ["--builder", f"{b}=tcp://127.0.0.1:{h.wait_port_file(pf, ('data',), 15, p)['data']}"]
        proxy = Proxy(control, mode, where)
        self.addCleanup(proxy.close)
        proxy.start()
        readers, sources = [], []
        for r, via in ((0, proxy.port), (1, control)):
            rpf = h.path("ports", f"reader-{r}.port")
            ids = (2 * r, 2 * r + 1)
            reader = h.daemon("readoutd", f"reader-{r}",
                              ["--id", r, "--run", RUN, "--listen", "127.0.0.1:0",
                               "--port-file", rpf, "--sources", ",".join(map(str, ids)),
                               "--control", f"127.0.0.1:{via}"] + keyed + links)
            rport = h.wait_port_file(rpf, ("data",), 15, reader)["data"]
            readers.append(reader)
            sources += [h.start_source(id=s, run=RUN, seed=1, events=EVENTS, payload=64,
                                       rate=RATE, reader_port=rport,
                                       builder={"control": control}, first_event=0,
                                       run_key_file=key if run_key else None) for s in ids]
        others = [p for p in h.procs if p not in (hub, readers[0])]
        return hub, readers[0], others, proxy, out

    def tampered_run(self, mode: str, where: str, receiver_says: str, run_key: bool = True) -> dict:
        hub, reader, others, proxy, out = self.start_run(mode, where, run_key)
        self.assertNotEqual(self.h.wait(hub, 90), 0, hub.tail())
        self.assertTrue(proxy.tampered.is_set(), f"the proxy never tampered ({proxy.sealed})")
        for p in [reader] + others:
            self.h.wait(p, 30)
        receiver = reader if where == "down" else hub
        receiver_says = receiver_says.format(at=proxy.at, next=proxy.at + 1)
        self.assertIn(receiver_says, receiver.log())
        if where == "down":
            self.assertIn("lost the builder's control connection: " + receiver_says, reader.log())
            self.assertNotEqual(reader.returncode, 0, reader.tail())
        m = read_metrics(out)
        # The reader is given up as a dead peer: named, its share counted
        # lost, the books closed all the same; and never "OK".
        self.assertNotEqual(m["status"], "ok", m.get("errors"))
        self.assertTrue(any(e.startswith("Reader 0 ") and "lost its control connection" in e
                            for e in m["errors"]), m["errors"])
        self.assertEqual(len(m["errors"]), 3, m["errors"])   # and its sources, told to stop
        self.assertTrue(m["balanced"], unbalanced(m) + m.get("impossible_counters", []))
        self.assertNotIn("forged on the path", reader.log())
        hub_counted = m["counters"]["builder"]["control_refused"]
        self.assertEqual(hub_counted, 1 if where == "up" else 0, m["counters"]["builder"])
        self.h.assert_clean()
        return m

    def test_untouched_link_runs_ok(self) -> None:
        hub, reader, others, proxy, out = self.start_run("pass")
        self.assertEqual(self.h.wait(hub, 90), 0, hub.tail())
        for p in [reader] + others:
            self.assertEqual(self.h.wait(p, 30), 0, p.tail())
        # Messages enough both ways after TAMPER_AFTER_S for the others.
        self.assertGreater(proxy.sealed["down"], 10, proxy.sealed)
        self.assertGreater(proxy.sealed["up"], 3, proxy.sealed)
        m = read_metrics(out)
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["counters"]["builder"]["control_refused"], 0)
        self.h.assert_clean()

    def test_injected_lost_builder(self) -> None:
        self.tampered_run("inject", "down", "control message failed authentication")

    def test_reordered_messages(self) -> None:
        self.tampered_run("reorder", "down", "control message out of sequence (sequence {next}, "
                                             "expected {at})")

    def test_replayed_message(self) -> None:
        self.tampered_run("replay", "down", "control message out of sequence (sequence {at}, "
                                            "expected {next})")

    def test_replayed_message_without_a_run_key(self) -> None:
        """Loopback peers without a key: the session key is derived under an
        empty one, and a replay is still refused."""
        self.tampered_run("replay", "down", "control message out of sequence (sequence {at}, "
                                            "expected {next})", run_key=False)

    def test_flipped_byte_to_the_hub(self) -> None:
        self.tampered_run("flip", "up", "control message failed authentication")


if __name__ == "__main__":
    import unittest
    unittest.main()
