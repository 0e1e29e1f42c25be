"""A virtual cluster on one machine: one network namespace per host.

    esdq<pid>-sw         the switch: a bridge per rail, br0 (rail 0), br1, ...,
                         one veth end per host on each (p<i> on br0, r<R>p<i>
                         on br<R>)
    esdq<pid>-<host>     a host: lo, eth0 (the other veth end) at 198.18.0.<n>/24,
                         and with `rails` = K > 1 eth<R> at 198.18.<R>.<n>/24

Everything is created inside namespaces of this run (veth pairs are made in
the switch namespace with their other end moved straight into the host's),
so nothing appears in the machine's own network namespace and nothing
leaves the bridges of 198.18.0.0/24 ... 198.18.<K-1>.0/24 (all within
198.18.0.0/15). Each rail is a subnet of its own on an interface of its
own, so traffic to a host's rail-R address goes over rail R. `mtu` sets
the MTU of every veth end and bridge of every rail (jumbo frames: 9000).
Optional shaping puts a token-bucket filter (tc tbf; this kernel has no
netem, so rate only, no added delay) on both ends of every host's link on
every rail: a full-duplex link of that rate to a switch per rail, e.g.
gigabit Ethernet.

Each host runs a chronyd (-x: the system clock is never touched) with its
command socket in a 0700 root-owned directory /tmp/esdq<pid>-chrony/<host>/;
the builder's host serves `local stratum 8`, the others follow it, and each
daemon reads its own host's chronyd through ES_CHRONY_SOCKET. Daemons run
as `ip netns exec NS unshare --uts` under the host's name, so builderd sees
distinct hosts exactly as across machines.

teardown() stops the chronyds, kills anything left in the namespaces and
deletes them (which removes the veths and the bridge), and removes the
chrony directory; every child also dies with the launcher (PDEATHSIG) and
deploy/daqrun --cleanup removes what a killed launcher left.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..schema import MAX_RAILS, Key, TopologyError
from .base import LaunchError, die_with_parent_fn, register, run_cmd, stop_processes, text
from .local import LocalBackend

SUBNET = ipaddress.ip_network("198.18.0.0/24")       # rail 0; the daemons' addresses
# The MTU of every rail: IPv4's smallest datagram every host takes, up to a
# jumbo frame of common switches.
MTU_MIN, MTU_MAX = 576, 9216
NTP_PORT = 123
CHRONY_STRATUM = 8


def rail_subnet(rail: int) -> ipaddress.IPv4Network:
    """Rail R's subnet, 198.18.R.0/24 (rail 0's is SUBNET)."""
    return ipaddress.ip_network(f"198.18.{rail}.0/24")


def rail_address(rail0: str, rail: int) -> str:
    """A host's address on rail R: 198.18.R.N for its rail-0 address 198.18.0.N."""
    return str(rail_subnet(rail).network_address + (int(ipaddress.ip_address(rail0)) & 0xff))


def rail_names(rail: int, index: int) -> tuple[str, str, str]:
    """(bridge, switch port, host interface) of host number index on rail R;
    rail 0's are those of a one-rail cluster: br0, p<i>, eth0."""
    port = f"p{index}" if rail == 0 else f"r{rail}p{index}"
    return f"br{rail}", port, f"eth{rail}"


def netns_names() -> list[str]:
    r = run_cmd(["ip", "netns", "list"], check=False)
    # Lines are "NAME" or "NAME (id: N)".
    return [line.split()[0] for line in text(r).splitlines() if line.strip()]


def netns_pids(ns: str) -> list[int]:
    r = run_cmd(["ip", "netns", "pids", ns], check=False)
    return [int(w) for w in text(r).split() if w.isdigit()]


def delete_netns(ns: str) -> str | None:
    """Kills every process left in ns and deletes it; a problem, or None."""
    for pid in netns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while netns_pids(ns) and time.monotonic() < deadline:
        time.sleep(0.05)
    r = run_cmd(["ip", "netns", "del", ns], check=False)
    err = r.stderr.decode(errors="replace").strip()
    if r.returncode != 0 and "No such file" not in err:
        return f"ip netns del {ns}: {err}"
    return None


def chrony_tracking(sock: Path) -> tuple[bool, str]:
    """(synchronised, the CSV line or chronyc's words) of the chronyd at sock."""
    try:
        r = run_cmd(["chronyc", "-h", str(sock), "-c", "tracking"], check=False, timeout=5)
    except LaunchError as e:
        return False, str(e)
    line = (text(r) + r.stderr.decode(errors="replace")).strip()
    fields = line.split(",")
    ok = len(fields) == 14 and fields[13] == "Normal" and fields[2] not in ("0", "16")
    return ok, line


@register("netns")
class NetnsBackend(LocalBackend):
    """One network namespace per host on 198.18.0.0/24, joined by veth pairs
    to a bridge, and one more bridge and veth per host for every further
    rail (198.18.R.0/24); optional MTU and tbf shaping on every rail's links;
    a chronyd per host."""

    needs_hosts = True
    options_title = "the virtual cluster"
    options = {
        "rails": Key("int", 1, 1, MAX_RAILS, "network interfaces per host, each on a bridge "
                                             "of its own: rail R is 198.18.R.0/24, a host's "
                                             "eth<R> at 198.18.R.N (N as on rail 0); a "
                                             "reader's TCP link to a builder on another host "
                                             "is one connection per rail (docs/BUILDERS.md, "
                                             "Rails)"),
        "mtu": Key("int", None, MTU_MIN, MTU_MAX, "MTU of every veth end and bridge of every "
                                                  "rail, e.g. `9000` (jumbo frames)",
                   shown="the kernel's (1500)"),
        "shaping": Key("str", "none", doc="tbf rate on both ends of every host's link on "
                                          "every rail, e.g. `\"1gbit\"` (gigabit Ethernet); "
                                          "`\"none\"` = off"),
        "shaping_burst": Key("str", "16kb", doc="tbf burst"),
        "shaping_latency": Key("str", "10ms", doc="tbf queue length"),
        "chrony": Key("bool", True, doc="a chronyd per host, the builder's (the hub's) host "
                                        "serving the others"),
        "chrony_timeout_s": Key("number", 30, 1, 3600, "how long every chronyd may take to "
                                                       "synchronise (else the run fails)"),
        "chrony_max_skew_ppm": Key("number", 5, 0, 10**6, "then wait until every skew is this "
                                                          "low ..."),
        "chrony_settle_s": Key("number", 10, 0, 3600, "... but at most this long"),
    }
    host_keys = {
        "netns_address": Key("str", None, doc=f"its address in the virtual cluster (must be "
                                              f"in {SUBNET}): rail 0's; 198.18.0.N makes it "
                                              f"198.18.R.N on rail R",
                             shown="198.18.0.N, N = position in `[hosts]` + 1"),
        "shaping": Key("str", None, doc="tbf rate of its link on every rail, e.g. "
                                        "`\"1gbit\"`; `\"none\"` = off",
                       shown="`[netns] shaping`"),
    }

    @classmethod
    def validate(cls, where, hosts, options):
        seen: dict[str, str] = {}
        for name, h in hosts.items():
            if h["netns_address"] is not None:
                why = cls.check_address(f"[hosts.{name}] netns_address", h["netns_address"])
                if why:
                    raise TopologyError(f"{where} {why}")
                if h["netns_address"] in seen:
                    raise TopologyError(f"{where} [hosts.{name}] netns_address: "
                                        f"{h['netns_address']} is also {seen[h['netns_address']]}'s")
                seen[h["netns_address"]] = name
        if len(hosts) > 250:
            raise TopologyError(f"{where} [hosts]: at most 250 hosts fit in the virtual cluster")
        rails = options.get("rails") or 1
        for name, h in hosts.items():
            listed = h.get("addresses")
            if listed is not None and len(listed) != rails:
                raise TopologyError(
                    f"{where} [hosts.{name}] addresses: {len(listed)} address(es), one per "
                    f"rail, but [netns] rails = {rails}: set netns.rails={len(listed)}, or "
                    f"list {rails} (the virtual cluster gives host N 198.18.R.N on rail R "
                    f"whatever they are)")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.switch = f"{self.tag}-sw"
        self.ns = {h: f"{self.tag}-{h}" for h in self.hosts}
        self.addr: dict[str, str] = {}                # rail 0: the daemons' addresses
        self.rails = int(self.options.get("rails") or 1)
        self.mtu: int | None = self.options.get("mtu")
        self.rail_addr: dict[str, list[str]] = {}     # every rail's, rail 0 first
        self.created: list[str] = []              # namespaces, in creation order
        self.chrony_dir = Path(f"/tmp/{self.tag}-chrony")
        self.chronyds: dict[str, subprocess.Popen] = {}
        self.sockets: dict[str, Path] = {}
        self.tracking: dict[str, str] = {}
        self.shaping: dict[str, str | None] = {}
        self.builder_host: str | None = None
        self._torn_down = False
        self._assign_addresses()

    # -- configuration ----------------------------------------------------
    def _assign_addresses(self) -> None:
        used: dict[str, str] = {}
        for h, spec in self.hosts.items():
            if spec.netns_address:
                used[spec.netns_address] = h
        free = (str(a) for a in SUBNET.hosts() if str(a) not in used)
        for h, spec in self.hosts.items():
            self.addr[h] = spec.netns_address or next(free)
            self.rail_addr[h] = [rail_address(self.addr[h], r) for r in range(self.rails)]

    @staticmethod
    def check_address(where: str, value: str) -> str | None:
        """Why value cannot be a host's address in the virtual cluster."""
        try:
            a = ipaddress.ip_address(value)
        except ValueError:
            return f"{where}: {value!r} is not an IPv4 address"
        if a not in SUBNET or a in (SUBNET.network_address, SUBNET.broadcast_address):
            return f"{where}: {value} is not a host address of {SUBNET}"
        return None

    def link_rate(self, host: str) -> str | None:
        spec = self.hosts[host].shaping
        rate = spec if spec is not None else self.options.get("shaping")
        return None if rate in (None, "", "none", "off") else rate

    def address(self, host):
        return self.addr[host]

    def status_address(self, host):
        return "127.0.0.1"               # the host's own loopback, read from inside it

    def netns_path(self, host):
        return f"/run/netns/{self.ns[host]}" if host in self.ns else None

    def rail_addresses(self, host):
        return list(self.rail_addr[host])

    def env(self, host):
        out = super().env(host)
        if host in self.sockets:
            out["ES_CHRONY_SOCKET"] = str(self.sockets[host])
        return out

    def wrap(self, host, argv):
        return ["ip", "netns", "exec", self.ns[host], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', host] + list(argv)

    def host_command(self, host, argv):
        return ["ip", "netns", "exec", self.ns[host]] + list(argv)

    def preexec(self):
        return die_with_parent_fn()

    def describe(self):
        return {
            "switch_namespace": self.switch,
            "subnet": str(SUBNET),
            "rails": self.rails,
            "rail_subnets": [str(rail_subnet(r)) for r in range(self.rails)],
            "mtu": self.mtu,
            "hosts": {h: {"address": self.addr[h], "namespace": self.ns[h],
                          "rails": self.rail_addr[h],
                          "shaping": self.shaping.get(h, self.link_rate(h)),
                          "chrony_socket": str(self.sockets[h]) if h in self.sockets else None,
                          "chrony_tracking_at_start": self.tracking.get(h)}
                      for h in self.hosts},
            "shaping": {"qdisc": "tbf", "burst": self.options.get("shaping_burst"),
                        "latency": self.options.get("shaping_latency")},
            "chrony": {"server": self.builder_host, "stratum": CHRONY_STRATUM,
                       "enabled": bool(self.options.get("chrony", True))},
        }

    # -- set-up -------------------------------------------------------------
    @staticmethod
    def unavailable(chrony: bool, shaping: bool) -> str | None:
        """Why a virtual cluster cannot be made here, or None."""
        if os.geteuid() != 0:
            return "the netns backend needs root (ip netns, veth, tc, chronyd)"
        tools = ["ip", "unshare"] + (["chronyd", "chronyc"] if chrony else []) + \
            (["tc"] if shaping else [])
        for tool in tools:
            if shutil.which(tool) is None:
                return f"the netns backend needs {tool}, which is not installed"
        return None

    def _ns_add(self, ns: str) -> None:
        run_cmd(["ip", "netns", "add", ns])
        self.created.append(ns)

    def prepare(self, builder_host):
        self.builder_host = builder_host
        chrony = bool(self.options.get("chrony", True))
        why = self.unavailable(chrony, any(self.link_rate(h) for h in self.hosts))
        if why:
            raise LaunchError(why)
        taken = [n for n in netns_names() if n.startswith(self.tag + "-")]
        if taken:
            raise LaunchError(f"network namespaces {', '.join(taken)} already exist "
                              f"(left by an earlier launcher with this pid?); remove them "
                              f"with deploy/daqrun --cleanup")
        sw = self.switch
        self._ns_add(sw)
        for rail in range(self.rails):
            run_cmd(["ip", "-n", sw, "link", "add", rail_names(rail, 0)[0], "type", "bridge"])
        for i, h in enumerate(self.hosts):
            self._ns_add(self.ns[h])
            run_cmd(["ip", "-n", self.ns[h], "link", "set", "lo", "up"])
            self.shaping[h] = self.link_rate(h)
            for rail in range(self.rails):
                self._add_link(h, i, rail)
        for rail in range(self.rails):
            bridge = rail_names(rail, 0)[0]
            if self.mtu:      # after its ports: a bridge's MTU may not exceed theirs
                run_cmd(["ip", "-n", sw, "link", "set", bridge, "mtu", str(self.mtu)])
            run_cmd(["ip", "-n", sw, "link", "set", bridge, "up"])
        shaped = {h: r for h, r in self.shaping.items() if r}
        rails = (f"; {self.rails} rails (" + ", ".join(str(rail_subnet(r))
                                                       for r in range(self.rails)) + ")"
                 if self.rails > 1 else "")
        self.say(f"virtual cluster: switch {sw}, "
                 + ", ".join(f"{h} {self.addr[h]} ({self.ns[h]})" for h in self.hosts)
                 + rails + (f"; mtu {self.mtu}" if self.mtu else "")
                 + (f"; tbf shaping {', '.join(f'{h} {r}' for h, r in shaped.items())}"
                    if shaped else "; no shaping"))
        self._wait_links()
        if chrony:
            self._start_chrony(builder_host)

    def _add_link(self, h: str, index: int, rail: int) -> None:
        """Host h's link on rail: a veth pair from the rail's bridge to the
        host's eth<rail>, its address, MTU and shaping at both ends."""
        sw, ns = self.switch, self.ns[h]
        bridge, port, dev = rail_names(rail, index)
        mtu = ["mtu", str(self.mtu)] if self.mtu else []
        run_cmd(["ip", "-n", sw, "link", "add", port] + mtu + ["type", "veth", "peer", "name",
                                                             dev] + mtu + ["netns", ns])
        run_cmd(["ip", "-n", sw, "link", "set", port, "master", bridge])
        run_cmd(["ip", "-n", sw, "link", "set", port, "up"])
        run_cmd(["ip", "-n", ns, "addr", "add",
                 f"{self.rail_addr[h][rail]}/{rail_subnet(rail).prefixlen}", "dev", dev])
        run_cmd(["ip", "-n", ns, "link", "set", dev, "up"])
        rate = self.shaping[h]
        if rate:
            burst = self.options.get("shaping_burst") or "16kb"
            latency = self.options.get("shaping_latency") or "10ms"
            for where, link in ((ns, dev), (sw, port)):
                run_cmd(["tc", "-n", where, "qdisc", "add", "dev", link, "root", "tbf",
                         "rate", rate, "burst", burst, "latency", latency])

    def _wait_links(self, timeout_s: float = 10) -> None:
        """Waits until every host reaches the others (ARP through the bridge):
        a daemon's first connect then does not meet a link still coming up."""
        if len(self.hosts) < 2:
            return
        first = next(iter(self.hosts))
        deadline = time.monotonic() + timeout_s
        for h in list(self.hosts)[1:]:
            for rail, addr in enumerate(self.rail_addr[h]):
                while True:
                    r = run_cmd(["ip", "netns", "exec", self.ns[first], "ping", "-c", "1", "-W",
                                 "1", "-q", addr], check=False, timeout=5) \
                        if shutil.which("ping") else None
                    if r is None or r.returncode == 0:
                        break
                    if time.monotonic() > deadline:
                        on = f" on rail {rail}" if self.rails > 1 else ""
                        raise LaunchError(f"host {h} ({addr}) does not answer ping from "
                                          f"{first}{on} after {timeout_s:g} s")
                    time.sleep(0.1)

    def _start_chrony(self, builder_host: str) -> None:
        self.chrony_dir.mkdir(mode=0o700)
        os.chmod(self.chrony_dir, 0o700)
        server = self.addr[builder_host]
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        # The server first, so the clients' first requests find it.
        order = [builder_host] + [h for h in self.hosts if h != builder_host]
        for h in order:
            d = self.chrony_dir / h
            d.mkdir(mode=0o700)
            sock = d / "chronyd.sock"
            if h == builder_host:
                conf = (f"# {h}: serves time to the virtual cluster\n"
                        f"local stratum {CHRONY_STRATUM}\nallow {SUBNET}\n"
                        f"bindaddress {self.addr[h]}\nport {NTP_PORT}\n")
            else:
                conf = (f"# {h}: follows {builder_host}\n"
                        f"server {server} port {NTP_PORT} iburst minpoll -4 maxpoll -4\n"
                        f"port 0\n")
            conf += (f"bindcmdaddress {sock}\ncmdport 0\npidfile {d / 'chronyd.pid'}\n"
                     f"driftfile {d / 'chronyd.drift'}\n")
            path = d / "chronyd.conf"
            path.write_text(conf, encoding="utf-8")
            log = open(logs / f"chronyd-{h}.log", "ab")
            try:
                self.chronyds[h] = subprocess.Popen(
                    ["ip", "netns", "exec", self.ns[h], "chronyd", "-x", "-u", "root", "-d",
                     "-f", str(path)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True, close_fds=True, preexec_fn=die_with_parent_fn())
            except OSError as e:
                raise LaunchError(f"cannot start chronyd for {h}: {e.strerror}") from e
            finally:
                log.close()
            self.sockets[h] = sock
        timeout_s = float(self.options.get("chrony_timeout_s") or 30)
        deadline = time.monotonic() + timeout_s
        pending = list(order)
        t0 = time.monotonic()
        while pending:
            for h in list(pending):
                proc = self.chronyds[h]
                if proc.poll() is not None:
                    raise LaunchError(f"chronyd of {h} exited with status {proc.returncode} "
                                      f"(log: {logs / f'chronyd-{h}.log'})")
                ok, line = chrony_tracking(self.sockets[h])
                if ok:
                    self.tracking[h] = line
                    pending.remove(h)
            if not pending:
                break
            if time.monotonic() > deadline:
                states = "; ".join(f"{h}: {chrony_tracking(self.sockets[h])[1]!r}"
                                   for h in pending)
                raise LaunchError(f"chronyd not synchronised after {timeout_s:g} s on "
                                  f"{', '.join(pending)} ({states}); logs in {logs}")
            time.sleep(0.2)
        synced_s = time.monotonic() - t0
        # A client that has just synchronised has few samples and a wide
        # frequency skew, which becomes the drift bound of its in-band
        # offsets: let it settle to max_skew_ppm (a few seconds at 16
        # samples/s), but not longer than settle_s.
        max_skew = float(self.options.get("chrony_max_skew_ppm") or 5)
        settle_until = time.monotonic() + float(self.options.get("chrony_settle_s") or 10)
        unsettled = []
        while True:
            unsettled = []
            for h in order:
                ok, line = chrony_tracking(self.sockets[h])
                fields = line.split(",")
                if ok:
                    self.tracking[h] = line
                try:
                    skew = float(fields[9])
                except (IndexError, ValueError):
                    skew = float("inf")
                if not ok or skew > max_skew:
                    unsettled.append(f"{h} {skew:g} ppm")
            if not unsettled or time.monotonic() > settle_until:
                break
            time.sleep(0.25)
        self.say(f"chrony: {builder_host} serves {server} (local stratum {CHRONY_STRATUM}); "
                 f"{len(order)} chronyd synchronised in {synced_s:.1f} s"
                 + (f", skew below {max_skew:g} ppm after {time.monotonic() - t0:.1f} s"
                    if not unsettled else
                    f"; skew still above {max_skew:g} ppm on {', '.join(unsettled)}"))

    # -- teardown -------------------------------------------------------------
    def teardown(self):
        if self._torn_down:
            return []
        self._torn_down = True
        problems = []
        stop_processes(self.chronyds.values(), grace_s=2.0)
        # Every namespace of this launcher, also one created just before an
        # interruption could record it (the names carry the launcher's pid).
        ours = [ns for ns in netns_names() if ns.startswith(self.tag + "-")]
        for ns in list(reversed(self.created)) + [n for n in ours if n not in self.created]:
            p = delete_netns(ns)
            if p:
                problems.append(p)
        shutil.rmtree(self.chrony_dir, ignore_errors=True)
        left = {ns for ns in netns_names() if ns.startswith(self.tag + "-")}
        problems += [f"network namespace {ns} still exists" for ns in sorted(left)]
        if self.chrony_dir.exists():
            problems.append(f"{self.chrony_dir} still exists")
        return problems
