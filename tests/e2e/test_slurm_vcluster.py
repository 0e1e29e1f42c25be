"""The virtual Slurm cluster (deploy/slurm-vcluster; docs/DEPLOY.md, "A
virtual Slurm cluster"): three nodes, each a network namespace with its
slurmd, come up idle; srun runs a task on every node and each sees its own
namespace address; an sbatch --wrap job runs and completes; scancel of a
running job leaves nothing in squeue nor on the node; `down` leaves no
daemon, namespace, veth, route or spool directory. An `up` that fails (a
port taken, a --dir that cannot be made) names the reason and removes what
it made; one interrupted or killed halfway leaves nothing (after `down`); a
subnet already routed (another cluster's) and a bad --subnet are refused.

Needs root, ip, nsenter and unshare, and Debian's slurmctld, slurmd,
slurm-client and munge (the script installs them when missing; skipped with
the reason when that cannot be done). Each cluster takes a /24 of
198.18.0.0/15 (--subnet) that no other on this machine uses: one derived
from this process's pid and not routed here (another suite beside this one
starts from another), retried on another should an `up` find it taken
meanwhile. It is used only inside the namespaces the cluster makes and on
their one veth into the root namespace.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from harness import REPO, E2ETestCase

from daqlib import slurm_vcluster as vc
from daqlib.backends.netns import netns_names

VCLUSTER = REPO / "deploy" / "slurm-vcluster"
_unavailable: list[str | None] = []


def unavailable() -> str | None:
    """Why the virtual Slurm cluster cannot be built here (checked once)."""
    if not _unavailable:
        why = None
        if os.geteuid() != 0:
            why = "needs root (network namespaces, veth pairs, slurmd)"
        for tool in ("ip", "nsenter", "unshare", "ping"):
            if why is None and shutil.which(tool) is None:
                why = f"{tool} not found"
        if why is None and vc.missing_packages():
            try:
                vc.install_packages()
            except (vc.ClusterError, OSError, subprocess.SubprocessError) as e:
                why = f"Debian's Slurm packages cannot be installed: {e}"
        _unavailable.append(why)
    return _unavailable[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


# The /24s of 198.18.0.0/15 the tests' clusters take, but the first 16 (the
# default 198.18.0.0/24 of a cluster brought up by hand, and the netns
# backend's rails).
_SUBNETS = [ipaddress.ip_network(f"198.{18 + i // 256}.{i % 256}.0/24") for i in range(16, 512)]


def free_subnet(skip: set = frozenset()) -> ipaddress.IPv4Network:
    """A subnet for this process's next cluster: the first not routed here
    (nor in skip), from one that depends on this process's pid, so that a
    suite running beside this one looks elsewhere first."""
    start = os.getpid() % len(_SUBNETS)
    for k in range(len(_SUBNETS)):
        net = _SUBNETS[(start + k) % len(_SUBNETS)]
        if net not in skip and not vc.routed(net):
            return net
    raise AssertionError("every /24 of 198.18.16.0 ... 198.19.255.0 is routed here")


def up_on_a_free_subnet(run, attempts: int = 5):
    """run(subnet) -> a Result of `slurm-vcluster up ... --subnet SUBNET`,
    tried on another subnet when the one chosen was taken meanwhile (by a
    cluster of a suite beside this one); (result, subnet)."""
    tried: set = set()
    for _ in range(attempts):
        subnet = free_subnet(tried)
        tried.add(subnet)
        r = run(subnet)
        if r.returncode == 0 or "is already routed here" not in r.output:
            return r, subnet
    return r, subnet


def node_address(subnet: ipaddress.IPv4Network, n: int) -> str:
    return str(subnet.network_address + n)


class SlurmVclusterTest(E2ETestCase):

    def setUp(self) -> None:
        why = unavailable()
        if why:
            self.skipTest(why)
        super().setUp()
        self.vdir = self.h.dir / "vc"
        self.port = free_port()
        self.subnet = free_subnet()
        self.env = {"SLURM_CONF": str(self.vdir / "slurm.conf")}
        # Whatever happens, nothing of this test's cluster stays.
        self.addCleanup(lambda: subprocess.run([str(VCLUSTER), "down", "--dir", str(self.vdir)],
                                               stdin=subprocess.DEVNULL, capture_output=True,
                                               timeout=60))

    def vcluster(self, *args, timeout_s: float = 90):
        return self.h.run(f"vcluster-{args[0]}-{self.h._next()}", [VCLUSTER, *args], timeout_s)

    def slurm(self, *argv, timeout_s: float = 30):
        r = self.h.run(f"{argv[0]}-{self.h._next()}", list(argv), timeout_s, env=self.env)
        self.assertEqual(r.returncode, 0, r.describe())
        return r.output

    def state(self) -> dict:
        return json.loads((self.vdir / "vcluster.json").read_text(encoding="utf-8"))

    def addr(self, n: int) -> str:
        """Node n's address on this test's subnet."""
        return node_address(self.subnet, n)

    def assertNothingLeft(self, tag: str) -> None:
        """No daemon of the cluster, namespace, veth, route or spool."""
        deadline = time.monotonic() + 5
        while True:
            procs = []
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{d}/cmdline").read_bytes()
                except OSError:
                    continue
                if str(self.vdir).encode() in cmd:       # zombies have none
                    shown = cmd.replace(b"\0", b" ").decode(errors="replace")
                    procs.append(f"{d} {shown}")
            if not procs or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(procs, [], "daemons left")
        self.assertEqual([n for n in netns_names() if n.startswith(tag + "-")], [],
                         "namespaces left")
        self.assertFalse(Path(f"/sys/class/net/{tag}").exists(), f"veth {tag} left")
        routes = subprocess.run(["ip", "route", "show", str(self.subnet)], capture_output=True,
                                text=True).stdout
        self.assertEqual(routes.strip(), "", "route left")
        for sub in ("spool", "ctld", "munge", "run", "slurm.conf", "vcluster.json"):
            self.assertFalse((self.vdir / sub).exists(), f"{self.vdir / sub} left")

    def up(self, *args: str) -> tuple[str, dict[str, str]]:
        r, self.subnet = up_on_a_free_subnet(
            lambda subnet: self.vcluster("up", "--dir", self.vdir, "--port", self.port,
                                         "--subnet", subnet, *args))
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("every node idle", r.output)
        self.assertIn(f"export SLURM_CONF={self.vdir / 'slurm.conf'}", r.output)
        st = self.state()
        return st["tag"], st["nodes"]

    def test_jobs_on_every_node_then_down(self) -> None:
        tag, nodes = self.up("--hosts", "3")
        self.assertEqual(nodes, {"host-1": self.addr(1), "host-2": self.addr(2),
                                 "host-3": self.addr(3)})
        conf = (self.vdir / "slurm.conf").read_text(encoding="utf-8")
        for line in ("SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
                     "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
                     f"NodeName=host-2 NodeAddr={self.addr(2)}",
                     f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.addr(254)})"):
            self.assertIn(line, conf)
        self.assertEqual(sorted(self.slurm("sinfo", "-h", "-N", "-o", "%N %T").split()),
                         sorted([n for n in nodes] + ["idle"] * 3))
        # One task per node, each on its own node with its namespace's address.
        out = self.slurm("srun", "-N3", "-l", "sh", "-c",
                         'echo "$(hostname) $SLURMD_NODENAME $SLURM_JOB_ID '
                         '$(ip -4 -o addr show eth0)"')
        seen = {}
        for line in out.splitlines():
            m = re.match(r"^(\d+): (\S+) (\S+) (\d+) .* inet ([\d.]+)/24", line)
            if m:
                seen[m.group(2)] = (m.group(3), m.group(5))
        self.assertEqual(seen, {n: (n, a) for n, a in nodes.items()}, out)
        for name, addr in nodes.items():
            out = self.slurm("srun", "-w", name, "ip", "-4", "-o", "addr", "show", "eth0")
            self.assertIn(f"inet {addr}/24", out)
        # A batch job runs and completes.
        job_out = self.vdir / "logs" / "job-%j.out"
        job = self.slurm("sbatch", "--parsable", "--wait", "-w", "host-2", "-o", job_out,
                         "--wrap", "hostname; ip -4 -o addr show eth0").strip()
        self.assertRegex(job, r"^\d+$")
        text = Path(str(job_out).replace("%j", job)).read_text(encoding="utf-8")
        self.assertIn("host-2", text)
        self.assertIn(f"inet {self.addr(2)}/24", text)
        self.assertIn("JobState=COMPLETED", self.slurm("scontrol", "show", "job", job))
        # scancel of a running job: gone from squeue and from its node.
        job = self.slurm("sbatch", "--parsable", "-w", "host-3", "--wrap", "sleep 60").strip()
        ns = f"{tag}-host-3"

        def sleepers() -> list[str]:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            return [p for p in pids
                    if Path(f"/proc/{p}/cmdline").exists()
                    and Path(f"/proc/{p}/cmdline").read_bytes() == b"sleep\x0060\x00"]

        deadline = time.monotonic() + 20
        while not sleepers():
            self.assertLess(time.monotonic(), deadline, "sleep 60 never started on host-3")
            time.sleep(0.1)
        self.assertIn(" R ", self.slurm("squeue", "-h", "-j", job, "-o", " %t "))
        self.slurm("scancel", job)
        deadline = time.monotonic() + 20
        while self.slurm("squeue", "-h").strip() or sleepers():
            self.assertLess(time.monotonic(), deadline, "the cancelled job stays")
            time.sleep(0.2)
        r = self.vcluster("status", "--dir", self.vdir)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(f"subnet {self.subnet}", r.output)
        r = self.vcluster("down", "--dir", self.vdir)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(f"down {tag}: stopped munged, slurmctld, slurmd-host-1", r.output)
        self.assertNothingLeft(tag)
        self.assertTrue((self.vdir / "logs" / "slurmctld.log").exists())
        r = self.vcluster("status", "--dir", self.vdir)
        self.assertEqual(r.returncode, 3, r.describe())

    def test_nodes_of_a_topology(self) -> None:
        tag, nodes = self.up(str(REPO / "deploy" / "topologies" / "three-hosts.toml"))
        self.assertEqual(nodes, {"builder": self.addr(1), "readout0": self.addr(2),
                                 "readout1": self.addr(3)})
        out = self.slurm("srun", "-w", "readout1", "hostname")
        self.assertEqual(out.strip(), "readout1")
        # A second cluster on the same subnet is refused by name, and what it
        # made removed; this one goes on.
        other = self.h.dir / "vc2"
        r = self.vcluster("up", "--hosts", "1", "--dir", other, "--port", free_port(),
                          "--subnet", self.subnet)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn(f"up failed: {self.subnet} is already routed here ({self.subnet} dev "
                      f"{tag}: another virtual cluster?); bring it down first or choose "
                      f"another --subnet; removed what it had made", r.output)
        self.assertEqual([n for n in netns_names() if n.startswith(f"essl{r.pid}-")], [])
        self.assertFalse((other / "vcluster.json").exists())
        self.assertEqual(self.slurm("srun", "-w", "builder", "hostname").strip(), "builder")
        self.assertEqual(self.vcluster("down", "--dir", self.vdir).returncode, 0)
        self.assertNothingLeft(tag)

    def test_bad_subnet(self) -> None:
        for subnet, why in (("10.0.0.0/24", "not a /24 of 198.18.0.0/15"),
                            ("198.20.1.0/24", "not a /24 of 198.18.0.0/15"),
                            ("198.18.0.0/16", "not a /24 of 198.18.0.0/15"),
                            ("198.18.3.7/24", "not an IPv4 network"),
                            ("nearby", "not an IPv4 network")):
            with self.subTest(subnet=subnet):
                r = self.vcluster("up", "--hosts", "1", "--dir", self.vdir, "--subnet", subnet)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(f"error: --subnet {subnet}: {why}", r.output)
                self.assertFalse(self.vdir.exists())

    def test_port_taken(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", self.port))
            s.listen()
            r, self.subnet = up_on_a_free_subnet(
                lambda subnet: self.vcluster("up", "--hosts", "2", "--dir", self.vdir, "--port",
                                             self.port, "--subnet", subnet))
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn(f"up failed: slurmctld cannot listen: port {self.port} is taken", r.output)
        self.assertIn("removed what it had made", r.output)
        tag = re.search(r"switch (essl\d+)-sw", r.output).group(1)
        self.assertNothingLeft(tag)

    def test_dir_that_cannot_be_made(self) -> None:
        blocker = self.h.path("a-file")
        blocker.write_text("not a directory\n")
        self.vdir = blocker / "vc"
        r = self.vcluster("up", "--hosts", "2", "--dir", self.vdir, "--subnet", self.subnet)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn(f"up failed: cannot create {self.vdir}: Not a directory", r.output)
        # Nothing of this `up` (its pid names what it makes); other clusters
        # on this machine are not this test's to count.
        self.assertEqual([n for n in netns_names() if n.startswith(f"essl{r.pid}-")], [])
        self.assertFalse(Path(f"/sys/class/net/essl{r.pid}").exists())

    def interrupt_up(self, sig: int) -> tuple[str, int]:
        """Starts `up` and sends sig once slurmctld is started; (tag, status)."""
        p = self.h.start("vcluster-up", [VCLUSTER, "up", "--hosts", "3", "--dir", self.vdir,
                                         "--port", str(self.port), "--subnet", str(self.subnet)])
        deadline = time.monotonic() + 60
        state = {}
        while p.popen.poll() is None:
            try:
                state = self.state()
            except (OSError, ValueError):
                state = {}
            if "slurmctld" in state.get("pids", {}):
                p.popen.send_signal(sig)
                break
            self.assertLess(time.monotonic(), deadline, "up never started slurmctld")
            time.sleep(0.005)
        rc = p.popen.wait(timeout=60)
        tag = state.get("tag") or re.search(r"switch (essl\d+)-sw", p.log()).group(1)
        return tag, rc

    def test_interrupted_up_removes_what_it_made(self) -> None:
        tag, rc = self.interrupt_up(signal.SIGTERM)
        if rc == 0:       # it finished before the signal came: nothing to interrupt
            self.assertEqual(self.vcluster("down", "--dir", self.vdir).returncode, 0)
        else:
            self.assertEqual(rc, 130)
            log = (self.h.dir / "logs" / "vcluster-up.log").read_text()
            self.assertIn("up failed: interrupted; removed what it had made", log)
        self.assertNothingLeft(tag)

    def test_killed_up_then_down(self) -> None:
        tag, rc = self.interrupt_up(signal.SIGKILL)
        r = self.vcluster("down", "--dir", self.vdir)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(f"down {tag}: stopped munged, slurmctld", r.output)
        self.assertNothingLeft(tag)
