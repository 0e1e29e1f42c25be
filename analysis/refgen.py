"""The deterministic fragment generator of docs/fragment-format.md §2, in
plain Python and independently of the C code: mix64 (SplitMix64's
finaliser), key(seed, salt, run, event, source) and the payload of every
(event, source); one value at a time, the readable reference, and many at
a time for checking whole runs (analysis/refbuild.py, analysis/refdata.py).

Speed: payloads are generated many 64-bit words at a time by packing them
into one big Python integer, one word per 128-bit lane, so that each step of
mix64 (xor, shift, multiply, mask) is a single C-level pass over all lanes;
a 128-bit lane holds a full 64x64-bit product, so lanes never carry into one
another. CRCs are chained with zlib.crc32.
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Iterable

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15          # SplitMix64 increment
MIX_C1 = 0xBF58476D1CE4E5B9
MIX_C2 = 0x94D049BB133111EB

# The 8 ASCII bytes of each salt read as a big-endian integer (spec §2).
SALTS = {
    "payload": int.from_bytes(b"payload!", "big"),
    "missing": int.from_bytes(b"missing!", "big"),
    "duplicate": int.from_bytes(b"duplicat", "big"),
    "delay": int.from_bytes(b"delay!!!", "big"),
}


# --------------------------------------------------------------------------
# Spec §2, one value at a time: the readable reference.

def mix64(z: int) -> int:
    """The SplitMix64 finaliser; z is taken modulo 2^64."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * MIX_C1) & MASK64
    z = ((z ^ (z >> 27)) * MIX_C2) & MASK64
    return z ^ (z >> 31)


def key(seed: int, salt: int, run: int, event: int, source: int) -> int:
    """key(seed, salt, run, event, source) of spec §2."""
    k = mix64(seed ^ salt)
    k = mix64(k ^ run)
    k = mix64(k ^ event)
    return mix64(k ^ source)


def payload(seed: int, run: int, event: int, source: int, length: int) -> bytes:
    """The payload of (event, source): little-endian words next(s), next(s), ..."""
    s = key(seed, SALTS["payload"], run, event, source)
    words = []
    for _ in range((length + 7) // 8):
        s = (s + GAMMA) & MASK64
        words.append(mix64(s))
    return struct.pack(f"<{len(words)}Q", *words)[:length]


# --------------------------------------------------------------------------
# The same, many values at a time (see the module docstring).

LANE_BYTES = 16                      # one 64-bit value per 128-bit lane
CHUNK_LANES = 1 << 17                # lanes per big integer: ~2 MiB each

_mask_cache: dict[int, int] = {}


def _lane_mask(lanes: int) -> int:
    """An integer with the low 64 bits of each of `lanes` lanes set."""
    mask = _mask_cache.get(lanes)
    if mask is None:
        mask = int.from_bytes((b"\xff" * 8 + b"\x00" * 8) * lanes, "little")
        if len(_mask_cache) > 8:
            _mask_cache.clear()
        _mask_cache[lanes] = mask
    return mask


def _pack(values: array) -> int:
    """Packs unsigned 64-bit values (array 'Q') one per lane, lane 0 lowest."""
    spread = array("Q", bytes(LANE_BYTES * len(values)))
    spread[0::2] = values
    if sys.byteorder == "big":
        spread.byteswap()
    return int.from_bytes(spread.tobytes(), "little")


def _lane_bytes(z: int, lanes: int) -> bytes:
    """The low 8 bytes of each lane, little-endian, concatenated."""
    raw = array("Q")
    raw.frombytes(z.to_bytes(LANE_BYTES * lanes, "little"))
    return raw[0::2].tobytes()       # raw copies: no byte-order interpretation


def _unpack(z: int, lanes: int) -> array:
    words = array("Q")
    words.frombytes(_lane_bytes(z, lanes))
    if sys.byteorder == "big":
        words.byteswap()
    return words


def _mix_lanes(z: int, mask: int) -> int:
    """mix64 applied to every lane of z."""
    z ^= (z >> 30) & mask
    z = (z * MIX_C1) & mask
    z ^= (z >> 27) & mask
    z = (z * MIX_C2) & mask
    z ^= (z >> 31) & mask
    return z


def mix64_many(values: Iterable[int]) -> array:
    """mix64 of every value (each < 2^64), as an array 'Q'."""
    values = values if isinstance(values, array) else array("Q", values)
    out = array("Q")
    for start in range(0, len(values), CHUNK_LANES):
        part = values[start:start + CHUNK_LANES]
        out.extend(_unpack(_mix_lanes(_pack(part), _lane_mask(len(part))), len(part)))
    return out


def keys_many(seed: int, salt: int, run: int, first_event: int, events: int,
              sources: int) -> array:
    """key(seed, salt, run, e, s) for e in the run's IDs, s in 0..S-1, event-major."""
    k = mix64(mix64(seed ^ salt) ^ run)
    per_event = mix64_many((k ^ e) & MASK64 for e in range(first_event, first_event + events))
    return mix64_many(ke ^ s for ke in per_event for s in range(sources))


def payloads_many(pair_keys: array, length: int) -> bytes:
    """The payloads of the given (event, source) payload keys, each `length`
    bytes, concatenated in the order of the keys."""
    if length == 0 or not pair_keys:
        return b""
    words = (length + 7) // 8
    parts = []
    pairs_per_chunk = max(1, CHUNK_LANES // words)
    step_pattern = b"".join(struct.pack("<Q8x", (k * GAMMA) & MASK64) for k in range(1, words + 1))
    for start in range(0, len(pair_keys), pairs_per_chunk):
        chunk = pair_keys[start:start + pairs_per_chunk]
        lanes = len(chunk) * words
        # Lane (p, k) = key_p + (k+1) * GAMMA: each key repeated `words`
        # times, plus the same step pattern after every key.
        repeated = array("Q", bytes(8 * lanes))
        for k in range(words):
            repeated[k::words] = chunk
        mask = _lane_mask(lanes)
        steps = int.from_bytes(step_pattern * len(chunk), "little")
        z = _mix_lanes((_pack(repeated) + steps) & mask, mask)
        data = _lane_bytes(z, lanes)
        if length == words * 8:
            parts.append(data)
        else:
            stride = words * 8
            parts.append(b"".join(data[i:i + length] for i in range(0, len(data), stride)))
    return b"".join(parts)
