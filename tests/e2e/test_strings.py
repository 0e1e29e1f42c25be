"""Peer strings that must not reach the outputs raw (docs/PROTOCOL.md,
Strings): a HELLO whose host has a byte that is not UTF-8, a quote or a
newline, and an END whose group name has such bytes, fed to real daemons
over real sockets.

- Every listener refuses such a HELLO at the codec, answers ERROR
  bad_message naming the field and quoting the bytes escaped, counts it,
  and the run it tried to join goes on and balances, its events matching
  the reference builder.
- A source that greeted properly and then sends an END with a bad group
  name is refused and dropped as a lost peer, named in metrics.json; the
  books of the rest balance.
- In both, metrics.json is strict UTF-8 JSON, no log has a line a peer
  forged, and analysis/report.py writes its report.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, E2ETestCase, HarnessError, Proc, read_metrics, unbalanced, wait_for_line
from wire import greet, greet_sealed, greet_tcp, hello, message, read_message

FORGED = b"12:00:00.000 builderd ERROR FORGED"
BAD_HOSTS = {
    "not UTF-8": (b"daq\xff", b"key 'host' in hello has byte 0xff at offset 3 ('daq\\xff')"),
    "quote": (b'a"b', b"key 'host' in hello has byte 0x22 at offset 1 ('a\"b')"),
    "newline": (b"ok\n" + FORGED, b"key 'host' in hello has byte 0x0a at offset 2 ('ok\\x0a12:00"),
}
BAD_GROUP = b'g"\xff\n' + b"00:00:00.000 builderd FORGED"[:27]


class PeerStringTest(E2ETestCase):
    needs_daemons = True

    def check_outputs(self, procs: list[Proc], run_dir: Path) -> dict:
        """metrics.json strict UTF-8 JSON, no forged log line, a report."""
        raw = (run_dir / "metrics.json").read_bytes()
        m = json.loads(raw.decode("utf-8", errors="strict"))
        for p in procs:
            for line in p.log_path.read_bytes().split(b"\n"):
                line.decode("utf-8", errors="strict")
                # A forged line would carry FORGED with no escaped newline
                # before it on its own line.
                if b"FORGED" in line:
                    self.assertIn(b"\\x0a", line.split(b"FORGED")[0],
                                  f"{p.name} has a forged line: {line!r}")
        out = run_dir / "report"
        r = subprocess.run(["/usr/bin/python3", REPO / "analysis" / "report.py", run_dir,
                            "--out", out], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        page = (out / "report.html").read_text(encoding="utf-8")
        self.assertIn("Conservation equations", page)
        return m

    def test_bad_host_names_are_refused(self) -> None:
        h = self.h
        events = 6000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=events)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=32, rate=2000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        wait_for_line(builder, "all 2 sources and 1 readers connected")
        listeners = {
            "builder control": (ports["control"], dict(role="source", id=1, channel="control", sources=())),
            "builder data": (ports["data"], dict(role="reader", id=0, sources=(0, 1))),
            "reader data": (rport, dict(role="source", id=0, sources=())),
        }
        for where, (port, fields) in listeners.items():
            for what, (host, words) in BAD_HOSTS.items():
                with self.subTest(where=where, host=what):
                    reply = greet_tcp(port, hello(host=host, **fields))
                    self.assertIn(b"error", reply)
                    self.assertIn(b"bad_message", reply)
                    self.assertIn(words, reply)
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 15), 0, p.tail())
        for _, words in BAD_HOSTS.values():
            self.assertIn(words.decode(), builder.log())
            self.assertIn(words.decode(), reader.log())
        run_dir = h.dir / "run"
        m = self.check_outputs([builder, reader] + sources, run_dir)
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["status"], "ok")
        self.assertEqual(m["counters"]["builder"]["events_accepted"], events)
        self.assertGreaterEqual(m["counters"]["builder"]["refused_connections"], 6)
        self.assertGreaterEqual(m["counters"]["reader.0"]["refused_connections"], 3)
        r = h.refbuild("--seed", 1, "--run", 1, "--sources", 2, "--events", events,
                       "--payload", 32, "--events-file", run_dir / "events.jsonl")
        self.assertEqual(r.returncode, 0, r.describe())
        h.assert_clean()

    def test_bad_group_name_drops_the_peer(self) -> None:
        h = self.h
        events = 3000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=events)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        source0 = h.start_source(id=0, run=1, seed=1, events=events, payload=32, rate=2000,
                                 reader_port=rport, builder=ports)
        # Source 1 by hand: a proper greeting on both channels, then, once
        # the run starts, an END whose only group name is hostile.
        data = socket.create_connection(("127.0.0.1", rport), timeout=10)
        self.addCleanup(data.close)
        self.assertIn(b"welcome", greet(data, hello(role="source", id=1, sources=())))
        ctl = socket.create_connection(("127.0.0.1", ports["control"]), timeout=10)
        self.addCleanup(ctl.close)
        welcomed, link = greet_sealed(ctl, hello(role="source", id=1, channel="control",
                                                 sources=()))
        self.assertIn(b"welcome", welcomed)
        deadline = time.monotonic() + 30
        while b"start" not in link.read_raw():
            self.assertLess(time.monotonic(), deadline, "no START for source 1")
        end = message({"type": "end", "status": 0, "groups": {BAD_GROUP: {"frags_sent": 0}}})
        link.send_raw(end)
        self.assertEqual(h.wait(builder, 60), 1, builder.tail())
        # The reader dropped a source at the builder's request: an error of
        # its run, so it ends non-zero too; source 0 finished cleanly.
        self.assertEqual(h.wait(reader, 15), 1, reader.tail())
        self.assertEqual(h.wait(source0, 15), 0, source0.tail())
        self.assertIn("dropped at the builder's request: source 1 is gone", reader.log())
        words = "group name 0 in end has byte 0x22 at offset 1 ('g\"\\xff\\x0a00:00:00.000"
        self.assertIn(words, builder.log())
        run_dir = h.dir / "run"
        m = self.check_outputs([builder, reader, source0], run_dir)
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertEqual(m["status"], "failed")
        gone = m["losses"]["peers_gone"]
        self.assertEqual([(g["role"], g["id"]) for g in gone], [("source", 1)], gone)
        self.assertTrue(any(words in e for e in m["errors"]), m["errors"])
        # Source 0's fragments all arrived; no event could complete without
        # source 1.
        self.assertEqual(m["counters"]["source.0"]["frags_sent"], events)
        self.assertEqual(m["counters"]["builder"]["events_accepted"], 0)
        h.assert_clean()
