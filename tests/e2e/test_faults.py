"""Faults and bad input against the real daemons: the seed's fragment faults
alone and together, every kind of broken frame a reader can receive, a peer
that dribbles bytes, a peer that never connects and strangers at the door.
Each checks the clear error, its counter, and that the books of everything
else still balance."""

from __future__ import annotations

from harness import E2ETestCase, read_jsonl, read_metrics, topology, unbalanced

EVENTS = 4000
SOURCES = 4

# --inject kind -> the reader's counter for it and words of its error.
INJECTIONS = {
    "crc": ("err_crc", "checksum mismatch"),
    "magic": ("err_magic", "bad magic"),
    "version": ("err_version", "bad version"),
    "flags": ("err_flags", "bad flags"),
    "length": ("err_length", "oversized length"),
    "run": ("err_run", "frame of run 2, expected run 1"),
    "truncate": ("err_truncated", "closed inside a frame"),
    "noend": ("err_no_end", "without an END frame"),
}


class FragmentFaultTest(E2ETestCase):
    needs_daemons = True

    def run_faults(self, check: bool, **faults):
        topo = topology(events=EVENTS, payload=64, rate=0, timeout_ms=300,
                        max_inflight=8192, **faults)
        r = self.h.daqrun(topo, timeout_s=180)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        if check:
            self.assertIn("PASS refbuild", r.output, r.output)
        self.h.assert_clean()
        return m

    def test_each_fault_alone(self) -> None:
        for faults, check in (({"missing_every": 7}, True), ({"duplicate_every": 5}, True),
                              ({"reorder": True}, True),
                              ({"delay_every": 11, "delay_ms": 5}, False)):
            with self.subTest(**faults):
                m = self.run_faults(check, **faults)
                c = m["counters"]["builder"]
                if "duplicate_every" in faults:
                    self.assertGreater(c["frags_duplicate"], 0)
                    self.assertEqual(c["events_complete"], EVENTS)
                if "reorder" in faults or "delay_every" in faults:
                    self.assertEqual(c["events_complete"], EVENTS, c)

    def test_all_faults_with_reorder(self) -> None:
        m = self.run_faults(False, missing_every=7, duplicate_every=5, delay_every=11,
                            delay_ms=5, reorder=True)
        c = m["counters"]["builder"]
        self.assertGreater(c["events_expired"], 0)
        self.assertGreater(c["frags_duplicate"], 0)
        self.assertEqual(c["events_complete"] + c["events_expired"] + c["events_unobserved"],
                         EVENTS)


class BadFrameTest(E2ETestCase):
    """Source 1 sends 300 good frames, then one broken one, and stops."""
    needs_daemons = True

    def test_each_broken_frame(self) -> None:
        good = 300
        for kind, (counter, words) in INJECTIONS.items():
            with self.subTest(kind=kind):
                topo = topology(events=EVENTS, payload=64, rate=0, timeout_ms=200)
                topo["source"] = [{"id": 1, "extra": ["--inject", f"{kind}@{good}"]}]
                r = self.h.daqrun(topo, timeout_s=120)
                self.assertNotEqual(r.returncode, 0, "a run with a broken frame must fail")
                m = r.metrics()
                self.assertTrue(m["balanced"], unbalanced(m))
                self.assertEqual(m["status"], "failed")
                errors = " | ".join(m["errors"])
                self.assertIn(counter, errors)
                log = (r.run_dir / "logs" / "reader-0.log").read_text()
                self.assertIn("source 1", log)
                self.assertIn(words, log)
                per_source = m["counters"]["reader.0.source.1"]
                self.assertEqual(per_source[counter], 1, per_source)
                self.assertEqual(per_source["frames_rejected"], 0 if kind == "noend" else 1)
                self.assertEqual(per_source["frames_forwarded"], good)
                # Nothing else was lost: events before the break are complete,
                # every later one is expired, missing source 1 alone.
                c = m["counters"]["builder"]
                self.assertEqual(c["events_complete"], good, c)
                self.assertEqual(c["events_expired"], EVENTS - good, c)
                expired = read_jsonl(r.run_dir / "expired.jsonl")
                self.assertEqual({tuple(x["missing"]) for x in expired}, {(1,)})
                for other in (0, 2, 3):
                    self.assertEqual(m["counters"][f"reader.{other // 2}.source.{other}"]
                                     ["frames_forwarded"], EVENTS)
                self.h.assert_clean()


class PeerTest(E2ETestCase):
    needs_daemons = True

    def test_dribbled_frames(self) -> None:
        """Source 0 writes one byte per system call; the reader reassembles."""
        # A byte per system call is slow under a sanitizer on a busy
        # machine: the test is about reassembly, so no event may time out.
        topo = topology(events=300, payload=32, rate=0, timeout_ms=20000)
        topo["source"] = [{"id": 0, "extra": ["--dribble"]}]
        r = self.h.daqrun(topo, timeout_s=120)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        self.assertIn("PASS refbuild", r.output)
        calls = m["counters"]["source.0"]["write_calls"]
        self.assertGreaterEqual(calls, 300 * (42 + 32), "dribble did not write byte by byte")
        self.h.assert_clean()

    def test_peer_never_connects(self) -> None:
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, peer_timeout_ms=1500)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        source = h.start_source(id=0, run=1, seed=1, events=500, payload=16,
                                reader_port=rport, builder=ports)
        self.assertEqual(h.wait(builder, 30), 1, builder.tail())
        m = read_metrics(h.dir / "run")
        self.assertFalse(m["balanced"])
        self.assertIn("Source 1 never connected to the builder's control port", m["errors"])
        h.wait(reader, 15)
        h.wait(source, 15)
        h.assert_clean()

    def test_strangers_are_refused(self) -> None:
        """A source of another run and one its reader does not serve are
        refused with a reason; the run goes on unaffected."""
        h = self.h
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=20000)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=1, seed=1, events=20000, payload=16, rate=20000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        wrong_run = h.start_source(id=0, run=2, seed=1, events=10, payload=16,
                                   reader_port=rport, builder=ports)
        unknown = h.start_source(id=7, run=1, seed=1, events=10, payload=16,
                                 reader_port=rport, builder=ports)
        self.assertEqual(h.wait(wrong_run, 30), 1)
        self.assertIn("run 2", wrong_run.log())
        self.assertEqual(h.wait(unknown, 30), 1)
        self.assertIn("source 7", unknown.log())
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            self.assertEqual(h.wait(p, 15), 0, p.tail())
        m = read_metrics(h.dir / "run")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertGreaterEqual(m["counters"]["builder"]["refused_connections"], 2)
        self.assertEqual(m["counters"]["builder"]["events_accepted"], 20000)
        h.assert_clean()
