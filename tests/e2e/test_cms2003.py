"""analysis/cms2003.py --quick: the CMS 2003 bare event builder (2 x 2 over
one shaped rail and over two rails with jumbo frames, two fragment sizes) on
the netns cluster: the side-by-side table is printed and written, every
run's books balance and every event is accepted, each throughput is a share
of the measured link capacity between 0 and 1.2, the CPU idle share is a
fraction, two rails carry more than one (the ratio table), the launcher's
socket buffers are shown, and no namespace is left behind.

Needs root, ip, tc and iperf3 (skipped with the reason otherwise); uses
198.18.0.0/15 only inside namespaces the launcher and railcap create.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from pathlib import Path

import test_deploy_ssh as ssh_tests
from harness import REPO, E2ETestCase, listening_ports, read_json

from test_netns_rails import netns_names, netns_unavailable

CMS2003 = REPO / "analysis" / "cms2003.py"


def all_processes() -> list[tuple[int, str]]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out.append((int(d.name), cmd))
    return out


def left_behind(owners: set[int]) -> list[str]:
    """Namespaces of the netns backend (esdq<pid>-...) of the test's own
    processes (owners: cms2003 and each launcher it started, seen by
    Harness.run): another test's, or a suite's beside this one, are not
    this test's to count, dead owner or not."""
    left = []
    for name in sorted(netns_names()):
        m = re.match(r"esdq([0-9]+)-", name)
        if m is not None and int(m.group(1)) in owners:
            left.append(name)
    return left


class Cms2003QuickTest(E2ETestCase):
    """make cms2003-quick's command, end to end."""

    def setUp(self) -> None:
        why = netns_unavailable("iperf3")
        if why:
            self.skipTest(why)
        super().setUp()

    def test_quick_table_balances_and_fractions_are_shares(self) -> None:
        out = self.h.path("cms2003")
        owners: set[int] = set()
        python = "/usr/bin/python3" if shutil.which("/usr/bin/python3") else sys.executable
        r = self.h.run("cms2003", [python, CMS2003, "--quick", "--out", out,
                                   "--bin", self.h.bin], 300, seen=owners)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("## 2x2, 1 rail, MTU 1500", r.output)
        self.assertIn("| fragment B | MB/s per node | of the link | whole run | CPU idle "
                      "| books | events accepted | the note |", r.output)
        self.assertIn("## 2x2, 2 rails, MTU 9000", r.output)
        self.assertIn("240 MB/s per node = 95% of the link (16 kB)", r.output)
        self.assertIn("## Two rails against one (2x2)", r.output)
        doc = read_json(out / "cms2003.json")
        self.assertTrue((out / "cms2003.md").is_file())
        configs = {c["name"]: c for c in doc["configs"]}
        self.assertEqual(sorted(configs), ["2x2, 1 rail, MTU 1500", "2x2, 2 rails, MTU 9000"])
        for name, cfg in configs.items():
            self.assertEqual(cfg["rate"], "100mbit")
            self.assertGreater(cfg["capacity"]["rail_Bps"], 0)
            self.assertEqual([x["payload"] for x in cfg["runs"]], [1024, 16384])
            for run in cfg["runs"]:
                with self.subTest(config=name, payload=run["payload"]):
                    self.assertTrue(run["balanced"], run)
                    self.assertTrue(run["ok"], run)
                    self.assertIsInstance(run["fraction"], float)
                    self.assertGreater(run["fraction"], 0.0)
                    self.assertLessEqual(run["fraction"], 1.2)
                    self.assertTrue(0.0 <= run["cpu_idle"] <= 1.0, run["cpu_idle"])
                    self.assertEqual(run["accepted"], run["events"])
                    self.assertEqual(run["refbuild"], "PASS", run)
                    self.assertGreater(run["steady"]["seconds"], 0)
                    self.assertTrue(run["socket_buffer"], "the launcher sized the buffers")
            print(f"\n  cms2003 quick, {name}: " + ", ".join(
                f"{x['payload']} B {x['per_node_Bps'] / 1e6:.2f} MB/s = {x['fraction']:.0%}"
                for x in cfg["runs"]), flush=True)
        # Two rails carry more than one at 16 KiB (the full run's criterion,
        # 1.9x, needs an idle machine: make cms2003).
        one = configs["2x2, 1 rail, MTU 1500"]["runs"][1]["per_node_Bps"]
        two = configs["2x2, 2 rails, MTU 9000"]["runs"][1]["per_node_Bps"]
        self.assertGreater(two, 1.3 * one)
        self.assertEqual(left_behind(owners), [], "cms2003 left namespaces")
        self.h.assert_clean()


# -- on real hosts over ssh (--hosts) -------------------------------------------

def hosts_doc(count: int, port: int, key: Path, known: Path, remote: Path) -> dict:
    """A hosts file of count hosts, all this machine's sshd on loopback,
    each with a work directory of its own."""
    doc = {"ssh": {"user": "root", "port": port,
                   "options": ["-i", str(key), "-o", "IdentitiesOnly=yes",
                               "-o", f"UserKnownHostsFile={known}",
                               "-o", "StrictHostKeyChecking=accept-new",
                               "-o", "LogLevel=ERROR"]}}
    for i in range(count):
        doc[f"hosts.node{i}"] = {"address": "127.0.0.1", "workdir": str(remote / f"node{i}")}
    return doc


def control_dirs(owners: set[int]) -> set[str]:
    """The ssh backends' control directories (/tmp/esdq<launcher pid>-ssh)
    of the test's own processes (owners, seen by Harness.run): another
    run's, a suite's beside this one, is not this test's to count."""
    dirs = set()
    for p in Path("/tmp").glob("esdq*-ssh"):
        pid = p.name[len("esdq"):-len("-ssh")]
        if pid.isdigit() and int(pid) in owners:
            dirs.add(str(p))
    return dirs


class Cms2003HostsErrorsTest(E2ETestCase):
    """cms2003.py --hosts: a hosts file that cannot hold the configurations,
    or is not one, is refused before any host is reached."""

    def cms2003(self, hosts: dict, *args: str) -> object:
        path = self.h.write_topology(hosts, "hosts.toml")
        return self.h.run("cms2003-bad", [sys.executable, CMS2003, "--hosts", path, "--out",
                                          self.h.path("out"), "--bin", self.h.bin, *args], 60)

    def test_too_few_hosts_wrong_tables_and_netns_options(self) -> None:
        three = {f"hosts.n{i}": {"address": "127.0.0.1"} for i in range(3)}
        four = dict(three, **{"hosts.n3": {"address": "127.0.0.1"}})
        for hosts, args, status, message in (
                (three, ["--n", "2"], 2, "lists 3 host(s); the 2x2 configuration needs 4: "
                                         "b0..b1 and r0..r1 are the first 4 in file order"),
                (four, [], 2, "lists 4 host(s); the 8x8 configuration needs 16"),
                (four, ["--quick", "--rate", "1gbit"], 2,
                 "--rate shapes the netns cluster's links; with --hosts the rate is the wire's"),
                (dict(four, run={"events": 5}), ["--quick"], 2,
                 "[run] does not belong in a hosts file"),
                (dict(four, **{"hosts.n1": {"work_dir": "/tmp"}}), ["--quick"], 2,
                 "[hosts.n1] unknown key 'work_dir'"),
                (dict(four, **{"hosts.n2": {"addresses": ["127.0.0.1", "127.0.0.1"]}}),
                 ["--quick"], 2, "127.0.0.1 is listed twice"),
                (four, ["--quick", "--rails", "2"], 1,
                 "no configuration could run on these hosts")):
            with self.subTest(message=message):
                r = self.cms2003(hosts, *args)
                self.assertEqual(r.returncode, status, r.describe())
                self.assertIn(message, r.output)
        r = self.cms2003(four, "--quick", "--rails", "2")
        self.assertIn("2x2, 2 rails, MTU 9000: Skipped: it needs 2 rails, and the hosts "
                      "b0..r1 have 1 address(es) each", r.output)
        self.h.assert_clean()


class Cms2003HostsTopologyTest(E2ETestCase):
    """The topologies --hosts makes: the file's host tables under the role
    names, each configuration's rails of each host's addresses."""

    def test_roles_rails_and_keys_of_the_generated_topologies(self) -> None:
        sys.path.insert(0, str(REPO / "analysis"))
        import cms2003
        import cms2003_ssh
        from daqlib.topology import load_topology
        doc = {"ssh": {"user": "daq", "port": 2222}}
        for i in range(5):
            doc[f"hosts.node{i}"] = {"ssh": f"daq@node{i}.example.org",
                                     "addresses": [f"10.1.0.{i + 1}", f"10.2.0.{i + 1}"],
                                     "workdir": f"/scratch/{i}"}
        path = self.h.write_topology(doc, "hosts.toml")
        cluster = cms2003_ssh.Cluster(path, self.h.bin)
        self.assertEqual(cluster.roles(2), {"b0": "node0", "b1": "node1", "r0": "node2",
                                            "r1": "node3"})
        self.assertEqual(cluster.rails(2), 2)
        self.assertIsNone(cluster.missing(2))
        self.assertIn("lists 5 host(s); the 8x8 configuration needs 16", cluster.missing(8))
        for rails in (1, 2):
            with self.subTest(rails=rails):
                topo = self.h.path(f"t{rails}.toml")
                topo.write_text(cms2003.topology(2, rails, 1500, 1e9, 4096, 3000, cluster))
                t = load_topology(str(topo), [])
                self.assertEqual(t.deploy["backend"], "ssh")
                self.assertEqual(list(t.hosts), ["b0", "b1", "r0", "r1"])
                self.assertEqual(t.hosts["r1"]["ssh"], "daq@node3.example.org")
                self.assertEqual(t.hosts["r1"]["workdir"], "/scratch/3")
                self.assertEqual(t.backend_options()["port"], 2222)
                be = cluster.backend(topo, ["b0", "r1"], self.h.path(f"run{rails}"))
                self.assertEqual(be.rail_addresses("r1"),
                                 ["10.1.0.4", "10.2.0.4"][:rails])
                self.assertEqual(be.host_command("b0", ["iperf3", "-s"])[-3:],
                                 ["daq@node0.example.org", "--", "iperf3 -s"])
                self.assertEqual(be.teardown(), [])
                self.assertNotIn("shaping", topo.read_text())
        self.h.assert_clean()


class Cms2003SshTest(E2ETestCase):
    """cms2003.py --hosts over the ssh backend, against this machine's sshd
    on loopback (test_deploy_ssh's): four hosts, all 127.0.0.1."""

    start_sshd = ssh_tests.SshDeployTest.start_sshd
    _start_sshd = ssh_tests.SshDeployTest._start_sshd
    stop_sshd = ssh_tests.SshDeployTest.stop_sshd

    def setUp(self) -> None:
        why = ssh_tests.sshd_unavailable()
        if why is None and shutil.which("iperf3") is None:
            why = "iperf3 not installed (DEPS_EXTRA=iperf3 scripts/deps.sh)"
        if why:
            self.skipTest(why)
        super().setUp()
        if not all(os.access(self.h.bin / d, os.X_OK) for d in ("builderd", "readoutd",
                                                               "sourced")):
            self.skipTest(f"daemons not built in {self.h.bin}")
        self.made_privsep = False
        self.addCleanup(self.stop_sshd)
        self.start_sshd()
        self.remote = self.h.dir / "remote"
        self.owners: set[int] = set()      # cms2003 and its launchers (their pids name objects)
        self.iperf_port = ssh_tests.free_port()
        self.hosts = self.h.write_topology(hosts_doc(4, self.port, self.key, self.known,
                                                     self.remote), "hosts.toml")

    def cms2003(self, *args: str, timeout_s: float = 170) -> object:
        python = "/usr/bin/python3" if shutil.which("/usr/bin/python3") else sys.executable
        return self.h.run("cms2003", [python, CMS2003, "--hosts", self.hosts,
                                      "--iperf-port", str(self.iperf_port),
                                      "--bin", self.h.bin, *args], timeout_s, seen=self.owners)

    def assert_nothing_running(self) -> None:
        """No daemon, iperf3, ssh client or session of the test, no iperf3
        port listening, no control directory left."""
        self.stop_sshd()
        self.h.assert_clean()
        self.assertNotIn(self.iperf_port, listening_ports())
        iperfs = [(pid, cmd) for pid, cmd in all_processes()
                  if "iperf3" in cmd and str(self.iperf_port) in cmd]
        self.assertEqual(iperfs, [])
        self.assertEqual(control_dirs(self.owners), set())

    def test_quick_over_ssh_table_books_and_capacity(self) -> None:
        out = self.h.path("cms2003")
        r = self.cms2003("--quick", "--events", "3000", "--out", str(out))
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("cms2003: hosts b0 = node0, b1 = node1, r0 = node2, r1 = node3", r.output)
        self.assertIn("# CMS 2003 event builder on the hosts of", r.output)
        self.assertIn("## 2x2, 1 rail, MTU 1500", r.output)
        self.assertIn("| fragment B | MB/s per node | of the link | whole run | CPU idle "
                      "| books | events accepted | the note |", r.output)
        self.assertRegex(r.output, r"No shaping; rail capacity [0-9.]+ MB/s \(iperf3 r0 to "
                                   r"b0\); 1 rail\(s\), rail 0 MTU 65536 \(lo\)")
        # The two-rail configuration needs two addresses per host.
        self.assertIn("Skipped: it needs 2 rails, and the hosts b0..r1 have 1 address(es) "
                      "each", r.output)
        doc = read_json(out / "cms2003.json")
        self.assertTrue((out / "cms2003.md").is_file())
        self.assertEqual((doc["backend"], doc["hosts_file"]), ("ssh", str(self.hosts)))
        configs = {c["name"]: c for c in doc["configs"]}
        self.assertEqual(configs["2x2, 2 rails, MTU 9000"]["runs"], [])
        cfg = configs["2x2, 1 rail, MTU 1500"]
        self.assertEqual(cfg["mtus"], {h: [["lo", 65536]] for h in ("b0", "b1", "r0", "r1")})
        # iperf3 ran through ssh: the client over the shared connection, the
        # server in an ssh session on b0 (its log in b0's work directory).
        cap = cfg["capacity"]
        self.assertEqual((cap["backend"], cap["client"], cap["server"]), ("ssh", "r0", "b0"))
        self.assertEqual(cap["command"][0], "ssh")
        self.assertIn(f"iperf3 -J -c 127.0.0.1 -p {self.iperf_port}", cap["command"][-1])
        self.assertGreater(cap["rail_Bps"], 0)
        self.assertTrue((self.remote / "node0" / "b0" / "railcap" / "logs" /
                         "iperf3-b0-rail0.log").is_file())
        self.assertEqual([x["payload"] for x in cfg["runs"]], [1024, 16384])
        for run in cfg["runs"]:
            with self.subTest(payload=run["payload"]):
                self.assertTrue(run["balanced"], run)
                self.assertTrue(run["ok"], run)
                self.assertEqual(run["accepted"], run["events"])
                self.assertEqual(run["events"], 3000)
                self.assertGreater(run["fraction"], 0.0)
                self.assertLessEqual(run["fraction"], 1.2)
                self.assertEqual(sorted(run["cpu_idle_hosts"]), ["b0", "b1", "r0", "r1"])
                self.assertEqual(run["cpu_idle"], min(run["cpu_idle_hosts"].values()))
                self.assertTrue(0.0 <= run["cpu_idle"] <= 1.0, run["cpu_idle"])
                self.assertGreater(run["steady"]["seconds"], 0)
            # The daemons ran on the hosts, from their work directories.
            name = f"n2-r1-m1500-p{run['payload']}"
            self.assertTrue((self.remote / "node2" / "r0" / name / "logs" /
                             "reader-0.log").is_file())
        print(f"\n  cms2003 over ssh (loopback), rail {cap['rail_Bps'] / 1e6:.0f} MB/s: "
              + ", ".join(f"{x['payload']} B {x['per_node_Bps'] / 1e6:.2f} MB/s = "
                          f"{x['fraction']:.1%}" for x in cfg["runs"]), flush=True)
        self.assert_nothing_running()

    def test_host_without_iperf3_and_iperf3_port_taken(self) -> None:
        r = self.cms2003("--quick", "--iperf3", "/nonexistent/iperf3", "--out",
                         str(self.h.path("out")), timeout_s=90)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("cms2003: host r0 has no /nonexistent/iperf3 (`ssh ", r.output)
        self.assertIn("install iperf3 there", r.output)
        # A socket bound to the port (not listening: a client is refused,
        # not held) makes b0's server exit; its log says why. The port is
        # the one the kernel gives the socket: one chosen earlier may have
        # become a connection's own meanwhile.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            self.iperf_port = taken.getsockname()[1]
            r = self.cms2003("--quick", "--out", str(self.h.path("out")), timeout_s=90)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn(f"cms2003: iperf3 server on b0 (iperf3 -s -B 127.0.0.1 -p "
                      f"{self.iperf_port}) exited with status 1", r.output)
        self.assertIn("Address already in use", r.output)
        self.assert_nothing_running()
