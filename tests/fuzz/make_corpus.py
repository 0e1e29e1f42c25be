#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (docs/FUZZING.md):

  OUT/frame/  frame streams: every 'frames' vector of tests/data/vectors.json,
              generated streams ending in END, and one frame per refusal
  OUT/ctl/    control messages: every type, valid (canonical and not), a
              stream of all of them, and refused ones
  OUT/ring/   ring scripts: the real producer going several laps round the
              ring, ring images written into the segment (with and without
              a wrap), and corrupt ones
  OUT/evfile/ event files: every 'file' vector of tests/data/evfile-vectors.json
              (good, cut, damaged), under the default and a tight payload limit
  OUT/ctl.dict  libFuzzer dictionary of the control messages' keys and names

Input layouts are those of tests/fuzz/harness.h. Python 3 standard library
only: msgpack is encoded here. Usage:

  make_corpus.py --out build/fuzz/corpus [--vectors tests/data/vectors.json]
"""

import argparse
import json
import os
import struct
import zlib

# ---- frames (docs/fragment-format.md §1) -------------------------------

FRAME_HEADER = ">HBBHIQQQI"  # up to payload_len; the CRC follows
MAX_PAYLOAD = 1048576


def frame(run, event, payload=b"", source=0, sequence=0, ts=1, flags=0, magic=0x4553,
          version=1, length=None, crc_xor=0):
    """One frame; length and crc_xor make broken ones."""
    n = len(payload) if length is None else length
    head = struct.pack(FRAME_HEADER, magic, version, flags, source, run, event, sequence, ts, n)
    crc = zlib.crc32(payload, zlib.crc32(head)) ^ crc_xor
    return head + struct.pack(">I", crc) + payload


def frame_input(run, max_payload, stream, seed=1):
    """fuzz_frame_input(): run_id, configured max payload, piece seed, stream."""
    return struct.pack(">III", run, max_payload, seed) + stream


def payload(n, salt=0):
    return bytes((i * 131 + salt) & 0xFF for i in range(n))


def frame_seeds(vectors):
    seeds = {}
    for i, v in enumerate(vectors.get("frames", [])):
        raw = bytes.fromhex(v["frame_hex"])
        n = len(bytes.fromhex(v["payload_hex"]))
        seeds[f"vector-{i}"] = frame_input(v["run"], MAX_PAYLOAD, raw, seed=i)
        seeds[f"vector-{i}-tight-limit"] = frame_input(v["run"], n, raw, seed=i + 100)
        if n > 0:
            seeds[f"vector-{i}-over-limit"] = frame_input(v["run"], n - 1, raw)
        seeds[f"vector-{i}-other-run"] = frame_input(v["run"] ^ 1, MAX_PAYLOAD, raw)

    run = 7
    stream = b"".join(frame(run, e, payload(e * 13 % 97, e), source=2, sequence=e)
                      for e in range(8))
    seeds["stream-8-then-end"] = frame_input(
        run, 256, stream + frame(run, 8, flags=1, source=2, sequence=8), seed=3)
    seeds["stream-truncated"] = frame_input(run, 256, stream[:-5], seed=4)
    # Payloads past 2 KiB take the decoder's other CRC path (a combine with a
    # cached shift operator): lengths repeat and change from frame to frame.
    big = b"".join(frame(run, e, payload(n, e), sequence=e)
                   for e, n in enumerate((2049, 2049, 3000, 2048, 4096, 2049)))
    seeds["large-payloads"] = frame_input(run, 4096, big + frame(run, 6, flags=1, sequence=6),
                                          seed=5)
    seeds["large-bad-crc"] = frame_input(run, 8192, frame(run, 0, payload(2500))
                                         + frame(run, 1, payload(2500), crc_xor=0x80000000))
    seeds["end-only"] = frame_input(run, 0, frame(run, 0, flags=1))
    seeds["empty-payloads"] = frame_input(run, 0, frame(run, 1) + frame(run, 2) + frame(run, 3))
    seeds["limit-over-1MiB"] = frame_input(run, 0xFFFFFFFF, frame(run, 5, payload(300)))
    seeds["header-only"] = frame_input(run, 64, frame(run, 5, payload(10))[:42])
    good = frame(run, 9, payload(20))
    seeds["bad-magic"] = frame_input(run, 64, good + frame(run, 10, payload(4), magic=0x4554))
    seeds["bad-version"] = frame_input(run, 64, frame(run, 10, payload(4), version=2))
    seeds["bad-flags"] = frame_input(run, 64, frame(run, 10, payload(4), flags=0x80))
    seeds["wrong-run"] = frame_input(run, 64, good + frame(run + 1, 10, payload(4)))
    seeds["bad-crc"] = frame_input(run, 64, good + frame(run, 10, payload(33), crc_xor=1))
    seeds["end-with-payload"] = frame_input(run, 64, frame(run, 10, payload(1), flags=1))
    seeds["oversized"] = frame_input(run, 64, frame(run, 10, payload(65)))
    seeds["length-lies"] = frame_input(run, 4096, frame(run, 10, payload(8), length=4000))
    return seeds


# ---- msgpack, just what the control messages need ------------------------

def mp(o):
    if o is None:
        return b"\xc0"
    if o is True:
        return b"\xc3"
    if o is False:
        return b"\xc2"
    if isinstance(o, int):
        if 0 <= o < 0x80:
            return bytes([o])
        if -32 <= o < 0:
            return struct.pack("b", o)
        if o >= 0:
            for code, fmt, top in ((0xCC, ">B", 0xFF), (0xCD, ">H", 0xFFFF),
                                   (0xCE, ">I", 0xFFFFFFFF), (0xCF, ">Q", 2**64 - 1)):
                if o <= top:
                    return bytes([code]) + struct.pack(fmt, o)
        for code, fmt, bits in ((0xD0, ">b", 8), (0xD1, ">h", 16), (0xD2, ">i", 32),
                                (0xD3, ">q", 64)):
            if o >= -(1 << (bits - 1)):
                return bytes([code]) + struct.pack(fmt, o)
        raise ValueError(o)
    if isinstance(o, str):
        b = o.encode()
        if len(b) < 32:
            return bytes([0xA0 | len(b)]) + b
        if len(b) < 256:
            return b"\xd9" + bytes([len(b)]) + b
        return b"\xda" + struct.pack(">H", len(b)) + b
    if isinstance(o, (bytes, bytearray)):  # already encoded msgpack
        return bytes(o)
    if isinstance(o, list):
        head = bytes([0x90 | len(o)]) if len(o) < 16 else b"\xdc" + struct.pack(">H", len(o))
        return head + b"".join(mp(x) for x in o)
    if isinstance(o, dict):
        head = bytes([0x80 | len(o)]) if len(o) < 16 else b"\xde" + struct.pack(">H", len(o))
        return head + b"".join(mp(k) + mp(v) for k, v in o.items())
    raise TypeError(o)


def ctl(body):
    """A control message: 4-byte big-endian length, then the body."""
    b = body if isinstance(body, bytes) else mp(body)
    return struct.pack(">I", len(b)) + b


# fuzz_ctl_input(): a mode byte, then a stream (0) or one body (1).
def ctl_stream(stream):
    return b"\x00" + stream


def ctl_body(body):
    return b"\x01" + (body if isinstance(body, bytes) else mp(body))


def str8(s):
    """A str in the 2-byte-header form even when short (not canonical)."""
    b = s.encode()
    return b"\xd9" + bytes([len(b)]) + b


def ctl_seeds():
    msgs = {
        "hello-reader": {"type": "hello", "role": "reader", "id": 1, "channel": "data",
                         "run_id": 42, "protocol": 1, "pid": 31337, "host": "daq-01",
                         "sources": [0, 1, 65535], "rail": 1, "rails": 2, "nonce": "cd" * 32,
                         "proof": "ab" * 32},
        "hello-source": {"type": "hello", "role": "source", "id": 3, "channel": "control",
                         "run_id": 42, "protocol": 3, "pid": 7, "host": "h" * 255,
                         "sources": [], "rail": 0, "rails": 1, "nonce": "", "proof": ""},
        "welcome": {"type": "welcome", "run_id": 42, "role": "builder", "id": 0},
        "error": {"type": "error", "code": "wrong_run", "reason": "run 41 is not run 42"},
        "credit": {"type": "credit", "limit": 2**64 - 1, "sequence": 17},
        "ping": {"type": "ping", "sequence": 1, "t1_ns": 1700000000000000000},
        "pong": {"type": "pong", "sequence": 1, "t1_ns": 1700000000000000000,
                 "t2_ns": 1700000000000001000, "t3_ns": 1700000000000002000},
        "stats": {"type": "stats", "status": 0,
                  "groups": {"": {"fragments_received": 300, "bytes": 2**40},
                             "source.3": {"held_count": 2}, "process": {}}},
        "end": {"type": "end", "status": -3, "groups": {"": {"frames": 1}}},
        "bye": {"type": "bye", "status": 2147483647},
        "start": {"type": "start", "delay_ns": 250000000, "at_realtime_ns": 1700000000250000000},
        "challenge": {"type": "challenge", "nonce": "0123456789abcdef" * 4},
        "stop-source": {"type": "stop", "source": 3, "last_event": 2**64 - 1,
                        "confirm": False, "reason": "reader 1 is gone"},
        "stop-all": {"type": "stop", "source": 2**32 - 1, "last_event": 2**64 - 1,
                     "confirm": False, "reason": "stop"},
        "stop-drained": {"type": "stop", "source": 2**32 - 1, "last_event": 41999,
                         "confirm": True, "reason": "operator stop (SIGUSR2)"},
        "hello-builder": {"type": "hello", "role": "builder", "id": 255, "channel": "control",
                          "run_id": 42, "protocol": 3, "pid": 9, "host": "daq-bu-01",
                          "sources": [], "rail": 0, "rails": 1, "nonce": "", "proof": ""},
        "routing": {"type": "routing", "mode": "manager", "builders": 2, "first_event": 0,
                    "events": 100000, "batch": 64, "window_batches": 4096},
        "routing-limits": {"type": "routing", "mode": "static", "builders": 256,
                           "first_event": 2**64 - 1, "events": 2**64 - 1, "batch": 1 << 20,
                           "window_batches": 1 << 20},
        "token": {"type": "token", "slots": 1024, "decided": 96, "decided_below": 128,
                  "sequence": 3},
        "assign": {"type": "assign", "first": 128, "count": 64, "builder": 1,
                   "retired_below": 64, "sequence": 3},
        "lost": {"type": "lost", "builder": 1, "reason": "builder 1 answered no clock probe"},
        "clock": {"type": "clock", "source": 3, "offset_ns": -1500000, "bound_ns": 25000,
                  "at_ns": 1700000000000000000, "drift_ppb": 100000},
        "clock-unbounded": {"type": "clock", "source": 65535, "offset_ns": -2**63,
                            "bound_ns": -1, "at_ns": 2**64 - 1, "drift_ppb": 2**32 - 1},
    }
    seeds = {k: ctl_body(v) for k, v in msgs.items()}
    seeds["all-types-stream"] = ctl_stream(b"".join(ctl(v) for v in msgs.values()))
    # Strings at their limits, in the str8 form, one byte from refusal.
    seeds["longest-strings"] = ctl_stream(
        ctl(b"\x83" + mp("type") + mp("error") + mp("code") + str8("c" * 31) + mp("reason")
            + str8("r" * 255))
        + ctl(b"\x83" + mp("type") + mp("end") + mp("status") + mp(0) + mp("groups") + b"\x81"
              + str8("g" * 31) + b"\x81" + str8("n" * 31) + mp(1)))
    # Accepted, but not in the encoder's canonical form.
    seeds["noncanonical-ints-and-str8"] = ctl_stream(ctl(
        b"\x83" + b"\xd9\x04type" + b"\xd9\x04ping" + mp("sequence") + b"\xcf" + bytes(7)
        + b"\x05" + mp("t1_ns") + b"\xd3" + bytes(7) + b"\x09"))
    seeds["unknown-keys-reordered"] = ctl_body(mp(
        {"limit": 5, "extra": [1, {"x": None}], 7: "int key", "type": "credit",
         "sequence": 2, "float": b"\xcb" + struct.pack(">d", 1.5)}))
    deep = b"\x91" * 14 + b"\xc0"
    seeds["nested-14"] = ctl_body(mp({"type": "bye", "status": 0, "deep": deep}))
    seeds["partial-second-message"] = ctl_stream(ctl(msgs["ping"]) + ctl(msgs["bye"])[:9])
    # Refused.
    seeds["bad-length-0"] = ctl_stream(b"\x00\x00\x00\x00\x80")
    seeds["bad-length-huge"] = ctl_stream(b"\x00\x01\x00\x01" + b"\x80")
    seeds["bad-not-a-map"] = ctl_body(mp([1, 2]))
    seeds["bad-trailing"] = ctl_body(mp(msgs["bye"]) + b"\xc0")
    seeds["bad-unknown-type"] = ctl_body({"type": "hullo"})
    seeds["bad-missing-key"] = ctl_body({"type": "pong", "sequence": 1})
    seeds["bad-duplicate-key"] = ctl_body(b"\x83" + mp("type") + mp("bye") + mp("status") + mp(1)
                                     + mp("status") + mp(2))
    seeds["bad-nested-17"] = ctl_body(mp({"type": "bye", "status": 0,
                                          "deep": b"\x91" * 16 + b"\xc0"}))
    seeds["bad-huge-array"] = ctl_body(b"\x81" + mp("x") + b"\xdd\xff\xff\xff\xff")
    seeds["bad-nul-in-host"] = ctl_body(dict(msgs["hello-reader"], host="a\0b"))
    seeds["bad-duplicate-group"] = ctl_body(b"\x83" + mp("type") + mp("end") + mp("status") + mp(0)
                                       + mp("groups") + b"\x82" + mp("g") + mp({}) + mp("g")
                                       + mp({}))
    seeds["bad-i32-range"] = ctl_body({"type": "bye", "status": 2**31})
    # One over each limit of docs/PROTOCOL.md.
    seeds["bad-code-32"] = ctl_body(b"\x83" + mp("type") + mp("error") + mp("reason") + mp("r")
                                    + mp("code") + str8("c" * 32))
    seeds["bad-host-256"] = ctl_body(dict(msgs["hello-reader"], host="h" * 256))
    seeds["bad-sources-257"] = ctl_body(dict(msgs["hello-reader"], sources=list(range(257))))
    seeds["bad-group-name-32"] = ctl_body({"type": "stats", "status": 0, "groups": {"g" * 32: {}}})
    seeds["bad-counter-name-32"] = ctl_body({"type": "end", "status": 0,
                                             "groups": {"": {"n" * 32: 1}}})
    seeds["bad-groups-41"] = ctl_body({"type": "end", "status": 0,
                                       "groups": {f"g{i}": {} for i in range(41)}})
    seeds["bad-counters-49"] = ctl_body({"type": "end", "status": 0,
                                         "groups": {"": {f"c{i}": i for i in range(49)}}})
    # Each narrowed field one past its range.
    seeds["bad-builders-0"] = ctl_body(dict(msgs["routing"], builders=0))
    seeds["bad-builders-257"] = ctl_body(dict(msgs["routing"], builders=257))
    seeds["bad-batch-0"] = ctl_body(dict(msgs["routing"], batch=0))
    seeds["bad-window-over"] = ctl_body(dict(msgs["routing"], window_batches=(1 << 20) + 1))
    seeds["bad-mode"] = ctl_body(dict(msgs["routing"], mode="random"))
    seeds["bad-count-0"] = ctl_body(dict(msgs["assign"], count=0))
    seeds["bad-assign-builder-256"] = ctl_body(dict(msgs["assign"], builder=256))
    seeds["bad-lost-reason-256"] = ctl_body(dict(msgs["lost"], reason="r" * 256))
    seeds["bad-clock-bound-minus-2"] = ctl_body(dict(msgs["clock"], bound_ns=-2))
    seeds["bad-clock-source-65536"] = ctl_body(dict(msgs["clock"], source=65536))
    return seeds


# ---- ring scripts (tests/fuzz/harness.h, enum fuzz_ring_op) ---------------

RAW, HEAD, TAIL, STATE, WORD, PRODUCE, PEEK, RELEASE, WAIT, DETACH, NOTIFY, DRAIN, TRUNCATE = \
    range(13)
RING_RUN_ID = 0x52494E47
HEADER_BYTES = 192


def op_raw(offset, data):
    return struct.pack(">BHH", RAW, offset, len(data)) + data


def op_counter(which, value, mode=0):
    return struct.pack(">BBQ", which, mode, value)


def op_produce(length, shortfall=0, seed=0):
    return struct.pack(">BHHB", PRODUCE, length, shortfall, seed)


def op_word(offset, length):
    return struct.pack(">BHI", WORD, offset, length)


def ring_word(pos, length):
    """A record word as the producer stores it: native (little-endian) u64."""
    return struct.pack("<Q", length | ((pos >> 3) & 0xFFFFFFFF) << 32)


def ring_header(capacity, head, tail=0, state=2):
    """The 192-byte header of docs/SHM.md, native byte order."""
    line0 = struct.pack("<QIIQIIQ", 0x4553534852494E47, 1, HEADER_BYTES, capacity,
                        RING_RUN_ID, state, 0).ljust(64, b"\0")
    line1 = struct.pack("<Q", head).ljust(64, b"\0")
    line2 = struct.pack("<Q", tail).ljust(64, b"\0")
    return line0 + line1 + line2


def align8(n):
    return (n + 7) & ~7


def ring_image(capacity, lengths):
    """Records of the given payload lengths from position 0, and the header."""
    data, pos = b"", 0
    for n in lengths:
        data += ring_word(pos, n) + payload(n, pos).ljust(align8(n), b"\0")
        pos += align8(8 + n)
    return op_raw(0, ring_header(capacity, pos)) + op_raw(HEADER_BYTES, data)


def ring_seeds():
    seeds = {}
    # Config byte: bit 0 picks 4096 (0) or 8192 (1) bytes.
    laps = b"".join(op_produce(n, n % 3, n & 0xFF) + op_produce(n // 2 + 1, 0, 7) + bytes([PEEK])
                    + bytes([WAIT]) + bytes([PEEK, RELEASE, NOTIFY])
                    for n in (100, 1500, 2040, 900, 3000, 17, 2000, 1024, 2047, 5))
    seeds["producer-laps-4k"] = b"\x00" + laps + bytes([DETACH, DRAIN, PRODUCE])
    seeds["producer-laps-8k"] = b"\x01" + laps + bytes([DRAIN, WAIT])
    seeds["producer-full"] = b"\x00" + b"".join(op_produce(1000, 0, i) for i in range(6)) \
        + bytes([PEEK, PEEK, RELEASE]) + op_produce(2000) + bytes([DRAIN])
    seeds["producer-too-big"] = b"\x00" + op_produce(2041) + op_produce(2040) + bytes([DRAIN])
    seeds["image-4-records"] = b"\x00" + ring_image(4096, [0, 1, 100, 2040])
    seeds["image-8k-many"] = b"\x01" + ring_image(8192, [i * 37 % 300 for i in range(20)])
    # The consumer reads two records up to near the end, the producer wraps.
    wrap = (b"\x00" + ring_image(4096, [2040, 1960]) + bytes([PEEK, PEEK, RELEASE])
            + op_raw(HEADER_BYTES + 4016, ring_word(4016, 0xFFFFFFFF))
            + op_raw(HEADER_BYTES, ring_word(4096, 16) + payload(16))
            + op_counter(HEAD, 4096 + 24) + bytes([DRAIN]))
    seeds["image-wrap"] = wrap
    seeds["image-then-detach-state"] = b"\x00" + ring_image(4096, [8, 8]) \
        + struct.pack(">BB", STATE, 3) + bytes([DRAIN])
    seeds["word-op"] = b"\x00" + op_counter(HEAD, 64) + op_word(0, 56) + bytes([DRAIN])
    # A hostile producer forging records where the consumer reads next:
    # one near the end of the lap, a wrap marker, one at the start.
    # Record words only (WORD ops), so that the seed stays short.
    seeds["forged-wrap"] = (b"\x00" + op_word(0, 2040) + op_word(2048, 1960)
                            + op_counter(HEAD, 4016) + bytes([PEEK, PEEK, RELEASE])
                            + op_word(4016, 64) + op_word(4088, 0xFFFFFFFF) + op_word(0, 16)
                            + op_counter(HEAD, 104, mode=3) + bytes([DRAIN]))
    # A record forged where the consumer reads next, near the end of the lap.
    seeds["near-end-word"] = (b"\x00" + op_word(0, 2040) + op_word(2048, 1960)
                              + op_counter(HEAD, 4016) + bytes([PEEK, PEEK, RELEASE])
                              + op_counter(HEAD, 80, mode=1) + op_word(4016, 64)
                              + bytes([DRAIN]))
    # Corrupt: each must end in -EPROTO without a crash.
    seeds["bad-tag"] = b"\x00" + op_raw(HEADER_BYTES, ring_word(8, 8)) + op_counter(HEAD, 16) \
        + bytes([DRAIN])
    seeds["bad-length"] = b"\x00" + op_raw(HEADER_BYTES, ring_word(0, 0x7FFFFFF0)) \
        + op_counter(HEAD, 4096) + bytes([DRAIN])
    seeds["bad-wrap-at-0"] = b"\x00" + op_raw(HEADER_BYTES, ring_word(0, 0xFFFFFFFF)) \
        + op_counter(HEAD, 64) + bytes([DRAIN])
    seeds["bad-head-misaligned"] = b"\x00" + op_counter(HEAD, 13) + bytes([PEEK, PEEK])
    seeds["bad-head-too-far"] = b"\x00" + op_counter(HEAD, 4096 + 8) + bytes([DRAIN])
    seeds["bad-head-backwards"] = b"\x00" + op_produce(10) + bytes([PEEK]) \
        + op_counter(HEAD, 0) + bytes([PEEK, WAIT, DRAIN])
    seeds["bad-tail-for-producer"] = b"\x00" + op_produce(10) + op_counter(TAIL, 4096 * 3) \
        + op_produce(3000) + op_produce(3000) + bytes([DRAIN])
    seeds["bad-record-past-head"] = b"\x00" + op_raw(HEADER_BYTES, ring_word(0, 100)) \
        + op_counter(HEAD, 16) + bytes([DRAIN])
    # The segment cut short under both sides: a lost data page, a lost
    # header page, nothing left.
    fill = op_produce(1500, 0, 1) + op_produce(1500, 0, 2) + bytes([PEEK])
    seeds["truncated-data-page"] = b"\x00" + fill + op_produce(1000, 0, 3) \
        + struct.pack(">BH", TRUNCATE, 4096) + bytes([PEEK, PEEK, PEEK]) + op_produce(100) \
        + bytes([RELEASE, DRAIN])
    seeds["truncated-header"] = b"\x00" + fill + struct.pack(">BH", TRUNCATE, 100) \
        + bytes([PEEK, WAIT, NOTIFY]) + op_produce(8) + bytes([DRAIN])
    seeds["truncated-to-nothing"] = b"\x01" + struct.pack(">BH", TRUNCATE, 0) + op_produce(8) \
        + bytes([PEEK, DRAIN])
    return seeds


def ctl_dict():
    """libFuzzer dictionary: every key and name of docs/PROTOCOL.md, as msgpack str."""
    words = ["type", "hello", "welcome", "error", "credit", "ping", "pong", "stats", "end",
             "bye", "start", "role", "id", "channel", "run_id", "protocol", "pid", "host",
             "sources", "code", "reason", "limit", "sequence", "t1_ns", "t2_ns", "t3_ns",
             "status", "groups", "delay_ns", "source", "reader", "builder", "control", "data",
             "proof", "rail", "rails", "at_realtime_ns", "challenge", "nonce", "stop", "routing", "token",
             "assign", "lost", "mode", "manager", "static", "builders", "first_event",
             "events", "batch", "window_batches", "slots", "decided", "decided_below",
             "first", "count", "retired_below", "clock", "offset_ns", "bound_ns", "at_ns",
             "drift_ppb", "last_event", "confirm"]
    lines = []
    for w in words:
        enc = mp(w)
        lines.append('"' + "".join(f"\\x{b:02x}" for b in enc) + '"')
    return "\n".join(lines) + "\n"


def evfile_seeds(path):
    """fuzz_evfile_input(): the payload limit, then a file of the vectors."""
    with open(path) as f:
        files = json.load(f)["file"]
    seeds = {}
    for i, v in enumerate(files):
        data = bytes.fromhex(v["hex"])
        seeds[f"vector-{i}"] = struct.pack(">I", v["max_payload"]) + data
        seeds[f"vector-{i}-tight-limit"] = struct.pack(">I", 16) + data
    return seeds


def write(out, target, seeds):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, f"seed-{name}"), "wb") as f:
            f.write(data)
    return len(seeds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="corpus directory (one folder per target)")
    ap.add_argument("--vectors", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                      "vectors.json"))
    args = ap.parse_args()
    with open(args.vectors) as f:
        vectors = json.load(f)
    counts = {
        "frame": write(args.out, "frame", frame_seeds(vectors)),
        "ctl": write(args.out, "ctl", ctl_seeds()),
        "ring": write(args.out, "ring", ring_seeds()),
        "evfile": write(args.out, "evfile", evfile_seeds(os.path.join(
            os.path.dirname(args.vectors), "evfile-vectors.json"))),
    }
    with open(os.path.join(args.out, "ctl.dict"), "w") as f:
        f.write(ctl_dict())
    print("corpus: " + ", ".join(f"{n} {t}" for t, n in counts.items()) + f" seeds in {args.out}")


if __name__ == "__main__":
    main()
