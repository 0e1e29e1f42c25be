"""deploy/daqrun and the harness itself, driven with the stand-in daemons
of tests/e2e/fake (which honour the command lines and port files but not
the protocol): topology errors, start-up failures, timeouts, interruption,
and that nothing is ever left running or listening."""

from __future__ import annotations

import inspect
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

from harness import DAQRUN, REPO, E2ETestCase, HarnessError, read_json, topology

from daqlib import cli, doctables
from daqlib.backends import BACKENDS, register
from daqlib.backends.local import LocalBackend
from daqlib.schema import Key

FAKE_BIN = Path(__file__).resolve().parent / "fake"


class LauncherTest(E2ETestCase):
    def setUp(self) -> None:
        super().setUp()
        self.h.bin = FAKE_BIN
        self.topo = topology(events=2000, payload=64, rate=0)

    def daqrun(self, *args: str, env: dict | None = None, timeout_s: float = 60, **kw):
        return self.h.daqrun(self.topo, args=args, env=env, timeout_s=timeout_s, **kw)

    def test_run_passes_and_leaves_nothing(self) -> None:
        r = self.daqrun()
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertRegex(r.output, r"builder-0 pid \d+: data 127\.0\.0\.1:\d+, control")
        self.assertIn("fake builderd: run 1", r.output)     # builderd's summary
        params = r.params()
        self.assertEqual(params["run"]["sources"], 4)
        self.assertEqual(len(params["processes"]), 7)
        self.assertTrue(all(p["status"] == 0 for p in params["processes"]), params)
        self.assertEqual(set(params["ports"]), {"builder-0", "reader-0", "reader-1"})
        for name in ("builder-0", "reader-0", "reader-1", "source-3"):
            self.assertTrue((r.run_dir / "logs" / f"{name}.log").exists(), name)
        self.assertTrue(self.h.ports, "no ports recorded from params.json")
        self.h.assert_clean()

    def test_out_dir_reused(self) -> None:
        out = self.h.dir / "reused"
        out.mkdir()
        (out / "events.jsonl").write_text('{"event": 999999, "crc": 1}\n')
        self.assertRunOk(self.daqrun(out=out))
        self.assertRunOk(self.daqrun(out=out))
        self.h.assert_clean()

    def test_timeout_stops_everything(self) -> None:
        r = self.daqrun("--timeout", "3", env={"ES_FAKE_HANG": "builderd"})
        self.assertEqual(r.returncode, 124, r.describe())
        self.assertIn("timeout after 3 s", r.output)
        procs = r.params()["processes"]
        # Stopped by SIGTERM (a daemon's cue to drain), not SIGKILL.
        self.assertTrue(all(p["killed"] and p["status"] == -signal.SIGTERM for p in procs),
                        procs)
        self.h.assert_clean()

    def test_timeout_escalates_to_sigkill(self) -> None:
        r = self.daqrun("--timeout", "3",
                        env={"ES_FAKE_HANG": "sourced", "ES_FAKE_IGNORE_TERM": "1"})
        self.assertEqual(r.returncode, 124, r.describe())
        statuses = {p["name"]: p["status"] for p in r.params()["processes"]}
        self.assertEqual(statuses["source-0"], -signal.SIGKILL, statuses)
        self.h.assert_clean()

    def test_interrupt_stops_everything(self) -> None:
        topo = self.h.write_topology(self.topo)
        out = self.h.dir / "interrupted"
        p = self.h.start("daqrun-int", [sys.executable, DAQRUN, topo, "--out", out,
                                        "--bin", FAKE_BIN, "--timeout", "60"],
                         env={"ES_FAKE_HANG": "builderd"})
        deadline = time.monotonic() + 20
        while True:     # wait until every daemon runs
            try:
                if len(read_json(out / "params.json").get("processes", [])) == 7:
                    break
            except HarnessError:
                pass
            self.assertLess(time.monotonic(), deadline, p.tail())
            time.sleep(0.05)
        for pr in read_json(out / "params.json")["ports"].values():
            self.h.ports.update(pr.values())
        os.kill(p.pid, signal.SIGINT)
        self.assertEqual(self.h.wait(p, 20), 130, p.tail())
        self.assertIn("interrupted (SIGINT)", p.log())
        self.h.assert_clean()

    def test_daemon_failing_at_start(self) -> None:
        r = self.daqrun(env={"ES_FAKE_FAIL": "readoutd"})
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("reader-0 exited with status 3 before writing its port file", r.output)
        self.assertIn("failing on purpose", r.output)      # the log tail
        self.h.assert_clean()

    def test_refbuild_skipped_when_timing_decides(self) -> None:
        r = self.daqrun("--set", "delay_every=5", "--set", "delay_ms=10")
        self.assertRunOk(r)
        self.assertIn("refbuild skipped: delay faults", r.output)
        self.assertFalse(r.params()["refbuild"]["deterministic"])

    def test_topology_errors_name_the_key(self) -> None:
        cases = [
            (["--set", "run.evnts=5"], "unknown key 'evnts' in [run]"),
            (["--set", "events=-1"], "[run] events"),
            (["--set", "payload=\"big\""], "[run] payload: expected an integer"),
            (["--set", "reader.1.sources=[3]"], "missing [2]"),
            (["--set", "reader.1.sources=[1, 2, 3]"],
             "source 1 is listed by reader 0 and reader 1"),
            (["--set", "reader.9.port=1"], "no [[reader]] with id 9"),
            (["--set", "deploy.backend=\"ssh\""], "[deploy] backend"),
            (["--set", "delay_every=3"], "[run] delay_ms"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.daqrun(*args)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(message, r.output)
        bad = self.h.path("bad.toml")
        bad.write_text("[run]\nevents = 10\n[[reader]]\nid = 0\n")
        r = self.h.run("daqrun-bad", [sys.executable, DAQRUN, bad, "--out", self.h.dir / "x",
                                      "--bin", FAKE_BIN], 30)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("[[reader]] #1: missing key 'sources'", r.output)

    def test_missing_binaries(self) -> None:
        empty = self.h.dir / "emptybin"
        empty.mkdir()
        r = self.daqrun("--bin", str(empty))
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("builderd, readoutd, sourced not found", r.output)

    def test_help(self) -> None:
        r = self.h.run("daqrun-help", [sys.executable, DAQRUN, "--help"], 30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("--set KEY=VALUE", r.output)


DEMO_BACKEND = '''
import sys
sys.path.insert(0, sys.argv.pop(1))
from daqlib.backends import register
from daqlib.backends.local import LocalBackend
from daqlib.schema import Key, TopologyError


@register("demo")
class DemoBackend(LocalBackend):
    """A backend with an option, a host key and a check, declared here only."""
    needs_hosts = True
    options_title = "a backend of the tests"
    options = {"label": Key("str", "plain", doc="a label for params.json")}
    host_keys = {"demo_slot": Key("int", None, 0, 7, "a slot")}

    @classmethod
    def validate(cls, where, hosts, options):
        for name, h in hosts.items():
            if h["demo_slot"] is None:
                raise TopologyError(f"{where} [hosts.{name}] demo_slot: the demo backend "
                                    f"needs one")

    def describe(self):
        return dict(super().describe(), label=self.options["label"],
                    slots={h: s.demo_slot for h, s in self.hosts.items()})


from daqlib.cli import main
sys.exit(main())
'''


class DeclarationsTest(E2ETestCase):
    """Each launcher option and topology key declared once: the docs'
    tables and --help come from the declarations, and a backend brings
    its own keys and checks without any other change."""

    def test_docs_tables_match_declarations(self) -> None:
        self.assertEqual(doctables.differences(), [])
        # The comparison sees a table edited by hand.
        text = (doctables.DOCS / "TOPOLOGY.md").read_text()
        row = "| `grace_s` | number 0 … 3600 | `15` |"
        self.assertIn(row, text)
        edited = text.replace(row, "| `grace_s` | number 0 … 3600 | `20` |")
        self.assertNotEqual(doctables.render(edited, doctables.tables()), edited)

    def test_help_lists_every_declared_option(self) -> None:
        r = self.h.run("daqrun-help", [sys.executable, DAQRUN, "--help"], 30)
        self.assertEqual(r.returncode, 0)
        for o in cli.OPTIONS:
            with self.subTest(option=o.flag):
                shown = o.metavar if not o.flag.startswith("-") else \
                    f"{o.flag} [{o.metavar} ...]" if o.kind == "pids" else \
                    f"{o.flag} {{{','.join(o.choices)}}}" if o.choices else \
                    f"{o.flag} {o.metavar}" if o.metavar else o.flag
                self.assertIn(shown, r.output)
        flags = {a for act in cli.build_parser()._actions for a in act.option_strings}
        self.assertEqual(flags - {"-h", "--help"}, {o.flag for o in cli.OPTIONS[1:]})

    def demo(self, *sets: str) -> tuple:
        script = self.h.path("daqrun-demo.py")
        script.write_text(DEMO_BACKEND)
        topo = topology(events=2000, payload=64, rate=0)
        topo["builder"]["host"] = "node"
        for r in topo["reader"]:
            r["host"] = "node"
        path = self.h.write_topology(topo, "demo.toml")
        path.write_text(path.read_text() + '\n[hosts.node]\naddress = "127.0.0.1"\n')
        out = self.h.dir / f"demo-{len(sets)}"
        argv = [sys.executable, script, str(Path(DAQRUN).parent), path, "--out", out,
                "--bin", FAKE_BIN, "--timeout", "40", "--backend", "demo"]
        for s in sets:
            argv += ["--set", s]
        return self.h.run(f"daqrun-demo-{len(sets)}", argv, 60), out

    def test_a_backend_declares_its_own_keys(self) -> None:
        r, out = self.demo("hosts.node.demo_slot=3", "demo.label=\"blue\"")
        self.assertEqual(r.returncode, 0, r.describe())
        params = read_json(out / "params.json")
        self.assertEqual(params["backend"], "demo")
        self.assertEqual(params["backend_info"]["label"], "blue")
        self.assertEqual(params["backend_info"]["slots"], {"node": 3})
        self.assertEqual(params["topology"]["demo"], {"label": "blue"})
        for sets, message in (((), "[hosts.node] demo_slot: the demo backend needs one"),
                              (("hosts.node.demo_slot=9",), "demo_slot: expected an integer "
                                                            "in 0..7, got 9"),
                              (("hosts.node.demo_slot=1", "demo.colour=1"),
                               "unknown key 'colour' in [demo] (known: label)")):
            with self.subTest(sets=sets):
                r, _ = self.demo(*sets)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(message, r.output)

    def test_deploy_md_names_every_backend_method(self) -> None:
        """The table of DEPLOY.md's "The backend interface" lists exactly the
        methods of base.Backend a backend writes or overrides."""
        from daqlib.backends.base import Backend
        doc = (REPO / "docs" / "DEPLOY.md").read_text()
        section = doc.split("## The backend interface", 1)[1].split("\n## ", 1)[0]
        rows = [ln.split("|")[1] for ln in section.splitlines()
                if ln.startswith("| `")]
        documented = {m for cell in rows for m in re.findall(r"`(\w+)\(", cell)}
        methods = {n for n, f in inspect.getmembers(Backend, callable)
                   if not inspect.isclass(f) and (not n.startswith("_") or n == "__init__")}
        self.assertEqual(documented, methods)

    def test_a_registered_backend_gets_its_docs_table(self) -> None:
        @register("demo")
        class Demo(LocalBackend):
            options_title = "a backend of the tests"
            options = {"label": Key("str", "plain", doc="a label")}
        try:
            made = doctables.tables()["backends"]
            self.assertIn("### `[demo]` (optional): a backend of the tests", made)
            self.assertIn("| `label` | string | `\"plain\"` | a label |", made)
            self.assertNotEqual(doctables.differences(), [])
        finally:
            del BACKENDS["demo"]
        self.assertEqual(doctables.differences(), [])


class HarnessSelfTest(E2ETestCase):
    def test_detects_leftover_process(self) -> None:
        p = self.h.start("sleeper", ["sleep", "60"])
        self.assertIn(p.pid, [pid for pid, _ in self.h.leftovers()])
        with self.assertRaises(HarnessError):
            self.h.assert_clean(settle_s=0.2)
        self.h.stop(p)
        self.h.assert_clean()

    def test_detects_grandchild_by_tag(self) -> None:
        # A child that escapes into a session of its own, as daqrun's daemons do.
        p = self.h.start("spawner", [sys.executable, "-c",
                                     "import subprocess,sys; p = subprocess.Popen(['sleep', '60'],"
                                     " start_new_session=True); print(p.pid, flush=True)"])
        self.assertEqual(self.h.wait(p, 10), 0)
        pid = int(p.log().split()[0])
        self.assertIn(pid, [x for x, _ in self.h.leftovers()])
        killed = self.h.close(keep=True)
        self.assertIn(pid, [x for x, _ in killed])
        self.h.assert_clean()

    def test_detects_listening_port(self) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        self.h.ports.add(s.getsockname()[1])
        with self.assertRaises(HarnessError):
            self.h.assert_clean(settle_s=0.2)
        s.close()
        self.h.assert_clean()

    def test_wait_times_out(self) -> None:
        p = self.h.start("sleeper", ["sleep", "60"])
        t0 = time.monotonic()
        with self.assertRaises(HarnessError):
            self.h.wait(p, 0.5)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertIsNotNone(p.returncode)

    def test_port_file_wait_fails_fast_on_exit(self) -> None:
        p = self.h.start("quitter", ["sh", "-c", "echo bye >&2; exit 4"])
        with self.assertRaises(HarnessError) as cm:
            self.h.wait_port_file(self.h.dir / "never.port", ("data",), 10, p)
        self.assertIn("exited 4", str(cm.exception))
