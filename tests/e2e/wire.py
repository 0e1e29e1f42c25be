"""Speaking the control protocol by hand (docs/PROTOCOL.md), for tests that
play a peer the daemons must refuse or a builder that hands out a bad ring:
a msgpack encoder for the subset the greeting needs, framing, and both
sides of the challenge -> HELLO -> reply exchange."""

from __future__ import annotations

import os
import socket
import struct


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


def hello(role: str = "reader", id: int = 0, run: int = 1, sources=(0,),
          channel: str = "data", protocol: int = 3, host: str | bytes = "e2e-test") -> bytes:
    """A HELLO without a proof: good enough for a run without a key, from this host."""
    return message({"type": "hello", "role": role, "id": id, "channel": channel, "run_id": run,
                    "protocol": protocol, "pid": os.getpid(), "host": host,
                    "sources": list(sources), "rail": 0, "rails": 1, "proof": ""})


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


def greet_tcp(port: int, greeting: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        return greet(s, greeting)


def challenge() -> bytes:
    return message({"type": "challenge", "nonce": os.urandom(16).hex()})


def welcome(run: int, role: str, id: int) -> bytes:
    return message({"type": "welcome", "run_id": run, "role": role, "id": id})
