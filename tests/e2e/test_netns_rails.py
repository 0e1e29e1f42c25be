"""Rails and jumbo frames in the virtual cluster (docs/DEPLOY.md, netns):
a host's `addresses` and `[netns] rails`/`mtu` in a topology and their
errors; every host's veth per rail with its address, MTU and tbf shaping;
8000-byte unfragmentable pings across each rail at MTU 9000 and not at
1500; a run of three-hosts.toml over two rails that balances; nothing left
after success, failure or a killed owner; a cleanup that leaves a live
owner's cluster alone, whatever program that owner is (this test's own
process), and takes what a dead one left; analysis/railcap.py measuring
each rail's tbf rate.

The netns tests need root, ip, tc and ping (iperf3 for railcap; skipped
with the reason otherwise). They only use 198.18.0.0/15 inside namespaces
they (or the launcher, or railcap) create and remove.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import DAQRUN, REPO, E2ETestCase, read_json

from daqlib import topology as daqrun
from daqlib.backends.netns import NetnsBackend

sys.path.insert(0, str(REPO / "analysis"))
import railcap  # noqa: E402

TOPOLOGIES = REPO / "deploy" / "topologies"
THREE = TOPOLOGIES / "three-hosts.toml"
RAILCAP = REPO / "analysis" / "railcap.py"
RATE = "100mbit"                       # the shaping of the measured links
RATE_BYTES = 100e6 / 8


def sh(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)


def ip_json(*argv: str) -> list[dict]:
    r = sh("ip", "-j", *argv)
    if r.returncode != 0:
        raise AssertionError(f"ip -j {' '.join(argv)}: {r.stderr}")
    return json.loads(r.stdout or "[]")


def netns_names() -> list[str]:
    return [line.split()[0] for line in sh("ip", "netns", "list").stdout.splitlines()
            if line.strip()]


def netns_unavailable(*more: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root (creates network namespaces, veth pairs, tc qdiscs)"
    for tool in ("ip", "tc", "ping", "unshare") + more:
        if shutil.which(tool) is None:
            return f"{tool} not found (scripts/deps.sh installs it)"
    if sh("ip", "netns", "list").returncode != 0:
        return "ip netns unavailable"
    return None


class RailsTopologyTest(E2ETestCase):
    """addresses, rails and mtu: validation and what the backends get; no root."""

    def load(self, *sets: str, path: Path = THREE):
        return daqrun.load_topology(str(path), list(sets))

    def test_errors_name_the_key(self) -> None:
        two = 'hosts.builder.addresses=["127.0.0.1", "10.0.1.1"]'
        cases = [
            (("netns.rails=0",), "[netns] rails: expected an integer in 1..4, got 0"),
            (("netns.rails=5",), "[netns] rails: expected an integer in 1..4, got 5"),
            (("netns.mtu=100",), "[netns] mtu: expected an integer in 576..9216, got 100"),
            (("netns.mtu=65536",), "[netns] mtu: expected an integer in 576..9216, got 65536"),
            (("netns.mtu=\"jumbo\"",), "[netns] mtu: expected an integer"),
            ((two,), "[hosts.builder] addresses: 2 address(es), one per rail, but [netns] "
                     "rails = 1: set netns.rails=2"),
            ((two, "netns.rails=3"), "2 address(es), one per rail, but [netns] rails = 3"),
            (('hosts.builder.addresses=["10.0.0.1", "10.0.0.1"]', "deploy.backend=local"),
             "[hosts.builder] addresses: 10.0.0.1 is listed twice (rails 0 and 1)"),
            (('hosts.builder.addresses=["10.0.0.1", "10.0.1.1"]', "deploy.backend=local"),
             "[hosts.builder] addresses: the first (rail 0) is 10.0.0.1 but address is "
             "127.0.0.1"),
            (("hosts.builder.addresses=[]", "deploy.backend=local"),
             "[hosts.builder] addresses: expected 1 to 4 addresses (one per rail), got 0"),
            (('hosts.builder.addresses=["127.0.0.1", "a", "b", "c", "d"]',
              "deploy.backend=local"), "expected 1 to 4 addresses (one per rail), got 5"),
            (('hosts.builder.addresses=["127.0.0.1", ""]', "deploy.backend=local"),
             "address 1 (rail 1) is empty"),
            (("hosts.builder.addresses=[1, 2]",), "[hosts.builder] addresses: expected a list "
                                                  "of strings"),
        ]
        for sets, message in cases:
            with self.subTest(sets=sets):
                with self.assertRaises(daqrun.TopologyError) as cm:
                    self.load(*sets)
                self.assertIn(message, str(cm.exception))
        # Through the command line: status 2 and the same words.
        r = self.h.run("daqrun-bad", [sys.executable, DAQRUN, THREE, "--out",
                                      self.h.dir / "bad", "--set", "netns.rails=9"], 30)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("[netns] rails: expected an integer in 1..4, got 9", r.output)

    def test_hosts_get_their_rails(self) -> None:
        t = self.load('hosts.builder.addresses=["127.0.0.1", "127.0.1.1"]', "netns.rails=2")
        specs = t.host_specs()
        self.assertEqual(specs["builder"].address, "127.0.0.1")
        self.assertEqual(specs["builder"].addresses, ["127.0.0.1", "127.0.1.1"])
        self.assertEqual(specs["readout0"].addresses, ["127.0.0.1"])
        # addresses alone: the first is the address (local and ssh).
        t = self.load('hosts.readout0.addresses=["10.0.0.2", "10.0.1.2"]',
                      "hosts.readout0.address=10.0.0.2", "deploy.backend=ssh")
        self.assertEqual(t.host_specs()["readout0"].address, "10.0.0.2")
        doc = {"hosts": {"a": {"addresses": ["10.0.0.7", "10.0.1.7"], "ssh": "daq@evb"}},
               "deploy": {"backend": "ssh"}, "builder": {"host": "a"},
               "reader": [{"id": 0, "sources": [0], "host": "a"}]}
        t = daqrun.resolve_topology(doc, "t.toml")
        self.assertEqual(t.host_specs()["a"].address, "10.0.0.7")
        # The virtual cluster's own addresses, rail 0 exactly as with one rail.
        t = self.load("netns.rails=3", "hosts.readout1.netns_address=198.18.0.9")
        be = NetnsBackend(t.host_specs(), self.h.dir, self.h.bin, t.backend_options(),
                          say=lambda _: None)
        self.assertEqual({h: be.rail_addresses(h) for h in t.hosts},
                         {"builder": ["198.18.0.1", "198.18.1.1", "198.18.2.1"],
                          "readout0": ["198.18.0.2", "198.18.1.2", "198.18.2.2"],
                          "readout1": ["198.18.0.9", "198.18.1.9", "198.18.2.9"]})
        self.assertEqual(be.address("readout1"), "198.18.0.9")


class NetnsRailsTest(E2ETestCase):
    """Rails, MTU and shaping of the namespaces the netns backend builds."""

    def setUp(self) -> None:
        why = netns_unavailable()
        if why:
            self.skipTest(why)
        super().setUp()

    def build(self, **kw) -> NetnsBackend:
        be = railcap.cluster(self.h.dir, say=lambda _: None, **kw)
        self.addCleanup(self.torn_down, be)
        be.prepare(railcap.HOSTS[1])
        return be

    def torn_down(self, be: NetnsBackend) -> None:
        self.assertEqual(be.teardown(), [])
        assert_nothing_left(self, be.tag)

    def ping(self, be: NetnsBackend, rail: int, size: int) -> subprocess.CompletedProcess:
        """An unfragmentable (DF) ping of size bytes from cap0 to cap1 on rail."""
        a, b = railcap.HOSTS
        return sh("ip", "netns", "exec", be.ns[a], "ping", "-M", "do", "-s", str(size), "-c",
                  "1", "-W", "2", "-I", be.rail_addresses(a)[rail], be.rail_addresses(b)[rail])

    def test_two_rails_jumbo_and_shaping(self) -> None:
        be = self.build(rails=2, mtu=9000, shaping=RATE)
        for index, host in enumerate(railcap.HOSTS):
            ns = be.ns[host]
            addrs = {x["ifname"]: [(a["local"], a["prefixlen"]) for a in x["addr_info"]
                                   if a["family"] == "inet"]
                     for x in ip_json("-n", ns, "addr")}
            self.assertEqual(addrs["eth0"], [(f"198.18.0.{index + 1}", 24)], addrs)
            self.assertEqual(addrs["eth1"], [(f"198.18.1.{index + 1}", 24)], addrs)
            self.assertEqual(sorted(addrs), ["eth0", "eth1", "lo"])
            links = {x["ifname"]: x for x in ip_json("-n", ns, "link")}
            for dev in ("eth0", "eth1"):
                self.assertEqual(links[dev]["mtu"], 9000, links[dev])
                self.assertIn("UP", links[dev]["flags"])
                qd = [q for q in ip_json_tc(ns, dev) if q["kind"] == "tbf"]
                self.assertEqual(len(qd), 1, f"{host} {dev}: {qd}")
                self.assertEqual(qd[0]["options"]["rate"], RATE_BYTES, qd)
        sw = {x["ifname"]: x for x in ip_json("-n", be.switch, "link")}
        self.assertEqual(sorted(sw), ["br0", "br1", "lo", "p0", "p1", "r1p0", "r1p1"])
        for port, bridge in (("p0", "br0"), ("p1", "br0"), ("r1p0", "br1"), ("r1p1", "br1")):
            self.assertEqual(sw[port]["master"], bridge, sw[port])
            self.assertEqual(sw[port]["mtu"], 9000, sw[port])
            self.assertEqual([q["kind"] for q in ip_json_tc(be.switch, port)
                              if q["kind"] == "tbf"], ["tbf"], port)
        for bridge in ("br0", "br1"):
            self.assertEqual(sw[bridge]["mtu"], 9000, sw[bridge])
        for rail in (0, 1):
            r = self.ping(be, rail, 8000)
            self.assertEqual(r.returncode, 0, f"rail {rail}: {r.stdout}{r.stderr}")
            self.assertIn("8008 bytes from", r.stdout)
        d = be.describe()
        self.assertEqual((d["rails"], d["mtu"]), (2, 9000))
        self.assertEqual(d["hosts"]["cap1"]["rails"], ["198.18.0.2", "198.18.1.2"])

    def test_cleanup_leaves_a_live_owners_cluster_alone(self) -> None:
        """This process owns the cluster (esdq<its pid>-*), and is neither a
        launcher nor railcap: a cleanup of its pid leaves it alone while it
        runs. A directory of a pid that runs but started after the
        directory was made (a dead owner's number, given again) is taken."""
        be = self.build()
        mine = sorted(be.created)
        self.assertEqual(len(mine), 3, mine)
        c = self.h.run("cleanup-live", [sys.executable, DAQRUN, "--cleanup", str(os.getpid())],
                       60)
        self.assertEqual(c.returncode, 0, c.describe())
        self.assertNotIn("removed", c.output)
        self.assertIn(f"left alone 3 object(s) of pid {os.getpid()}, which still runs", c.output)
        for ns in mine:
            self.assertIn(f"network namespace {ns}", c.output)
        self.assertEqual(sorted(n for n in netns_names() if n.startswith(be.tag + "-")), mine)
        r = self.ping(be, 0, 1000)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # A pid given again: the directory is older than the process now
        # holding its number.
        sleeper = self.h.start("sleeper", ["sleep", "60"])
        reused = Path(f"/tmp/esdq{sleeper.pid}-chrony")
        reused.mkdir()
        self.addCleanup(shutil.rmtree, reused, True)
        made = time.time() - 30
        os.utime(reused, (made, made))
        c = self.h.run("cleanup-reused", [sys.executable, DAQRUN, "--cleanup",
                                          str(sleeper.pid)], 60)
        self.assertEqual(c.returncode, 0, c.describe())
        self.assertIn(f"removed directory {reused}", c.output)
        self.assertFalse(reused.exists())
        self.assertIsNone(sleeper.returncode)
        self.h.stop(sleeper)

    def test_standard_mtu_refuses_jumbo_pings(self) -> None:
        be = self.build(rails=2)
        for rail in (0, 1):
            self.assertEqual(ip_json("-n", be.ns["cap0"], "link", "show", f"eth{rail}")[0]["mtu"],
                             1500)
            small = self.ping(be, rail, 1400)
            self.assertEqual(small.returncode, 0, f"rail {rail}: {small.stdout}{small.stderr}")
            big = self.ping(be, rail, 8000)
            self.assertNotEqual(big.returncode, 0, f"rail {rail}: {big.stdout}")
            self.assertRegex(big.stdout + big.stderr, r"(?i)message too long|mtu")
        # Without shaping no tbf anywhere.
        self.assertEqual([q for q in ip_json_tc(be.ns["cap0"], "eth1") if q["kind"] == "tbf"],
                         [])


def assert_nothing_left(test: E2ETestCase, tag: str) -> None:
    """No namespace, bridge, veth or /tmp directory of the owner tag (esdq<pid>)."""
    deadline = time.monotonic() + 5
    while [n for n in netns_names() if n.startswith(tag + "-")] \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    test.assertEqual([n for n in netns_names() if n.startswith(tag + "-")], [],
                     "network namespaces left behind")
    links = sh("ip", "-o", "link", "show").stdout
    test.assertNotIn(tag, links, "a link of the cluster in the machine's namespace")
    for name in ("br1", "r1p0", "eth1"):
        test.assertNotRegex(links, rf": {name}[@:]", "a rail's link in the machine's namespace")
    test.assertEqual(sorted(Path("/tmp").glob(f"{tag}-*")), [])


def ip_json_tc(ns: str, dev: str) -> list[dict]:
    r = sh("tc", "-n", ns, "-j", "qdisc", "show", "dev", dev)
    if r.returncode != 0:
        raise AssertionError(f"tc -n {ns} qdisc show dev {dev}: {r.stderr}")
    return json.loads(r.stdout or "[]")


class NetnsRailsRunTest(E2ETestCase):
    """A real run over a two-rail cluster, and teardown whatever happens."""
    needs_daemons = True

    def setUp(self) -> None:
        why = netns_unavailable("chronyd", "chronyc")
        if why:
            self.skipTest(why)
        super().setUp()

    def assert_nothing_left(self, pid: int) -> None:
        assert_nothing_left(self, f"esdq{pid}")
        self.assertEqual(sorted(Path("/dev/shm").glob(f"es-daq{pid}-*")), [])
        self.h.assert_clean()

    def test_three_hosts_over_two_rails_balance(self) -> None:
        r = self.h.daqrun(THREE, timeout_s=150, sets=["events=20000", "netns.rails=2",
                                                       "netns.mtu=9000", "netns.shaping=1gbit"])
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertIn("2 rails (198.18.0.0/24, 198.18.1.0/24); mtu 9000", r.output)
        m = self.assertBalanced(r)
        p = r.params()
        self.assertEqual(p["rails"], {"builder": ["198.18.0.1", "198.18.1.1"],
                                      "readout0": ["198.18.0.2", "198.18.1.2"],
                                      "readout1": ["198.18.0.3", "198.18.1.3"]})
        info = p["backend_info"]
        self.assertEqual((info["rails"], info["mtu"]), (2, 9000))
        self.assertEqual({h: x["address"] for h, x in p["hosts"].items()},
                         {"builder": "198.18.0.1", "readout0": "198.18.0.2",
                          "readout1": "198.18.0.3"})
        links = {x["id"]: x for x in m["reader_links"]}
        self.assertTrue(links[0]["address"].startswith("198.18.0.2:"), links)
        # Each reader's link is a connection per rail, each carrying its
        # lanes (64 events each in turn): about half the frames, none astray.
        for r in (0, 1):
            rails = [m["counters"][f"builder.from_reader.{r}.rail.{k}"] for k in (0, 1)]
            self.assertEqual(sum(x["frames_received"] for x in rails),
                             m["counters"][f"builder.from_reader.{r}"]["frames_received"])
            for x in rails:
                self.assertGreater(x["frames_received"], 0.45 * 2 * 20000, rails)
                self.assertEqual(x["frames_wrong_rail"], 0)
        self.assert_nothing_left(int(info["switch_namespace"][4:].split("-")[0]))

    def test_failed_start_tears_down_every_rail(self) -> None:
        r = self.h.daqrun(THREE, timeout_s=90, sets=["events=1000", "netns.rails=3",
                                                      'builder.extra=["--no-such-flag"]'])
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("builder-0 exited with status 2 before writing its port file", r.output)
        sw = r.params()["backend_info"]["switch_namespace"]
        self.assert_nothing_left(int(sw[4:].split("-")[0]))


class RailcapTest(E2ETestCase):
    """analysis/railcap.py: each rail's capacity on shaped links."""

    def setUp(self) -> None:
        why = netns_unavailable("iperf3")
        if why:
            self.skipTest(why)
        super().setUp()

    def test_measures_the_tbf_rate_on_each_rail(self) -> None:
        # Two jumbo-frame rails, and one rail of standard frames, whose
        # headers (66 of 1514 bytes a frame) leave about 95% for payload.
        for rails, mtu in ((2, 9000), (1, None)):
            with self.subTest(rails=rails, mtu=mtu):
                self.measure(rails, mtu)

    def measure(self, rails: int, mtu: int | None) -> None:
        out = self.h.path(f"railcap-{rails}.json")
        r = self.h.run("railcap", [sys.executable, RAILCAP, "--rails", str(rails),
                                   "--shaping", RATE, "--streams", "4", "--seconds", "2",
                                   "--json", out] + (["--mtu", str(mtu)] if mtu else []), 120)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("| rail | subnet | 1 stream MB/s | 4 streams MB/s | of tbf rate |",
                      r.output)
        doc = read_json(out)
        self.assertEqual((doc["mtu"], doc["rate_bps"]), (mtu or 1500, 100e6))
        self.assertEqual([x["subnet"] for x in doc["rails"]],
                         [f"198.18.{i}.0/24" for i in range(rails)])
        for x in doc["rails"]:
            for key in ("one_stream_Bps", "streams_Bps"):
                self.assertLess(abs(x[key] / RATE_BYTES - 1), 0.10, f"rail {x['rail']} {key}: "
                                f"{x[key] / 1e6:.2f} MB/s against {RATE_BYTES / 1e6:.2f}")
        for rail, b in (doc["all_rails_Bps"] or {}).items():
            self.assertLess(abs(b / RATE_BYTES - 1), 0.10, f"rail {rail} with the others: {b}")
        self.assertEqual(doc["all_rails_Bps"] is None, rails == 1)
        print(f"\n  railcap, tbf {RATE}, mtu {mtu or 1500}: " + ", ".join(
            f"rail {x['rail']} {x['one_stream_Bps'] / 1e6:.2f}/{x['streams_Bps'] / 1e6:.2f} MB/s"
            for x in doc["rails"]), flush=True)
        # Only railcap's own (esdq<its pid>-*): a suite beside this one has
        # its own clusters.
        assert_nothing_left(self, f"esdq{r.pid}")
        self.h.assert_clean()

    def test_bad_options_and_cleanup_of_a_killed_railcap(self) -> None:
        for args, message in ((["--rails", "5"], "[netns] rails: expected an integer in 1..4"),
                              (["--mtu", "99999"], "[netns] mtu: expected an integer in "
                                                   "576..9216"),
                              (["--shaping", "10zz"], "'10zz' is not a tc rate")):
            r = self.h.run("railcap-bad", [sys.executable, RAILCAP] + args, 30)
            self.assertEqual(r.returncode, 2, r.describe())
            self.assertIn(message, r.output)
        p = self.h.start("railcap-long", [sys.executable, RAILCAP, "--rails", "2",
                                          "--shaping", RATE, "--seconds", "60"])
        tag = f"esdq{p.pid}"
        deadline = time.monotonic() + 30
        while len([n for n in netns_names() if n.startswith(tag + "-")]) < 3:
            if p.returncode is not None or time.monotonic() > deadline:
                self.fail(f"railcap did not build its cluster:\n{p.tail(30)}")
            time.sleep(0.1)
        # While it runs, --cleanup leaves its namespaces alone (and says
        # so) ... Only its own are looked at: what another test, or a suite
        # beside this one, left is theirs to clean up and check.
        c = self.h.run("cleanup-live", [sys.executable, DAQRUN, "--cleanup", str(p.pid)], 60)
        self.assertEqual(c.returncode, 0, c.describe())
        self.assertNotIn("removed", c.output)
        self.assertIn(f"left alone 3 object(s) of pid {p.pid}, which still runs", c.output)
        self.assertIn("railcap.py", c.output)
        self.assertEqual(len([n for n in netns_names() if n.startswith(tag + "-")]), 3)
        # ... and once it is killed, removes them.
        os.kill(p.pid, signal.SIGKILL)
        p.popen.wait(timeout=10)
        c = self.h.run("cleanup", [sys.executable, DAQRUN, "--cleanup", str(p.pid)], 60)
        self.assertEqual(c.returncode, 0, c.describe())
        self.assertIn(f"removed network namespace {tag}-cap0", c.output)
        assert_nothing_left(self, tag)
        self.h.assert_clean(settle_s=10)

