"""Real hosts over ssh.

For every host of the topology the backend, before any daemon starts,
makes the host's run directory WORKDIR/<host>/<run name> (logs/, ports/,
a previous run's outputs removed) and either copies the three daemons to
WORKDIR/<host>/bin (tar over ssh; the host needs the same shared libraries:
libevent, msgpack-c, zlib, libdeflate, libsodium, jansson, libsystemd) or
checks that they are where [hosts.NAME] bin says.

Each daemon then runs in an ssh session of its own,

    ssh [options] DEST 'exec /bin/sh -c WRAPPER daqrun-wrap DIR LOG OUT env ES_...=... DAEMON ARGS'

where WRAPPER starts the daemon in the background (stdin /dev/null, output
to its log files on that host), prints `daqrun-pid N`, and relays signal
names the launcher writes to the session's stdin (TERM, KILL, INT, HUP) to
the daemon. When that stdin closes (the launcher died, or ssh was killed)
the daemon gets SIGTERM, then SIGKILL 3 s later: nothing outlives its
session. When the daemon exits the wrapper prints `daqrun-exit STATUS` and
the session ends. Environment variables of the launcher whose names start
with ES_ (except ES_BIN) are passed on, with the host's chrony_socket as
ES_CHRONY_SOCKET.

Short commands (port files, logs, shared-memory clean-up, copying) share
one master connection per destination (ControlMaster, control sockets in
/tmp/esdq<pid>-ssh/), closed at teardown. At the end each host's run
directory is brought back into the local one (tar over ssh), so the local
run directory holds every log and the builder's outputs as with the local
backend. ssh always runs with BatchMode=yes: keys, not passwords.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..schema import U16, Key, TopologyError
from .base import DAEMONS, Backend, Handle, LaunchError, register, run_cmd, text

WRAPPER = r'''
cd "$1" || exit 126
log=$2 out=$3
shift 3
exec 3<&0
if [ -n "$out" ]; then
  "$@" </dev/null >>"$out" 2>>"$log" &
else
  "$@" </dev/null >>"$log" 2>&1 &
fi
pid=$!
echo "daqrun-pid $pid"
(
  while IFS= read -r s; do
    case $s in TERM|KILL|INT|HUP) kill -s "$s" "$pid" 2>/dev/null ;; esac
  done
  kill -s TERM "$pid" 2>/dev/null && sleep 3 && kill -s KILL "$pid" 2>/dev/null
) <&3 >/dev/null 2>&1 &
watch=$!
exec 3<&-
wait "$pid"
rc=$?
kill "$watch" 2>/dev/null
echo "daqrun-exit $rc"
exit "$rc"
'''

OUTPUTS = ("events.jsonl", "expired.jsonl", "metrics.json")
SIGNAL_NAMES = {signal.SIGTERM: "TERM", signal.SIGKILL: "KILL", signal.SIGINT: "INT",
                signal.SIGHUP: "HUP"}


class SshProc:
    def __init__(self, popen: subprocess.Popen, ssh_log: Path):
        self.popen = popen
        self.ssh_log = ssh_log

    def lines(self) -> list[str]:
        try:
            return self.ssh_log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []


@register("ssh")
class SshBackend(Backend):
    """Daemons on real hosts, each started with `ssh host ...`."""

    poll_s = 0.2
    options_title = "defaults for hosts reached over ssh"
    options = {
        "user": Key("str", None, doc="login user, unless a host's `ssh` names one",
                    shown="ssh's default"),
        "port": Key("int", None, 1, U16, "the hosts' ssh port", shown="ssh's default"),
        "options": Key("strlist", [], doc="further ssh arguments, e.g. `[\"-i\", \"KEY\", "
                                          "\"-o\", \"StrictHostKeyChecking=accept-new\"]`"),
        "workdir": Key("str", "/tmp/daqrun", doc="remote directory of runs and copied "
                                                 "binaries"),
    }
    host_keys = {
        "ssh": Key("str", None, doc="destination `[user@]host`", shown="`address`"),
        "ssh_port": Key("int", None, 1, U16, "its ssh port", shown="`[ssh] port`"),
        "ssh_options": Key("strlist", [], doc="further ssh arguments (appended to "
                                              "`[ssh] options`)"),
        "workdir": Key("str", None, doc="remote directory; the run goes to "
                                        "WORKDIR/NAME/<run name>",
                       shown="`[ssh] workdir`"),
    }

    @classmethod
    def validate(cls, where, hosts, options):
        for name, h in hosts.items():
            if h["address"] is None and h.get("addresses"):
                h["address"] = h["addresses"][0]           # rail 0
            if h["address"] is None and h["ssh"] is None:
                raise TopologyError(f"{where} [hosts.{name}]: the ssh backend needs 'address' "
                                    f"(where its daemons listen) or 'ssh' (where to log in)")
            if h["address"] is None:
                h["address"] = h["ssh"].rpartition("@")[2]

    @classmethod
    def needs_local_binaries(cls, hosts):
        """The daemons are copied from --bin unless every host has its own."""
        return not all(h.bin for h in hosts.values())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.control_dir = Path(f"/tmp/{self.tag}-ssh")
        self.procs: list[subprocess.Popen] = []
        self.masters: set[tuple[str, ...]] = set()
        self.collected: set[str] = set()
        self._torn_down = False

    # -- hosts and paths ----------------------------------------------------
    def dest(self, host: str) -> str:
        spec = self.hosts[host]
        dest = spec.ssh or spec.address
        user = self.options.get("user")
        return f"{user}@{dest}" if user and "@" not in dest else dest

    def workdir(self, host: str) -> str:
        return (self.hosts[host].workdir or self.options.get("workdir") or "/tmp/daqrun").rstrip("/")

    def remote_dir(self, host: str) -> str:
        return f"{self.workdir(host)}/{host}/{self.run_dir.name}"

    def remote_bin(self, host: str) -> str:
        spec = self.hosts[host]
        return spec.bin or f"{self.workdir(host)}/{host}/bin"

    def path(self, host, local):
        try:
            rel = Path(local).relative_to(self.run_dir)
        except ValueError:
            return str(local)
        return f"{self.remote_dir(host)}/{rel.as_posix()}"

    def binary(self, host, daemon):
        return f"{self.remote_bin(host)}/{daemon}"

    def describe(self):
        return {"control_dir": str(self.control_dir),
                "hosts": {h: {"address": self.address(h), "ssh": self.dest(h),
                              "port": self.hosts[h].ssh_port or self.options.get("port"),
                              "run_dir": self.remote_dir(h), "bin": self.remote_bin(h),
                              "copied_bin": not self.hosts[h].bin}
                          for h in self.hosts}}

    def ssh_argv(self, host: str, mux: bool) -> list[str]:
        spec = self.hosts[host]
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        port = spec.ssh_port or self.options.get("port")
        if port:
            argv += ["-p", str(port)]
        if mux:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_dir}/%C",
                     "-o", "ControlPersist=15"]
        else:
            argv += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        argv += list(self.options.get("options") or []) + list(spec.ssh_options)
        return argv + [self.dest(host)]

    def remote(self, host: str, command: str, *, check: bool = True, timeout: float = 60,
               input: bytes | None = None) -> subprocess.CompletedProcess:
        """Runs a shell command on host over the shared connection."""
        argv = self.ssh_argv(host, mux=True)
        self.masters.add(tuple(argv))
        r = run_cmd(argv + ["--", command], check=False, timeout=timeout, input=input)
        if r.returncode == 255:
            err = r.stderr.decode(errors="replace").strip()
            raise LaunchError(f"ssh to {host} ({self.dest(host)}) failed: {err}")
        if check and r.returncode != 0:
            err = (r.stderr or r.stdout).decode(errors="replace").strip()
            raise LaunchError(f"on {host} ({self.dest(host)}): `{command}` failed "
                              f"(status {r.returncode}): {err}")
        return r

    def host_command(self, host, argv):
        """ssh over the host's shared connection (closed at teardown), the
        remote shell given argv quoted word by word."""
        self.control_dir.mkdir(mode=0o700, exist_ok=True)
        ssh = self.ssh_argv(host, mux=True)
        self.masters.add(tuple(ssh))
        return ssh + ["--", shlex.join(argv)]

    # -- set-up -------------------------------------------------------------
    def prepare(self, builder_host):
        if shutil.which("ssh") is None:
            raise LaunchError("the ssh backend needs the ssh client, which is not installed")
        self.control_dir.mkdir(mode=0o700, exist_ok=True)
        for h in self.hosts:
            d = shlex.quote(self.remote_dir(h))
            outs = " ".join(f"{d}/{o}" for o in OUTPUTS)
            self.remote(h, f"mkdir -p {d}/logs {d}/ports && rm -f {outs} {d}/logs/* {d}/ports/* "
                           f"&& rm -rf {d}/builders")
            b = self.remote_bin(h)
            if self.hosts[h].bin:
                missing = self.remote(h, " ; ".join(
                    f"test -x {shlex.quote(b + '/' + x)} || echo {x}" for x in DAEMONS))
                if text(missing).split():
                    raise LaunchError(f"on {h} ({self.dest(h)}): {', '.join(text(missing).split())}"
                                      f" not found or not executable in {b} ([hosts.{h}] bin)")
                how = f"binaries in {b}"
            else:
                self.copy_binaries(h, b)
                how = f"binaries copied to {b}"
            self.say(f"ssh: {h} = {self.dest(h)}, address {self.address(h)}, run directory "
                     f"{self.remote_dir(h)}, {how}")

    def make_dir(self, host, local):
        local.mkdir(parents=True, exist_ok=True)
        self.remote(host, "mkdir -p -- " + shlex.quote(self.path(host, local)))

    def put_file(self, local):
        data = Path(local).read_bytes()
        for h in self.hosts:
            q = shlex.quote(self.path(h, local))
            self.remote(h, f"umask 077 && cat > {q}", input=data)

    def copy_binaries(self, host: str, target: str) -> None:
        tar = subprocess.Popen(["tar", "-C", str(self.bin_dir), "-chf", "-", *DAEMONS],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        try:
            argv = self.ssh_argv(host, mux=True)
            self.masters.add(tuple(argv))
            q = shlex.quote(target)
            r = subprocess.run(argv + ["--", f"mkdir -p {q} && tar -C {q} -xf -"],
                               stdin=tar.stdout, capture_output=True, timeout=300)
        finally:
            tar.stdout.close()
            tar.wait(timeout=60)
        if tar.returncode != 0:
            raise LaunchError(f"tar of {self.bin_dir} failed: "
                              f"{tar.stderr.read().decode(errors='replace').strip()}")
        if r.returncode != 0:
            raise LaunchError(f"copying the daemons to {host} ({self.dest(host)}):{target} "
                              f"failed: {r.stderr.decode(errors='replace').strip()}")

    # -- daemons ------------------------------------------------------------
    def forwarded_env(self, host: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k.startswith("ES_") and k != "ES_BIN"}
        env.update(self.env(host))
        return env

    def start(self, name, argv, log_path, *, host, stdout_path=None):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        ssh_log = log_path.with_name(log_path.stem + ".ssh.log")
        envs = [f"{k}={v}" for k, v in sorted(self.forwarded_env(host).items())]
        words = [self.remote_dir(host), self.path(host, log_path),
                 self.path(host, stdout_path) if stdout_path else ""]
        words += (["env"] + envs if envs else []) + list(argv)
        command = "exec /bin/sh -c " + shlex.quote(WRAPPER) + " daqrun-wrap " + \
            " ".join(shlex.quote(w) for w in words)
        out = open(ssh_log, "ab")
        try:
            popen = subprocess.Popen(self.ssh_argv(host, mux=False) + ["--", command],
                                     stdin=subprocess.PIPE, stdout=out, stderr=out,
                                     start_new_session=True, close_fds=True)
        except OSError as e:
            raise LaunchError(f"cannot start ssh for {name}: {e.strerror}") from e
        finally:
            out.close()
        self.procs.append(popen)
        return Handle(name=name, host=host, argv=list(argv), log_path=log_path,
                      stdout_path=stdout_path, pid=0, started=time.monotonic(),
                      impl=SshProc(popen, ssh_log))

    @staticmethod
    def _parse(handle: Handle) -> int | None:
        """Updates handle.pid from the wrapper's lines; the exit status if there."""
        status = None
        for line in handle.impl.lines():
            if line.startswith("daqrun-pid ") and not handle.pid:
                handle.pid = int(line.split()[1])
            elif line.startswith("daqrun-exit "):
                status = int(line.split()[1])
        return status

    def wait(self, handle, timeout=0):
        if handle.returncode is not None:
            return handle.returncode
        popen: subprocess.Popen = handle.impl.popen
        try:
            ssh_rc = popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if not handle.pid:
                self._parse(handle)
            return None
        rc = self._parse(handle)
        if rc is None:
            rc = ssh_rc if ssh_rc != 0 else 255     # the session ended without a status
        elif 128 < rc < 160:
            rc = -(rc - 128)                       # killed by signal rc - 128, as sh says
        handle.returncode = rc
        handle.ended = time.monotonic()
        return rc

    def kill(self, handle, sig=signal.SIGTERM):
        if self.wait(handle, 0) is not None:
            return
        popen: subprocess.Popen = handle.impl.popen
        word = SIGNAL_NAMES.get(sig, "TERM")
        try:
            popen.stdin.write(f"{word}\n".encode())
            popen.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        if sig == signal.SIGKILL:
            # The session itself may be stuck: closing it makes the remote
            # watchdog stop the daemon (SIGTERM, SIGKILL after 3 s).
            try:
                popen.wait(timeout=2)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(popen.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def log_text(self, handle):
        try:
            r = self.remote(handle.host, "cat -- " + shlex.quote(self.path(handle.host,
                                                                            handle.log_path)),
                            check=False, timeout=15)
            remote = text(r)
        except LaunchError as e:
            remote = f"(cannot read the log on {handle.host}: {e})\n"
        ssh = "\n".join(l for l in handle.impl.lines() if not l.startswith("daqrun-"))
        return remote + (f"[ssh] {ssh}\n" if ssh.strip() else "")

    def read_file(self, host, path):
        r = self.remote(host, "cat -- " + shlex.quote(self.path(host, path)), check=False,
                        timeout=15)
        if r.returncode != 0:
            return None
        return text(r)

    def collect(self, handle, run_dir):
        paths = [p for p in (handle.log_path, handle.stdout_path) if p is not None]
        if handle.host in self.collected:
            return paths
        self.collected.add(handle.host)
        argv = self.ssh_argv(handle.host, mux=True)
        self.masters.add(tuple(argv))
        q = shlex.quote(self.remote_dir(handle.host))
        try:
            ssh = subprocess.Popen(argv + ["--", f"tar -C {q} -cf - ."],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
            r = subprocess.run(["tar", "-C", str(run_dir), "-xf", "-"], stdin=ssh.stdout,
                               capture_output=True, timeout=600)
            ssh.stdout.close()
            ssh.wait(timeout=60)
            if ssh.returncode != 0 or r.returncode != 0:
                self.say(f"collecting {handle.host}:{self.remote_dir(handle.host)} failed: "
                         f"{ssh.stderr.read().decode(errors='replace').strip()} "
                         f"{r.stderr.decode(errors='replace').strip()}")
        except (OSError, subprocess.TimeoutExpired) as e:
            self.say(f"collecting {handle.host}:{self.remote_dir(handle.host)} failed: {e}")
        return paths

    def remove_shm(self, host, name):
        try:
            r = self.remote(host, f"for f in /dev/shm/es-{name}-r*; do [ -e \"$f\" ] && "
                                  f"rm -f \"$f\" && echo \"${{f#/dev/shm/}}\"; done; true",
                            check=False, timeout=15)
        except LaunchError:
            return []
        return text(r).split()

    def teardown(self):
        if self._torn_down:
            return []
        self._torn_down = True
        problems = []
        for p in self.procs:            # sessions still open: closing them stops the daemons
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                p.wait(timeout=5)
        for argv in self.masters:
            # argv ends with DEST; -O exit asks its master to close.
            run_cmd(list(argv[:-1]) + ["-O", "exit", argv[-1]], check=False, timeout=15)
        shutil.rmtree(self.control_dir, ignore_errors=True)
        if self.control_dir.exists():
            problems.append(f"{self.control_dir} still exists")
        return problems
