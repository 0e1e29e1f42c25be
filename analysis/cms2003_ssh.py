"""analysis/cms2003.py --hosts FILE: the CMS 2003 measurement on real hosts
over the launcher's ssh backend (docs/DEPLOY.md, "The CMS 2003 measurement
on a real cluster").

FILE lists the cluster's hosts as a topology does: `[hosts.NAME]` tables
with the keys of docs/TOPOLOGY.md (`ssh`, `address` or `addresses` one per
rail, `workdir`, `bin`, `ssh_port`, `ssh_options`, ...) and, optionally,
the `[ssh]` table of defaults. The first 2N hosts in file order are the N x
N configuration's b0 .. b(N-1) (builders; the hub on b0) and r0 .. r(N-1)
(readers, each with its source): each configuration's topology is that
file's host tables under those names, with `[deploy] backend = "ssh"`,
each host's first K addresses for a configuration of K rails, and no
shaping (the rate is the wire's).

Nothing on the hosts is changed but the run directories: the rails' MTU is
read (`ip -o addr`, `ip -o link`) and reported, the CPU idle share is each
host's /proc/stat before and after a run (the busiest host's is shown), and
the rail capacity is iperf3 from r0 to b0 on each rail (railcap's Iperf
through the ssh backend).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import tomllib
from pathlib import Path

import railcap
from daqlib.backends import BACKENDS, Backend
from daqlib.schema import TopologyError
from daqlib.topology import load_topology, resolve_topology

TABLES = ("ssh", "hosts")


class Cluster:
    """The hosts of FILE and what the measurement asks of them."""

    def __init__(self, path: Path, bin_dir: Path, iperf_port: int = railcap.PORT,
                 iperf3: str = "iperf3"):
        self.path, self.bin_dir = path, bin_dir
        self.iperf_port, self.iperf3 = iperf_port, iperf3
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise TopologyError(f"cannot read hosts file {path}: {e.strerror}") from e
        except tomllib.TOMLDecodeError as e:
            raise TopologyError(f"hosts file {path}: not valid TOML: {e}") from e
        extra = [k for k in doc if k not in TABLES]
        if extra:
            raise TopologyError(f"{path}: [{extra[0]}] does not belong in a hosts file (only "
                                f"[hosts.NAME] tables and [ssh]; cms2003.py writes the rest)")
        self.hosts: dict[str, dict] = doc.get("hosts") or {}
        self.ssh: dict = doc.get("ssh") or {}
        if not self.hosts or not isinstance(self.hosts, dict):
            raise TopologyError(f"{path}: no hosts: list them as [hosts.NAME] tables with "
                                f"`ssh = \"user@node\"` and `address`")
        self.names = list(self.hosts)
        first = self.names[0]
        # The launcher's own checks of every host, naming the file's hosts.
        resolve_topology({"deploy": {"backend": "ssh"}, "ssh": self.ssh, "hosts": self.hosts,
                          "run": {"events": 1}, "builder": {"host": first},
                          "reader": [{"id": 0, "sources": [0], "host": first}]}, str(path))

    # -- the hosts of a configuration ----------------------------------------
    def missing(self, n: int) -> str | None:
        """Why FILE cannot hold the N x N configuration, or None."""
        need = 2 * n
        if len(self.names) >= need:
            return None
        return (f"{self.path} lists {len(self.names)} host(s); the {n}x{n} configuration "
                f"needs {need}: b0..b{n - 1} and r0..r{n - 1} are the first {need} in file "
                f"order (add hosts, or choose the configurations with --n / --quick)")

    def roles(self, n: int) -> dict[str, str]:
        """{b0: the first host's name, ..., r0: the (N+1)th's, ...}."""
        names = [f"b{i}" for i in range(n)] + [f"r{i}" for i in range(n)]
        return dict(zip(names, self.names))

    def addresses(self, name: str) -> list[str]:
        h = self.hosts[name]
        return list(h.get("addresses") or [h.get("address") or
                                             str(h.get("ssh") or name).rpartition("@")[2]])

    def rails(self, n: int) -> int:
        """The rails every host of the N x N configuration has."""
        return min(len(self.addresses(h)) for h in self.roles(n).values())

    def tables(self, n: int, rails: int) -> str:
        """[deploy], [ssh] and the [hosts.b0] ... tables of a topology: FILE's
        host tables under the role names, with the first `rails` addresses."""
        text = '[deploy]\nbackend = "ssh"\n\n'
        if self.ssh:
            text += "[ssh]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                        for k, v in self.ssh.items()) + "\n"
        for role, name in self.roles(n).items():
            h = dict(self.hosts[name])
            listed = h.pop("addresses", None)
            if listed:
                if rails == 1:
                    h["address"] = listed[0]
                else:
                    h["addresses"] = listed[:rails]
            text += f"[hosts.{role}]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                                  for k, v in h.items()) + "\n"
        return text

    def describe(self, n: int) -> dict[str, dict]:
        return {role: {"host": name, "rails": self.addresses(name)}
                for role, name in self.roles(n).items()}

    def backend(self, topology: Path, hosts: list[str], run_dir: Path) -> Backend:
        """The ssh backend of a configuration's topology, on hosts of it."""
        t = load_topology(str(topology), [])
        specs = t.host_specs()
        run_dir.mkdir(parents=True, exist_ok=True)
        return BACKENDS["ssh"]({h: specs[h] for h in hosts}, run_dir, self.bin_dir,
                               t.backend_options(), say=lambda _line: None)

    # -- what is read on the hosts -------------------------------------------
    @staticmethod
    def on_hosts(be: Backend, argv: list[str], timeout: float = 60) -> dict[str, str]:
        """argv's output on every host of be, the hosts at once."""
        procs = {h: subprocess.Popen(be.host_command(h, argv), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for h in be.hosts}
        out = {}
        for h, p in procs.items():
            stdout, stderr = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise railcap.LaunchError(f"on host {h}: `{' '.join(argv)}` failed (status "
                                          f"{p.returncode}): {stderr.decode(errors='replace')}")
            out[h] = stdout.decode(errors="replace")
        return out

    def cpu_times(self, be: Backend) -> dict[str, tuple[int, int]]:
        """{host: (idle + iowait, total) jiffies} from each host's /proc/stat."""
        out = {}
        for h, text in self.on_hosts(be, ["head", "-n", "1", "/proc/stat"]).items():
            fields = [int(x) for x in text.split()[1:]]
            out[h] = (fields[3] + fields[4], sum(fields[:8]))
        return out

    def mtus(self, be: Backend) -> dict[str, list]:
        """{host: [(interface, MTU) of each rail's address, or None]}."""
        texts = self.on_hosts(be, ["sh", "-c", "ip -o addr show; echo ---; ip -o link show"])
        out = {}
        for h, text in texts.items():
            addrs, _, links = text.partition("---\n")
            mtu = {}
            for line in links.splitlines():
                w = line.split()
                if len(w) > 4 and "mtu" in w:
                    mtu[w[1].rstrip(":").split("@")[0]] = int(w[w.index("mtu") + 1])
            iface = {}
            for line in addrs.splitlines():
                w = line.split()
                if len(w) > 3 and w[2] in ("inet", "inet6"):
                    iface[ipaddress.ip_interface(w[3])] = w[1]
            rails = []
            for a in be.rail_addresses(h):
                dev = interface_of(iface, ip_of(a))
                rails.append([dev, mtu.get(dev)] if dev else None)
            out[h] = rails
        return out

    def capacity(self, topology: Path, run_dir: Path, seconds: float, say) -> dict:
        """railcap from r0 to b0 over ssh on each rail of the configuration."""
        be = self.backend(topology, ["b0", "r0"], run_dir / "railcap")
        try:
            be.prepare("b0")
            return railcap.measure_rails(be, "r0", "b0", 4, seconds, say=say,
                                         port=self.iperf_port, program=self.iperf3)
        finally:
            be.teardown()


def ip_of(address: str) -> str:
    """address as ip prints it: itself if an IP, else what it resolves to here."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        try:
            return socket.gethostbyname(address)
        except OSError:
            return address


def interface_of(iface: dict, address: str) -> str | None:
    """The interface holding address, else the one whose subnet has it (the
    127.0.0.0/8 of lo)."""
    try:
        a = ipaddress.ip_address(address)
    except ValueError:
        return None
    exact = [dev for i, dev in iface.items() if i.ip == a]
    within = [dev for i, dev in iface.items() if a in i.network]
    return (exact or within or [None])[0]


def mtu_line(mtus: dict[str, list], rails: int) -> str:
    """Each rail's MTU on the hosts: "rail 0 MTU 1500 (eth0)" when all
    agree, else the hosts of each value."""
    parts = []
    for r in range(rails):
        seen: dict[str, list[str]] = {}
        for h, per_rail in mtus.items():
            x = per_rail[r] if r < len(per_rail) else None
            key = f"{x[1]} ({x[0]})" if x else "unknown (address on no interface)"
            seen.setdefault(key, []).append(h)
        if len(seen) == 1:
            parts.append(f"rail {r} MTU {next(iter(seen))}")
        else:
            parts.append(f"rail {r} MTU " + "; ".join(f"{k} on {', '.join(v)}"
                                                     for k, v in seen.items()))
    return ", ".join(parts)


def idle_share(before: dict, after: dict) -> dict[str, float]:
    return {h: (after[h][0] - before[h][0]) / max(1, after[h][1] - before[h][1])
            for h in before}
