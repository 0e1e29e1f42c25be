"""A source that speaks the real protocols by hand (docs/PROTOCOL.md for the
control messages, docs/fragment-format.md for the frames) and then
misbehaves as a broken or hostile one would, against the real readoutd and
builderd: it greets both, answers every clock probe, waits for START and
sends good frames whose payloads are the generator's (so the reference
builder agrees on the events they complete), then

- "absurd":    ends its stream cleanly and reports the final counters it is
               given, however impossible;
- "dribble":   sends one more frame a byte at a time, every 10 ms, and never
               finishes it;
- "blackhole": sends nothing more on its data connection, which stays open.

In the last two its control link stays alive (PONGs keep coming) and it
never sends END: only its data path is stuck.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
import refbuild  # noqa: E402
import wire  # noqa: E402


# -- msgpack, the subset the control messages use ---------------------------

def pack(value) -> bytes:
    if isinstance(value, bool):
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, dict):
        n = len(value)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return head + b"".join(pack(k) + pack(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        n = len(value)
        head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
        return head + b"".join(pack(v) for v in value)
    if isinstance(value, str):
        raw = value.encode()
        if len(raw) < 32:
            return bytes([0xa0 | len(raw)]) + raw
        return b"\xd9" + bytes([len(raw)]) + raw if len(raw) < 256 else \
            b"\xda" + struct.pack(">H", len(raw)) + raw
    if value < 0:
        return b"\xd2" + struct.pack(">i", value)
    if value < 128:
        return bytes([value])
    if value < 1 << 32:
        return b"\xce" + struct.pack(">I", value)
    return b"\xcf" + struct.pack(">Q", value)


def unpack(buf: bytes, pos: int = 0):
    """Decodes one value at pos; returns (value, next position)."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return b, pos
    if b >= 0xe0:
        return b - 0x100, pos
    if 0x80 <= b <= 0x8f or b in (0xde, 0xdf):
        if b <= 0x8f:
            n = b & 0x0f
        elif b == 0xde:
            n, pos = struct.unpack_from(">H", buf, pos)[0], pos + 2
        else:
            n, pos = struct.unpack_from(">I", buf, pos)[0], pos + 4
        out = {}
        for _ in range(n):
            k, pos = unpack(buf, pos)
            v, pos = unpack(buf, pos)
            out[k] = v
        return out, pos
    if 0x90 <= b <= 0x9f or b in (0xdc, 0xdd):
        if b <= 0x9f:
            n = b & 0x0f
        elif b == 0xdc:
            n, pos = struct.unpack_from(">H", buf, pos)[0], pos + 2
        else:
            n, pos = struct.unpack_from(">I", buf, pos)[0], pos + 4
        out = []
        for _ in range(n):
            v, pos = unpack(buf, pos)
            out.append(v)
        return out, pos
    if 0xa0 <= b <= 0xbf or b in (0xd9, 0xda, 0xdb):
        if b <= 0xbf:
            n = b & 0x1f
        else:
            size = {0xd9: 1, 0xda: 2, 0xdb: 4}[b]
            n = int.from_bytes(buf[pos:pos + size], "big")
            pos += size
        return buf[pos:pos + n].decode(errors="replace"), pos + n
    if b in (0xc0, 0xc2, 0xc3):
        return {0xc0: None, 0xc2: False, 0xc3: True}[b], pos
    fmt = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q",
           0xd0: ">b", 0xd1: ">h", 0xd2: ">i", 0xd3: ">q"}.get(b)
    if fmt is None:
        raise ValueError(f"msgpack byte 0x{b:02x} not in the subset")
    return struct.unpack_from(fmt, buf, pos)[0], pos + struct.calcsize(fmt)


def message(body: dict) -> bytes:
    raw = pack(body)
    return struct.pack(">I", len(raw)) + raw


def read_message(s: socket.socket) -> dict | None:
    head = s.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return None
    n = struct.unpack(">I", head)[0]
    body = s.recv(n, socket.MSG_WAITALL)
    if len(body) < n:
        return None
    return unpack(body)[0]


def hello(role: str, id: int, run: int, channel: str) -> bytes:
    return message({"type": "hello", "role": role, "id": id, "channel": channel, "run_id": run,
                    "protocol": wire.PROTOCOL, "pid": os.getpid(), "host": socket.gethostname(),
                    "sources": [], "rail": 0, "rails": 1, "nonce": wire.nonce(), "proof": ""})


class Link(wire.Sealed):
    """A sealed control connection speaking dicts."""

    def send(self, body: dict) -> None:
        self.send_raw(message(body))

    def read(self) -> dict | None:
        body = self.read_raw()
        return unpack(body)[0] if body else None

    @classmethod
    def dialer(cls, sock: socket.socket, challenge: str, greeting: bytes,
               run_key: bytes = b"") -> "Link":
        """The dialer's end, after the challenge (its nonce) and our greeting."""
        return cls(sock, wire.session_key(challenge, unpack(greeting[4:])[0], run_key), True)

    @classmethod
    def listener(cls, sock: socket.socket, challenge: str, hello: dict,
                 run_key: bytes = b"") -> "Link":
        """The listener's end, after our challenge and the peer's HELLO; the
        run's key (the key file's bytes, its final newline aside) if any."""
        return cls(sock, wire.session_key(challenge, hello, run_key), False)


def greet_control(port: int, greeting: bytes, timeout_s: float = 10) -> Link:
    """greet(), then the control link it opens."""
    s, challenge = _greet(port, greeting, timeout_s)
    return Link.dialer(s, challenge, greeting)


def greet(port: int, greeting: bytes, timeout_s: float = 10) -> socket.socket:
    """Connects to 127.0.0.1:port (retrying until it listens), takes the
    challenge, greets and expects WELCOME."""
    return _greet(port, greeting, timeout_s)[0]


def _greet(port: int, greeting: bytes, timeout_s: float) -> tuple[socket.socket, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    challenge = read_message(s)
    assert challenge and challenge.get("type") == "challenge", challenge
    s.sendall(greeting)
    reply = read_message(s)
    assert reply and reply.get("type") == "welcome", reply
    s.settimeout(None)
    return s, challenge["nonce"]


# -- the source ---------------------------------------------------------------

class FakeSource:
    def __init__(self, *, id: int, run: int, seed: int, payload: int, reader_port: int,
                 control_port: int, mode: str, frames: int, events: int | None = None,
                 report: dict | None = None, dribble_payload: int = 1000):
        assert mode in ("absurd", "dribble", "blackhole")
        self.id, self.run, self.seed, self.payload = id, run, seed, payload
        self.reader_port, self.control_port = reader_port, control_port
        self.mode, self.frames = mode, frames
        self.events = frames if events is None else events
        self.report = report or {}
        self.dribble_payload = dribble_payload
        self.started = threading.Event()
        self.closed = threading.Event()       # the builder closed our control link
        self.messages: list[str] = []         # types received on control
        self.pongs = 0
        self.dribbled = 0                     # bytes of the stuck frame sent
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._ctl_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> "FakeSource":
        t = threading.Thread(target=self._main, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        for s in ("data", "ctl"):
            sock = getattr(self, s, None)
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass

    def _send_ctl(self, body: dict) -> None:
        with self._ctl_lock:
            self.ctl.send(body)

    def _control_loop(self) -> None:
        try:
            while not self._stop.is_set():
                m = self.ctl.read()
                if m is None:
                    break
                kind = m.get("type")
                self.messages.append(kind)
                if kind == "ping":
                    t2 = time.time_ns()
                    self._send_ctl({"type": "pong", "sequence": m["sequence"], "t1_ns": m["t1_ns"],
                                    "t2_ns": t2, "t3_ns": time.time_ns()})
                    self.pongs += 1
                elif kind == "start":
                    self.started.set()
                elif kind == "bye":
                    break
        except (OSError, ValueError):
            pass
        self.closed.set()

    def _frame(self, event: int, sequence: int, flags: int = 0, body: bytes | None = None) -> bytes:
        if body is None:
            body = refbuild.payload(self.seed, self.run, event, self.id, self.payload)
        return refbuild.encode_frame(self.id, self.run, event, sequence, time.time_ns(), flags, body)

    def _main(self) -> None:
        try:
            self.data = greet(self.reader_port, hello("source", self.id, self.run, "data"))
            self.ctl = greet_control(self.control_port, hello("source", self.id, self.run, "control"))
            self._send_ctl({"type": "stats", "status": 0,
                            "groups": {"clock": {"injected_offset_ns": 0, "injected_offset_negative": 0},
                                       "chrony": {"available": 0}}})
            t = threading.Thread(target=self._control_loop, daemon=True)
            t.start()
            self._threads.append(t)
            if not self.started.wait(30):
                raise AssertionError("no START from the builder")
            for e in range(self.frames):
                self.data.sendall(self._frame(e, e))
            if self.mode == "absurd":
                self.data.sendall(self._frame(self.events, self.frames, flags=1, body=b""))
                self.data.shutdown(socket.SHUT_WR)
                groups = {"": dict({"events": self.events, "frags_omitted": 0,
                                    "frags_sent": self.frames, "frags_duplicated": 0,
                                    "frags_delayed": 0, "frags_abandoned": 0,
                                    "frames_wire": self.frames, "frames_bad_injected": 0},
                                   **self.report),
                          "clock": {"injected_offset_ns": 0, "injected_offset_negative": 0},
                          "chrony": {"available": 0}}
                self._send_ctl({"type": "end", "status": 0, "groups": groups})
                self._stop.wait(60)
                return
            if self.mode == "dribble":
                stuck = self._frame(self.frames, self.frames,
                                    body=refbuild.payload(self.seed, self.run, self.frames, self.id,
                                                          self.dribble_payload))
                for i in range(len(stuck) - 1):   # never the last byte
                    if self._stop.wait(0.01):
                        return
                    try:
                        self.data.sendall(stuck[i:i + 1])
                    except OSError:
                        break                     # the reader gave up on us
                    self.dribbled += 1
            self._stop.wait(120)
        except BaseException as e:  # surfaced by the test
            self.error = e
