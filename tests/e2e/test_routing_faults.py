"""Routing faults of a run of several builders end it at once, by name,
with balanced books (docs/BUILDERS.md, "A reader that finds a fault", and
"A dead or stalled builder"), against real daemons:

- a reader that refuses the hub's assignment (readoutd --skip-assign takes
  one as never received, so the next leaves a gap) tells the hub, which
  gives it up, stops the run and closes the books with the frames it held
  lost with it and what was still on the wire unread at the stop;
- a reader whose two builder links are crossed finds it in each link's
  WELCOME, before any frame: nothing is misrouted, and the run ends the same
  way;
- builders whose event timeout is longer than the hub's stall limit are not
  given up while healthy: the hub waits --stall-timeout-ms past
  --timeout-ms; a hub or builder with no event timeout is refused at
  start."""

from __future__ import annotations

import time
import uuid

from harness import E2ETestCase, read_metrics, unbalanced

from test_builders import builders_topology

RUN = 1
EVENTS = 6000
# How long a faulty run may take from the fault to the books (it took
# 40 s and more, with books that did not balance, before).
FAULT_TO_BOOKS_S = 5.0


class RoutingFaultTest(E2ETestCase):
    needs_daemons = True

    def assertEndedAtFault(self, m: dict, reader: int, text: str) -> None:
        """The run failed with balanced books, reader `reader` named with
        the fault and given up for it, and the books closed soon after."""
        self.assertNotEqual(m["exit_status"], 0)
        self.assertTrue(m["balanced"], f"{unbalanced(m)}\n{m.get('errors')}")
        named = [e for e in m["errors"] if e.startswith(f"Reader {reader} (") and text in e]
        self.assertTrue(named, m["errors"])
        gone = [(g["role"], g["id"], g["how"]) for g in m["losses"]["peers_gone"]]
        self.assertEqual(gone, [("reader", reader, "refused")], m["losses"])
        self.assertIsNotNone(m["fault_to_books_ms"])
        self.assertLess(m["fault_to_books_ms"], FAULT_TO_BOOKS_S * 1000, m["fault_to_books_ms"])
        kinds = {e["name"].split(":")[0] for e in m["equations"]}
        for s in (2, 3):   # the healthy reader's sources: equation 2 with the stop's bucket
            self.assertIn(f"2 source {s}", kinds)
        stopped = [e for e in m["equations"] if "unread at the stop for a fault" in e["name"]]
        self.assertTrue(stopped, [e["name"] for e in m["equations"]])
        self.assertEqual(sum(e["rhs"] - e["lhs"] for e in stopped), 0)

    def test_assignment_with_a_gap_ends_the_run_at_once(self) -> None:
        topo = builders_topology(2, events=EVENTS)
        topo["reader"][0]["extra"] = ["--skip-assign", "3"]
        t0 = time.monotonic()
        r = self.h.daqrun(topo, timeout_s=120)
        elapsed = time.monotonic() - t0
        self.assertNotEqual(r.returncode, 0, r.output)
        m = r.metrics()
        self.assertEndedAtFault(m, 0, "stopped the run: it refuses the hub's assignment: "
                                      "assignment of events 192..+64 to builder 1 does not "
                                      "start at 128, where the assigned IDs end: a gap")
        self.assertLess(elapsed, 20, r.output)   # 25 s before, in a daqrun of 6,000 events
        losses = m["losses"]
        # What reader 0's sources put on the wire and no builder got is
        # lost with it; what the others sent past the stop is unread.
        self.assertGreater(losses["frames_lost_with_readers"] + losses["frames_unread_at_stop"], 0)
        self.assertEqual(sum(s["assigned"] for s in m["builders"].values()) +
                         m["manager"]["ids_cut_unassigned"], EVENTS)
        log = (r.run_dir / "logs" / "reader-0.log").read_text()
        self.assertIn("--skip-assign: taking the hub's assignment 3", log)
        self.assertIn("Reader 0 refuses the hub's assignment", log)
        self.h.assert_clean()

    # -- crossed links --------------------------------------------------------
    def start_hub(self, builders: int) -> tuple:
        h = self.h
        out = h.dir / "run"
        out.mkdir(parents=True, exist_ok=True)
        pf = h.path("ports", "hub.port")
        hub = h.daemon("builderd", "hub",
                       ["--role", "hub", "--builders", builders, "--run", RUN, "--sources", 4,
                        "--readers", 2, "--events", EVENTS, "--control-listen", "127.0.0.1:0",
                        "--out", out, "--port-file", pf, "--quiet"])
        return hub, h.wait_port_file(pf, ("control",), 15, hub)["control"], out

    def start_builder(self, b: int, hub_port: int, out, shm: str | None) -> tuple:
        h = self.h
        pf = h.path("ports", f"builder-{b}.port")
        (out / "builders" / str(b)).mkdir(parents=True, exist_ok=True)
        p = h.daemon("builderd", f"builder-{b}",
                     ["--role", "builder", "--id", b, "--builders", 2,
                      "--hub", f"127.0.0.1:{hub_port}", "--run", RUN, "--sources", 4,
                      "--readers", 2, "--events", EVENTS, "--listen", "127.0.0.1:0",
                      "--out", out / "builders" / str(b), "--port-file", pf, "--quiet"],
                     shm_listen=f"{shm}-b{b}" if shm else None)
        port = h.wait_port_file(pf, ("data",), 15, p)["data"]
        return p, f"shm://{shm}-b{b}" if shm else f"tcp://127.0.0.1:{port}"

    def crossed_links(self, transport: str) -> None:
        """Reader 0's --builder 0= and 1= name each other's builder: each
        WELCOME names the other builder, the reader says so before any
        frame, and the run ends at once; reader 1's links are right."""
        h = self.h
        hub, control, out = self.start_hub(2)
        shm = f"xl{uuid.uuid4().hex[:8]}" if transport == "shm" else None
        builders, urls = zip(*(self.start_builder(b, control, out, shm) for b in (0, 1)))
        links = {0: (1, 0), 1: (0, 1)}   # reader 0's links crossed, reader 1's right
        readers = []
        for r in (0, 1):
            pf = h.path("ports", f"reader-{r}.port")
            argv = ["--id", r, "--run", RUN, "--listen", "127.0.0.1:0", "--port-file", pf,
                    "--sources", f"{2 * r},{2 * r + 1}", "--control", f"127.0.0.1:{control}"]
            for b, to in enumerate(links[r]):
                argv += ["--builder", f"{b}={urls[to]}"]
            p = h.daemon("readoutd", f"reader-{r}", argv)
            readers.append((p, h.wait_port_file(pf, ("data",), 15, p)["data"]))
        sources = [h.start_source(id=s, run=RUN, seed=1, events=EVENTS, payload=64,
                                  reader_port=readers[s // 2][1],
                                  builder={"control": control})
                   for s in range(4)]
        t0 = time.monotonic()
        self.assertEqual(h.wait(hub, 30), 1, hub.tail())
        self.assertLess(time.monotonic() - t0, 15, hub.tail())
        for p in sources + [p for p, _ in readers] + list(builders):
            h.wait(p, 15)
        m = read_metrics(out)
        # Whichever link's WELCOME came first names the fault.
        first = 0 if "link 0 answered as builder 1" in " ".join(m["errors"]) else 1
        self.assertEndedAtFault(m, 0, f"stopped the run: it finds builder link {first} answered "
                                      f"as builder {1 - first}: the links are crossed")
        # Known at the greeting: not one frame went to the wrong builder.
        for b in ("0", "1"):
            self.assertEqual(m["builders"][b]["misrouted"], 0, m["builders"][b])
            self.assertEqual(m["builders"][b]["assigned"], 0, m["builders"][b])
        self.assertEqual(m["manager"]["ids_cut_unassigned"], EVENTS)
        log = readers[0][0].log()
        self.assertIn(f"Reader 0: builder link {first} answered as builder {1 - first}: the "
                      f"links are crossed (at ", log)
        self.assertNotIn("answered as", readers[1][0].log())
        h.assert_clean()

    def test_crossed_tcp_builder_links_end_the_run_at_the_greeting(self) -> None:
        self.crossed_links("tcp")

    def test_crossed_shm_builder_links_end_the_run_at_the_greeting(self) -> None:
        self.crossed_links("shm")

    def test_crossed_rails_end_the_run_at_the_greeting(self) -> None:
        """One builder on two rails (127.0.0.1 and 127.0.0.2, one port):
        reader 0 gives its rails' URLs crossed. The builder, which knows
        which of its listeners took each connection, refuses them by name;
        the reader tells the builder's hub, which ends the run at once."""
        h = self.h
        out = h.dir / "run"
        out.mkdir(parents=True, exist_ok=True)
        pf = h.path("ports", "builder.port")
        builder = h.daemon("builderd", "builder",
                           ["--run", RUN, "--sources", 4, "--readers", 2, "--events", EVENTS,
                            "--listen", "127.0.0.1:0", "--listen", "127.0.0.2:0",
                            "--control-listen", "127.0.0.1:0", "--out", out,
                            "--port-file", pf, "--quiet"])
        ports = h.wait_port_file(pf, ("data", "control"), 15, builder)
        hosts = {0: ("127.0.0.2", "127.0.0.1"), 1: ("127.0.0.1", "127.0.0.2")}
        readers = []
        for r in (0, 1):
            rpf = h.path("ports", f"reader-{r}.port")
            argv = ["--id", r, "--run", RUN, "--listen", "127.0.0.1:0", "--port-file", rpf,
                    "--sources", f"{2 * r},{2 * r + 1}",
                    "--control", f"127.0.0.1:{ports['control']}"]
            for host in hosts[r]:
                argv += ["--builder", f"tcp://{host}:{ports['data']}"]
            p = h.daemon("readoutd", f"reader-{r}", argv)
            readers.append((p, h.wait_port_file(rpf, ("data",), 15, p)["data"]))
        sources = [h.start_source(id=s, run=RUN, seed=1, events=EVENTS, payload=64,
                                  reader_port=readers[s // 2][1], builder=ports)
                   for s in range(4)]
        t0 = time.monotonic()
        self.assertEqual(h.wait(builder, 30), 1, builder.tail())
        self.assertLess(time.monotonic() - t0, 15, builder.tail())
        for p in sources + [p for p, _ in readers]:
            h.wait(p, 15)
        m = read_metrics(out)
        first = 0 if "(rail 0 of 2) refused" in " ".join(m["errors"]) else 1
        self.assertEndedAtFault(
            m, 0, f"stopped the run: it finds the builder (rail {first} of 2) refused our data "
                  f"connection: reader 0 greeted rail {first} of 2 on the builder's rail "
                  f"{1 - first} address: its rails' URLs are crossed (bad_rail)")
        # Refused at the greeting (the other rail too, unless the reader
        # closed it first): nothing of reader 0 reached the builder.
        self.assertIn(m["counters"]["builder"]["refused_connections"], (1, 2))
        self.assertEqual(m["counters"]["builder.from_reader.0"]["frames_received"], 0)
        h.assert_clean()


class BuilderStallLimitTest(E2ETestCase):
    """A builder may wait its event timeout for an event's last fragment
    without sending a token: the hub gives a builder that holds events up
    only after --stall-timeout-ms past --timeout-ms."""
    needs_daemons = True

    def test_event_timeout_past_the_stall_limit_gives_no_healthy_builder_up(self) -> None:
        # With the skip rule off, an event missing a fragment waits the
        # whole event timeout, 2 s, twice the hub's stall limit: the hub
        # gave both builders up as stalled before.
        topo = builders_topology(2, events=640, timeout_ms=2000, skip_timeout_ms=0,
                                 missing_every=7, duplicate_every=5, reorder=True)
        topo["hub"]["extra"] = ["--stall-timeout-ms", "1000"]
        r = self.h.daqrun(topo, timeout_s=120)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        self.assertEqual(m["routing"]["builder_stall_ms"], 3000)
        self.assertEqual(m["losses"]["peers_gone"], [])
        self.assertEqual(m["manager"]["builders_lost"], 0)
        self.assertGreater(m["counters"]["builder"]["events_expired_timeout"], 0)
        self.assertIn("PASS refbuild", r.output)
        self.h.assert_clean()

    def test_no_event_timeout_is_refused_at_start(self) -> None:
        for role in ("hub", "builder"):
            argv = ["--role", role, "--builders", 2, "--run", RUN, "--sources", 2,
                    "--readers", 1, "--events", 100, "--timeout-ms", 0,
                    "--out", self.h.dir / role]
            argv += (["--control-listen", "127.0.0.1:0"] if role == "hub" else
                     ["--id", 0, "--hub", "127.0.0.1:1", "--listen", "127.0.0.1:0"])
            t0 = time.monotonic()
            p = self.h.daemon("builderd", f"refused-{role}", argv)
            self.assertEqual(self.h.wait(p, 10), 2, p.tail())
            self.assertLess(time.monotonic() - t0, 5)
            self.assertIn(f"builderd: --role {role} --timeout-ms 0: a builder whose events "
                          f"never time out may hold one for ever without a token, and the hub "
                          f"gives a builder up after --timeout-ms + --stall-timeout-ms (2000 ms)",
                          p.log())


if __name__ == "__main__":
    import unittest
    unittest.main()
