"""Daemons that live across runs (docs/RUNCONTROL.md): the real builderd
serving runs (--session-listen, --control-http), readoutd and sourced with
--session, driven over the hub's real HTTP endpoint, by deploy/daqrun
--runs and by this test itself: several runs on the same processes, a peer
killed between runs, fifty runs without growth, stale peers of an earlier
run refused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from harness import E2ETestCase, read_json, read_port_file, unbalanced

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy"))
from daqlib.hubclient import Hub, read_key  # noqa: E402


def proc_figures(pid: int) -> dict:
    """Resident memory (kB), open descriptors and threads of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    fds = sorted(os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    return {"rss_kb": rss, "fds": len(fds), "fd_targets": fds,
            "threads": len(os.listdir(f"/proc/{pid}/task"))}


class Cluster:
    """One hub, one reader, two sources on loopback, started once, serving;
    every daemon with key_file as its run key when one is given."""

    def __init__(self, test: E2ETestCase, sources=(0, 1), hub_extra=(), reader_extra=(),
                 key_file: Path | None = None):
        self.h, self.sources = test.h, tuple(sources)
        self.reader_extra = list(reader_extra)
        self.key_args = ["--run-key-file", str(key_file)] if key_file else []
        h = self.h
        # The reader's port stays the same when it is restarted, as a
        # deployment's would: --connect is fixed for a serving source.
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.reader_listen = f"127.0.0.1:{probe.getsockname()[1]}"
        probe.close()
        self.hub_args = ["--sources", str(len(self.sources)), "--readers", "1",
                         "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0"]
        pf = h.path("ports", "hub.port")
        self.hub_proc = h.daemon("builderd", "hub", ["--run", "1", *self.hub_args, *self.key_args,
                                                     "--out", h.path("base"), "--port-file", pf,
                                                     "--session-listen", "127.0.0.1:0",
                                                     "--control-http", "127.0.0.1:0",
                                                     *hub_extra])
        self.ports = h.wait_port_file(pf, ("data", "control", "session", "http"),
                                      proc=self.hub_proc)
        self.hub = Hub(f"http://127.0.0.1:{self.ports['http']}",
                       read_key(key_file) if key_file else None)
        self.reader_port_file = h.path("ports", "reader-0.port")
        self.reader = self.start_reader()
        self.reader_port = h.wait_port_file(self.reader_port_file, ("data",),
                                            proc=self.reader)["data"]
        self.source_procs = [h.daemon("sourced", f"source-{s}", ["--run", "1", *self.source_args(
            s, events=10, payload=16, rate=0), *self.key_args, "--session", self.session])
            for s in self.sources]
        self.wait_joined()

    @property
    def session(self) -> str:
        return f"127.0.0.1:{self.ports['session']}"

    def start_reader(self):
        return self.h.daemon("readoutd", "reader-0", ["--run", "1", *self.reader_args(),
                                                      *self.key_args,
                                                      "--port-file", self.reader_port_file,
                                                      "--session", self.session,
                                                      *self.reader_extra])

    def reader_args(self) -> list[str]:
        return ["--id", "0", "--listen", self.reader_listen, "--sources",
                ",".join(map(str, self.sources)),
                "--builder", f"tcp://127.0.0.1:{self.ports['data']}",
                "--control", f"127.0.0.1:{self.ports['control']}"]

    def source_args(self, s: int, *, events: int, payload: int, rate: float,
                    extra=()) -> list[str]:
        port = getattr(self, "reader_port", 0)
        return ["--id", str(s), "--seed", "1", "--events", str(events), "--payload",
                str(payload), "--rate", str(rate), "--connect", f"127.0.0.1:{port}",
                "--control", f"127.0.0.1:{self.ports['control']}", *extra]

    def wait_joined(self, timeout_s: float = 15) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.hub.state()
            if not st["missing"]:
                return st
            if time.monotonic() > deadline:
                raise AssertionError(f"not joined: {st['missing']}")
            time.sleep(0.02)

    def body(self, run: int, out: Path, *, events=2000, payload=64, rate=0,
             extra=()) -> dict:
        args = {"hub": [*self.hub_args, "--out", str(out)],
                "reader.0": self.reader_args()}
        for s in self.sources:
            args[f"source.{s}"] = self.source_args(s, events=events, payload=payload,
                                                   rate=rate, extra=extra)
        return {"run": run, "args": args}

    def wait_state(self, want: tuple[str, ...], timeout_s: float = 30) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.hub.state()
            if st["state"] in want:
                return st
            if time.monotonic() > deadline:
                raise AssertionError(f"hub still {st['state']}, not {want}: {st}")
            time.sleep(0.02)

    def run(self, run: int, out: Path, **kw) -> dict:
        """One whole run: configure, start, its end; its /state summary."""
        out.mkdir(parents=True, exist_ok=True)
        ok, reason = self.hub.post("/configure", self.body(run, out, **kw))
        assert ok, reason
        self.wait_state(("configured",))
        ok, reason = self.hub.post("/start", {"run": run})
        assert ok, reason
        while True:
            st = self.wait_state(("idle", "error"), 60)
            done = [r for r in st["runs"] if r["run"] == run]
            if done:
                return done[-1]
            time.sleep(0.02)

    def refbuild(self, test: E2ETestCase, run: int, out: Path, *, events=2000, payload=64):
        r = test.h.refbuild(out, "--events-file", out / "events.jsonl", "--params", self._empty_params(test),
                            "--seed", 1, "--run", run, "--sources", len(self.sources),
                            "--events", events, "--payload", payload)
        test.assertEqual(r.returncode, 0, r.output[-2000:])

    @staticmethod
    def _empty_params(test: E2ETestCase) -> Path:
        p = test.h.path("no-params.json")
        p.write_text("{}")
        return p

    def pids(self) -> list[int]:
        return [self.hub_proc.pid, self.reader.pid] + [p.pid for p in self.source_procs]

    def shutdown(self) -> None:
        self.hub.post("/shutdown", {})
        for p in [self.hub_proc, self.reader, *self.source_procs]:
            self.h.wait(p, 15)


class ServingRunsTest(E2ETestCase):
    def test_three_runs_on_the_same_processes_with_daqrun(self):
        topo = {"run": {"run": 7, "seed": 3, "events": 5000, "payload": 64, "rate": 0},
                "builder": {"host": "127.0.0.1"},
                "reader": [{"id": 0, "sources": [0, 1], "host": "127.0.0.1", "transport": "tcp"},
                           {"id": 1, "sources": [2], "host": "127.0.0.1", "transport": "tcp"}]}
        r = self.h.daqrun(topo, args=["--runs", "3", "--quiet",
                                      "--set", "runs.2.payload=700", "--set", "runs.2.rate=4000",
                                      "--set", "runs.3.missing_every=7",
                                      "--set", "runs.3.duplicate_every=5",
                                      "--set", "runs.3.seed=9"], timeout_s=240)
        self.assertEqual(r.returncode, 0, r.output[-3000:])
        self.assertIn("3 of 3 runs on the same 6 processes", r.output)
        self.assertNotIn("% complete", r.output, "--quiet: no progress line")
        pids, payloads = None, []
        for number in (7, 8, 9):
            d = r.run_dir / f"run-{number}"
            m = read_json(d / "metrics.json")
            self.assertTrue(m["balanced"], unbalanced(m))
            self.assertEqual(m["run"]["run"], number)
            self.assertRefbuildPasses(d)
            params = read_json(d / "params.json")
            payloads.append(params["run"]["payload"])
            run_pids = sorted(p["pid"] for p in params["processes"])
            pids = pids or run_pids
            self.assertEqual(run_pids, pids, "the same processes in every run")
            self.assertTrue((d / "configure.json").exists())
        self.assertEqual(payloads, [64, 700, 64])
        m9 = read_json(r.run_dir / "run-9" / "metrics.json")
        self.assertGreater(m9["counters"]["builder"]["events_expired"]
                           + m9["counters"]["builder"].get("events_incomplete", 0), 0)
        self.h.assert_clean()

    def test_stop_mid_run_drains_and_the_next_run_starts_cleanly(self):
        topo = {"run": {"run": 3, "seed": 2, "events": 50_000_000, "payload": 128,
                        "rate": 3000},
                "builder": {"host": "127.0.0.1"},
                "reader": [{"id": 0, "sources": [0, 1], "host": "127.0.0.1", "transport": "tcp"}]}
        r = self.h.daqrun(topo, args=["--runs", "2", "--quiet", "--run-seconds", "1.5",
                                      "--set", "runs.2.events=4000", "--set", "runs.2.rate=0"],
                          timeout_s=180)
        self.assertEqual(r.returncode, 0, r.output[-3000:])
        stopped = read_json(r.run_dir / "run-3" / "metrics.json")
        self.assertTrue(stopped["balanced"], unbalanced(stopped))
        last = stopped["stop_last_event"]
        self.assertIsNotNone(last)
        for s in (0, 1):
            counters = stopped["counters"][f"source.{s}"]
            self.assertEqual(counters["frags_cut_by_stop"], 50_000_000 - last - 1)
        self.assertEqual(stopped["counters"]["builder"]["events_accepted"], last + 1)
        self.assertEqual(read_json(r.run_dir / "run-3" / "params.json")["run"]["events"], last + 1)
        self.assertRefbuildPasses(r.run_dir / "run-3")
        runs = read_json(r.run_dir / "runs.json")["runs"]
        self.assertEqual([x["ended_by"] for x in runs], ["operator stop", "its end"])
        self.assertGreater(runs[0]["stop_to_books_ms"], 0)
        after = read_json(r.run_dir / "run-4" / "metrics.json")
        self.assertTrue(after["balanced"], unbalanced(after))
        self.assertEqual(after["counters"]["builder"]["events_accepted"], 4000)
        self.assertRefbuildPasses(r.run_dir / "run-4")
        self.h.assert_clean()

    def test_runs_on_the_three_host_virtual_cluster(self):
        if os.geteuid() != 0 or shutil.which("ip") is None:
            self.skipTest("needs root and ip (network namespaces)")
        three = Path(__file__).resolve().parents[2] / "deploy" / "topologies" / "three-hosts.toml"
        r = self.h.daqrun(three, args=["--runs", "2", "--quiet", "--set", "events=5000",
                                       "--set", "runs.2.payload=300"], timeout_s=240)
        self.assertEqual(r.returncode, 0, r.output[-3000:])
        self.assertIn("2 of 2 runs on the same", r.output)
        runs = read_json(r.run_dir / "runs.json")["runs"]
        self.assertEqual([x["balanced"] for x in runs], [True, True])
        self.assertEqual([x["refbuild"] for x in runs], [0, 0])
        self.h.assert_clean()

    def test_bad_requests_are_refused_with_the_reason(self):
        c = Cluster(self)
        out = self.h.path("run-1")
        good = c.body(1, out)
        cases = [
            ({"args": good["args"]}, "run: 1 .. 4294967295"),
            ({"run": 1, "args": {**good["args"], "source.9": []}}, '"source.9" is neither'),
            ({"run": 1, "args": {k: v for k, v in good["args"].items() if k != "reader.0"}},
             "none for reader 0"),
            ({"run": 1, "args": {**good["args"], "hub": "--out x"}}, "hub: a list of strings"),
            ({"run": 1, "args": {**good["args"], "hub": ["a\nb"]}}, "without a newline"),
            ({"run": 1, "args": {**good["args"], "hub": ["x" * 5000]}}, "more than 4000 bytes"),
            ({"run": 1, "args": {**good["args"], "hub": ["--no-such-option"]}}, "hub: "),
        ]
        for body, words in cases:
            ok, reason = c.hub.post("/configure", body)
            self.assertFalse(ok, body)
            self.assertIn(words, reason)
            self.assertEqual(c.hub.state()["state"], "idle", reason)
        for path, doc, words in (("/start", {"run": 1}, "not configured"),
                                 ("/stop", {"run": 1}, "not running"),
                                 ("/reset", {}, "nothing to reset")):
            ok, reason = c.hub.post(path, doc)
            self.assertFalse(ok)
            self.assertIn(words, reason)
        # A peer's refusal (its option parser's words) is the hub's error,
        # and reset leaves it.
        bad = c.body(1, out)
        bad["args"]["source.1"] = bad["args"]["source.1"] + ["--rate", "fast"]
        self.assertTrue(c.hub.post("/configure", bad)[0])
        st = c.wait_state(("error",))
        self.assertIn("source 1 refused run 1: --rate", st["error"])
        self.assertIn("reset", c.hub.post("/configure", good)[1])
        self.assertTrue(c.hub.post("/reset", {})[0])
        c.wait_state(("idle",))
        self.assertTrue(c.hub.post("/configure", c.body(2, self.h.path("run-2")))[0])
        c.wait_state(("configured",))
        ok, reason = c.hub.post("/start", {"run": 3})
        self.assertFalse(ok)
        self.assertIn("cannot start run 3: the hub is configured run 2", reason)
        self.assertTrue(c.hub.post("/start", {"run": 2})[0])
        st = c.wait_state(("idle",))
        self.assertTrue([r for r in st["runs"] if r["run"] == 2][-1]["balanced"])
        c.shutdown()
        self.h.assert_clean()

    def test_reader_killed_between_runs_is_named_and_rejoins(self):
        c = Cluster(self)
        first = c.run(1, self.h.path("run-1"))
        self.assertTrue(first["balanced"], first)
        os.kill(c.reader.pid, signal.SIGKILL)
        self.h.wait(c.reader, 10)
        deadline = time.monotonic() + 10
        while "reader 0" not in c.hub.state()["missing"] and time.monotonic() < deadline:
            time.sleep(0.02)
        ok, reason = c.hub.post("/configure", c.body(2, self.h.path("run-2")))
        self.assertFalse(ok)
        self.assertIn("reader 0", reason)
        self.assertEqual(c.hub.state()["state"], "idle")
        c.reader = c.start_reader()
        c.wait_joined()
        second = c.run(2, self.h.path("run-2"), events=3000)
        self.assertTrue(second["balanced"], second)
        self.assertEqual(second["events_decided"], 3000)
        c.refbuild(self, 2, self.h.path("run-2"), events=3000)
        c.shutdown()
        self.h.assert_clean()

    def test_fifty_runs_without_growth(self):
        # ... and each run's CPU figures its own.
        c = Cluster(self)
        figures = {}
        sanitized = b"__asan_init" in (self.h.bin / "builderd").read_bytes()
        for run in range(1, 51):
            s = c.run(run, self.h.path(f"runs/run-{run}"), events=300, payload=32)
            self.assertTrue(s["balanced"], s)
            if run in (1, 50):
                time.sleep(0.5)     # the test's own HTTP connection closed
                figures[run] = {pid: proc_figures(pid) for pid in c.pids()}
        for pid in c.pids():
            one, fifty = figures[1][pid], figures[50][pid]
            self.assertEqual(fifty["fds"], one["fds"], f"pid {pid}: {one} -> {fifty}")
            self.assertEqual(fifty["threads"], one["threads"], f"pid {pid}: {one} -> {fifty}")
            if not sanitized:      # AddressSanitizer keeps what is freed in quarantine
                self.assertLessEqual(fifty["rss_kb"], one["rss_kb"] * 1.05,
                                     f"pid {pid}: {one} -> {fifty}")
        (self.h.dir / "fifty-runs.json").write_text(json.dumps(figures, indent=1))
        # Each run's metrics.json gives each process's CPU of that run alone:
        # over the fifty they add up to at most what the process used in
        # its life (a clock tick each of rounding), where counting from the
        # process's start would give about 25 times that.
        tick = os.sysconf("SC_CLK_TCK")
        for pid in c.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            life_s = (int(fields[11]) + int(fields[12])) / tick
            runs_s = 0.0
            for run in range(1, 51):
                m = read_json(self.h.path(f"runs/run-{run}") / "metrics.json")
                me = [p for p in m["processes"] if p["pid"] == pid]
                self.assertEqual(len(me), 1, (run, pid))
                runs_s += me[0]["cpu_user_s"] + me[0]["cpu_sys_s"]
            self.assertGreater(runs_s, 0, pid)
            self.assertLessEqual(runs_s, life_s + 50 * 2 / tick, f"pid {pid}")
        c.shutdown()
        self.h.assert_clean()

    def test_a_frame_of_the_last_run_is_refused_and_counted(self):
        c = Cluster(self)
        c.run(1, self.h.path("run-1"))
        out = self.h.path("run-2")
        s = c.run(2, out, events=3000, extra=["--inject", "oldrun@200"])
        self.assertTrue(s["balanced"], s)
        self.assertNotEqual(s["status"], 0, "a run with a stale frame is not a clean run")
        m = read_json(out / "metrics.json")
        self.assertTrue(m["balanced"], unbalanced(m))
        self.assertGreaterEqual(m["counters"]["reader.0"]["err_run"], 1, m["counters"]["reader.0"])
        self.assertTrue(any("frames of another run (err_run)" in e for e in m["errors"]),
                        m["errors"])
        self.assertIn("frame of run 1, expected run 2", c.reader.log())
        # Never built: no event has more than the fragments sent in run 2.
        self.assertLess(m["counters"]["builder"]["events_accepted"], 3000)
        third = c.run(3, self.h.path("run-3"), events=1000)
        self.assertTrue(third["balanced"] and third["status"] == 0, third)
        c.shutdown()
        self.h.assert_clean()

    def test_a_source_of_the_last_run_is_refused_in_the_next(self):
        c = Cluster(self)
        c.run(1, self.h.path("run-1"))
        out = self.h.path("run-2")
        out.mkdir(parents=True, exist_ok=True)
        ok, reason = c.hub.post("/configure", c.body(2, out, events=8000, rate=4000))
        self.assertTrue(ok, reason)
        c.wait_state(("configured",))
        self.assertTrue(c.hub.post("/start", {"run": 2})[0])
        stale = self.h.daemon("sourced", "stale-source", ["--run", "1", *c.source_args(
            0, events=100, payload=64, rate=0), "--connect-timeout-ms", "2000"])
        self.assertEqual(self.h.wait(stale, 20), 1)
        self.assertIn("run 1", stale.log())
        st = c.wait_state(("idle",), 60)
        s = [r for r in st["runs"] if r["run"] == 2][-1]
        self.assertTrue(s["balanced"], s)
        self.assertEqual(s["events_decided"], 8000)
        m = read_json(out / "metrics.json")
        self.assertGreaterEqual(m["counters"]["builder"]["refused_connections"], 1)
        c.refbuild(self, 2, out, events=8000)
        c.shutdown()
        self.h.assert_clean()

    def test_daqrun_fault_during_serving_runs_is_named_and_books_close(self):
        """daqrun --runs with --fault (make soak's serving mix): a reader
        killed during the second run, counted from the first run's start.
        The hub names it and closes that run's books with its loss; the next
        configure fails naming it; every run that ended balanced."""
        topo = {"run": {"run": 21, "seed": 4, "events": 24000, "payload": 64, "rate": 6000},
                "builder": {"host": "127.0.0.1"},
                "reader": [{"id": 0, "sources": [0, 1], "host": "127.0.0.1", "transport": "tcp"},
                           {"id": 1, "sources": [2, 3], "host": "127.0.0.1", "transport": "tcp"}]}
        r = self.h.daqrun(topo, args=["--runs", "3", "--quiet", "--fault", "reader:1:KILL@6.0"],
                          timeout_s=240)
        self.assertEqual(r.returncode, 1, r.output[-3000:])
        self.assertIn("fault: sending SIGKILL to reader-1", r.output)
        first = read_json(r.run_dir / "run-21" / "metrics.json")
        self.assertTrue(first["balanced"], unbalanced(first))
        self.assertEqual(first["counters"]["builder"]["events_accepted"], 24000)
        hit = read_json(r.run_dir / "run-22" / "metrics.json")
        self.assertTrue(hit["balanced"], unbalanced(hit))
        self.assertEqual([(p["role"], p["id"]) for p in hit["losses"]["peers_gone"]],
                         [("reader", 1)])
        self.assertIn("reader 1", r.output.split("run 23", 1)[-1])
        rows = read_json(r.run_dir / "runs.json")["runs"]
        self.assertEqual([row["run"] for row in rows], [21, 22])

class RunControlDeadlinesTest(E2ETestCase):
    """The hub's races and deadlines (docs/RUNCONTROL.md, "Deadlines and
    reset"): a refused configure's late end never drives the state, a peer
    that does not answer is named within --transition-timeout-ms, and reset
    resets every peer from any state."""

    TIMEOUT_MS = 3000

    def wait_error(self, c: Cluster, started: float, slack_s: float) -> dict:
        st = c.wait_state(("error",), self.TIMEOUT_MS / 1000 + slack_s)
        return {**st, "after_s": time.monotonic() - started}

    def test_reset_while_a_refused_configure_ends_never_goes_back_to_error(self):
        c = Cluster(self)
        for k in range(1, 11):
            bad = c.body(k, self.h.path(f"bad-{k}"))
            bad["args"]["source.1"] = bad["args"]["source.1"] + ["--rate", "fast"]
            ok, reason = c.hub.post("/configure", bad)
            self.assertTrue(ok, reason)
            if k % 2:     # as soon as the refusal is the hub's error, or before it
                self.assertIn("source 1 refused run", c.wait_state(("error",))["error"])
            ok, reason = c.hub.post("/reset", {})
            self.assertTrue(ok, reason)
            st = c.wait_state(("idle", "error"))
            self.assertEqual(st["state"], "idle", f"try {k}: {st}")
            self.assertEqual([p["run"] for p in st["peers"]], [0, 0, 0], st)
            summary = [r for r in st["runs"] if r["run"] == k]
            self.assertEqual(len(summary), 1, st["runs"])
            self.assertFalse(summary[0]["started"])
        time.sleep(0.3)
        self.assertEqual(c.hub.state()["state"], "idle")
        out = self.h.path("run-11")
        s = c.run(11, out, events=3000)
        self.assertTrue(s["balanced"] and s["status"] == 0, s)
        self.assertEqual(s["events_decided"], 3000)
        c.refbuild(self, 11, out, events=3000)
        c.shutdown()
        self.h.assert_clean()

    def test_a_reader_that_never_answers_a_configure_is_named_and_reset(self):
        c = Cluster(self, hub_extra=["--transition-timeout-ms", str(self.TIMEOUT_MS)],
                    reader_extra=["--session-ignore-configure", "2"])
        first = c.run(1, self.h.path("run-1"), events=1000)
        self.assertTrue(first["balanced"], first)
        t0 = time.monotonic()
        ok, reason = c.hub.post("/configure", c.body(2, self.h.path("run-2")))
        self.assertTrue(ok, reason)
        st = self.wait_error(c, t0, 10)
        self.assertGreaterEqual(st["after_s"], self.TIMEOUT_MS / 1000 * 0.9, st)
        self.assertIn(f"configure of run 2: no answer within {self.TIMEOUT_MS / 1000:g} s "
                      f"from reader 0 (pid {c.reader.pid} on ", st["error"])
        self.assertNotIn("source", st["error"])
        self.assertIn("the configure of run 2 is not answered", c.reader.log())
        self.assertIn("reset", c.hub.post("/configure", c.body(3, self.h.path("run-3")))[1])
        ok, reason = c.hub.post("/reset", {})
        self.assertTrue(ok, reason)
        st = c.wait_state(("idle", "error"), 20)
        self.assertEqual(st["state"], "idle", st)
        self.assertEqual([p["run"] for p in st["peers"]], [0, 0, 0], st)
        self.assertIn("Reset by the hub", c.reader.log())
        out = self.h.path("run-3")
        s = c.run(3, out, events=3000)
        self.assertTrue(s["balanced"] and s["status"] == 0, s)
        self.assertEqual(s["events_decided"], 3000)
        c.refbuild(self, 3, out, events=3000)
        c.shutdown()
        self.h.assert_clean()

    def test_a_peer_that_stops_reporting_is_named_not_stuck_in_stopping(self):
        c = Cluster(self, hub_extra=["--transition-timeout-ms", str(self.TIMEOUT_MS),
                                     "--stall-timeout-ms", "1000"])
        out = self.h.path("run-1")
        out.mkdir(parents=True, exist_ok=True)
        ok, reason = c.hub.post("/configure", c.body(1, out, events=50_000_000, rate=2000))
        self.assertTrue(ok, reason)
        c.wait_state(("configured",))
        frozen = c.source_procs[1]
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            self.assertTrue(c.hub.post("/start", {"run": 1})[0])
            time.sleep(0.5)
            t0 = time.monotonic()
            ok, reason = c.hub.post("/stop", {"run": 1})
            # The run object may have ended already, having given the
            # frozen source up: the hub is then stopping by itself.
            self.assertTrue(ok or "the hub is stopping" in reason, reason)
            # The run object gives the frozen source up (--stall-timeout-ms),
            # then the peers have the deadline to report idle.
            st = self.wait_error(c, t0, 20)
            self.assertIn(f"stop of run 1: no answer within {self.TIMEOUT_MS / 1000:g} s from "
                          f"source 1 (pid {frozen.pid} on ", st["error"])
            self.assertNotIn("reader 0", st["error"])
            self.assertNotIn("source 0", st["error"])
            # A reset while it is still frozen: the reset's own deadline
            # names it, the others answered.
            t0 = time.monotonic()
            self.assertTrue(c.hub.post("/reset", {})[0])
            self.assertEqual(c.hub.state()["state"], "resetting")
            st = self.wait_error(c, t0, 10)
            self.assertGreaterEqual(st["after_s"], self.TIMEOUT_MS / 1000 * 0.9, st)
            self.assertEqual(st["error"], f"reset: no answer within {self.TIMEOUT_MS / 1000:g} s "
                             f"from source 1 (pid {frozen.pid} on {st['peers'][1]['host']})")
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        ok, reason = c.hub.post("/reset", {})
        self.assertTrue(ok, reason)
        st = c.wait_state(("idle", "error"), 20)
        self.assertEqual(st["state"], "idle", st)
        out = self.h.path("run-2")
        s = c.run(2, out, events=3000)
        self.assertTrue(s["balanced"] and s["status"] == 0, s)
        c.refbuild(self, 2, out, events=3000)
        c.shutdown()
        self.h.assert_clean()


class HubDescribesItselfTest(E2ETestCase):
    """/state carries the hub's state machine and the actions that apply
    now (a console offers exactly those): each state's actions as the rules
    say, and an action it does not offer refused with the reason."""
    needs_daemons = True

    def actions(self, c: Cluster) -> list[str]:
        return [a["action"] for a in c.hub.state()["actions"]]

    def test_actions_follow_the_state(self):
        c = Cluster(self)
        st = c.hub.state()
        self.assertEqual([s["name"] for s in st["machine"]["states"]],
                         ["idle", "configuring", "configured", "running", "stopping",
                          "resetting", "error"])
        self.assertTrue(all({"event", "from", "to", "meaning"} <= set(r)
                            for r in st["machine"]["rules"]))
        self.assertEqual(self.actions(c), ["configure", "shutdown"])
        configure = st["actions"][0]
        self.assertEqual((configure["path"], sorted(configure["args"])),
                         ("/configure", ["args", "run"]))
        ok, reason = c.hub.post("/start", {"run": 1})
        self.assertFalse(ok)
        self.assertIn("start", reason)
        out = self.h.path("run-1")
        out.mkdir(parents=True, exist_ok=True)
        ok, reason = c.hub.post("/configure", c.body(1, out, events=40000, rate=8000))
        self.assertTrue(ok, reason)
        c.wait_state(("configured",))
        self.assertEqual(self.actions(c), ["start", "reset", "shutdown"])
        self.assertTrue(c.hub.post("/start", {"run": 1})[0])
        self.assertEqual(self.actions(c), ["stop", "reset", "shutdown"])
        self.assertTrue(c.hub.post("/stop", {"run": 1})[0])
        c.wait_state(("idle",), 60)
        self.assertEqual(self.actions(c), ["configure", "shutdown"])
        c.shutdown()
        self.h.assert_clean()
