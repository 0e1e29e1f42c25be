"""The operator's console over serving daemons (docs/RUNCONTROL.md): the
real builderd, readoutd and sourced started once by deploy/daqrun --serve
on loopback, driven by deploy/daqctl --session DIR: a run configured from
a topology (daqlib's runconfig.configure_body, as daqrun --runs builds
it), started, run to its end and checked by refbuild, then one stopped
mid-run; a three-point scan to its table (JSON and CSV agreeing, every
point balanced, the gaps between runs within 1 s by the builder's own
record times); a point not over in time reset and the scan going on; the
hub killed mid-scan ending it (exit 3) with the points done in the table;
a run over shared memory; every bad scan file refused by name before
anything starts (the hub idle, no run made)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import DAQRUN, REPO, E2ETestCase, HarnessError, read_json, unbalanced

sys.path.insert(0, str(REPO / "deploy"))
from daqlib.hubclient import Hub, read_key  # noqa: E402

DAQCTL = REPO / "deploy" / "daqctl"
SEED, EVENTS, PAYLOAD = 3, 2000, 64
TOPOLOGY = {"run": {"run": 1, "seed": SEED, "events": EVENTS, "payload": PAYLOAD, "rate": 0},
            "builder": {"host": "127.0.0.1", "quiet": True},
            "reader": [{"id": 0, "sources": [0, 1], "host": "127.0.0.1", "transport": "tcp"}]}


def record_times_ns(run_dir: Path) -> tuple[int, int]:
    """The first and last built event's record time (the builder's clock)."""
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return json.loads(lines[0])["t_ns"], json.loads(lines[-1])["t_ns"]


class SessionCase(E2ETestCase):
    """daqrun --serve started on self.topology, its session in self.dir."""
    needs_daemons = True
    topology = TOPOLOGY

    def setUp(self) -> None:
        super().setUp()
        self.topo = self.h.write_topology(self.topology)
        self.dir = self.h.path("session")
        self.serving = self.h.start("daqrun-serve", [
            sys.executable, str(DAQRUN), str(self.topo), "--serve", "--quiet",
            "--out", str(self.dir), "--bin", str(self.h.bin)])
        deadline = time.monotonic() + 30
        while not (self.dir / "session.json").exists():
            if self.serving.returncode is not None or time.monotonic() > deadline:
                raise HarnessError(f"daqrun --serve wrote no session.json:\n"
                                   f"{self.serving.tail()}")
            time.sleep(0.05)
        s = read_json(self.dir / "session.json")
        self.hub = Hub(s["hub"], read_key(Path(s["run_key_file"])))

    def daqctl(self, *args: object) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAQ_")}
        return subprocess.run([sys.executable, str(DAQCTL), "--session", str(self.dir),
                               *map(str, args)], capture_output=True, text=True,
                              timeout=240, env=env)

    def ok(self, *args: object) -> subprocess.CompletedProcess:
        r = self.daqctl(*args)
        self.assertEqual(r.returncode, 0, f"daqctl {args}: {r.stdout}{r.stderr}")
        return r

    def wait_state(self, want: tuple[str, ...], timeout_s: float = 60) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.hub.state()
            if st["state"] in want:
                return st
            if time.monotonic() > deadline:
                self.fail(f"hub still {st['state']}, not {want}: {st}")
            time.sleep(0.02)

    def summary(self, run: int) -> dict:
        deadline = time.monotonic() + 60
        while True:
            st = self.wait_state(("idle", "error"))
            done = [r for r in st["runs"] if r["run"] == run]
            if done:
                return done[-1]
            if time.monotonic() > deadline:
                self.fail(f"no summary of run {run}: {st}")
            time.sleep(0.02)

    def shut_down(self) -> None:
        self.ok("shutdown")
        self.assertEqual(self.h.wait(self.serving, 60), 0, self.serving.tail())
        self.h.assert_clean()

    def refbuild(self, run: int, run_dir: Path, events: int, payload: int) -> None:
        empty = self.h.path("no-params.json")
        empty.write_text("{}")
        r = self.h.refbuild(run_dir, "--events-file", run_dir / "events.jsonl", "--params",
                            empty, "--seed", SEED, "--run", run, "--sources", 2,
                            "--events", events, "--payload", payload)
        self.assertEqual(r.returncode, 0, r.output[-2000:])



class OperatorSessionTest(SessionCase):
    def test_configure_a_topology_then_start_and_stop(self) -> None:
        r = self.daqctl("configure", REPO / "deploy" / "topologies" / "three-hosts.toml",
                        "--run", 4)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("a run of the netns backend is built by the daqrun that started its "
                      "daemons", r.stderr)
        self.assertFalse((self.dir / "run-4").exists())
        r = self.ok("configure", self.topo, "--run", 4)
        self.assertEqual(json.loads(r.stdout)["accepted"], True)
        body = read_json(self.dir / "run-4" / "configure.json")
        self.assertEqual((body["run"], sorted(body["args"])),
                         (4, ["hub", "reader.0", "source.0", "source.1"]))
        self.wait_state(("configured",))
        # A scan starts from idle only.
        scan = self.h.path("one.toml")
        scan.write_text(f'topology = "{self.topo.name}"\nstop = {{ events = 10 }}\n'
                        "[grid]\npayload = [64]\n")
        r = self.daqctl("scan", scan)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("scan refused: the hub is configured (run 4); a scan starts from idle",
                      r.stderr)
        self.ok("start", "--run", 4)
        done = self.summary(4)
        self.assertEqual((done["status"], done["balanced"], done["events_decided"]),
                         (0, True, EVENTS))
        m = read_json(self.dir / "run-4" / "metrics.json")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.refbuild(4, self.dir / "run-4", EVENTS, PAYLOAD)
        # A long paced run, --set as daqrun's, stopped by the operator.
        self.ok("configure", self.topo, "--run", 5, "--set", "events=50000000",
                "--set", "rate=3000", "--set", "payload=128")
        self.wait_state(("configured",))
        self.ok("start", "--run", 5)
        time.sleep(0.5)
        self.ok("stop", "--run", 5)
        done = self.summary(5)
        self.assertTrue(done["balanced"], done)
        self.assertIsNotNone(done["stop_to_books_ms"], done)
        m = read_json(self.dir / "run-5" / "metrics.json")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertGreater(m["counters"]["source.0"]["frags_cut_by_stop"], 0)
        self.shut_down()

    def test_a_three_point_scan_to_its_table(self) -> None:
        scan = self.h.path("three.toml")
        scan.write_text(f'topology = "{self.topo.name}"\nstop = {{ events = 3000 }}\n'
                        "repeats = 2\n"
                        "[[point]]\npayload = 64\n"
                        "[[point]]\npayload = 512\nrate = 20000\n"
                        "[[point]]\npayload = 64\nrate = 5000\nstop = { seconds = 0.3 }\n")
        r = self.ok("scan", scan, "--first-run", 20)
        for k in (1, 2, 3):
            self.assertIn(f"daqctl: point {k}/3 (", r.stdout)
        self.assertIn("scan PASS: 3 of 3 points balanced", r.stdout)
        doc = read_json(self.dir / "scan-three.json")
        rows = doc["rows"]
        self.assertEqual([row["runs"] for row in rows], [[20, 21], [22, 23], [24, 25]])
        self.assertEqual([(row["payload"], row["rate"]) for row in rows],
                         [(64, None), (512, 20000), (64, 5000)])
        self.assertEqual([row["stop"] for row in rows],
                         ["events=3000", "events=3000", "seconds=0.3"])
        for row in rows:
            self.assertEqual((row["verdict"], row["balanced"], row["status"]),
                             ("balanced", True, 0), row)
            for key in ("accepted_events_per_s", "p50_us", "p99_us", "p99_uncertainty_us",
                        "cpu_us_per_fragment"):
                self.assertIsNotNone(row[key], (key, row))
        self.assertEqual([row["events_decided"] for row in rows[:2]], [3000, 3000])
        # The CSV holds the same rows as the JSON.
        with open(self.dir / "scan-three.csv", newline="") as f:
            table = list(csv.DictReader(f))
        self.assertEqual(len(table), 3)
        for row, line in zip(rows, table):
            self.assertEqual(list(line), list(row))
            for key, value in row.items():
                shown = (" ".join(map(str, value)) if isinstance(value, list) else
                         "" if value is None else str(value))
                self.assertEqual(line[key], shown, key)
        # Gaps within 1 s: the scan's own and the builder's record times.
        runs = self.hub.state()["runs"]
        for number in range(20, 26):
            mine = [x for x in runs if x["run"] == number]
            self.assertTrue(mine and mine[-1]["balanced"], runs)
            self.assertTrue(read_json(self.dir / f"run-{number}" / "metrics.json")["balanced"])
        for prev, row in zip(rows, rows[1:]):
            self.assertLessEqual(row["gap_s"], 1.0, row)
            self.assertLessEqual(row["started_at"] - prev["ended_at"], 1.0)
            _, last = record_times_ns(self.dir / f"run-{prev['runs'][-1]}")
            first, _ = record_times_ns(self.dir / f"run-{row['runs'][0]}")
            self.assertLess((first - last) / 1e9, 1.0, (prev, row))
        self.refbuild(20, self.dir / "run-20", 3000, 64)
        self.refbuild(23, self.dir / "run-23", 3000, 512)
        self.shut_down()

    def test_the_scan_printed_as_bodies_for_the_console(self) -> None:
        """scan --print-bodies: daqctl's own points and numbering, every
        run's body as configure TOPOLOGY --print-body builds it and as its
        configure.json holds it, nothing sent."""
        scan = self.h.path("printed.toml")
        scan.write_text(f'topology = "{self.topo.name}"\nstop = {{ events = 3000 }}\n'
                        "repeats = 2\n"
                        "[[point]]\npayload = 64\n"
                        "[[point]]\npayload = 512\nrate = 20000\n"
                        "[[point]]\nrate = 5000\nstop = { seconds = 0.3 }\n")
        r = self.ok("scan", scan, "--print-bodies", "--first-run", 30)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["format"], doc["repeats"], doc["keys"], doc["first_run"]),
                         ("daq-scan-plan/1", 2, ["payload", "rate"], 30))
        self.assertEqual([(p["point"], p["values"], p["stop"], [x["run"] for x in p["runs"]])
                          for p in doc["points"]],
                         [(1, {"payload": 64}, {"events": 3000}, [30, 31]),
                          (2, {"payload": 512, "rate": 20000}, {"events": 3000}, [32, 33]),
                          (3, {"rate": 5000}, {"seconds": 0.3}, [34, 35])])
        self.assertEqual(doc["points"][1]["label"], "payload=512 rate=20000")
        for p in doc["points"]:
            for x in p["runs"]:
                self.assertEqual(x["body"]["run"], x["run"])
                self.assertEqual(x["body"], read_json(self.dir / f"run-{x['run']}" /
                                                      "configure.json"))
        # The one code path: configure TOPOLOGY --print-body with the point's keys.
        r = self.ok("configure", self.topo, "--run", 33, "--set", "payload=512",
                    "--set", "rate=20000", "--set", "events=3000", "--print-body")
        self.assertEqual(json.loads(r.stdout), doc["points"][1]["runs"][1]["body"])
        st = self.hub.state()
        self.assertEqual((st["state"], st["runs"]), ("idle", []))
        # Numbered from the hub's last run without --first-run; a bad file
        # refused as the scan's own.
        r = self.ok("scan", scan, "--print-bodies")
        self.assertEqual(json.loads(r.stdout)["first_run"], TOPOLOGY["run"]["run"])
        bad = self.h.path("bad.toml")
        bad.write_text(f'topology = "{self.topo.name}"\nstop = {{ events = 10 }}\n'
                       "[grid]\nrat = [1]\n")
        r = self.daqctl("scan", bad, "--print-bodies")
        self.assertEqual((r.returncode, r.stdout), (2, ""), r.stderr)
        self.assertIn("unknown key 'rat'", r.stderr)
        self.shut_down()

    def test_a_point_not_over_in_time_is_reset_and_the_scan_goes_on(self) -> None:
        scan = self.h.path("late.toml")
        scan.write_text(f'topology = "{self.topo.name}"\n'
                        "[[point]]\nrate = 1000\nstop = { events = 50000000 }\n"
                        "[[point]]\nrate = 0\nstop = { events = 1000 }\n")
        r = self.daqctl("scan", scan, "--point-timeout", 1, "--first-run", 3)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("scan FAIL: 1 of 2 points balanced", r.stdout)
        rows = read_json(self.dir / "scan-late.json")["rows"]
        self.assertEqual(rows[0]["verdict"], "run 3: not over after 1 s; reset")
        self.assertEqual((rows[0]["balanced"], rows[0]["accepted_events_per_s"]), (False, None))
        self.assertEqual((rows[1]["runs"], rows[1]["verdict"]), ([4], "balanced"))
        self.assertEqual(self.hub.state()["state"], "idle")
        self.shut_down()

    def test_the_hub_killed_mid_scan_ends_it_with_the_points_done(self) -> None:
        scan = self.h.path("killed.toml")
        scan.write_text(f'topology = "{self.topo.name}"\nstop = {{ events = 1000 }}\n'
                        "[[point]]\npayload = 64\n"
                        "[[point]]\nrate = 1000\nstop = { seconds = 30 }\n")
        proc = subprocess.Popen([sys.executable, str(DAQCTL), "--session", str(self.dir),
                                 "scan", str(scan)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        self.wait_state(("running",))
        deadline = time.monotonic() + 30
        while self.hub.state()["run"] != 2 or self.hub.state()["state"] != "running":
            self.assertLess(time.monotonic(), deadline, "the second point never ran")
            time.sleep(0.05)
        pids = {p["name"]: p["pid"] for p in read_json(self.dir / "params.json")["processes"]}
        os.kill(pids["builder-0"], 9)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 3, out + err)
        self.assertIn("daqctl: point 1/2 (payload=64; runs 1): balanced", out)
        self.assertIn("scan stopped after 1 of 2 points: the hub at", err)
        self.assertIn("is unreachable", err)
        rows = read_json(self.dir / "scan-killed.json")["rows"]
        self.assertEqual([(r["runs"], r["verdict"]) for r in rows], [([1], "balanced")])
        # daqrun --serve names the hub's death and fails; no peer outlives it.
        self.assertEqual(self.h.wait(self.serving, 60), 1, self.serving.tail())
        self.h.assert_clean()

    def test_bad_scan_files_are_refused_before_anything_starts(self) -> None:
        head = f'topology = "{self.topo.name}"\n'
        cases = [
            ("speed = 1\n" + head + "stop = { events = 10 }\n[grid]\nrate = [1]\n",
             "unknown key 'speed'"),
            (head + "stop = { events = 10 }\n[grid]\nrat = [1, 2]\n", "unknown key 'rat'"),
            (head + "stop = { events = 10 }\n[grid]\nevents = [1, 2]\n",
             "unknown key 'events'; a run's length is stop = {events = N}"),
            (head + "stop = { events = 10 }\ngrid = {}\n", "[grid] is empty"),
            (head + "stop = { events = 10 }\n[grid]\nrate = []\n",
             "grid key 'rate' needs a non-empty list"),
            (head + "stop = { minutes = 1 }\n[grid]\nrate = [1]\n",
             "a stop condition is {events = N} or {seconds = S}"),
            (head + "stop = { events = 0 }\n[grid]\nrate = [1]\n",
             "stop events must be a positive integer, got 0"),
            (head + "stop = { seconds = -2 }\n[grid]\nrate = [1]\n",
             "stop seconds must be a positive number, got -2"),
            (head + "[grid]\nrate = [1]\n", "point 1 has no stop condition"),
            (head + "repeats = 0\nstop = { events = 10 }\n[grid]\nrate = [1]\n",
             "repeats must be an integer in 1..1000, got 0"),
            (head + "repeats = \"two\"\nstop = { events = 10 }\n[grid]\nrate = [1]\n",
             "repeats must be an integer in 1..1000, got 'two'"),
            (head + "stop = { events = 10 }\n[grid]\npayload = [64, 2000000]\n",
             "point 2 (payload=2000000): topology"),
            (head + "stop = { events = 10 }\n[grid]\npayload = [64, 2000000]\n",
             "[run] payload: expected an integer in 0..1048576, got 2000000"),
            (head + "stop = { events = 10 }\n[[point]]\nrate = -5\n",
             "point 1 (rate=-5): topology"),
            (head + "stop = { events = 10 }\n[[point]]\nrate = -5\n",
             "[run] rate: expected a number in 0..1000000000, got -5"),
            (head + "stop = { events = 10 }\n[[point]]\nbatch = 8\n", "batch"),
            (head + "stop = { events = 10 }\n[grid]\nrate = [1]\n[[point]]\nrate = 1\n",
             "give either [grid] or [[point]] tables (not both)"),
            (head + "stop = { events = 10 }\n", "(not neither)"),
            ("stop = { events = 10 }\n[grid]\nrate = [1]\n", "no topology"),
            (head + "stop = { events = 10 \n", "not valid TOML"),
        ]
        for n, (text, reason) in enumerate(cases):
            with self.subTest(reason=reason):
                path = self.h.path(f"bad-{n}.toml")
                path.write_text(text)
                r = self.daqctl("scan", path)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(f"daqctl: error: scan {path}", r.stderr)
                self.assertIn(reason, r.stderr)
                self.assertEqual(r.stdout, "")
        st = self.hub.state()
        self.assertEqual((st["state"], st["runs"]), ("idle", []))
        self.assertEqual(sorted(p.name for p in self.dir.glob("run-*")), [])
        self.shut_down()


class ShmSessionTest(SessionCase):
    """The rings' name is fixed at the daemons' start: a client names the
    same rings (session.json's shm_name)."""
    topology = dict(TOPOLOGY, reader=[dict(TOPOLOGY["reader"][0], transport="shm")])

    def test_a_run_over_shared_memory_from_the_session(self) -> None:
        self.ok("configure", self.topo, "--run", 2)
        body = read_json(self.dir / "run-2" / "configure.json")
        shm = read_json(self.dir / "session.json")["shm_name"]
        self.assertIn(f"shm://{shm}", body["args"]["reader.0"])
        self.wait_state(("configured",))
        self.ok("start", "--run", 2)
        done = self.summary(2)
        self.assertEqual((done["balanced"], done["events_decided"]), (True, EVENTS))
        m = read_json(self.dir / "run-2" / "metrics.json")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.refbuild(2, self.dir / "run-2", EVENTS, PAYLOAD)
        self.shut_down()


class ServeUsageTest(E2ETestCase):
    def test_serve_leaves_the_runs_to_the_operator(self) -> None:
        topo = self.h.write_topology(TOPOLOGY)
        for extra in (["--runs", "2"], ["--run-seconds", "1"]):
            with self.subTest(extra=extra):
                r = self.h.run("daqrun", [sys.executable, DAQRUN, topo, "--serve",
                                          "--out", self.h.path("x"), *extra], 30)
                self.assertEqual(r.returncode, 2, r.output)
                self.assertIn("--serve leaves the runs to the operator: no --runs, "
                              "--run-plan or --run-seconds", r.output)
