"""deploy/daqrun with several builders (docs/BUILDERS.md, docs/TOPOLOGY.md):
[[builder]] tables, [hub] and the [run] keys of routing, each bad value with
the error that names it; the exact command lines of the hub, the builders,
the readers and the sources (a single [builder] unchanged); and whole runs
with the stand-in daemons of tests/e2e/fake: start order, port files,
per-builder records and summary, and every process stopped when a builder
fails to start, on timeout and after a fault on the hub; and two builders
on two hosts over ssh."""

from __future__ import annotations

import copy
import os
import signal
import sys
from pathlib import Path

from harness import DAQRUN, REPO, E2ETestCase, read_jsonl, topology
import test_deploy_ssh
from test_topology_builders import several_builders_unsupported

from daqlib import daemons
from daqlib import topology as daqrun
from daqlib.backends.local import LocalBackend
from daqlib.cli import parse_fault

FAKE_BIN = Path(__file__).resolve().parent / "fake"
TOPOLOGIES = REPO / "deploy" / "topologies"
TWO_BUILDERS = TOPOLOGIES / "two-builders.toml"
TWO_BY_TWO = TOPOLOGIES / "netns-two-by-two.toml"
SMALL = ["events=2000", "rate=0", "payload=64"]


def several(builders: int = 2, **run) -> dict:
    """A one-host topology of `builders` [[builder]] tables, as a dict."""
    doc = topology(events=2000, payload=64, rate=0, **run)
    del doc["builder"]
    doc["builder"] = [{"id": b, "host": "127.0.0.1"} for b in range(builders)]
    return doc


class BuildersTopologyTest(E2ETestCase):
    """[[builder]], [hub] and the routing keys; no daemons."""

    def load(self, doc: dict | Path, *sets: str) -> daqrun.Topology:
        path = doc if isinstance(doc, Path) else self.h.write_topology(doc)
        return daqrun.load_topology(str(path), list(sets))

    def assertError(self, doc: dict | Path, message: str, *sets: str) -> None:
        with self.assertRaises(daqrun.TopologyError) as cm:
            self.load(doc, *sets)
        self.assertIn(message, str(cm.exception))

    def test_shipped_topologies(self) -> None:
        two = self.load(TWO_BUILDERS)
        self.assertTrue(two.several)
        self.assertEqual([(b["id"], b["host"]) for b in two.builders], [(0, "node"), (1, "node")])
        self.assertEqual(two.hub_host, "node")
        self.assertEqual([two.links(r) for r in two.readers], [{0: "shm", 1: "shm"}] * 2)
        self.assertEqual(two.run["routing"], "manager")
        self.assertEqual(two.run["batch"], 64)
        grid = self.load(TWO_BY_TWO)
        self.assertEqual(grid.deploy["backend"], "netns")
        self.assertEqual(list(grid.hosts), ["builder0", "builder1", "readout0", "readout1"])
        self.assertEqual(grid.hub_host, "builder0")
        self.assertEqual([b["host"] for b in grid.builders], ["builder0", "builder1"])
        self.assertEqual([grid.links(r) for r in grid.readers], [{0: "tcp", 1: "tcp"}] * 2)
        self.assertEqual([grid.source_host(s) for s in range(4)],
                         ["readout0", "readout0", "readout1", "readout1"])
        self.assertEqual(grid.used_hosts(), ["builder0", "builder1", "readout0", "readout1"])
        self.assertEqual(grid.shm_builders(), [])
        # The workloads of the one-builder topologies, so make compare
        # compares like with like.
        one = self.load(TOPOLOGIES / "one-host.toml")
        three = self.load(TOPOLOGIES / "three-hosts.toml")
        def strip(run: dict) -> dict:
            return {k: v for k, v in run.items() if k not in daqrun.HUB_RUN_KEYS}
        self.assertEqual(strip(two.run), strip(one.run))
        self.assertEqual(strip(grid.run), strip(three.run))

    def test_single_builder_is_the_hub(self) -> None:
        t = self.load(TOPOLOGIES / "local.toml")
        self.assertFalse(t.several)
        self.assertIsNone(t.hub)
        self.assertEqual(t.builders, [t.builder])
        self.assertEqual(t.hub_host, "127.0.0.1")
        self.assertNotIn("hub", t.as_dict())
        self.assertIsInstance(t.as_dict()["builder"], dict)
        # One [[builder]] table is a hub and one builder.
        one = self.load(several(1))
        self.assertTrue(one.several)
        self.assertEqual(len(one.builders), 1)

    def test_hub_placement(self) -> None:
        doc = several(2)
        doc["builder"][0]["host"] = "127.0.0.2"
        self.assertEqual(self.load(doc).hub_host, "127.0.0.2")     # builder 0's host
        doc["hub"] = {"host": "127.0.0.3", "control_port": 0}
        t = self.load(doc)
        self.assertEqual(t.hub_host, "127.0.0.3")
        self.assertEqual(t.used_hosts()[0], "127.0.0.3")
        self.assertEqual(self.load(doc, "hub.host=127.0.0.4").hub_host, "127.0.0.4")
        # Ids in any order: the builders come sorted by id.
        doc["builder"].reverse()
        self.assertEqual([b["id"] for b in self.load(doc).builders], [0, 1])

    def test_links_follow_placement(self) -> None:
        doc = several(2)
        doc["builder"][1]["host"] = "127.0.0.2"
        doc["reader"][1]["host"] = "127.0.0.2"
        t = self.load(doc)
        self.assertEqual([t.links(r) for r in t.readers],
                         [{0: "shm", 1: "tcp"}, {0: "tcp", 1: "shm"}])
        self.assertEqual([b["id"] for b in t.shm_builders()], [0, 1])
        self.assertEqual(daemons.shm_segments(t),
                         [("127.0.0.1", f"{daemons.shm_name()}-b0"),
                          ("127.0.0.2", f"{daemons.shm_name()}-b1")])
        t = self.load(doc, "reader.1.transport=\"tcp\"")
        self.assertEqual(t.links(t.readers[1]), {0: "tcp", 1: "tcp"})
        self.assertEqual([b["id"] for b in t.shm_builders()], [0])
        t = self.load(doc, "reader.0.transport=\"tcp\"", "reader.1.transport=\"tcp\"")
        self.assertFalse(daemons.uses_shm(t))
        self.assertEqual(daemons.shm_segments(t), [])
        self.assertEqual(self.load(doc, "reader.1.host=127.0.0.9").readers[1]["transport"],
                         "tcp")

    def test_errors_name_the_key(self) -> None:
        def doc_with(**change) -> dict:
            doc = several(2)
            for path, value in change.items():
                section, _, key = path.partition("__")
                if section.startswith("builder"):
                    doc["builder"][int(section[len("builder"):])][key] = value
                else:
                    doc.setdefault(section, {})[key] = value
            return doc

        duplicate = several(2)
        duplicate["builder"][1]["id"] = 0
        gap = several(2)
        gap["builder"][1]["id"] = 2
        no_id = several(2)
        del no_id["builder"][1]["id"]
        single = topology(events=2000)
        cases = [
            (duplicate, "[[builder]] id: builder 0 appears twice"),
            (gap, "[[builder]] id: the builders' ids must be 0..M-1, each once; missing [1]"),
            (no_id, "[[builder]] #2: missing key 'id'"),
            (doc_with(builder0__id=256), "[[builder]] #1 id: expected an integer in 0..255, "
                                         "got 256"),
            (doc_with(builder1__control_port=7000),
             "[[builder]] #2 control_port: a builder of several has no control port; the "
             "run's is the hub's ([hub] control_port)"),
            (doc_with(builder1__colour=1), "[[builder]] #2 unknown key 'colour'"),
            (doc_with(run__routing="round-robin"),
             "[run] routing: expected \"manager\" or \"static\", got 'round-robin'"),
            (doc_with(run__batch=0), "[run] batch: expected an integer in 1..1048576, got 0"),
            (doc_with(run__batch=(1 << 20) + 1), "[run] batch: expected an integer in "
                                                 "1..1048576, got 1048577"),
            (doc_with(run__window_batches=0), "[run] window_batches: expected an integer in "
                                              "1..1048576, got 0"),
            (doc_with(run__batch=1024),
             "[run] max_inflight: each builder's slots (4096, builderd's default) must exceed "
             "the hub's high water mark, 4 x batch = 4096"),
            (doc_with(run__max_inflight=256), "[run] max_inflight: each builder's slots (256) "
                                              "must exceed the hub's high water mark, 4 x "
                                              "batch = 256"),
            (doc_with(run__no_admission=True), "[run] no_admission: a run of [[builder]] "
                                               "tables has no credits to ignore"),
            (doc_with(run__timeout_ms=0), "[run] timeout_ms: 0 (events never expire) with "
                                          "[[builder]] tables: a healthy builder could then go "
                                          "without a token for ever"),
            (doc_with(run__timeout_ms=1000, builder1__extra=["--timeout-ms", "5000"]),
             "[[builder]] id 1 extra: --timeout-ms 5000 exceeds the hub's 1000, which its "
             "stall limit follows; set [run] timeout_ms instead"),
            (doc_with(hub__port=1), "[hub] unknown key 'port'"),
            (dict(single, run=dict(single["run"], routing="static")),
             "[run] routing: applies to a hub and its builders ([[builder]] tables)"),
            (dict(single, run=dict(single["run"], batch=32)), "[run] batch: applies to a hub"),
            (dict(single, hub={"host": "127.0.0.1"}),
             "[hub]: a hub of its own goes with [[builder]] tables"),
        ]
        for doc, message in cases:
            with self.subTest(message=message):
                self.assertError(doc, message)

    def test_host_errors_name_the_key(self) -> None:
        doc = copy.deepcopy(several(2))
        for table in doc["builder"] + doc["reader"]:
            table["host"] = "a"
        path = self.h.write_topology(doc)
        path.write_text(path.read_text() + '\n[hosts.a]\n[hosts.b]\n')
        self.assertEqual(self.load(path).hub_host, "a")
        for sets, message in (
                (["builder.1.host=c"], "[[builder]] id 1 host: 'c' is not a host of [hosts] "
                                       "(known: a, b)"),
                (["hub.host=c"], "[hub] host: 'c' is not a host of [hosts]"),
                (["reader.0.host=b", "reader.0.transport=\"shm\""],
                 "[[reader]] id 0 transport: \"shm\" needs a builder on the reader's host, but "
                 "no [[builder]] is on reader host 'b' (builder hosts: a)")):
            with self.subTest(sets=sets):
                self.assertError(path, message, *sets)

    def test_set_names_a_builder(self) -> None:
        doc = several(2)
        t = self.load(doc, "builder.1.data_port=7001", "builder.0.quiet=true")
        self.assertEqual(t.builders[1]["data_port"], 7001)
        self.assertTrue(t.builders[0]["quiet"])
        for sets, message in (
                (["builder.host=127.0.0.2"], "--set builder.host: the builders are "
                                             "[[builder]] tables: use builder.ID.host"),
                (["builder.5.host=x"], "--set builder.5.host: no [[builder]] with id 5"),
                (["builder.x.host=x"], "--set builder.x.host: 'x' is not a builder id"),
                (["builder.0.control_port=1"], "--set builder.0.control_port: unknown key "
                                               "'control_port' in [[builder]]")):
            with self.subTest(sets=sets):
                self.assertError(doc, message, *sets)
        self.assertError(topology(events=10), "--set builder.0.host: no [[builder]] tables",
                         "builder.0.host=x")

    def test_faults_name_the_hub(self) -> None:
        self.assertEqual(parse_fault("hub:0:KILL@1.5")["role"], "hub")
        self.assertEqual(parse_fault("builder:1:STOP@2")["id"], 1)
        with self.assertRaises(daqrun.TopologyError) as cm:
            parse_fault("manager:0:KILL@1")
        self.assertIn("ROLE is source, reader, builder or hub", str(cm.exception))


PORTS = {"hub": {"control": 7000}, "builder-0": {"data": 7100, "control": 7001},
         "builder-1": {"data": 7101}, "reader-0": {"data": 7200}, "reader-1": {"data": 7201}}


class CommandLinesTest(E2ETestCase):
    """The exact argv the launcher starts (daemons.command_lines), from the
    ports the port files would say."""

    def lines(self, path: Path, *sets: str) -> dict[str, tuple[str, list[str]]]:
        t = daqrun.load_topology(str(path), list(sets))
        self.run_dir = self.h.dir / "run"
        be = LocalBackend(t.host_specs(), self.run_dir, Path("/opt/es/bin"))
        return {name: (host, argv) for name, host, argv in
                daemons.command_lines(t, be, self.run_dir, PORTS)}

    def common(self) -> list[str]:
        return ["--run-key-file", f"{self.run_dir}/run.key"]

    def test_one_builder_unchanged(self) -> None:
        sets = ("events=500", "max_inflight=64", "builder.flush_every=8", "builder.quiet=true")
        got = self.lines(TOPOLOGIES / "local.toml", *sets)
        d, shm = self.run_dir, daemons.shm_name()
        sha = daemons.config_sha256(daqrun.load_topology(str(TOPOLOGIES / "local.toml"),
                                                         list(sets)))
        self.assertRegex(sha, "^[0-9a-f]{64}$")
        self.assertEqual(list(got), ["builder-0", "reader-0", "reader-1", "source-0",
                                     "source-1", "source-2", "source-3"])
        self.assertEqual(got["builder-0"], ("127.0.0.1", [
            "/opt/es/bin/builderd", "--run", "1", "--sources", "4", "--readers", "2",
            "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0", "--out", str(d),
            "--port-file", f"{d}/ports/builder-0.port", "--first-event", "0", "--events", "500",
            "--filter-modulo", "1", "--max-inflight", "64", "--flush-every", "8",
            "--shm-listen", shm, "--shm-capacity", "4194304",
            # local.toml's [output]: raw files in the run directory, cells of its payload
            "--record", "raw", "--record-dir", str(d), "--record-max-payload", "256",
            "--config-sha256", sha, "--quiet", *self.common(),
            "--metrics-listen", "127.0.0.1:0"]))
        self.assertEqual(got["reader-1"][1], [
            "/opt/es/bin/readoutd", "--id", "1", "--run", "1", "--listen", "127.0.0.1:0",
            "--port-file", f"{d}/ports/reader-1.port", "--sources", "2,3",
            "--builder", f"shm://{shm}", "--control", "127.0.0.1:7001", *self.common()])
        tcp = self.lines(TOPOLOGIES / "local.toml", "reader.1.transport=\"tcp\"")
        self.assertIn("tcp://127.0.0.1:7100", tcp["reader-1"][1])
        self.assertEqual(got["source-2"][1], [
            "/opt/es/bin/sourced", "--id", "2", "--run", "1", "--seed", "1", "--events", "500",
            "--first-event", "0", "--payload", "256", "--rate", "20000",
            "--connect", "127.0.0.1:7201", "--control", "127.0.0.1:7001", *self.common()])

    def test_hub_builders_readers_sources(self) -> None:
        got = self.lines(TWO_BUILDERS, "events=500", "routing=\"static\"", "batch=32",
                         "window_batches=128", "max_inflight=8192", "timeout_ms=500",
                         "builder.1.shm_capacity=65536", "builder.0.flush_every=16",
                         "hub.quiet=true", "builder.1.extra=[\"--batch-bytes\", \"65536\"]")
        d, shm = self.run_dir, daemons.shm_name()
        self.assertEqual(list(got), ["hub", "builder-0", "builder-1", "reader-0", "reader-1",
                                     "source-0", "source-1", "source-2", "source-3"])
        building = ["--first-event", "0", "--events", "500", "--filter-modulo", "1",
                    "--max-inflight", "8192", "--timeout-ms", "500"]
        self.assertEqual(got["hub"], ("node", [
            "/opt/es/bin/builderd", "--role", "hub", "--builders", "2", "--run", "1",
            "--sources", "4", "--readers", "2", "--control-listen", "127.0.0.1:0",
            "--out", str(d), "--port-file", f"{d}/ports/hub.port", *building,
            "--routing", "static", "--batch", "32", "--window-batches", "128", "--quiet",
            *self.common(), "--metrics-listen", "127.0.0.1:0"]))
        self.assertEqual(got["builder-0"], ("node", [
            "/opt/es/bin/builderd", "--role", "builder", "--id", "0", "--builders", "2",
            "--hub", "127.0.0.1:7000", "--run", "1", "--sources", "4", "--readers", "2",
            "--listen", "127.0.0.1:0", "--out", f"{d}/builders/0",
            "--port-file", f"{d}/ports/builder-0.port", *building, "--flush-every", "16",
            "--shm-listen", f"{shm}-b0", *self.common(), "--metrics-listen", "127.0.0.1:0"]))
        self.assertEqual(got["builder-1"][1], [
            "/opt/es/bin/builderd", "--role", "builder", "--id", "1", "--builders", "2",
            "--hub", "127.0.0.1:7000", "--run", "1", "--sources", "4", "--readers", "2",
            "--listen", "127.0.0.1:0", "--out", f"{d}/builders/1",
            "--port-file", f"{d}/ports/builder-1.port", *building,
            "--shm-listen", f"{shm}-b1", "--shm-capacity", "65536", *self.common(),
            "--metrics-listen", "127.0.0.1:0", "--batch-bytes", "65536"])
        self.assertEqual(got["reader-0"][1], [
            "/opt/es/bin/readoutd", "--id", "0", "--run", "1", "--listen", "127.0.0.1:0",
            "--port-file", f"{d}/ports/reader-0.port", "--sources", "0,1",
            "--builder", f"0=shm://{shm}-b0", "--builder", f"1=shm://{shm}-b1",
            "--control", "127.0.0.1:7000", *self.common()])
        self.assertEqual(got["source-3"][1], [
            "/opt/es/bin/sourced", "--id", "3", "--run", "1", "--seed", "1", "--events", "500",
            "--first-event", "0", "--payload", "1024", "--rate", "10000",
            "--connect", "127.0.0.1:7201", "--control", "127.0.0.1:7000", *self.common()])

    def test_tcp_where_not_co_located(self) -> None:
        got = self.lines(TWO_BY_TWO, "deploy.backend=\"local\"", "routing=\"manager\"",
                         "hub.control_port=7000", "builder.1.data_port=7101")
        self.assertEqual(got["hub"][0], "builder0")
        self.assertIn("--control-listen", got["hub"][1])
        self.assertEqual(got["hub"][1][got["hub"][1].index("--control-listen") + 1],
                         "127.0.0.1:7000")
        self.assertNotIn("--shm-listen", got["builder-0"][1])
        self.assertNotIn("--shm-listen", got["builder-1"][1])
        self.assertEqual(got["builder-1"][1][got["builder-1"][1].index("--listen") + 1],
                         "127.0.0.1:7101")
        argv = got["reader-1"][1]
        at = argv.index("--builder")
        self.assertEqual(argv[at:at + 6], ["--builder", "0=tcp://127.0.0.1:7100",
                                           "--builder", "1=tcp://127.0.0.1:7101",
                                           "--control", "127.0.0.1:7000"])


class FakeBuildersRunTest(E2ETestCase):
    """Whole runs of several builders with the stand-in daemons: the
    launcher's plumbing, not the protocol."""

    def setUp(self) -> None:
        super().setUp()
        self.h.bin = FAKE_BIN

    def run_two(self, *sets: str, args=(), env=None, timeout_s: float = 60):
        return self.h.daqrun(TWO_BUILDERS, sets=SMALL + list(sets), args=list(args), env=env,
                             timeout_s=timeout_s)

    def test_two_builders_run(self) -> None:
        r = self.run_two("missing_every=7")
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertIn("(2 builders)", r.output)
        self.assertRegex(r.output, r"hub pid \d+ on node: control 127\.0\.0\.1:\d+, 2 builders, "
                                   r"routing manager")
        self.assertRegex(r.output, r"builder-1 pid \d+ on node: data 127\.0\.0\.1:\d+, shared "
                                   r"memory @es-daq\d+-b1")
        self.assertIn("sources 0,1, to builders 0 shm, 1 shm", r.output)
        p = r.params()
        names = [x["name"] for x in p["processes"]]
        self.assertEqual(names, ["hub", "builder-0", "builder-1", "reader-0", "reader-1",
                                 "source-0", "source-1", "source-2", "source-3"])
        self.assertTrue(all(x["status"] == 0 for x in p["processes"]), p["processes"])
        self.assertIn("control", p["ports"]["hub"])
        self.assertIn("data", p["ports"]["builder-1"])
        self.assertEqual([(b["id"], b["out"]) for b in p["builders"]],
                         [(0, "builders/0"), (1, "builders/1")])
        self.assertEqual(p["builders"][1]["shm_name"], p["shm_name"] + "-b1")
        self.assertEqual(len(p["topology"]["builder"]), 2)
        # The launcher started exactly the command lines command_lines() makes.
        t = daqrun.load_topology(str(TWO_BUILDERS), SMALL + ["missing_every=7"])
        be = LocalBackend(t.host_specs(), r.run_dir, FAKE_BIN.resolve())
        mine = daemons.shm_name()
        expected = {n: [a.replace(mine, p["shm_name"]) for a in argv]
                    for n, _, argv in daemons.command_lines(t, be, r.run_dir, p["ports"])}
        self.assertEqual({x["name"]: x["argv"] for x in p["processes"]}, expected)
        for name in ("hub.log", "hub.out", "builder-0.log", "builder-1.log", "reader-0.log"):
            self.assertTrue((r.run_dir / "logs" / name).exists(), name)
        # Each builder's records in its own folder; the summary counts them.
        total = 0
        for b in (0, 1):
            events = read_jsonl(r.run_dir / "builders" / str(b) / "events.jsonl")
            expired = read_jsonl(r.run_dir / "builders" / str(b) / "expired.jsonl")
            self.assertTrue(events and expired, b)
            self.assertIn(f"builder {b} (node): {len(events)} events recorded, {len(expired)} "
                          f"expired, complete {len(events)}, 0 events/s", r.output)
            total += len(events)
        self.assertIn(f"{total} accepted by 2 builders", r.output)   # the hub's summary
        self.h.assert_clean()

    def test_static_routing_and_tcp_links(self) -> None:
        r = self.run_two("routing=\"static\"", "batch=16", "reader.1.transport=\"tcp\"")
        self.assertRunOk(r)
        self.assertIn("static routing, batch 16", r.output)
        self.assertIn("misplaced=0", r.output)
        argv = {x["name"]: " ".join(x["argv"]) for x in r.params()["processes"]}
        self.assertRegex(argv["reader-1"], r"--builder 0=tcp://127\.0\.0\.1:\d+ --builder "
                                           r"1=tcp://127\.0\.0\.1:\d+")
        self.assertIn("--routing static --batch 16", argv["hub"])
        self.h.assert_clean()

    def test_rerun_clears_the_builders_records(self) -> None:
        out = self.h.dir / "reused"
        stale = out / "builders" / "2"
        stale.mkdir(parents=True)
        (stale / "events.jsonl").write_text('{"event": 1, "crc": 1}\n')
        r = self.h.daqrun(TWO_BUILDERS, sets=SMALL, out=out, timeout_s=60)
        self.assertRunOk(r)
        self.assertFalse(stale.exists())
        self.h.assert_clean()

    def test_builder_failing_at_start_stops_the_run(self) -> None:
        # Builder 1's host has an address no interface here has: it cannot listen.
        r = self.run_two("hosts.far.address=\"192.0.2.1\"", "builder.1.host=\"far\"")
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("builder-1 exited with status 1 before writing its port file", r.output)
        procs = {x["name"]: x for x in r.params()["processes"]}
        self.assertEqual(list(procs), ["hub", "builder-0", "builder-1"])
        self.assertTrue(procs["hub"]["killed"] and procs["builder-0"]["killed"], procs)
        self.h.assert_clean()

    def test_timeout_stops_every_process(self) -> None:
        r = self.run_two(args=["--timeout", "4"], env={"ES_FAKE_HANG": "builderd"})
        self.assertEqual(r.returncode, 124, r.describe())
        procs = r.params()["processes"]
        self.assertEqual(len(procs), 9)
        self.assertTrue(all(p["killed"] and p["status"] == -signal.SIGTERM for p in procs),
                        procs)
        self.h.assert_clean()

    def test_fault_on_the_hub(self) -> None:
        # Killed, the hub ends the run: every other daemon loses its control
        # link and exits, or is stopped grace_s later.
        r = self.run_two("deploy.grace_s=2", args=["--fault", "hub:0:KILL@0.5"],
                         env={"ES_FAKE_HANG": "builderd"})
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("fault: sending SIGKILL to hub", r.output)
        self.assertIn("FAIL (builderd status -9", r.output)
        statuses = {p["name"]: p["status"] for p in r.params()["processes"]}
        self.assertEqual(statuses["hub"], -signal.SIGKILL, statuses)
        self.assertTrue(all(s is not None and s != 0 for s in statuses.values()), statuses)
        self.h.assert_clean()


    def test_cleanup_removes_a_dead_launchers_builder_rings(self) -> None:
        # A launcher that is gone, a pid of this test's own (a suite beside
        # this one picks another): near the top of the largest pid_max.
        pid = 4194303 - os.getpid()
        while pid > 0 and os.path.exists(f"/proc/{pid}"):
            pid -= 1
        rings = [Path(f"/dev/shm/es-daq{pid}-b1-r0"), Path(f"/dev/shm/es-daq{pid}-r2")]
        for ring in rings:
            ring.write_bytes(b"")
            self.addCleanup(ring.unlink, missing_ok=True)
        c = self.h.run("cleanup", [sys.executable, DAQRUN, "--cleanup", str(pid)], 60)
        self.assertEqual(c.returncode, 0, c.describe())
        for ring in rings:
            self.assertIn(f"removed shared-memory segment {ring}", c.output)
            self.assertFalse(ring.exists())


class SshBuildersTest(test_deploy_ssh.SshDeployTest):
    """Two builders over ssh, on two hosts of this machine: each builder's
    folder made on its host and its records brought back; with the
    stand-ins, or the real daemons where they run several builders."""

    # Only this class's own tests, not those of the one-builder runs again.
    test_run_over_ssh = test_interrupt_stops_remote_daemons = None
    test_killed_launcher_leaves_no_remote_daemon = None

    def builders_topology(self, bin_dir: Path | None = None) -> dict:
        doc = self.topology(bin_dir, events=2000, rate=0)
        del doc["builder"]
        doc["builder"] = [{"id": 0, "host": "evb"}, {"id": 1, "host": "ro"}]
        return doc

    def test_two_builders_over_ssh(self) -> None:
        self.h.bin = FAKE_BIN
        r = self.h.daqrun(self.builders_topology(FAKE_BIN), timeout_s=120)
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertIn("(2 builders)", r.output)
        self.assertRegex(r.output, r"reader-0 pid \d+ on ro: .*to builders 0 tcp, 1 shm")
        self.assertRegex(r.output, r"reader-1 pid \d+ on evb: .*to builders 0 shm, 1 tcp")
        remote = self.h.dir / "remote"
        self.assertTrue((remote / "ro" / "run-1" / "builders" / "1" / "events.jsonl").exists())
        self.assertFalse((remote / "ro" / "run-1" / "builders" / "0").exists())
        for b in (0, 1):
            self.assertTrue(read_jsonl(r.run_dir / "builders" / str(b) / "events.jsonl"), b)
        argv = {p["name"]: p["argv"] for p in r.params()["processes"]}
        self.assertIn(f"{remote}/ro/run-1/builders/1", argv["builder-1"])
        self.assertTrue((r.run_dir / "logs" / "hub.log").exists())
        self.assert_clean()

    def test_two_builders_over_ssh_real_daemons(self) -> None:
        if not all(os.access(self.h.bin / d, os.X_OK) for d in ("builderd", "readoutd",
                                                                 "sourced")):
            self.skipTest(f"daemons not built in {self.h.bin}")
        why = several_builders_unsupported(self.h)
        if why:
            self.skipTest(why)
        doc = self.builders_topology()
        doc["run"]["missing_every"] = 30
        r = self.h.daqrun(doc, timeout_s=150)
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertIn("(2 builders)", r.output)
        self.assertBalanced(r)
        self.assert_clean()
