"""Slurm: one allocation for the run, every daemon a job step on its node.

prepare() asks for the allocation with salloc, held by a command that
reads the launcher's pipe:

    salloc --job-name esdq<pid>-daqrun --nodes K [--nodelist ...] [--exclusive]
           [--partition P --account A --qos Q --time T --constraint C]
           sh -c 'echo "daqrun-allocation $SLURM_JOB_ID $SLURM_JOB_NODELIST"; read _'

When the launcher closes the pipe, or dies (even by SIGKILL: the kernel
closes it), `read` ends, salloc relinquishes the allocation and Slurm ends
every step in it: nothing outlives the launcher, and teardown() checks that
the job has left squeue (scancel when it has not). A topology host runs on
the node its `slurm_node` names, else on the node of its own name when the
cluster has one, else on a node the allocation gives; its daemons listen on
the node's NodeAddr (`slurm_address` to choose another interface).

Run inside a job (`salloc -N3 daqrun ...`, an `sbatch` script) or given a
job's ID ([slurm] allocation), the launcher takes no allocation of its own:
its daemons are steps of that job, on its nodes, and teardown() cancels
those steps and leaves the job to its owner.

Each daemon is then one step, started from this machine as a cluster's
login node starts them:

    srun --jobid J --nodelist NODE --nodes 1 --ntasks 1 --overlap
         --job-name NAME --chdir RUN_DIR sh -c 'echo daqrun-step ... >&2; exec "$@"' DAEMON ARGS

Why steps and not a heterogeneous job: the launcher starts the daemons in
stages (builder, then readers once its ports are known, then sources), and
with --runs starts them once and keeps them for many runs; a step per daemon
is started, signalled (`scancel --signal SIG J.S`), watched and cancelled on
its own, and a step that dies is named, while a heterogeneous job starts its
components together and ends as one. Why --overlap and not --exclusive: a
node runs more daemons than it has cores (two sources and a reader on a
two-core node), mostly waiting on sockets; an exclusive step would wait for
a free core and stall the run. The allocation itself is exclusive by default
([slurm] exclusive), so no other job shares the nodes while we measure.

srun relays each step's stdout and stderr to the log files here, so the
logs are in --out as with every backend. The port files, the run key (a
mode-600 file, never on a command line or in the environment) and the
builder's outputs go through the run directory, which must be on a file
system the nodes share (as a batch job's working directory is), and the
daemons must be there too (--bin, or `bin` per host); prepare() checks both
on every node with one short step before any daemon starts.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..schema import Key, TopologyError
from .base import (DAEMONS, PREFIX, Backend, Handle, LaunchError, SharedRunDir, die_with_parent_fn,
                   register, run_cmd, text)

TOOLS = ("salloc", "srun", "scancel", "squeue", "scontrol", "sinfo")
# Where deploy/slurm-vcluster keeps its configuration unless told otherwise.
VCLUSTER_CONF = Path("/tmp/es-slurm-vcluster/slurm.conf")
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
NODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
STEP_LINE = re.compile(r"^daqrun-step (\d+)\.(\d+) (\d+) (\S+)$", re.M)
CANCELLED = re.compile(r"\*\*\* STEP (\d+\.\d+) ON (\S+) CANCELLED")
ALLOC_LINE = re.compile(r"^daqrun-allocation (\d+) (\S+)$", re.M)
JOB_ID_LINE = re.compile(r"(?:Pending|Granted) job allocation (\d+)")
# squeue's reasons for a pending job that waiting will not cure.
NEVER_REASONS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit",
                 "BadConstraints", "InvalidAccount", "InvalidQOS", "AccountNotAllowed",
                 "QOSMaxNodePerJobLimit", "QOSMaxWallDurationPerJobLimit"}
# The step's first words: its job, step, pid and node, where the launcher
# reads them (the log), then the daemon in the same process.
STEP_WRAPPER = ('echo "daqrun-step $SLURM_JOB_ID.$SLURM_STEP_ID $$ $SLURMD_NODENAME" >&2; '
                'exec "$@"')
CHECK_SCRIPT = r'''
token=$1; shift
if [ "$(cat "$token" 2>/dev/null)" != "$DAQRUN_TOKEN" ]; then
  echo "no-shared-dir"
fi
for b in "$@"; do [ -x "$b" ] || echo "missing $b"; done
echo "checked $SLURMD_NODENAME"
'''


class StepProc:
    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.step: str | None = None        # "J.S", from the step's first line
        self.node: str | None = None
        self.signalled: list[str] = []      # what daqrun sent it
        self.cancelled: str | None = None   # Slurm's words when cancelled from outside


def slurm_env() -> dict[str, str]:
    """The launcher's environment without the SLURM_* variables of a job it
    may itself run in (they would steer our srun), SLURM_CONF kept."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("SLURM_") or k == "SLURM_CONF"}


def find_conf(given: str | None) -> str | None:
    """The SLURM_CONF for the Slurm commands: given ([slurm] conf), else
    $SLURM_CONF, else None when Slurm's own default exists, else the virtual
    cluster's."""
    given = given or os.environ.get("SLURM_CONF")
    if given:
        if not Path(given).is_file():
            raise LaunchError(f"Slurm's configuration {given} does not exist "
                              f"([slurm] conf or SLURM_CONF)")
        return given
    if SYSTEM_CONF.is_file():
        return None                       # Slurm's own default: nothing to set
    if VCLUSTER_CONF.is_file():
        return str(VCLUSTER_CONF)
    raise LaunchError("no Slurm configuration: set SLURM_CONF or [slurm] conf, or bring "
                      "up the virtual cluster first (deploy/slurm-vcluster up)")


def job_name(pid: int) -> str:
    """The allocation's name: the launcher's tag and this machine's name, so
    --cleanup on this machine can tell a dead launcher's job (JOB_RE)."""
    return f"{PREFIX}{pid}-daqrun-{socket.gethostname().split('.')[0]}"


JOB_RE = re.compile(rf"^{PREFIX}(\d+)-daqrun-(\S+)$")


def stale_jobs(stale) -> list[tuple[str, str]]:
    """(job id, name) of this user's daqrun allocations made on this machine
    by launchers stale(pid, None, name) says are gone (None: no time of
    this machine's clock tells when the job was made, the controller's
    may differ); [] without Slurm."""
    if shutil.which("squeue") is None:
        return []
    try:
        conf = find_conf(None)
    except LaunchError:
        return []
    env = dict(slurm_env(), **({"SLURM_CONF": conf} if conf else {}))
    r = subprocess.run(["squeue", "-h", "--me", "-o", "%i %j"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30, env=env)
    here = socket.gethostname().split(".")[0]
    jobs = []
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        words = line.split()
        m = JOB_RE.match(words[1]) if len(words) == 2 else None
        if m and m.group(2) == here and stale(int(m.group(1)), None, words[1]):
            jobs.append((words[0], words[1]))
    return jobs


def cancel_jobs(jobs: list[tuple[str, str]]) -> list[str]:
    """scancel of each; the problems."""
    if not jobs:
        return []
    try:
        conf = find_conf(None)
    except LaunchError as e:
        return [str(e)]
    env = dict(slurm_env(), **({"SLURM_CONF": conf} if conf else {}))
    problems = []
    for job, name in jobs:
        r = subprocess.run(["scancel", job], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=30, env=env)
        if r.returncode != 0:
            problems.append(f"scancel {job} ({name}): {r.stderr.strip()}")
    return problems


@register("slurm")
class SlurmBackend(SharedRunDir, Backend):
    """One Slurm allocation for the run (salloc); every daemon a job step on
    its node (srun --overlap); the run directory on a shared file system."""

    poll_s = 0.05
    needs_hosts = True
    waits_in_queue = True        # the run's --timeout starts once allocated
    options_title = "the Slurm allocation"
    options = {
        "partition": Key("str", None, doc="partition (`salloc --partition`)",
                         shown="the cluster's default"),
        "account": Key("str", None, doc="account charged (`salloc --account`)",
                       shown="the user's default"),
        "qos": Key("str", None, doc="quality of service (`salloc --qos`)",
                   shown="the default"),
        "time": Key("str", None, doc="the allocation's time limit (`salloc --time`, e.g. "
                                     "`\"30\"` minutes, `\"2:00:00\"`)",
                    shown="the partition's"),
        "constraint": Key("str", None, doc="node features the nodes not named by "
                                           "`slurm_node` must have (`salloc --constraint`)",
                          shown="none"),
        "allocation": Key("str", "auto", doc="`\"auto\"`: the job daqrun runs in "
                                             "(`$SLURM_JOB_ID`: in `salloc` or `sbatch`) when "
                                             "there is one, else a new allocation; `\"new\"`: "
                                             "always a new one; a job ID: steps in that running "
                                             "job of yours (`salloc --no-shell`). A job daqrun "
                                             "did not allocate is left running; the keys below "
                                             "that shape an allocation do not apply to it"),
        "exclusive": Key("bool", True, doc="whole nodes, shared with no other job "
                                           "(`salloc --exclusive`)"),
        "allocate_timeout_s": Key("number", 300, 1, 86400, "how long the allocation may "
                                                           "stay pending in the queue"),
        "conf": Key("str", None, doc="`SLURM_CONF` of the Slurm commands",
                    shown="`$SLURM_CONF`, else /etc/slurm/slurm.conf, else a running "
                          "`deploy/slurm-vcluster`'s"),
        "salloc_options": Key("strlist", [], doc="further `salloc` arguments"),
        "srun_options": Key("strlist", [], doc="further `srun` arguments of every step"),
    }
    host_keys = {
        "slurm_node": Key("str", None, doc="the Slurm node its daemons run on",
                          shown="the node of its name if there is one, else one the "
                                "allocation gives"),
        "slurm_address": Key("str", None, doc="the address its daemons listen on under Slurm",
                             shown="the node's `NodeAddr`"),
    }

    @classmethod
    def validate(cls, where, hosts, options):
        for name, h in hosts.items():
            node = h.get("slurm_node")
            if node is not None and not NODE_RE.match(node):
                raise TopologyError(f"{where} [hosts.{name}] slurm_node: {node!r} is not a "
                                    f"Slurm node name (letters, digits, '.', '_', '-')")
        allocation = options.get("allocation", "auto")
        if allocation not in ("auto", "new") and not re.fullmatch(r"[0-9]{1,12}", allocation):
            raise TopologyError(f"{where} [slurm] allocation: {allocation!r} is not \"auto\", "
                                f"\"new\" or a job ID")
        for key in ("partition", "account", "qos", "constraint", "time"):
            value = options.get(key)
            if value is not None and any(c.isspace() for c in value):
                raise TopologyError(f"{where} [slurm] {key}: {value!r} has white space "
                                    f"(Slurm takes one word)")

    @classmethod
    def needs_local_binaries(cls, hosts):
        return not all(h.bin for h in hosts.values())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.job_name = job_name(os.getpid())
        self.job_id: str | None = None
        self.conf: str | None = None
        self.salloc: subprocess.Popen | None = None
        self.granted = False
        self.own_job = True                     # False: a job of the user's, left running
        self.node: dict[str, str] = {}          # topology host -> Slurm node
        self.addr: dict[str, str] = {}
        self.steps: list[Handle] = []
        self.token_path = self.run_dir / f".{self.tag}-slurm-check"
        self._torn_down = False

    # -- where things are ---------------------------------------------------
    def address(self, host):
        return self.addr.get(host) or self.hosts[host].slurm_address or "0.0.0.0"

    def rail_addresses(self, host):
        return [self.address(host)] + list(self.hosts[host].addresses[1:])

    def status_address(self, host):
        return self.address(host)        # the node's: srun reaches it from here too

    def host_command(self, host, argv):
        return self.srun_argv(self.node[host], f"{self.tag}-cmd") + ["--quiet"] + list(argv)

    def describe(self):
        return {"job_id": self.job_id, "job_name": self.job_name, "own_allocation": self.own_job,
                "slurm_conf": self.conf,
                "partition": self.options.get("partition"),
                "exclusive": bool(self.options.get("exclusive", True)),
                "hosts": {h: {"node": self.node.get(h), "address": self.addr.get(h)}
                          for h in self.hosts},
                "steps": {h.name: {"step": h.impl.step, "node": h.impl.node}
                          for h in self.steps}}

    # -- set-up -------------------------------------------------------------
    def prepare(self, builder_host):
        missing = [t for t in TOOLS if shutil.which(t) is None]
        if missing:
            raise LaunchError(f"the slurm backend needs Slurm's commands ({', '.join(missing)} "
                              f"not found; Debian: apt-get install slurm-client)")
        self.conf = find_conf(self.options.get("conf"))
        if self.conf:
            # Every Slurm command of this launcher, also those of host_command().
            os.environ["SLURM_CONF"] = self.conf
        r = run_cmd(["scontrol", "ping"], check=False, timeout=30)
        if r.returncode != 0 or "UP" not in text(r):
            raise LaunchError(f"the Slurm controller does not answer (scontrol ping: "
                              f"{(text(r) + r.stderr.decode(errors='replace')).strip()}; "
                              f"SLURM_CONF={self.conf or SYSTEM_CONF})")
        named = self.named_nodes()
        given = self.given_job()
        if given is None:
            self.allocate(named)
        else:
            self.use_job(given, named)
        self.check_nodes()
        whose = "" if self.own_job else ", a job daqrun did not allocate: left running"
        self.say(f"slurm: job {self.job_id} ({self.job_name}{whose}), "
                 + ", ".join(f"{h} on node {self.node[h]} {self.addr[h]}" for h in self.hosts)
                 + (f"; SLURM_CONF={self.conf}" if self.conf else ""))

    def named_nodes(self) -> dict[str, str]:
        """{host: node} of the hosts whose node is known before allocating."""
        argv = ["sinfo", "-h", "-N", "-o", "%N"]
        if self.options.get("partition"):
            argv += ["-p", self.options["partition"]]
        known = set(text(run_cmd(argv, timeout=30)).split())
        named = {}
        for h, spec in self.hosts.items():
            if spec.slurm_node:
                if spec.slurm_node not in known:
                    where = f"partition {self.options['partition']}" \
                        if self.options.get("partition") else "the cluster"
                    raise LaunchError(f"[hosts.{h}] slurm_node {spec.slurm_node}: no such node "
                                      f"in {where} (sinfo lists {', '.join(sorted(known))})")
                named[h] = spec.slurm_node
            elif h in known:
                named[h] = h
        return named

    def given_job(self) -> str | None:
        """The job the daemons are to run in when it is not ours to allocate:
        [slurm] allocation's job ID, or with "auto" the job daqrun runs in."""
        allocation = self.options.get("allocation", "auto")
        if allocation == "new":
            return None
        if allocation == "auto":
            return os.environ.get("SLURM_JOB_ID") or None
        return allocation

    def use_job(self, job: str, named: dict[str, str]) -> None:
        """Steps in a running job of the user's: its nodes take the hosts (a
        host's slurm_node must be one of them; a host named like a node of the
        cluster takes that node when the job has it)."""
        r = run_cmd(["squeue", "-h", "-j", job, "-o", "%T|%j|%N"], check=False, timeout=30)
        line = text(r).strip()
        if r.returncode != 0 or not line:
            raise LaunchError(f"Slurm job {job} ([slurm] allocation, or $SLURM_JOB_ID) is not in "
                              f"squeue: {r.stderr.decode(errors='replace').strip() or 'gone'}")
        state, name, nodelist = line.split("|", 2)
        if state != "RUNNING":
            raise LaunchError(f"Slurm job {job} is {state}, not RUNNING: its nodes are not "
                              f"allocated yet")
        nodes = text(run_cmd(["scontrol", "show", "hostnames", nodelist], timeout=30)).split()
        self.job_id, self.job_name, self.own_job, self.granted = job, name, False, True
        for h, node in list(named.items()):
            if node in nodes:
                continue
            if self.hosts[h].slurm_node:
                raise LaunchError(f"[hosts.{h}] slurm_node {node}: not a node of job {job} "
                                  f"({', '.join(nodes)})")
            del named[h]                      # only named like a node: any node will do
        free = [n for n in nodes if n not in set(named.values())]
        unnamed = [h for h in self.hosts if h not in named]
        if len(unnamed) > len(free):
            need = len(set(named.values())) + len(unnamed)
            raise LaunchError(f"Slurm job {job} has {len(nodes)} node(s) ({', '.join(nodes)}); "
                              f"the topology's {len(self.hosts)} hosts need {need}: ask for "
                              f"more (salloc -N{need}) or place hosts on the same node with "
                              f"slurm_node")
        for h in self.hosts:
            self.node[h] = named.get(h) or free.pop(0)
            self.addr[h] = self.hosts[h].slurm_address or self.node_address(self.node[h])

    def salloc_argv(self, named: dict[str, str], count: int) -> list[str]:
        o = self.options
        argv = ["salloc", "--job-name", self.job_name, "--nodes", str(count)]
        if named:
            argv += ["--nodelist", ",".join(sorted(set(named.values())))]
        if o.get("exclusive", True):
            argv.append("--exclusive")
        for key in ("partition", "account", "qos", "time", "constraint"):
            if o.get(key):
                argv += [f"--{key}", str(o[key])]
        argv += list(o.get("salloc_options") or [])
        return argv + ["sh", "-c", 'echo "daqrun-allocation $SLURM_JOB_ID $SLURM_JOB_NODELIST"; '
                                   'read _']

    def allocate(self, named: dict[str, str]) -> None:
        unnamed = [h for h in self.hosts if h not in named]
        count = len(set(named.values())) + len(unnamed)
        log_path = self.run_dir / "logs" / "salloc.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.salloc_argv(named, count)
        with open(log_path, "ab") as log:
            try:
                # Not in the launcher's process group (Ctrl-C is the
                # launcher's to handle) and no PDEATHSIG: a dead launcher
                # closes the pipe, and salloc relinquishes the job cleanly.
                self.salloc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log,
                                               stderr=log, start_new_session=True,
                                               close_fds=True, env=slurm_env())
            except OSError as e:
                raise LaunchError(f"cannot start salloc: {e.strerror}") from e
        nodes = self.wait_for_allocation(log_path, argv)
        free = [n for n in nodes if n not in set(named.values())]
        for h in self.hosts:
            self.node[h] = named.get(h) or free.pop(0)
            self.addr[h] = self.hosts[h].slurm_address or self.node_address(self.node[h])

    def wait_for_allocation(self, log_path: Path, argv: list[str]) -> list[str]:
        """The allocated nodes, once salloc's command says it runs; the job
        id as soon as salloc names it (teardown cancels it). Fails when salloc
        gives up, when squeue says the job can never start, or after
        allocate_timeout_s."""
        limit = float(self.options.get("allocate_timeout_s") or 300)
        asked = shlex.join(argv[:-3])
        t0 = looked = told = time.monotonic()
        while True:
            got = log_path.read_text(encoding="utf-8", errors="replace")
            m = JOB_ID_LINE.search(got)
            if m and not self.job_id:
                self.job_id = m.group(1)
            m = ALLOC_LINE.search(got)
            if m:
                self.job_id = m.group(1)
                self.granted = True
                return text(run_cmd(["scontrol", "show", "hostnames", m.group(2)])).split()
            if self.salloc.poll() is not None:
                raise LaunchError(f"salloc exited with status {self.salloc.returncode} without "
                                  f"an allocation: {got.strip()[-400:] or '(no output)'} "
                                  f"({asked})")
            now = time.monotonic()
            if self.job_id and now - looked > 1:
                looked = now
                reason = self.pending_reason()
                if reason.split()[-1:] and reason.split()[-1] in NEVER_REASONS:
                    raise LaunchError(f"job {self.job_id} can never start as asked: squeue "
                                      f"says {reason} ({asked})")
            if now - t0 > limit:
                raise LaunchError(f"no allocation after {limit:g} s ([slurm] "
                                  f"allocate_timeout_s): job {self.job_id or '?'} still "
                                  f"pending ({self.pending_reason()})")
            if now - told > 10:
                told = now
                self.say(f"slurm: waiting for job {self.job_id or '?'} to be allocated "
                         f"({self.pending_reason()}, {now - t0:.0f} s)")
            time.sleep(0.05)

    def pending_reason(self) -> str:
        if not self.job_id:
            return "no job id yet"
        r = run_cmd(["squeue", "-h", "-j", self.job_id, "-o", "%T %r"], check=False)
        return text(r).strip() or "not in squeue"

    def node_address(self, node: str) -> str:
        """The node's NodeAddr as an IPv4 address (daemons listen on it)."""
        out = text(run_cmd(["scontrol", "show", "node", "-o", node], timeout=30))
        m = re.search(r"\bNodeAddr=(\S+)", out)
        name = m.group(1) if m else node
        try:
            return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
        except (socket.gaierror, IndexError) as e:
            raise LaunchError(f"node {node}: its NodeAddr {name} does not resolve to an IPv4 "
                              f"address here ({e}); set [hosts.NAME] slurm_address") from e

    def srun_argv(self, node: str, name: str) -> list[str]:
        return ["srun", "--jobid", str(self.job_id), "--nodelist", node, "--nodes", "1",
                "--ntasks", "1", "--overlap", "--job-name", name, "--chdir", str(self.run_dir),
                *(self.options.get("srun_options") or [])]

    def check_nodes(self) -> None:
        """One step per node: it sees the run directory (a token written here)
        and its daemons are executable there."""
        token = secrets.token_hex(16)
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        for node in dict.fromkeys(self.node.values()):
            hosts = [h for h in self.hosts if self.node[h] == node]
            bins = sorted({self.binary(h, d) for h in hosts for d in DAEMONS})
            argv = self.srun_argv(node, f"{self.tag}-check") + [
                "--quiet", "--export", f"ALL,DAQRUN_TOKEN={token}", "sh", "-c", CHECK_SCRIPT,
                "daqrun-check", str(self.token_path), *bins]
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                               env=slurm_env())
            out = r.stdout.decode(errors="replace")
            if r.returncode != 0 or "checked" not in out:
                raise LaunchError(f"node {node}: the check step failed (status {r.returncode}): "
                                  f"{(out + r.stderr.decode(errors='replace')).strip()[-300:]}")
            if "no-shared-dir" in out.split():
                raise LaunchError(f"node {node} does not see the run directory {self.run_dir}: "
                                  f"with the slurm backend --out must be on a file system the "
                                  f"nodes share (as a batch job's working directory is)")
            absent = [line.split(None, 1)[1] for line in out.splitlines()
                      if line.startswith("missing ")]
            if absent:
                raise LaunchError(f"node {node}: {', '.join(absent)} not found or not "
                                  f"executable there: put the daemons on a shared file system "
                                  f"(--bin) or set [hosts.NAME] bin")
        self.token_path.unlink(missing_ok=True)

    # -- daemons ------------------------------------------------------------
    def start(self, name, argv, log_path, *, host, stdout_path=None):
        if self.job_id is None:
            raise LaunchError(f"cannot start {name}: no Slurm allocation")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        err = open(log_path, "ab")
        out = open(stdout_path, "ab") if stdout_path else err
        env = dict(slurm_env(), **self.env(host))
        full = self.srun_argv(self.node[host], name) + ["sh", "-c", STEP_WRAPPER,
                                                        "daqrun-step"] + list(argv)
        try:
            popen = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                     start_new_session=True, close_fds=True, env=env,
                                     preexec_fn=die_with_parent_fn())
        except OSError as e:
            raise LaunchError(f"cannot start srun for {name}: {e.strerror}") from e
        finally:
            err.close()
            if out is not err:
                out.close()
        h = Handle(name=name, host=host, argv=list(argv), log_path=log_path,
                   stdout_path=stdout_path, pid=0, started=time.monotonic(),
                   impl=StepProc(popen))
        self.steps.append(h)
        return h

    def _learn(self, h: Handle) -> None:
        """The step's id, node and the daemon's pid from its first line."""
        if h.impl.step is not None:
            return
        try:
            got = h.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        m = STEP_LINE.search(got)
        if m:
            h.impl.step = f"{m.group(1)}.{m.group(2)}"
            h.pid = int(m.group(3))
            h.impl.node = m.group(4)

    def wait(self, handle, timeout=0):
        if handle.returncode is not None:
            return handle.returncode
        self._learn(handle)
        try:
            rc = handle.impl.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._learn(handle)
        if 128 < rc < 160:
            rc = -(rc - 128)                     # the task's signal, as srun reports it
        handle.returncode = rc
        handle.ended = time.monotonic()
        try:
            got = handle.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            got = ""
        m = CANCELLED.search(got)
        if m and not handle.impl.signalled:
            handle.impl.cancelled = f"its job step {m.group(1)} on {m.group(2)} was cancelled " \
                                    f"outside daqrun (scancel)"
        elif rc < 0 and not handle.impl.signalled:
            handle.impl.cancelled = f"its job step {handle.impl.step or '?'} got " \
                                    f"SIG{signal.Signals(-rc).name[3:]} from outside daqrun"
        return rc

    def exit_note(self, handle):
        return handle.impl.cancelled or ""

    def kill(self, handle, sig=signal.SIGTERM):
        if self.wait(handle, 0) is not None:
            return
        name = signal.Signals(sig).name[3:]
        handle.impl.signalled.append(name)
        if handle.impl.step:
            r = run_cmd(["scancel", "--quiet", "--signal", name, handle.impl.step],
                        check=False, timeout=30)
            if r.returncode == 0:
                return
        # No step yet (srun still asking for it), or scancel failed: srun
        # forwards the signal to its step, or dies and takes the request along.
        try:
            handle.impl.popen.send_signal(sig)
        except ProcessLookupError:
            pass

    def remove_shm(self, host, name):
        if self.job_id is None or host not in self.node or not self.job_alive():
            return []
        script = (f'for f in /dev/shm/es-{name}-r*; do [ -e "$f" ] && rm -f "$f" && '
                  f'echo "${{f#/dev/shm/}}"; done; true')
        try:
            r = run_cmd(self.host_command(host, ["sh", "-c", script]), check=False, timeout=60)
        except LaunchError:
            return []
        return text(r).split()

    # -- teardown -------------------------------------------------------------
    def job_alive(self) -> bool:
        r = run_cmd(["squeue", "-h", "-j", str(self.job_id), "-o", "%T"], check=False)
        return r.returncode == 0 and bool(text(r).strip())

    def end_own_steps(self) -> list[str]:
        """In a job of the user's: the steps of this launcher (its daemons,
        checks and commands, named NAME or <tag>-...) cancelled and gone."""
        ours = {h.name for h in self.steps} | {f"{self.tag}-check", f"{self.tag}-cmd"}
        deadline = time.monotonic() + 20
        while True:
            r = run_cmd(["squeue", "-h", "-s", "-j", str(self.job_id), "-o", "%i %j"],
                        check=False, timeout=30)
            left = [line.split()[0] for line in text(r).splitlines()
                    if len(line.split()) == 2 and line.split()[1] in ours]
            if not left:
                return []
            if time.monotonic() > deadline:
                return [f"Slurm job steps {', '.join(left)} are still in squeue"]
            run_cmd(["scancel", "--quiet", *left], check=False)
            time.sleep(0.2)

    def teardown(self):
        if self._torn_down:
            return []
        self._torn_down = True
        problems = []
        for h in self.steps:               # srun of a step still running
            p = h.impl.popen
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for h in self.steps:
            p = h.impl.popen
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        if self.salloc is not None and self.salloc.poll() is None and not self.granted:
            # Still pending: salloc withdraws its request on SIGTERM.
            self.salloc.send_signal(signal.SIGTERM)
            if self.job_id is not None:
                run_cmd(["scancel", "--quiet", str(self.job_id)], check=False)
            try:
                self.salloc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.salloc.kill()
                self.salloc.wait(timeout=5)
        if self.salloc is not None and self.salloc.poll() is None:
            try:
                self.salloc.stdin.close()      # `read` ends: the allocation is relinquished
            except OSError:
                pass
            try:
                self.salloc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.salloc.kill()
                self.salloc.wait(timeout=5)
        if self.job_id is not None and not self.own_job:
            problems += self.end_own_steps()
        elif self.job_id is not None:
            deadline = time.monotonic() + 20
            while self.job_alive():
                if time.monotonic() > deadline:
                    problems.append(f"Slurm job {self.job_id} is still in squeue")
                    break
                run_cmd(["scancel", "--quiet", str(self.job_id)], check=False)
                time.sleep(0.2)
        self.token_path.unlink(missing_ok=True)
        return problems
