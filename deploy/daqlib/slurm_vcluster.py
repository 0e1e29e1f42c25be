"""A virtual Slurm cluster on this machine (deploy/slurm-vcluster).

    essl<pid>-sw       the switch: bridge br0, one veth port per host, and
                       port p0 whose other end, essl<pid>, is in the root
                       namespace at 198.18.S.254/24 (the controller's side)
    essl<pid>-<host>   a node: lo, eth0 at 198.18.S.<n>/24, one slurmd

198.18.S.0/24 is the cluster's subnet (--subnet; 198.18.0.0/24 unless
given), any /24 of 198.18.0.0/15: its route in the root namespace is the
one thing two clusters on a machine could share, so `up` claims it under a
lock (LOCK) and refuses one already routed. <pid> is that of the `up` that
built it, unique among running clusters; everything it made is recorded in
DIR/vcluster.json as it is made, so `down` removes it all, also after an
`up` that failed or was killed halfway. One munged (its socket in DIR/munge,
reachable from every namespace since they share the filesystem) and one
slurmctld run in the root namespace, so sinfo/srun/sbatch work there as on
a cluster's login node. Each slurmd runs as
`ip netns exec NS unshare --uts` under its node's name, with its own spool
directory, pid file and log (DIR/spool/NODE, DIR/run, DIR/logs).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from .backends.base import LaunchError, run_cmd, text
from .backends.netns import delete_netns, netns_names

PREFIX = "essl"
SUBNET = ipaddress.ip_network("198.18.0.0/24")      # the default --subnet
RANGE = ipaddress.ip_network("198.18.0.0/15")       # where every --subnet must lie
CONTROLLER_HOST = 254                       # the root namespace's end of the switch: .254
LOCK = Path("/run/lock/es-slurm-vcluster.lock")     # held while a subnet is claimed
DEFAULT_DIR = Path("/tmp/es-slurm-vcluster")
CTLD_PORT = 6817
SLURMD_PORT = 6818                          # every node's, each in its own namespace
PACKAGES = {"slurmctld": "slurmctld", "slurmd": "slurmd", "sinfo": "slurm-client",
            "munged": "munge"}
UP_TIMEOUT_S = 60


class ClusterError(Exception):
    pass


def parse_subnet(text: str) -> ipaddress.IPv4Network:
    """--subnet: a /24 of 198.18.0.0/15 (198.18.N.0/24 or 198.19.N.0/24)."""
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except ValueError as e:
        raise ClusterError(f"--subnet {text}: not an IPv4 network ({e}); give "
                           f"198.18.N.0/24 or 198.19.N.0/24") from None
    if net.prefixlen != 24 or not net.subnet_of(RANGE):
        raise ClusterError(f"--subnet {text}: not a /24 of {RANGE}; give 198.18.N.0/24 or "
                           f"198.19.N.0/24 (N 0 .. 255)")
    return net


def controller_addr(subnet: ipaddress.IPv4Network) -> str:
    return str(subnet.network_address + CONTROLLER_HOST)


def say(msg: str) -> None:
    print(f"slurm-vcluster: {msg}", flush=True)


# -- state ---------------------------------------------------------------------
class State:
    """What `up` made, saved after every step in DIR/vcluster.json."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.path = directory / "vcluster.json"
        self.data: dict = {"tag": None, "namespaces": [], "links": [], "pids": {},
                           "dirs": [], "files": [], "nodes": {}}

    @classmethod
    def load(cls, directory: Path) -> "State | None":
        s = cls(directory)
        try:
            s.data.update(json.loads(s.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ClusterError(f"cannot read {s.path}: {e}") from e
        return s

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def add(self, kind: str, what) -> None:
        self.data[kind].append(what)
        self.save()


# -- hosts ---------------------------------------------------------------------
def hosts_from(count: int | None, topology: Path | None,
               subnet: ipaddress.IPv4Network = SUBNET) -> dict[str, str]:
    """{node name: address}: host-1..host-N, or a topology's [hosts] in order
    (its netns_address where given, as the netns backend assigns them), on
    subnet."""
    if topology is not None:
        import tomllib
        try:
            doc = tomllib.loads(topology.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ClusterError(f"cannot read {topology}: {e}") from e
        hosts = doc.get("hosts")
        if not isinstance(hosts, dict) or not hosts:
            raise ClusterError(f"{topology}: no [hosts.NAME] tables")
        wanted = {h: (v.get("netns_address") if isinstance(v, dict) else None)
                  for h, v in hosts.items()}
    else:
        if count is None or not 1 <= count <= 250:
            raise ClusterError("--hosts must be between 1 and 250")
        wanted = {f"host-{i}": None for i in range(1, count + 1)}
    used = {a for a in wanted.values() if a}
    ctl = controller_addr(subnet)
    for h, a in wanted.items():
        if a and (ipaddress.ip_address(a) not in subnet or a == ctl
                  or ipaddress.ip_address(a) in (subnet.network_address,
                                                 subnet.broadcast_address)):
            raise ClusterError(f"[hosts.{h}] netns_address {a}: not a node address of {subnet}"
                               + (" (the cluster's --subnet)" if subnet != SUBNET else ""))
    free = (str(a) for a in subnet.hosts() if str(a) not in used and str(a) != ctl)
    return {h: a or next(free) for h, a in wanted.items()}


def slurm_conf(directory: Path, nodes: dict[str, str], port: int, tag: str,
               controller: str) -> str:
    cpus = os.cpu_count() or 1
    ctl = socket.gethostname().split(".")[0]
    lines = [
        f"# The virtual Slurm cluster {tag} (deploy/slurm-vcluster; docs/DEPLOY.md)",
        f"ClusterName={tag}",
        f"SlurmctldHost={ctl}({controller})",
        f"SlurmctldPort={port}",
        f"SlurmdPort={SLURMD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={directory / 'munge' / 'munge.socket.2'}",
        f"StateSaveLocation={directory / 'ctld'}",
        f"SlurmdSpoolDir={directory / 'spool' / '%n'}",
        f"SlurmctldPidFile={directory / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'run' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={directory / 'logs' / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'logs' / 'slurmd-%n.log'}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "# No cgroups inside a network namespace: processes are tracked by parent",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "ReturnToService=2",
        "# Every node declares the machine's cores; trust the declaration",
        "SlurmdParameters=config_overrides",
        "KillWait=2",
        "MessageTimeout=10",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
    ]
    for name, addr in nodes.items():
        lines.append(f"NodeName={name} NodeAddr={addr} NodeHostname={name} CPUs={cpus} "
                     f"Sockets=1 CoresPerSocket={cpus} ThreadsPerCore=1 State=UNKNOWN")
    lines.append("PartitionName=vc Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


# -- packages ------------------------------------------------------------------
def missing_packages() -> list[str]:
    return sorted({pkg for tool, pkg in PACKAGES.items()
                   if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()})


def install_packages() -> None:
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise ClusterError(f"the Debian packages {' '.join(missing)} are missing and only "
                           f"root can install them (apt-get install {' '.join(missing)})")
    say(f"installing the Debian packages {' '.join(missing)} (apt-get install -y "
        f"--no-install-recommends)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing,
                 ["apt-get", "update", "-q"],
                 ["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing):
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=600)
        if r.returncode == 0 and argv[1] == "install":
            break
    left = missing_packages()
    if left:
        err = r.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise ClusterError(f"cannot install {' '.join(left)}: {' / '.join(err)}")


# -- processes -----------------------------------------------------------------
def pid_alive(pid: int, marker: str) -> bool:
    """Whether pid runs and its command line mentions marker (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def stop_pids(pids: dict[str, int], marker: str, grace_s: float = 5) -> list[str]:
    """SIGTERM, then SIGKILL after grace_s; the names of those that stayed."""
    live = {n: p for n, p in pids.items() if pid_alive(p, marker)}
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2)):
        for p in live.values():
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            live = {n: p for n, p in live.items() if pid_alive(p, marker)}
            if not live:
                return []
            time.sleep(0.05)
    return sorted(live)


def spawn(state: State, name: str, argv: list[str], log: Path) -> subprocess.Popen:
    """Starts a daemon in the foreground of a session of its own (it outlives
    `up`); its pid is recorded before anything else happens."""
    with open(log, "ab") as out:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, close_fds=True)
        except OSError as e:
            raise ClusterError(f"cannot start {name}: {e.strerror}") from e
    state.data["pids"][name] = proc.pid
    state.save()
    return proc


def log_tail(path: Path, lines: int = 3) -> str:
    try:
        got = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    fatal = [ln for ln in got if "fatal" in ln.lower()]
    bad = [ln for ln in got if "error" in ln.lower()]
    return " / ".join((fatal or bad or got)[-lines:]) or "(empty log)"


def slurm_env(directory: Path) -> dict[str, str]:
    return dict(os.environ, SLURM_CONF=str(directory / "slurm.conf"))


def node_states(directory: Path) -> dict[str, str]:
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=slurm_env(directory),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in r.stdout.splitlines() if " " in line)


# -- up ------------------------------------------------------------------------
def make_dirs(directory: Path, state: State | None) -> None:
    for sub, mode in (("", 0o755), ("munge", 0o700), ("ctld", 0o700), ("spool", 0o755),
                      ("run", 0o755), ("logs", 0o755)):
        d = directory / sub
        try:
            d.mkdir(mode=mode, parents=True, exist_ok=True)
            os.chmod(d, mode)
        except OSError as e:
            raise ClusterError(f"cannot create {d}: {e.strerror}") from e
        if state is not None and sub:
            state.add("dirs", sub)


def routed(subnet: ipaddress.IPv4Network) -> list[str]:
    """The routes of the root namespace that cover part of subnet (other
    than the default route), as "DST dev DEV"."""
    r = run_cmd(["ip", "-j", "-4", "route", "show"], check=False)
    out = []
    for route in json.loads(text(r) or "[]"):
        dst = route.get("dst")
        if dst in (None, "default"):
            continue
        try:
            net = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if net.overlaps(subnet):
            out.append(f"{dst} dev {route.get('dev')}")
    return out


def make_network(state: State, nodes: dict[str, str], subnet: ipaddress.IPv4Network) -> None:
    tag = state.data["tag"]
    ctl = controller_addr(subnet)
    if shutil.which("ip") is None:
        raise ClusterError("needs ip (iproute2)")
    sw = f"{tag}-sw"
    # Whether the subnet is free and taking it, one `up` at a time: two
    # clusters never both find it free.
    try:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        lock = open(LOCK, "a")
    except OSError as e:
        raise ClusterError(f"cannot open the lock {LOCK}: {e.strerror}") from e
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        taken = routed(subnet)
        if taken:
            raise ClusterError(f"{subnet} is already routed here ({'; '.join(taken)}: another "
                               f"virtual cluster?); bring it down first or choose another "
                               f"--subnet")
        run_cmd(["ip", "netns", "add", sw])
        state.add("namespaces", sw)
        run_cmd(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        run_cmd(["ip", "-n", sw, "link", "add", "p0", "type", "veth", "peer", "name", tag,
                 "netns", "1"])
        state.add("links", tag)
        run_cmd(["ip", "-n", sw, "link", "set", "p0", "master", "br0"])
        run_cmd(["ip", "-n", sw, "link", "set", "p0", "up"])
        run_cmd(["ip", "addr", "add", f"{ctl}/{subnet.prefixlen}", "dev", tag])
        run_cmd(["ip", "link", "set", tag, "up"])
    for i, (name, addr) in enumerate(nodes.items(), start=1):
        ns = f"{tag}-{name}"
        run_cmd(["ip", "netns", "add", ns])
        state.add("namespaces", ns)
        run_cmd(["ip", "-n", ns, "link", "set", "lo", "up"])
        run_cmd(["ip", "-n", sw, "link", "add", f"p{i}", "type", "veth", "peer", "name",
                 "eth0", "netns", ns])
        run_cmd(["ip", "-n", sw, "link", "set", f"p{i}", "master", "br0"])
        run_cmd(["ip", "-n", sw, "link", "set", f"p{i}", "up"])
        run_cmd(["ip", "-n", ns, "addr", "add", f"{addr}/{subnet.prefixlen}", "dev", "eth0"])
        run_cmd(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run_cmd(["ip", "-n", sw, "link", "set", "br0", "up"])
    deadline = time.monotonic() + 10
    for name in nodes:
        while run_cmd(["ip", "netns", "exec", f"{tag}-{name}", "ping", "-c", "1", "-W", "1",
                       "-q", ctl], check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise ClusterError(f"node {name} does not reach {ctl} (ping)")
            time.sleep(0.1)


def start_munge(state: State) -> None:
    d = state.dir / "munge"
    key = d / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    state.add("files", "munge/munge.key")
    sock = d / "munge.socket.2"
    proc = spawn(state, "munged", ["munged", "--foreground", "--force", f"--socket={sock}",
                                   f"--key-file={key}", f"--pid-file={d / 'munged.pid'}",
                                   f"--seed-file={d / 'munged.seed'}",
                                   f"--log-file={state.dir / 'logs' / 'munged.log'}"],
                 state.dir / "logs" / "munged.out")
    wait_for(lambda: sock.exists(), proc, "munged", state.dir / "logs" / "munged.log", 10)


def wait_for(ready, proc: subprocess.Popen, name: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited with status {proc.returncode}: {log_tail(log)} "
                               f"(log: {log})")
        if time.monotonic() > deadline:
            raise ClusterError(f"{name} not ready after {timeout_s:g} s: {log_tail(log)} "
                               f"(log: {log})")
        time.sleep(0.1)


def ctld_ready(directory: Path) -> bool:
    r = subprocess.run(["scontrol", "ping"], env=slurm_env(directory), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and "UP" in r.stdout


def port_free(port: int) -> str | None:
    """Why slurmctld could not listen on port (it binds every address), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As slurmctld: a connection of an earlier one in TIME_WAIT is no obstacle.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            return f"port {port} is taken ({e.strerror}): choose another with --port"
    return None


def start_slurm(state: State, nodes: dict[str, str]) -> None:
    d, tag = state.dir, state.data["tag"]
    conf = d / "slurm.conf"
    logs = d / "logs"
    ctld = spawn(state, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)],
                 logs / "slurmctld.out")
    wait_for(lambda: ctld_ready(d), ctld, "slurmctld", logs / "slurmctld.log", 30)
    procs = {}
    for name in nodes:
        (d / "spool" / name).mkdir(exist_ok=True)
        procs[name] = spawn(state, f"slurmd-{name}",
                            ["nsenter", f"--net=/run/netns/{tag}-{name}", "unshare", "--uts", "sh",
                             "-c", 'hostname "$0" && exec "$@"', name,
                             "slurmd", "-D", "-N", name, "-f", str(conf)],
                            logs / f"slurmd-{name}.out")
    deadline = time.monotonic() + UP_TIMEOUT_S
    while True:
        states = node_states(d)
        if all(states.get(n, "").startswith("idle") for n in nodes):
            return
        for name, proc in procs.items():
            if proc.poll() is not None:
                log = logs / f"slurmd-{name}.log"
                raise ClusterError(f"slurmd of {name} exited with status {proc.returncode}: "
                                   f"{log_tail(log)} (log: {log})")
        if ctld.poll() is not None:
            raise ClusterError(f"slurmctld exited with status {ctld.returncode}: "
                               f"{log_tail(logs / 'slurmctld.log')}")
        if time.monotonic() > deadline:
            shown = ", ".join(f"{n} {states.get(n, 'unknown')}" for n in nodes)
            raise ClusterError(f"not every node idle after {UP_TIMEOUT_S} s ({shown}); "
                               f"logs in {logs}")
        time.sleep(0.3)


def up(directory: Path, count: int | None, topology: Path | None, port: int,
       subnet: ipaddress.IPv4Network = SUBNET) -> int:
    directory = directory.resolve()
    if os.geteuid() != 0:
        raise ClusterError("needs root (network namespaces, veth pairs, slurmd as root)")
    nodes = hosts_from(count, topology, subnet)
    ctl = controller_addr(subnet)
    old = State.load(directory) if (directory / "vcluster.json").exists() else None
    if old is not None:
        raise ClusterError(f"{directory} already holds the virtual cluster {old.data['tag']}: "
                           f"`slurm-vcluster down --dir {directory}` first")
    install_packages()
    # A SIGTERM or SIGHUP during `up` is an interruption like Ctrl-C: what
    # was made is removed.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    make_dirs(directory, None)
    state = State(directory)
    state.data["tag"] = tag = f"{PREFIX}{os.getpid()}"
    state.data["nodes"] = nodes
    state.data["port"] = port
    state.data["subnet"] = str(subnet)
    try:
        state.save()
    except OSError as e:
        raise ClusterError(f"cannot write {state.path}: {e.strerror}") from e
    try:
        make_dirs(directory, state)
        conf = directory / "slurm.conf"
        conf.write_text(slurm_conf(directory, nodes, port, tag, ctl), encoding="utf-8")
        state.add("files", "slurm.conf")
        make_network(state, nodes, subnet)
        say(f"network: switch {tag}-sw, the controller's side {tag} at {ctl} in "
            f"the root namespace; " + ", ".join(f"{n} {a} ({tag}-{n})" for n, a in nodes.items()))
        why = port_free(port)
        if why:
            raise ClusterError(f"slurmctld cannot listen: {why}")
        start_munge(state)
        say(f"munged: key {directory / 'munge' / 'munge.key'}, socket "
            f"{directory / 'munge' / 'munge.socket.2'}")
        start_slurm(state, nodes)
    except (ClusterError, LaunchError, OSError, KeyboardInterrupt) as e:
        why = "interrupted" if isinstance(e, KeyboardInterrupt) else str(e)
        problems = teardown(state)
        say(f"up failed: {why}; removed what it had made"
            + (f" except: {'; '.join(problems)}" if problems else ""))
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    say(f"slurmctld on {ctl}:{port} (root namespace); slurmd on "
        + ", ".join(f"{n} {a}" for n, a in nodes.items()) + f"; every node idle")
    first = next(iter(nodes))
    print(f"""
The virtual Slurm cluster {tag} is up ({len(nodes)} node(s), partition vc). Use it with
    export SLURM_CONF={conf}
    sinfo
    srun -N{len(nodes)} hostname
    srun -w {first} ip -4 addr show eth0
    sbatch --wrap 'hostname; sleep 5'
run the event builder on it with
    {Path(__file__).resolve().parents[1] / 'daqrun'} {topology or 'deploy/topologies/three-hosts.toml'} --backend slurm
and remove it with
    {Path(__file__).resolve().parents[1] / 'slurm-vcluster'} down --dir {directory}
Logs: {directory / 'logs'}""", flush=True)
    return 0


# -- down ----------------------------------------------------------------------
def teardown(state: State) -> list[str]:
    """Removes what state records (and every namespace of its tag); the
    problems left."""
    d, tag = state.dir, state.data.get("tag") or ""
    problems = []
    pids = {n: int(p) for n, p in state.data.get("pids", {}).items()}
    stuck = stop_pids(pids, str(d))
    problems += [f"{n} (pid {pids[n]}) does not stop" for n in stuck]
    namespaces = list(reversed(state.data.get("namespaces", [])))
    namespaces += [n for n in netns_names() if tag and n.startswith(tag + "-")
                   and n not in namespaces]
    for ns in namespaces:
        p = delete_netns(ns)
        if p:
            problems.append(p)
    for link in state.data.get("links", []):
        if Path(f"/sys/class/net/{link}").exists():
            run_cmd(["ip", "link", "del", link], check=False)
        if Path(f"/sys/class/net/{link}").exists():
            problems.append(f"link {link} still exists")
    for sub in ("spool", "ctld", "munge", "run"):
        shutil.rmtree(d / sub, ignore_errors=True)
        if (d / sub).exists():
            problems.append(f"{d / sub} still exists")
    for f in ("slurm.conf", "vcluster.json"):
        try:
            (d / f).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            problems.append(f"cannot remove {d / f}: {e.strerror}")
    left = [n for n in netns_names() if tag and n.startswith(tag + "-")]
    problems += [f"network namespace {n} still exists" for n in left]
    return problems


def down(directory: Path) -> int:
    directory = directory.resolve()
    state = State.load(directory)
    if state is None:
        say(f"no virtual cluster in {directory} (no vcluster.json): nothing to do")
        return 0
    tag = state.data.get("tag")
    problems = teardown(state)
    if problems:
        say(f"down {tag}: could not remove: {'; '.join(problems)}")
        return 1
    say(f"down {tag}: stopped {', '.join(state.data.get('pids', {})) or 'nothing'}; removed "
        f"{len(state.data.get('namespaces', []))} namespace(s), the veth "
        f"{', '.join(state.data.get('links', [])) or '-'}, the spool, state and munge "
        f"directories (logs kept in {directory / 'logs'})")
    return 0


def status(directory: Path) -> int:
    directory = directory.resolve()
    state = State.load(directory)
    if state is None:
        say(f"no virtual cluster in {directory}")
        return 3
    tag = state.data["tag"]
    print(f"virtual Slurm cluster {tag} in {directory} (SLURM_CONF={directory / 'slurm.conf'}), "
          f"subnet {state.data.get('subnet') or SUBNET}")
    down_ = []
    for name, pid in state.data.get("pids", {}).items():
        alive = pid_alive(int(pid), str(directory))
        print(f"  {name:<20} pid {pid:<8} {'running' if alive else 'NOT RUNNING'}")
        if not alive:
            down_.append(name)
    for name, addr in state.data.get("nodes", {}).items():
        print(f"  node {name:<15} {addr:<15} namespace {tag}-{name}")
    states = node_states(directory)
    for name, st in states.items():
        print(f"  sinfo: {name} {st}")
    return 1 if down_ or not states else 0
