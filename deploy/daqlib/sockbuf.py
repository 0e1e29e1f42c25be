"""Rails and kernel socket buffers of the data links (docs/BUILDERS.md,
"Rails"; docs/TOPOLOGY.md, `socket_buffer`).

A reader's TCP link to a builder on another host is one connection per
rail both hosts have. Each connection's send and receive buffers are sized
from what must be in flight on it:

- the bandwidth-delay product, twice over (the window TCP needs to keep a
  link busy, and as much again for the acks' delay): the link's rate is the
  netns backend's tbf rate where it shapes, else ASSUMED_RATE; the round
  trip ASSUMED_RTT_S;
- with several builders, a batch's bytes: batch x the largest payload
  (+ the 42-byte frame header) x the reader's sources. A batch goes whole
  on one rail (its lane), so every connection needs room for one, whatever
  the rails. All readers send a batch to the same builder at once; a reader
  that can hand a whole batch to the kernel goes on to the next batch,
  another builder's, and so every builder's link is fed at once instead of
  in turn (the CMS note's "operating system tuning").

The larger of the two, at least MIN_BYTES, rounded up to a power of two,
capped at MAX_BYTES (the daemons' `--socket-buffer` range). With one
builder there are no batches, and the kernel's autotuning follows the BDP
by itself: `auto` leaves it alone.
"""

from __future__ import annotations

import re

FRAME_HEADER = 42
ASSUMED_RATE = 10e9            # bit/s of a link that is not shaped: 10 GbE
ASSUMED_RTT_S = 200e-6         # a switched LAN's round trip, with queueing
MIN_BYTES = 256 << 10
MAX_BYTES = 64 << 20

RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
              "kibit": 1024, "mibit": 1024 ** 2, "gibit": 1024 ** 3, "tibit": 1024 ** 4,
              "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
              "kibps": 8 * 1024, "mibps": 8 * 1024 ** 2, "gibps": 8 * 1024 ** 3}


def rate_bits(rate: str | None) -> float | None:
    """A tc rate ("1gbit", "200mbit", "125mbps") in bit/s; None for none."""
    if rate in (None, "", "none", "off"):
        return None
    m = re.fullmatch(r"([0-9.]+)\s*([a-z]*)", rate.strip().lower())
    if not m or m.group(2) not in RATE_UNITS:
        raise ValueError(f"{rate!r} is not a tc rate such as 1gbit or 200mbit")
    return float(m.group(1)) * RATE_UNITS[m.group(2)]


def common_rails(be, a: str, b: str) -> int:
    """Rails a link between hosts a and b uses: every rail both have; one
    on a single host (its own addresses are loopback to it)."""
    if a == b:
        return 1
    return min(len(be.rail_addresses(a)), len(be.rail_addresses(b)))


def link_rate_bits(be, host: str) -> float:
    rate = getattr(be, "link_rate", lambda _h: None)(host)
    return rate_bits(rate) or ASSUMED_RATE


def auto_bytes(rate_bits_s: float, batch: int | None, payload: int,
               sources: int) -> int | None:
    """The size for one connection (above); None: leave it to the kernel."""
    if not batch:
        return None
    bdp2 = 2 * rate_bits_s / 8 * ASSUMED_RTT_S
    per_batch = batch * (payload + FRAME_HEADER) * max(1, sources)
    want = max(MIN_BYTES, bdp2, per_batch)
    size = 1 << (int(want) - 1).bit_length()
    return min(MAX_BYTES, size)


def socket_buffer(t, be, daemon_host: str, peers: list[tuple[str, int]]) -> int | None:
    """--socket-buffer for a daemon on daemon_host whose TCP links go to
    peers [(host, sources on the link's reader)]: the topology's
    `socket_buffer` (bytes; 0 = the kernel's autotuning) or, for `auto`,
    the largest connection's size; None: no option."""
    want = t.run.get("socket_buffer")
    if want is not None:
        return int(want) or None
    if not t.several or not peers:
        return None
    batch = t.run.get("batch") or 64
    sizes = [auto_bytes(min(link_rate_bits(be, daemon_host), link_rate_bits(be, h)), batch,
                        t.run["payload"], n) for h, n in peers]
    sizes = [s for s in sizes if s]
    return max(sizes) if sizes else None
