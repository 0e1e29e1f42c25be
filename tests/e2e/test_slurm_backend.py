"""deploy/daqrun --backend slurm (docs/DEPLOY.md, "slurm") on a three-node
virtual Slurm cluster (deploy/slurm-vcluster up deploy/topologies/three-hosts.toml):

- the README's command as it is; the three-host topology balanced and
  matching refbuild, every daemon a job step of the run's one allocation on
  its node (its log names SLURM_JOB_ID, SLURM_STEP_ID and the node), reached
  at the node's namespace address, and nothing left in squeue afterwards;
- three runs in one allocation (--runs 3), on the same steps;
- daqrun inside `salloc -N3` and in an sbatch script: steps of that job,
  which daqrun leaves to its owner; a job given by ID ([slurm] allocation) left running after two
  runs; a job of too few nodes, a job that is not there, a bad value;
- a reader's step cancelled with scancel mid-run: named, counted, balanced;
- Ctrl-C during a run, the run's timeout, a builder that fails at start,
  and the launcher killed with SIGKILL: no step, job, process or segment
  left;
- bad inputs named before any daemon starts: a node the cluster does not
  have, daemons a node cannot find, a partition Slurm refuses, an allocation
  that stays pending (cancelled, not left in the queue);
- daqrun --cleanup cancels an allocation whose launcher is gone.

Root, and Debian's Slurm packages (installed when missing; skipped with the
reason when that cannot be done); each cluster on a /24 of 198.18.0.0/15 no
other cluster on this machine uses (test_slurm_vcluster.free_subnet), inside
the cluster's namespaces only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, TAG_VAR, E2ETestCase, Run

from test_slurm_vcluster import VCLUSTER, free_port, unavailable, up_on_a_free_subnet

THREE = REPO / "deploy" / "topologies" / "three-hosts.toml"
SMALL = ["run.events=20000", "run.payload=256"]


class SlurmBackendTest(E2ETestCase):
    """Each test its own virtual cluster (about 2 s to bring up), whose nodes
    are those of three-hosts.toml, on a subnet of its own: the runner gives
    no hook after a module's last test."""

    def setUp(self) -> None:
        why = unavailable()
        if why:
            self.skipTest(why)
        super().setUp()
        self.vdir = self.h.dir / "vc"
        self.addCleanup(lambda: subprocess.run([str(VCLUSTER), "down", "--dir", str(self.vdir)],
                                               stdin=subprocess.DEVNULL, capture_output=True,
                                               timeout=120))
        # Without the test's tag: the cluster's daemons are not the run's
        # leftovers (the steps, started by the run's srun, carry it).
        env = {k: v for k, v in os.environ.items() if k != TAG_VAR}

        def up(subnet):
            r = subprocess.run([str(VCLUSTER), "up", str(THREE), "--dir", str(self.vdir),
                                "--port", str(free_port()), "--subnet", str(subnet)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=300, env=env)
            r.output = r.stdout
            return r
        r, _ = up_on_a_free_subnet(up)
        self.assertEqual(r.returncode, 0, r.output)
        self.env = {"SLURM_CONF": str(self.vdir / "slurm.conf")}
        # The nodes' addresses on the cluster's subnet.
        state = json.loads((self.vdir / "vcluster.json").read_text(encoding="utf-8"))
        self.address = dict(state["nodes"])

    # -- helpers ------------------------------------------------------------
    def slurm(self, *argv: str) -> str:
        r = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=30, env=self.h.env(self.env))
        self.assertEqual(r.returncode, 0, f"{' '.join(argv)}: {r.stderr}")
        return r.stdout

    def queue(self) -> list[str]:
        """Every job and step in the cluster's queue."""
        return (self.slurm("squeue", "-h", "-o", "%i %j %T").splitlines()
                + self.slurm("squeue", "-h", "-s", "-o", "%i %j").splitlines())

    def assertQueueEmpty(self, settle_s: float = 15) -> None:
        deadline = time.monotonic() + settle_s
        while self.queue() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.queue(), [], "left in squeue")

    def daqrun(self, *sets: str, args=(), timeout_s: float = 180):
        return self.h.daqrun(THREE, sets=["deploy.backend=slurm", *SMALL, *sets],
                             args=list(args), timeout_s=timeout_s, env=self.env)

    def start_daqrun(self, *sets: str):
        out = self.h.dir / f"bg-{self.h._next()}"
        argv = [str(REPO / "deploy" / "daqrun"), str(THREE), "--out", str(out), "--bin",
                str(self.h.bin), "--quiet", "--set", "deploy.backend=slurm"]
        for s in sets:
            argv += ["--set", s]
        return self.h.start(f"daqrun-bg-{self.h._next()}", argv, env=self.env), out

    def wait_for_steps(self, proc, names: set[str], timeout_s: float = 60) -> dict[str, str]:
        """{step name: J.S} once every one of names runs as a step."""
        deadline = time.monotonic() + timeout_s
        while True:
            steps = {}
            for line in self.slurm("squeue", "-h", "-s", "-o", "%i %j").splitlines():
                step, name = line.split()
                steps[name] = step
            if names <= set(steps):
                return steps
            if proc.returncode is not None or time.monotonic() > deadline:
                self.fail(f"steps {sorted(names - set(steps))} never ran:\n{proc.tail(40)}")
            time.sleep(0.1)

    def assertNothingOfTheRunLeft(self, out: Path) -> None:
        self.assertQueueEmpty()
        self.h.assert_clean(settle_s=10)
        params = json.loads((out / "params.json").read_text(encoding="utf-8"))
        launcher = re.match(r"esdq(\d+)-", params["backend_info"]["job_name"]).group(1)
        segments = [p.name for p in Path("/dev/shm").glob(f"es-daq{launcher}-*")]
        self.assertEqual(segments, [], "shared-memory segments left")

    def assertRanAsSteps(self, r) -> dict:
        """Every daemon's log names the run's job, a step of its own and its
        node; params.json says the same; returns backend_info."""
        info = r.params()["backend_info"]
        job = info["job_id"]
        self.assertTrue(job and job.isdigit(), info)
        seen_steps = set()
        for p in r.params()["processes"]:
            host = p["host"]
            log = Path(p["log"]).read_text(encoding="utf-8", errors="replace")
            m = re.search(r"NOTE Slurm job step: SLURM_JOB_ID=(\d+) SLURM_STEP_ID=(\d+) "
                          r"SLURMD_NODENAME=(\S+)", log)
            self.assertIsNotNone(m, f"{p['name']}: no Slurm line in its log:\n{log[:800]}")
            self.assertEqual((m.group(1), m.group(3)), (job, host), p["name"])
            seen_steps.add(m.group(2))
            self.assertEqual(info["steps"][p["name"]], {"step": f"{job}.{m.group(2)}",
                                                         "node": host})
            self.assertGreater(p["pid"], 0, p)
        self.assertEqual(len(seen_steps), len(r.params()["processes"]), "one step per daemon")
        for host, addr in self.address.items():
            self.assertEqual(info["hosts"][host], {"node": host, "address": addr})
        return info

    # -- tests --------------------------------------------------------------
    def test_three_hosts_as_job_steps(self) -> None:
        # Recording on ([output]): the builder's step writes the events'
        # data on its node, and refbuild checks every byte of it.
        r = self.daqrun('output.format="raw"')
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("PASS refbuild", r.output)
        self.assertIn(f"PASS refbuild data {r.run_dir}: every payload byte of 20000 written "
                      f"events checked against the generator", r.output)
        a = {h: re.escape(x) for h, x in self.address.items()}
        self.assertRegex(r.output, rf"slurm: job \d+ \(esdq\d+-daqrun-\S+\), builder on node "
                                   rf"builder {a['builder']}, readout0 on node readout0 "
                                   rf"{a['readout0']}, readout1 on node readout1 {a['readout1']}")
        self.assertRanAsSteps(r)
        m = r.metrics()
        self.assertTrue(m["balanced"])
        self.assertEqual(m["counters"]["builder"]["events_accepted"], 20000)
        self.assertEqual(m["counters"]["builder"]["data_events_written"], 20000)
        # Each reader's HELLO came from its node's namespace address, and
        # every peer named its node as its host.
        links = {link["id"]: link["address"].rsplit(":", 1)[0] for link in m["reader_links"]}
        self.assertEqual(links, {0: self.address["readout0"], 1: self.address["readout1"]})
        hosts = {(p["role"], p["id"]): p["host"] for p in m["processes"]}
        self.assertEqual(hosts, {("builder", 0): "builder", ("reader", 0): "readout0",
                                 ("reader", 1): "readout1", ("source", 0): "readout0",
                                 ("source", 1): "readout0", ("source", 2): "readout1",
                                 ("source", 3): "readout1"})
        salloc = (r.run_dir / "logs" / "salloc.log").read_text(encoding="utf-8")
        self.assertIn("Relinquishing job allocation", salloc)
        self.assertNothingOfTheRunLeft(r.run_dir)

    def test_the_readme_command(self) -> None:
        """`deploy/daqrun deploy/topologies/three-hosts.toml --backend slurm`,
        nothing more (its 100,000 events: 10 s), into runs/three-hosts-slurm."""
        r = self.h.run("readme", [REPO / "deploy" / "daqrun", THREE, "--backend", "slurm"], 240,
                       env=self.env)
        self.assertEqual(r.returncode, 0, r.describe())
        out = self.h.dir / "runs" / "three-hosts-slurm"
        self.assertIn(f"run directory {out}", r.output)
        self.assertIn(f"PASS refbuild {out / 'events.jsonl'}", r.output)
        self.assertIn("equations: 21 of 21 balanced", r.output)
        # The progress line, every 5 s, from the builder's /status on its node.
        self.assertRegex(r.output, r"daqrun: \d+\.\d% complete, [1-9]\d* built \([1-9]\d*/s\)")
        self.assertNothingOfTheRunLeft(out)

    def test_several_runs_in_one_allocation(self) -> None:
        r = self.daqrun(args=["--runs", "3"])
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("3 of 3 runs on the same 7 processes", r.output)
        self.assertRegex(r.output, r"daqrun: \d+\.\d% complete, \d+ built", "a progress line")
        info = self.assertRanAsSteps(r)
        self.assertEqual(len(re.findall(r"slurm: job \d+", r.output)), 1, "one allocation")
        for n in (1, 2, 3):
            self.assertIn(f"PASS refbuild {r.run_dir / f'run-{n}' / 'events.jsonl'}", r.output)
            run_params = json.loads((r.run_dir / f"run-{n}" / "params.json").read_text())
            self.assertEqual(run_params["backend_info"]["job_id"], info["job_id"])
        self.assertNothingOfTheRunLeft(r.run_dir)

    def test_step_cancelled_mid_run(self) -> None:
        proc, out = self.start_daqrun(*SMALL, "run.events=100000", "run.rate=10000")
        steps = self.wait_for_steps(proc, {"builder-0", "reader-0", "reader-1", "source-0",
                                           "source-1", "source-2", "source-3"})
        time.sleep(2)                    # mid-run: 10 s of events at 10 kHz
        self.slurm("scancel", steps["reader-0"])
        rc = self.h.wait(proc, 120)
        self.assertEqual(rc, 1, proc.tail(60))
        log = proc.log()
        self.assertRegex(log, rf"reader-0 exited with status -?\d+: its job step "
                              rf"{re.escape(steps['reader-0'])} on readout0 was cancelled "
                              rf"outside daqrun \(scancel\)")
        m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
        self.assertTrue(m["balanced"], m.get("errors"))
        gone = [(g["role"], g["id"]) for g in m["losses"]["peers_gone"]]
        self.assertIn(("reader", 0), gone)
        self.assertIn("Reader 0", " | ".join(m["errors"]))
        link = next(x for x in m["reader_links"] if x["id"] == 0)
        self.assertTrue(link["died"], link)
        self.assertGreater(link["frames_received"], 0)
        self.assertNothingOfTheRunLeft(out)

    def test_ctrl_c_leaves_nothing(self) -> None:
        proc, out = self.start_daqrun(*SMALL, "run.events=100000", "run.rate=10000")
        self.wait_for_steps(proc, {"source-0", "source-3"})
        time.sleep(1)
        proc.popen.send_signal(signal.SIGINT)
        self.assertEqual(self.h.wait(proc, 60), 130, proc.tail(40))
        self.assertIn("interrupted (SIGINT); stopping every daemon", proc.log())
        self.assertNothingOfTheRunLeft(out)

    def test_timeout_and_a_failed_start_leave_nothing(self) -> None:
        r = self.daqrun("run.events=100000", "run.rate=10000", args=["--timeout", "4"])
        self.assertEqual(r.returncode, 124, r.describe())
        self.assertIn("timeout after 4 s; stopping", r.output)
        self.assertNothingOfTheRunLeft(r.run_dir)
        r = self.daqrun('builder.extra=["--no-such-option"]')
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("builder-0 exited with status 2 before writing its port file", r.output)
        self.assertNotIn("reader-0 pid", r.output)
        self.assertNothingOfTheRunLeft(r.run_dir)

    def test_launcher_killed_leaves_nothing(self) -> None:
        proc, out = self.start_daqrun(*SMALL, "run.events=100000", "run.rate=10000")
        self.wait_for_steps(proc, {"source-0", "source-3"})
        proc.popen.kill()
        proc.popen.wait(timeout=10)
        # The pipe that held the allocation closed with the launcher: salloc
        # relinquishes it and Slurm ends every step.
        self.assertQueueEmpty(settle_s=20)
        self.h.assert_clean(settle_s=15)
        salloc = (out / "logs" / "salloc.log").read_text(encoding="utf-8")
        self.assertIn("Relinquishing job allocation", salloc)

    def in_a_job(self, name: str, nodes: int, *sets: str):
        """daqrun started by `salloc -N nodes` in the job it grants, as a
        physicist runs it (or an sbatch script does)."""
        out = self.h.dir / f"in-{name}"
        argv = ["salloc", f"-N{nodes}", "--exclusive", "-J", name, sys.executable,
                REPO / "deploy" / "daqrun", THREE, "--out", out, "--bin", self.h.bin, "--quiet",
                "--timeout", "150", "--set", "deploy.backend=slurm"]
        for s in [*SMALL, *sets]:
            argv += ["--set", s]
        r = self.h.run(f"salloc-{name}", argv, 180, env=self.env)
        return Run(r.name, r.argv, r.returncode, r.output, r.elapsed_s, run_dir=out)

    def test_in_the_job_daqrun_runs_in(self) -> None:
        """Inside salloc (or sbatch) the daemons are steps of that job, on its
        nodes; daqrun cancels its steps and leaves the job to its owner."""
        r = self.in_a_job("physicist", 3)
        self.assertEqual(r.returncode, 0, r.describe())
        info = self.assertRanAsSteps(r)
        self.assertEqual((info["job_name"], info["own_allocation"]), ("physicist", False))
        job = info["job_id"]
        self.assertIn(f"Granted job allocation {job}", r.output)
        self.assertIn(f"slurm: job {job} (physicist, a job daqrun did not allocate: left "
                      f"running)", r.output)
        self.assertIn("equations: 21 of 21 balanced", r.output)
        self.assertIn("PASS refbuild", r.output)
        # salloc, not daqrun, ends the job once its command is over.
        self.assertIn(f"Relinquishing job allocation {job}", r.output)
        self.assertQueueEmpty()
        self.h.assert_clean(settle_s=10)

    def test_an_sbatch_script(self) -> None:
        """The batch script runs on the job's first node and daqrun in it: the
        daemons are steps of the batch job, and the script goes on after."""
        out = self.h.dir / "batch"
        log = self.h.dir / "batch.out"
        daqrun = shlex.join([sys.executable, str(REPO / "deploy" / "daqrun"), str(THREE),
                             "--out", str(out), "--bin", str(self.h.bin), "--quiet",
                             "--timeout", "150", "--backend", "slurm",
                             *[a for s in SMALL for a in ("--set", s)]])
        r = self.h.run("sbatch", ["sbatch", "--wait", "--parsable", "-N3", "--exclusive", "-J",
                                  "nightly", "-o", log, "--wrap",
                                  f"{daqrun}; echo after daqrun: $?"], 180, env=self.env)
        self.assertEqual(r.returncode, 0, r.describe() + log.read_text(errors="replace"))
        job = r.output.split()[0]
        text = log.read_text(errors="replace")
        self.assertIn(f"slurm: job {job} (nightly, a job daqrun did not allocate", text)
        self.assertIn("PASS refbuild", text)
        self.assertIn("after daqrun: 0", text)
        self.assertTrue(all(s["step"].startswith(f"{job}.") for s in
                            json.loads((out / "params.json").read_text())["backend_info"]
                            ["steps"].values()))
        self.assertQueueEmpty()
        self.h.assert_clean(settle_s=10)

    def test_a_job_given_by_id_is_left_running(self) -> None:
        self.slurm("salloc", "--no-shell", "-N3", "--exclusive", "-J", "held")
        job = self.slurm("squeue", "-h", "-n", "held", "-o", "%i").strip()
        try:
            r = self.daqrun(f'slurm.allocation="{job}"', args=["--runs", "2"])
            self.assertEqual(r.returncode, 0, r.describe())
            self.assertEqual(r.params()["backend_info"]["job_id"], job)
            self.assertIn("2 of 2 runs on the same 7 processes", r.output)
            self.assertEqual(self.slurm("squeue", "-h", "-j", job, "-o", "%T").split(),
                             ["RUNNING"])
            steps = [line for line in self.slurm("squeue", "-h", "-s", "-j", job,
                                                 "-o", "%i %j").splitlines()
                     if not line.split()[0].endswith((".extern", ".batch"))]
            self.assertEqual(steps, [], "daqrun's steps left in the job")
        finally:
            self.slurm("scancel", job)
        self.assertQueueEmpty()
        self.h.assert_clean(settle_s=10)

    def test_a_job_that_cannot_hold_the_topology(self) -> None:
        r = self.in_a_job("small", 2)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertRegex(r.output, r"Slurm job \d+ has 2 node\(s\) \([a-z0-9]+, [a-z0-9]+\); "
                                   r"the topology's 3 hosts need 3: ask for more \(salloc -N3\)")
        self.assertNotIn("builder-0 pid", r.output)
        for sets, rc, message in (
                (['slurm.allocation="999999"'], 1, "Slurm job 999999 ([slurm] allocation, or "
                                                   "$SLURM_JOB_ID) is not in squeue"),
                (["slurm.allocation=maybe"], 2, "[slurm] allocation: 'maybe' is not \"auto\", "
                                                "\"new\" or a job ID")):
            with self.subTest(sets=sets):
                r = self.daqrun(*sets, timeout_s=60)
                self.assertEqual(r.returncode, rc, r.describe())
                self.assertIn(message, r.output)
        self.assertQueueEmpty()
        self.h.assert_clean()

    def test_bad_inputs_are_named_before_any_daemon(self) -> None:
        cases = [
            (["hosts.readout1.slurm_node=nosuchnode"],
             "[hosts.readout1] slurm_node nosuchnode: no such node in the cluster"),
            (["hosts.readout1.bin=/nonexistent"],
             "node readout1: /nonexistent/builderd, /nonexistent/readoutd, "
             "/nonexistent/sourced not found or not executable there"),
            (["slurm.partition=nosuch"], "salloc exited with status 1 without an allocation"),
            (["slurm.salloc_options=[\"--nodes=9\"]"],
             "can never start as asked: squeue says PENDING PartitionConfig"),
        ]
        for sets, message in cases:
            with self.subTest(sets=sets):
                r = self.daqrun(*sets, timeout_s=120)
                self.assertEqual(r.returncode, 1, r.describe())
                self.assertIn(message, r.output)
                self.assertNotIn("builder-0 pid", r.output)
                self.assertQueueEmpty()
        self.h.assert_clean()

    def test_pending_allocation_gives_up_and_leaves_no_job(self) -> None:
        # Another job holds the builder node: ours stays pending.
        self.slurm("salloc", "--no-shell", "--exclusive", "-J", "holder", "-w", "builder")
        try:
            r = self.daqrun("slurm.allocate_timeout_s=3", timeout_s=120)
            self.assertEqual(r.returncode, 1, r.describe())
            self.assertRegex(r.output, r"no allocation after 3 s \(\[slurm\] allocate_timeout_s\):"
                                       r" job \d+ still pending \(PENDING")
            names = [line.split()[1] for line in self.queue()]
            self.assertEqual(names, ["holder"])
        finally:
            self.slurm("scancel", "-n", "holder")
        self.assertQueueEmpty()

    def test_cleanup_cancels_an_orphaned_allocation(self) -> None:
        here = socket.gethostname().split(".")[0]
        self.slurm("salloc", "--no-shell", "-N1", "-J", f"esdq999999-daqrun-{here}")
        self.slurm("salloc", "--no-shell", "-N1", "-J", "someone-else")
        try:
            # Only that (long gone) launcher's:
            # others' leftovers are theirs, and a suite's beside this one.
            r = self.h.run("cleanup", [str(REPO / "deploy" / "daqrun"), "--cleanup", "999999"],
                           60, env=self.env)
            self.assertEqual(r.returncode, 0, r.describe())
            self.assertRegex(r.output, rf"removed Slurm job \d+ \(esdq999999-daqrun-{here}\)")
            names = [line.split()[1] for line in self.queue()]
            self.assertEqual(names, ["someone-else"])
        finally:
            self.slurm("scancel", "-n", "someone-else")
        self.assertQueueEmpty()
