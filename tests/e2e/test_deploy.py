"""Deployment across hosts (docs/DEPLOY.md): topologies with [hosts],
transports that follow placement, the virtual cluster of network
namespaces (netns backend), teardown after success, failure and a killed
launcher (deploy/daqrun --cleanup), analysis/compare.py on a multi-host
run, and `make install` into a staging directory.

The netns tests need root and `ip netns` (skipped with the reason
otherwise). They only ever use 198.18.0.0/24 inside namespaces the
launcher creates for the test and removes afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import DAQRUN, REPO, E2ETestCase, HarnessError, read_json, topology

from daqlib import topology as daqrun

FAKE_BIN = Path(__file__).resolve().parent / "fake"
TOPOLOGIES = REPO / "deploy" / "topologies"
COMPARE = REPO / "analysis" / "compare.py"
SYSTEM_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable




def sh(*argv: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=check)


def netns_names() -> list[str]:
    return [line.split()[0] for line in sh("ip", "netns", "list").stdout.splitlines()
            if line.strip()]


def netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (creates network namespaces, veth pairs, tc qdiscs, chronyd)"
    for tool in ("ip", "tc", "chronyd", "chronyc", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} not found (scripts/deps.sh installs it)"
    r = sh("ip", "netns", "list")
    if r.returncode != 0:
        return f"ip netns unavailable: {r.stderr.strip()}"
    return None


def launcher_pid(params: dict) -> int:
    """The launcher's pid, from its namespace names (esdq<pid>-...)."""
    sw = params["backend_info"]["switch_namespace"]
    return int(re.match(r"esdq(\d+)-", sw).group(1))


class TopologyHostsTest(E2ETestCase):
    """[hosts], placement and transports; no root, no daemons."""

    def load(self, path: Path, *sets: str):
        return daqrun.load_topology(str(path), list(sets))

    def test_shipped_topologies(self) -> None:
        one = self.load(TOPOLOGIES / "one-host.toml")
        three = self.load(TOPOLOGIES / "three-hosts.toml")
        seven = self.load(TOPOLOGIES / "host-per-daemon.toml")
        self.assertEqual(list(one.hosts), ["node"])
        self.assertEqual([r["transport"] for r in one.readers], ["shm", "shm"])
        self.assertEqual(three.deploy["backend"], "netns")
        self.assertEqual(list(three.hosts), ["builder", "readout0", "readout1"])
        self.assertEqual([r["transport"] for r in three.readers], ["tcp", "tcp"])
        self.assertEqual([three.source_host(s) for s in range(4)],
                         ["readout0", "readout0", "readout1", "readout1"])
        self.assertEqual(len(seven.hosts), 7)
        self.assertEqual(len(set(seven.used_hosts())), 7)
        # Same run parameters, so that make compare compares like with like.
        self.assertEqual(one.run, three.run)
        self.assertEqual(one.run, seven.run)
        # One host under netns: still shared memory; moving a reader to the
        # builder's host makes its transport shm.
        mixed = self.load(TOPOLOGIES / "three-hosts.toml", "reader.1.host=builder")
        self.assertEqual([r["transport"] for r in mixed.readers], ["tcp", "shm"])

    def test_host_errors_name_the_key(self) -> None:
        three = TOPOLOGIES / "three-hosts.toml"
        local = REPO / "deploy" / "topologies" / "local.toml"
        cases = [
            ((three, "reader.0.host=nowhere"), "[[reader]] id 0 host: 'nowhere' is not a host"),
            ((three, "builder.host=elsewhere"), "[builder] host: 'elsewhere' is not a host"),
            ((three, "source.2.host=x"), "[[source]] id 2 host: 'x' is not a host"),
            ((three, "hosts.builder.netns_address=10.1.2.3"),
             "netns_address: 10.1.2.3 is not a host address of 198.18.0.0/24"),
            ((three, "hosts.builder.netns_address=198.18.0.5",
              "hosts.readout0.netns_address=198.18.0.5"), "is also builder's"),
            ((three, "hosts.readout0.bogus=1"), "unknown key 'bogus' in [hosts.NAME]"),
            ((three, "netns.shaping=1"), "[netns] shaping: expected a non-empty string"),
            ((three, "reader.1.transport=shm"), "\"shm\" needs the builder's host"),
            ((local, "deploy.backend=netns"), "[deploy] backend 'netns' needs the hosts"),
            ((local, "deploy.backend=ssh"), "[deploy] backend 'ssh' needs the hosts"),
            ((local, "deploy.backend=slurm"), "[deploy] backend 'slurm' needs the hosts"),
            ((local, "deploy.backend=kubernetes"), "'kubernetes' is not implemented"),
            ((three, "deploy.backend=slurm", "hosts.builder.slurm_node=a b"),
             "slurm_node: 'a b' is not a Slurm node name"),
            ((three, "deploy.backend=slurm", "slurm.partition=a b"),
             "[slurm] partition: 'a b' has white space"),
        ]
        for (path, *sets), message in cases:
            with self.subTest(sets=sets):
                with self.assertRaises(daqrun.TopologyError) as cm:
                    self.load(path, *sets)
                self.assertIn(message, str(cm.exception))
        bad = self.h.path("bad.toml")
        bad.write_text('[hosts."a b"]\n[[reader]]\nid = 0\nsources = [0]\n')
        with self.assertRaises(daqrun.TopologyError) as cm:
            self.load(bad)
        self.assertIn("a host name is", str(cm.exception))
        two = self.h.path("two.toml")
        two.write_text('[hosts.a]\n[hosts.b]\n[[reader]]\nid = 0\nsources = [0]\nhost = "a"\n')
        with self.assertRaises(daqrun.TopologyError) as cm:
            self.load(two)
        self.assertIn("[builder]: missing key 'host' (one of the [hosts]: a, b)",
                      str(cm.exception))

    def test_three_hosts_on_loopback_with_fakes(self) -> None:
        """The three-host placement on the local backend: every host at
        127.0.0.1, readers on TCP, the plumbing checked with stand-ins."""
        self.h.bin = FAKE_BIN
        r = self.h.daqrun(TOPOLOGIES / "three-hosts.toml", timeout_s=60,
                          args=["--backend", "local"],
                          sets=["events=2000", "rate=0", "payload=64"])
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertRegex(r.output, r"reader-1 pid \d+ on readout1: data 127\.0\.0\.1:\d+, "
                                   r"sources 2,3, to the builder over tcp")
        p = r.params()
        self.assertEqual(p["backend"], "local")
        self.assertEqual(p["hosts"]["readout0"]["daemons"], ["reader-0", "source-0", "source-1"])
        self.assertEqual(p["hosts"]["builder"]["daemons"], ["builder-0"])
        argv = {x["name"]: x["argv"] for x in p["processes"]}
        self.assertIn("tcp://127.0.0.1:", " ".join(argv["reader-0"]))
        self.h.assert_clean()


class NetnsDeployTest(E2ETestCase):
    """The virtual cluster, with the real daemons."""
    needs_daemons = True

    def setUp(self) -> None:
        why = netns_unavailable()
        if why:
            self.skipTest(why)
        super().setUp()

    def assert_no_leftovers(self, pid: int) -> None:
        """No namespace, veth, chrony directory, process or shm segment of
        launcher pid."""
        tag = f"esdq{pid}"
        deadline = time.monotonic() + 5
        while True:
            left = [n for n in netns_names() if n.startswith(tag + "-")]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(left, [], "network namespaces left behind")
        links = sh("ip", "-o", "link", "show").stdout
        self.assertNotIn(tag, links, "a link of the run in the machine's namespace")
        self.assertEqual(sorted(Path("/tmp").glob(f"{tag}-*")), [])
        self.assertEqual(sorted(Path("/dev/shm").glob(f"es-daq{pid}-*")), [])
        self.h.assert_clean()

    def test_three_hosts_balance_match_and_clocks(self) -> None:
        r = self.h.daqrun(TOPOLOGIES / "three-hosts.toml", timeout_s=150,
                          sets=["events=20000", "netns.shaping=1gbit"])
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        m = self.assertBalanced(r)
        p = r.params()
        info = p["backend_info"]
        self.assertEqual({h: x["address"] for h, x in info["hosts"].items()},
                         {"builder": "198.18.0.1", "readout0": "198.18.0.2",
                          "readout1": "198.18.0.3"})
        self.assertTrue(all(x["shaping"] == "1gbit" for x in info["hosts"].values()), info)
        self.assertIn("tbf shaping", r.output)
        # The progress line reads the builder's /status inside its namespace.
        self.assertRegex(r.output, r"daqrun: \d+\.\d% complete, \d+ built \(\d+/s\)")
        links = {x["id"]: x for x in m["reader_links"]}
        self.assertEqual({i: x["transport"] for i, x in links.items()}, {0: "tcp", 1: "tcp"})
        self.assertTrue(links[0]["address"].startswith("198.18.0.2:"), links)

        # Per-host chrony bounds: the builder's chronyd serves, the others follow.
        clocks = m["clocks"]
        self.assertEqual(clocks["builder"]["host"], "builder")
        for phase in ("chrony_start", "chrony_end"):
            c = clocks["builder"][phase]
            self.assertTrue(c["available"] and c["synchronised"], c)
            self.assertEqual(c["stratum"], 8, c)
            self.assertIsInstance(c["bound_ns"], int, c)
        hosts_seen = set()
        for peer in clocks["peers"]:
            name = peer["peer"]
            expect = "readout0" if name in ("source.0", "source.1", "reader.0") else "readout1"
            self.assertEqual(peer["host"], expect, peer)
            hosts_seen.add(peer["host"])
            self.assertFalse(peer["same_clock"], peer)
            for phase in ("chrony_start", "chrony_end"):
                c = peer[phase]
                self.assertTrue(c["available"] and c["synchronised"], f"{name} {phase}: {c}")
                self.assertEqual(c["stratum"], 9, c)
                self.assertIsInstance(c["bound_ns"], int, c)
            self.assertIsInstance(peer["chrony_pair_bound_ns"], int, peer)
            # One kernel clock underneath: the in-band estimate must find ~0.
            inband = peer["inband"]
            self.assertLessEqual(abs(inband["offset_ns"]), inband["bound_ns"], peer)
        self.assertEqual(hosts_seen, {"readout0", "readout1"})
        lat = m["latency"]
        self.assertEqual(lat["uncertainty_basis"], "clock offsets applied (in band, intersected with chrony's bound where both are known)", lat)
        self.assertIsInstance(lat["uncertainty_ns"], int)
        print(f"\n  3 hosts, tbf 1gbit: latency p50 {lat['p50_ns'] / 1e3:.0f} us, p99 "
              f"{lat['p99_ns'] / 1e3:.0f} us +/- {lat['uncertainty_ns'] / 1e3:.1f} us; chrony "
              f"bounds " + ", ".join(f"{x['peer']} {x['chrony_end']['bound_ns']} ns"
                                     for x in clocks["peers"]), flush=True)
        self.assert_no_leftovers(launcher_pid(p))

        # The comparison reads it (and an older metrics.json without clocks).
        old = self.h.path("old", "metrics.json")
        trimmed = dict(m)
        trimmed.pop("clocks")
        trimmed["latency"] = {k: v for k, v in m["latency"].items()
                              if k not in ("with_uncertainty", "uncertainty_ns")}
        old.write_text(json.dumps(trimmed))
        out = self.h.dir / "compare"
        c = self.h.run("compare", [SYSTEM_PYTHON, COMPARE, r.run_dir, old.parent, "--out", out],
                       60)
        self.assertEqual(c.returncode, 0, c.describe())
        table = (out / "compare.md").read_text()
        self.assertIn("three-hosts (netns, tbf 1gbit)", table)
        self.assertRegex(table, r"latency p99 \| [\d.]+ [mu]?s ± [\d.]+ [nmu]?s \| [\d.]+ [mu]?s"
                                r" ± n/a")
        self.assertRegex(table, r"\| readout0 \| source\.0, source\.1, reader\.0 \| [\d.]+ [nu]s "
                                r"\(stratum 9\)")
        self.assertIn("peak RSS builder 0", table)
        if "matplotlib" not in c.output:
            self.assertEqual((out / "latency.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
        # Repeats of one configuration share a column with --group.
        g = self.h.run("compare-group", [SYSTEM_PYTHON, COMPARE, r.run_dir, r.run_dir,
                                         "--group", "--no-plot"], 60)
        self.assertEqual(g.returncode, 0, g.describe())
        self.assertIn("three-hosts (netns, tbf 1gbit), 2 runs", g.output)
        self.assertRegex(g.output, r"latency p50 \| [\d.]+ [mu]?s ± [\d.]+ [nmu]?s \[")

    def test_failed_start_tears_down(self) -> None:
        r = self.h.daqrun(TOPOLOGIES / "three-hosts.toml", timeout_s=90,
                          sets=["events=1000", 'builder.extra=["--no-such-flag"]'])
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("builder-0 exited with status 2 before writing its port file", r.output)
        self.assert_no_leftovers(launcher_pid(r.params()))

    def test_killed_launcher_then_cleanup(self) -> None:
        topo = TOPOLOGIES / "three-hosts.toml"
        out = self.h.dir / "killed"
        p = self.h.start("daqrun-killed", [sys.executable, DAQRUN, topo, "--out", out,
                                           "--bin", self.h.bin, "--timeout", "120",
                                           "--set", "events=400000"])
        deadline = time.monotonic() + 60
        while True:     # until every daemon runs
            try:
                if len(read_json(out / "params.json").get("processes", [])) == 7:
                    break
            except HarnessError:
                pass
            if p.returncode is not None or time.monotonic() > deadline:
                self.fail(f"the run did not start:\n{p.tail(40)}")
            time.sleep(0.1)
        params = read_json(out / "params.json")
        pid = launcher_pid(params)
        self.assertEqual(pid, p.pid)
        os.kill(p.pid, signal.SIGKILL)
        p.popen.wait(timeout=10)
        # Its daemons and chronyds die with it (PDEATHSIG); its namespaces stay ...
        self.h.assert_clean(settle_s=10)
        left = [n for n in netns_names() if n.startswith(f"esdq{pid}-")]
        self.assertEqual(len(left), 4, left)
        # ... until --cleanup removes them: --cleanup PID, what this launcher
        # left (another test's leftovers, or a suite's beside this one, are
        # theirs to clean up and check).
        c = self.h.run("cleanup", [sys.executable, DAQRUN, "--cleanup", str(pid)], 60)
        self.assertEqual(c.returncode, 0, c.describe())
        self.assertIn(f"removed network namespace esdq{pid}-builder", c.output)
        self.assertIn(f"removed directory /tmp/esdq{pid}-chrony", c.output)
        self.assert_no_leftovers(pid)


UNITS = ("builderd", "readoutd", "sourced")
# The instance each unit is shown with: the hub, and peers by id.
INSTANCES = {"builderd": "hub", "readoutd": "0", "sourced": "0"}
# What makes each a service of many runs (docs/RUNCONTROL.md): the words
# ExecStart puts before the env file's $ARGS, from the env file's variables.
SERVING_FLAGS = {"builderd": ["--session-listen", "${SESSION_LISTEN}",
                              "--control-http", "${CONTROL_HTTP}"],
                 "readoutd": ["--session", "${HUB}"], "sourced": ["--session", "${HUB}"]}
# Units the templates name (DefaultDependencies, After=, Wants=, WantedBy=)
# that systemd-analyze verify --root must find in the staged root.
SYSTEM_TARGETS = ("sysinit.target", "basic.target", "shutdown.target", "multi-user.target",
                  "network-online.target", "time-sync.target")
MAX_EXPOSURE = 3.0
EXPOSURE_RE = re.compile(r"Overall exposure level for (\S+): (\d+\.\d) (\w+)")
ENV_EXAMPLES = ["builderd-hub", "readoutd-0", "readoutd-1",
                "sourced-0", "sourced-1", "sourced-2", "sourced-3"]


def unit_file(text: str):
    """A unit file's sections and keys (a key set twice keeps its last value)."""
    import configparser
    c = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                  comment_prefixes=("#", ";"))
    c.optionxform = str     # keys are case-sensitive
    c.read_string(text)
    return c


def env_file(path: Path) -> dict[str, str]:
    """An EnvironmentFile's KEY=VALUE assignments."""
    env = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            if not sep:
                raise AssertionError(f"{path}: not KEY=VALUE: {line!r}")
            env[key] = value
    return env


def exec_start(unit_text: str) -> list[str]:
    line = next(l for l in unit_text.splitlines() if l.startswith("ExecStart="))
    return line[len("ExecStart="):].split()


def expand(words: list[str], env: dict[str, str]) -> list[str]:
    """ExecStart's words as systemd expands them from the environment:
    ${VAR} one word, $VAR (unbraced) split on whitespace."""
    out = []
    for w in words:
        if m := re.fullmatch(r"\$\{(\w+)\}", w):
            out.append(env[m.group(1)])
        elif m := re.fullmatch(r"\$(\w+)", w):
            out += env[m.group(1)].split()
        else:
            out.append(w)
    return out


def free_port(host: str) -> int:
    import socket
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class InstallTest(E2ETestCase):
    needs_daemons = True

    def make_install(self, stage: Path) -> Path:
        if shutil.which("make") is None:
            self.skipTest("make not found")
        # -o all: the binaries already built (ES_BIN) are installed as they are.
        r = self.h.run("make-install", ["make", "-C", REPO, "-o", "all", "install",
                                        f"BIN={self.h.bin}", f"DESTDIR={stage}", "PREFIX=/usr"],
                       120)
        self.assertEqual(r.returncode, 0, r.describe())
        return stage / "usr"

    def test_make_install_into_destdir(self) -> None:
        root = self.make_install(self.h.dir / "stage")
        for d in UNITS:
            self.assertTrue(os.access(root / "bin" / d, os.X_OK), d)
            page = (root / "share" / "man" / "man1" / f"{d}.1").read_text()
            self.assertIn(f".TH {d.upper()} 1", page)
            self.assertIn("--run-key-file".replace("-", "\\-"), page)
            unit = (root / "lib" / "systemd" / "system" / f"{d}@.service").read_text()
            self.assertIn(f"ExecStart=/usr/bin/{d} --run-key-file %d/run.key "
                          f"{' '.join(SERVING_FLAGS[d])} $ARGS", unit)
            self.assertIn("LoadCredential=run.key:/etc/eventbuilder/run.key", unit)
            self.assertIn(f"EnvironmentFile=/etc/eventbuilder/{d}-%i.env", unit)
            for placeholder in ("@BINDIR@", "@DOCDIR@", "@DATADIR@"):
                self.assertNotIn(placeholder, unit)
            dropin = root / "lib" / "systemd" / "system" / f"{d}@.service.d" / "daq-network.conf"
            self.assertIn("IPAddressAllow=", dropin.read_text())
        for f in ("share/doc/eventbuilder/DEPLOY.md", "share/doc/eventbuilder/README.md",
                  "share/eventbuilder/chrony/builder-host.conf",
                  "share/eventbuilder/chrony/cluster-host.conf",
                  "share/eventbuilder/env/sourced-0.env.example",
                  "share/eventbuilder/env/builderd-hub.env.example",
                  "lib/sysusers.d/eventbuilder.conf"):
            self.assertTrue((root / f).is_file(), f)

    def test_units_are_notify_services(self) -> None:
        """Each template is a long-lived service (docs/RUNCONTROL.md,
        "systemd"): Type=notify from the daemon alone, restarted on a failure
        but not on a refused command line, started at boot, serving runs
        with the flags its env file's variables fill; every shipped env file
        sets them."""
        envs = {p.name.split(".")[0]: env_file(p)
                for p in sorted((REPO / "deploy" / "systemd" / "env").glob("*.env.example"))}
        self.assertEqual(sorted(envs), ENV_EXAMPLES)
        for d in UNITS:
            with self.subTest(unit=d):
                text = (REPO / "deploy" / "systemd" / f"{d}@.service").read_text()
                u = unit_file(text)
                s = u["Service"]
                self.assertEqual((s["Type"], s["NotifyAccess"], s["Restart"],
                                  s["RestartPreventExitStatus"], s["KillSignal"]),
                                 ("notify", "main", "on-failure", "2", "SIGTERM"))
                restart_s = float(re.fullmatch(r"(\d+(?:\.\d+)?)s", s["RestartSec"]).group(1))
                self.assertTrue(1 <= restart_s <= 60, s["RestartSec"])
                self.assertEqual(u["Install"]["WantedBy"], "multi-user.target")
                # Type=notify: the datagram goes over AF_UNIX, which the sandbox keeps.
                self.assertIn("AF_UNIX", s["RestrictAddressFamilies"].split())
                cmd = exec_start(text)
                self.assertEqual(cmd[:3], [f"@BINDIR@/{d}", "--run-key-file", "%d/run.key"])
                self.assertEqual(cmd[3:], SERVING_FLAGS[d] + ["$ARGS"])
                needed = {"ARGS"} | {w[2:-1] for w in cmd if w.startswith("${")}
                for name, env in envs.items():
                    if name.startswith(d + "-"):
                        self.assertEqual(needed - set(env), set(), f"{name}.env.example")
                        self.assertFalse(set(env) - needed, f"{name}: unused {set(env) - needed}")
        # Every peer joins the hub the example sets up.
        hub = envs["builderd-hub"]["SESSION_LISTEN"]
        for name, env in envs.items():
            if not name.startswith("builderd-"):
                self.assertEqual(env["HUB"], hub, name)

    def test_installed_units_verify_and_security(self) -> None:
        """The installed units as systemd reads them: verify finds nothing
        to say, and the offline security analysis rates each at most 3.0."""
        if shutil.which("systemd-analyze") is None:
            self.skipTest("systemd-analyze not found (scripts/deps.sh installs systemd)")
        stage = self.h.dir / "stage"
        unitdir = self.make_install(stage) / "lib" / "systemd" / "system"
        for target in SYSTEM_TARGETS:
            src = next((d / target for d in (Path("/usr/lib/systemd/system"),
                                             Path("/lib/systemd/system"))
                        if (d / target).is_file()), None)
            if src is None:
                self.skipTest(f"{target} not found on this host")
            shutil.copy(src, unitdir / target)
        for d in UNITS:
            unit = f"{d}@{INSTANCES[d]}.service"
            with self.subTest(unit=unit):
                # --root: ExecStart's /usr/bin/<daemon> and the drop-in are
                # looked up in the staged tree.
                v = self.h.run(f"verify-{d}", ["systemd-analyze", "verify", f"--root={stage}",
                                               unit], 60)
                self.assertEqual(v.returncode, 0, v.describe())
                self.assertEqual(v.output.strip(), "", v.describe())
                s = self.h.run(f"security-{d}", ["systemd-analyze", "security", "--offline=yes",
                                                 f"--root={stage}", "--no-pager", unit], 60)
                self.assertEqual(s.returncode, 0, s.describe())
                m = EXPOSURE_RE.search(s.output)
                self.assertIsNotNone(m, s.describe())
                self.assertEqual(m.group(1), unit)
                exposure = float(m.group(2))
                self.assertLessEqual(exposure, MAX_EXPOSURE, s.output)
                self.assertEqual(m.group(3), "OK", s.output)
                # What is left is what the daemons use: the network and local sockets.
                for needed in ("PrivateNetwork=", "RestrictAddressFamilies=~AF_(INET|INET6)"):
                    self.assertRegex(s.output, rf"✗ {re.escape(needed)}\s")
                for gone in ("SystemCallFilter=~@privileged", "CapabilityBoundingSet=~CAP_SYS_ADMIN",
                             "PrivateDevices=", "UMask=.*world-readable"):
                    self.assertNotRegex(s.output, rf"✗ {gone}")
                print(f"\n  {unit}: exposure {exposure}", file=sys.stderr)
        # The threshold flag agrees: above 3.0 fails.
        s = self.h.run("security-threshold", ["systemd-analyze", "security", "--offline=yes",
                                              f"--root={stage}", "--threshold=30", "--no-pager",
                                              *(f"{d}@{INSTANCES[d]}.service" for d in UNITS)],
                       60)
        self.assertEqual(s.returncode, 0, s.describe())

    def test_example_env_files_peers_serve(self) -> None:
        """The shipped env examples with the units' ExecStart: refused
        without the key the unit passes, and with it (the DAQ addresses
        10.0.0.N moved to loopback 127.0.0.N, free ports) every peer joins
        the hub's session port, played by this test, and tells the service
        manager's socket (one for all, as systemd's, also this test's)
        READY=1 from its own pid; at shutdown STOPPING=1, and exit 0."""
        import ipaddress
        import socket
        import tempfile
        from fakesource import Link, message, read_message
        envdir = REPO / "deploy" / "systemd" / "env"
        examples = {p.name.split(".")[0]: p for p in sorted(envdir.glob("*.env.example"))}
        self.assertEqual(sorted(examples), ENV_EXAMPLES)
        argv: dict[str, list[str]] = {}
        for name, path in examples.items():
            daemon = name.split("-")[0]
            cmd = exec_start((REPO / "deploy" / "systemd" / f"{daemon}@.service").read_text())
            argv[name] = [str(self.h.bin / daemon)] + expand(cmd[1:], env_file(path))
        # Every DAQ address the examples use is one the units let them reach.
        dropin = (REPO / "deploy" / "systemd" / "daq-network.conf").read_text()
        allowed = [ipaddress.ip_network(n) for line in dropin.splitlines()
                   if line.startswith("IPAddressAllow=") for n in line.split("=", 1)[1].split()]
        hostports = sorted({m for a in argv.values() for m in
                            re.findall(r"\b(10\.0\.0\.\d+):(\d+)\b", " ".join(a))})
        self.assertIn(("10.0.0.3", "7191"), hostports)     # the session port
        for host, _ in hostports:
            self.assertTrue(any(ipaddress.ip_address(host) in n for n in allowed),
                            f"{host} is outside the drop-in's IPAddressAllow {allowed}")

        # Without the key the unit adds, the examples are what issue 13
        # found (refused at the command line, before any socket).
        bare = self.h.run("reader-no-key", [a for a in argv["readoutd-0"]
                                            if a not in ("--run-key-file", "%d/run.key")], 30)
        self.assertEqual(bare.returncode, 2, bare.describe())
        self.assertIn("is not a loopback address", bare.output)

        creds = self.h.dir / "credentials"
        creds.mkdir(mode=0o700)
        key = creds / "run.key"
        # The key made as docs/DEPLOY.md tells an operator to make it.
        doc = (REPO / "docs" / "DEPLOY.md").read_text()
        make_key = next(l for l in doc.splitlines() if l.startswith("(umask 077; od "))
        mk = self.h.run("make-key", ["sh", "-c", make_key.replace("/etc/eventbuilder/run.key",
                                                                  str(key))], 30)
        self.assertEqual(mk.returncode, 0, mk.describe())
        self.assertEqual(key.stat().st_mode & 0o077, 0)
        self.assertRegex(key.read_text(), r"^[0-9a-f]{64}\n$")
        mapping = {f"{h}:{p}": f"127.0.0.{h.split('.')[-1]}:{free_port('127.0.0.' + h.split('.')[-1])}"
                   for h, p in hostports}

        def concrete(words: list[str]) -> list[str]:
            text = " ".join(words).replace("%d", str(creds))
            return re.sub(r"\b10\.0\.0\.\d+:\d+\b", lambda m: mapping[m.group(0)], text).split()

        hub_host, hub_port = mapping["10.0.0.3:7191"].split(":")
        hub = socket.socket()
        self.addCleanup(hub.close)
        hub.bind((hub_host, int(hub_port)))
        hub.listen(8)
        hub.settimeout(15)
        notify_dir = tempfile.mkdtemp(prefix="es-notify-")     # sun_path is short
        notify_path = os.path.join(notify_dir, "notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        notify.settimeout(15)
        self.addCleanup(shutil.rmtree, notify_dir, True)
        self.addCleanup(notify.close)

        def notification() -> tuple[str, int]:
            data, anc, _, _ = notify.recvmsg(4096, socket.CMSG_SPACE(12))
            pid = next(int.from_bytes(d[:4], sys.byteorder, signed=True)
                       for level, kind, d in anc
                       if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS)
            return data.decode(), pid

        peers = {name: self.h.start(name, concrete(a), env={"NOTIFY_SOCKET": notify_path})
                 for name, a in argv.items() if not name.startswith("builderd-")}
        links = {}
        for _ in peers:
            conn, _ = hub.accept()
            conn.settimeout(15)
            self.addCleanup(conn.close)
            conn.sendall(message({"type": "challenge", "nonce": "ab" * 32}))
            hello = read_message(conn)
            self.assertEqual((hello["channel"], hello["run_id"]), ("session", 0), hello)
            conn.sendall(message({"type": "welcome", "run_id": 0, "role": "builder", "id": 0}))
            link = Link.listener(conn, "ab" * 32, hello, key.read_bytes().rstrip(b"\n"))
            state = link.read()
            self.assertEqual((state["type"], state["state"]), ("state", "idle"), state)
            daemon = {"source": "sourced", "reader": "readoutd"}[hello["role"]]
            links[f"{daemon}-{hello['id']}"] = link
        self.assertEqual(sorted(links), sorted(peers))
        ready = [notification() for _ in peers]
        self.assertEqual(sorted(pid for _, pid in ready), sorted(p.pid for p in peers.values()))
        self.assertEqual({text for text, _ in ready},
                         {"READY=1\nSTATUS=joined the hub's session; idle"})
        for link in links.values():
            link.send({"type": "shutdown", "reason": "end of the test"})
        stopping = [notification() for _ in peers]
        self.assertEqual(sorted(pid for _, pid in stopping), sorted(p.pid for p in peers.values()))
        self.assertEqual({text for text, _ in stopping}, {"STOPPING=1"})
        for name, p in peers.items():
            self.assertEqual(self.h.wait(p, 15), 0, f"{name}:\n{p.tail()}")
            self.assertNotIn("can be read by other users", p.log())
            self.assertNotIn("Cannot notify", p.log())


class CompareVerdictTest(E2ETestCase):
    """analysis/compare.py's verdict on recorded runs (no daemons): a
    difference is resolved only beyond what buckets, clocks and the spread
    between repeats could explain."""

    def write_runs(self, name: str, p50s: list[int], unc: int,
                   events: bool = False) -> list[Path]:
        out = []
        for k, v in enumerate(p50s):
            d = self.h.dir / f"{name}-{k}"
            d.mkdir()
            if events:
                # Nearest rank of three records: p50 the middle one, p90 and
                # above the last; metrics.json's bucket edges say otherwise.
                (d / "events.jsonl").write_text("".join(
                    json.dumps({"run": 1, "event": i, "latency_ns": x, "uncertainty_ns": unc})
                    + "\n" for i, x in enumerate((v + 1_000, v - 1_000, v))))
            lat = {"p50_ns": v, "p90_ns": 2 * v, "p99_ns": 4 * v, "max_ns": 8 * v,
                   "uncertainty_ns": unc,
                   "with_uncertainty": {q: {"value_ns": m * v, "uncertainty_ns": unc}
                                        for q, m in (("p50", 1), ("p90", 2), ("p99", 4),
                                                     ("max", 8))}}
            (d / "metrics.json").write_text(json.dumps({"latency": lat, "status": "ok"}))
            out.append(d)
        return out

    def verdict(self, a: list[Path], b: list[Path]) -> str:
        args = [SYSTEM_PYTHON, COMPARE] + a + b + ["--group", "--no-plot"]
        for label, runs in (("one", a), ("three", b)):
            args += [x for _ in runs for x in ("--label", label)]
        # One --label per run, in the order of the runs.
        r = self.h.run("compare", args, 60)
        self.assertEqual(r.returncode, 0, r.describe())
        return r.output

    def test_resolved_with_paired_repeats(self) -> None:
        # Five interleaved repeats, the machine's load moving both cases
        # together; three hosts 30 us slower every time.
        load = [90_000, 130_000, 100_000, 160_000, 110_000]
        a = self.write_runs("one", load, 0)
        b = self.write_runs("three", [v + 30_000 for v in load], 2_000)
        out = self.verdict(a, b)
        self.assertIn("sign test at 90%", out)
        # Pair differences of 30 us, less buckets (4 to 8 us at these
        # values) and the clocks (2 us): resolved, with a lower bound.
        self.assertRegex(out, r"p50: difference \+30\.0 us .* \*\*resolved: three add 30\.0 us "
                              r"at the median \(at least [\d.]+ us\)\*\*")

    def test_exact_percentiles_from_events(self) -> None:
        # 4 us apart at 100 us: within a histogram bucket (4.1 us there),
        # so metrics.json's percentiles cannot resolve it; every event's
        # latency in events.jsonl can.
        load = [98_000, 131_000, 101_000, 150_000, 112_000]
        a = self.write_runs("one", load, 0)
        b = self.write_runs("three", [v + 4_000 for v in load], 500)
        self.assertRegex(self.verdict(a, b), r"p50: difference .* \*\*not resolved at this noise")
        a = self.write_runs("one-exact", load, 0, events=True)
        b = self.write_runs("three-exact", [v + 4_000 for v in load], 500, events=True)
        out = self.verdict(a, b)
        self.assertIn("Latencies are exact percentiles of every recorded event", out)
        self.assertRegex(out, r"p50: difference \+4\.0 us .* \*\*resolved: three add 4\.0 us "
                              r"at the median \(at least 3\.5 us\)\*\*")
        cached = json.loads((a[0] / "latency_exact.json").read_text())
        self.assertEqual((cached["p50_ns"], cached["p99_ns"], cached["samples"]),
                         (98_000, 99_000, 3))

    def test_scheduling_is_a_case_of_its_own(self) -> None:
        # Runs of one topology at SCHED_FIFO and without are different
        # columns, and each is judged against its own kind.
        def params(d: Path, topo: str, rtprio: int | None, cpus: str | None) -> None:
            t = {"builder": {"rtprio": rtprio, "cpus": cpus}, "sources": {"rtprio": rtprio},
                 "reader": [{"id": 0, "rtprio": rtprio}], "source": []}
            (d / "params.json").write_text(json.dumps(
                {"topology_file": f"deploy/topologies/{topo}.toml", "backend": "netns",
                 "topology": t}))
        runs = []
        for name, topo, rtprio, cpus, p50 in (("a", "one-host", None, None, 100_000),
                                              ("b", "three-hosts", None, None, 200_000),
                                              ("c", "one-host", 20, "1", 100_000),
                                              ("d", "three-hosts", 20, "1", 150_000)):
            (d,) = self.write_runs(name, [p50], 0)
            params(d, topo, rtprio, cpus)
            runs.append(d)
        r = self.h.run("compare", [SYSTEM_PYTHON, COMPARE] + runs + ["--no-plot"], 60)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("three-hosts (netns, no shaping, rtprio 20, cpus pinned) against "
                      "one-host (netns, no shaping, rtprio 20, cpus pinned):", r.output)
        self.assertIn("three-hosts (netns, no shaping) against one-host (netns, no shaping):",
                      r.output)
        self.assertRegex(r.output, r"\| scheduling \| as the kernel chooses \| as the kernel "
                                   r"chooses \| rtprio 20, cpus pinned \|")

    def test_not_resolved_within_noise(self) -> None:
        # The same spread, but the difference changes sign between pairs.
        a = self.write_runs("one", [90_000, 130_000, 100_000, 160_000, 110_000], 0)
        b = self.write_runs("three", [95_000, 120_000, 110_000, 150_000, 118_000], 2_000)
        out = self.verdict(a, b)
        self.assertRegex(out, r"p50: difference .* \*\*not resolved at this noise\*\*")
        # Three runs each: too few to pair; the ranges overlap.
        out = self.verdict(a[:3], b[:3])
        self.assertIn("every run of one case above every run of the other", out)
        self.assertIn("not resolved at this noise", out)


class PlacementTest(E2ETestCase):
    """cpus and rtprio: a daemon runs on the CPUs its topology gives it."""
    needs_daemons = True

    def test_bad_cpus_name_the_key(self) -> None:
        local = REPO / "deploy" / "topologies" / "local.toml"
        allowed = sorted(os.sched_getaffinity(0))
        for sets, message in (
                (['builder.cpus="x"'], "[builder] cpus: expected a CPU list such as '2-3'"),
                (['builder.cpus="3-1"'], "[builder] cpus: expected a CPU list"),
                (['reader.0.cpus="%d"' % (max(allowed) + 1)],
                 "[[reader]] id 0 cpus: '%d' names CPUs this machine does not give the "
                 "launcher" % (max(allowed) + 1)),
                (["source.1.rtprio=100"], "[[source]] #1 rtprio: expected an integer in 1..99")):
            with self.subTest(sets=sets):
                with self.assertRaises(daqrun.TopologyError) as cm:
                    daqrun.load_topology(str(local), sets)
                self.assertIn(message, str(cm.exception))
        # Through the launcher: exit 2 with the message, nothing started.
        r = self.h.daqrun(local, sets=['builder.cpus="x"'], timeout_s=60)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("[builder] cpus: expected a CPU list", r.output)

    def test_daemons_run_on_their_cpus(self) -> None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs two CPUs")
        first, last = cpus[0], cpus[-1]
        topo = topology(events=8000, payload=64, rate=2000)
        topo["builder"]["cpus"] = str(last)
        topo["sources"] = {"cpus": str(first)}
        topo["source"] = [{"id": 3, "cpus": f"{first},{last}"}]
        out = self.h.dir / "placed"
        p = self.h.start("daqrun-placed", [SYSTEM_PYTHON, DAQRUN,
                                           self.h.write_topology(topo, "placed.toml"),
                                           "--out", out, "--bin", self.h.bin, "--timeout", "60"])
        seen: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 5 and time.monotonic() < deadline and p.returncode is None:
            try:
                procs = read_json(out / "params.json").get("processes", [])
            except HarnessError:
                procs = []
            for proc in procs:
                name = proc["name"]
                if name in seen or not (name.startswith("builder") or name.startswith("source")):
                    continue
                try:
                    status = Path(f"/proc/{proc['pid']}/status").read_text()
                    cmd = Path(f"/proc/{proc['pid']}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"taskset" in cmd:      # not exec'd into the daemon yet
                    continue
                seen[name] = re.search(r"Cpus_allowed_list:\s*(\S+)", status).group(1)
            time.sleep(0.05)
        p.popen.wait(timeout=90)
        self.assertEqual(p.returncode, 0, p.tail(40))
        self.assertEqual(seen.get("builder-0"), str(last), seen)
        for s in (0, 1, 2):
            self.assertEqual(seen.get(f"source-{s}"), str(first), seen)
        self.assertEqual(seen.get("source-3"), f"{first}-{last}" if last == first + 1
                         else f"{first},{last}", seen)
        params = read_json(out / "params.json")
        argv = {x["name"]: x["argv"] for x in params["processes"]}
        self.assertEqual(argv["builder-0"][:3], ["taskset", "-c", str(last)])
        self.assertNotEqual(argv["reader-0"][0], "taskset")
        m = read_json(out / "metrics.json")
        self.assertTrue(m["balanced"], m.get("errors"))
