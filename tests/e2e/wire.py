"""Speaking the control protocol by hand (docs/PROTOCOL.md), for tests that
play a peer the daemons must refuse or a builder that hands out a bad ring:
a msgpack encoder for the subset the greeting needs, framing, both sides
of the challenge -> HELLO -> reply exchange, and the seal of the control
messages that follow it (docs/PROTOCOL.md, "Sealed control messages")."""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct

PROTOCOL = 5          # CTL_PROTOCOL_VERSION
SEAL_HEADER = 24      # an 8-byte sequence number, a 16-byte tag


def pack(value) -> bytes:
    """The msgpack subset a greeting needs: maps, strings, unsigned ints, arrays."""
    if isinstance(value, dict):
        assert len(value) < 16
        return bytes([0x80 | len(value)]) + b"".join(pack(k) + pack(v) for k, v in value.items())
    if isinstance(value, list):
        assert len(value) < 16
        return bytes([0x90 | len(value)]) + b"".join(pack(v) for v in value)
    if isinstance(value, (str, bytes)):
        # bytes: a msgpack str of exactly these bytes, UTF-8 or not, as a
        # hostile peer would send.
        raw = value.encode() if isinstance(value, str) else value
        return (bytes([0xa0 | len(raw)]) if len(raw) < 32 else bytes([0xd9, len(raw)])) + raw
    if value < 128:
        return bytes([value])
    return b"\xce" + struct.pack(">I", value)


def message(body: dict) -> bytes:
    raw = pack(body)
    return struct.pack(">I", len(raw)) + raw


def nonce() -> str:
    return os.urandom(32).hex()


def hello(role: str = "reader", id: int = 0, run: int = 1, sources=(0,),
          channel: str = "data", protocol: int = PROTOCOL, host: str | bytes = "e2e-test") -> bytes:
    """A HELLO without a proof: good enough for a run without a key, from this host."""
    return message({"type": "hello", "role": role, "id": id, "channel": channel, "run_id": run,
                    "protocol": protocol, "pid": os.getpid(), "host": host,
                    "sources": list(sources), "rail": 0, "rails": 1, "nonce": nonce(),
                    "proof": ""})


def session_key(challenge: str, hello: dict, run_key: bytes = b"") -> bytes:
    """The connection's session key (sys/auth's auth_session_key): HMAC-SHA256
    under the run key (empty without one) of the challenge and the HELLO's
    identity, its nonce last. hello is the decoded HELLO."""
    def text(v) -> bytes:
        return v if isinstance(v, bytes) else str(v).encode()
    channel = "data" if hello["channel"] == "data" else "control"
    fields = [challenge, hello["role"], hello["id"], hello["run_id"], channel, hello["pid"],
              hello["host"], f"{hello['rail']}/{hello['rails']}", hello["nonce"]]
    return hmac.new(run_key, b"session|" + b"|".join(text(f) for f in fields),
                    hashlib.sha256).digest()


class Sealed:
    """One end of a control connection after its greeting: every message out
    goes behind its sequence number and tag, every message in is checked
    (a bad one raises ValueError, as the daemons close the connection)."""

    def __init__(self, sock: socket.socket, key: bytes, dialer: bool):
        self.sock, self.key = sock, key
        self.out, self.into = (b"D", b"L") if dialer else (b"L", b"D")
        self.sent = self.received = 0

    def tag(self, direction: bytes, sequence: bytes, msg: bytes) -> bytes:
        return hmac.new(self.key, direction + sequence + msg, hashlib.sha256).digest()[:16]

    def seal(self, msg: bytes) -> bytes:
        """msg (length prefix and body) with its header, as the next message out."""
        seq = struct.pack(">Q", self.sent)
        self.sent += 1
        return seq + self.tag(self.out, seq, msg) + msg

    def send_raw(self, msg: bytes) -> None:
        self.sock.sendall(self.seal(msg))

    def read_raw(self) -> bytes:
        """The next message's body, checked; b"" when the connection ended."""
        head = self.sock.recv(SEAL_HEADER + 4, socket.MSG_WAITALL)
        if len(head) < SEAL_HEADER + 4:
            return b""
        n = struct.unpack(">I", head[SEAL_HEADER:])[0]
        body = self.sock.recv(n, socket.MSG_WAITALL)
        if len(body) < n:
            return b""
        seq, tag = head[:8], head[8:SEAL_HEADER]
        if not hmac.compare_digest(tag, self.tag(self.into, seq, head[SEAL_HEADER:] + body)):
            raise ValueError("control message failed authentication")
        if struct.unpack(">Q", seq)[0] != self.received:
            raise ValueError("control message out of sequence")
        self.received += 1
        return body

    def close(self) -> None:
        self.sock.close()


def read_message(s: socket.socket) -> bytes:
    head = s.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return b""
    return s.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL)


def greet(s: socket.socket, greeting: bytes) -> bytes:
    """Takes the listener's challenge on connected socket s, sends greeting
    and returns the body of the one reply."""
    assert b"challenge" in read_message(s)
    s.sendall(greeting)
    return read_message(s)


def greet_sealed(s: socket.socket, greeting: bytes) -> tuple[bytes, Sealed]:
    """greet(), and the control link that follows it: (the reply's body,
    the dialer's end)."""
    from fakesource import unpack    # the whole msgpack decoder
    challenge = unpack(read_message(s))[0]
    assert challenge["type"] == "challenge", challenge
    s.sendall(greeting)
    reply = read_message(s)
    return reply, Sealed(s, session_key(challenge["nonce"], unpack(greeting[4:])[0]), True)


def greet_tcp(port: int, greeting: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        return greet(s, greeting)


def challenge(nonce: str | None = None) -> bytes:
    return message({"type": "challenge", "nonce": nonce or os.urandom(16).hex()})


def welcome(run: int, role: str, id: int) -> bytes:
    return message({"type": "welcome", "run_id": run, "role": role, "id": id})
