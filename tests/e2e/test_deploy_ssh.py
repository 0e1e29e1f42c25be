"""The ssh backend (docs/DEPLOY.md) against this machine's own sshd on
loopback: each test starts /usr/sbin/sshd on 127.0.0.1 on a free port with
a temporary host key and a temporary authorized key (nothing in ~/.ssh or
/etc/ssh is read or changed) and stops it afterwards.

- a two-host topology whose hosts are both 127.0.0.1 over ssh: the
  daemons are copied to each host's work directory, started through ssh,
  the books balance, refbuild matches and every log comes back;
- Ctrl-C (SIGINT to the launcher) stops every remote daemon;
- a launcher killed with SIGKILL: its ssh sessions close, so the remote
  wrapper stops each daemon by itself; --cleanup then removes the
  launcher's ssh control directory.

Needs root (sshd) and openssh-server (scripts/deps.sh installs it); skipped
with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import DAQRUN, E2ETestCase, HarnessError, listening_ports, read_json

FAKE_BIN = Path(__file__).resolve().parent / "fake"
SSHD = "/usr/sbin/sshd"
# sshd's privilege separation directory, shared by every sshd here (another
# test's, a suite's beside this one, the system's): made when missing, with
# a mark that a test made it, and removed by the last test's sshd to stop,
# both under a lock.
PRIVSEP = Path("/run/sshd")
PRIVSEP_LOCK = Path("/run/lock/es-e2e-sshd.lock")
PRIVSEP_MADE = Path("/run/lock/es-e2e-sshd.made")


@contextlib.contextmanager
def privsep_lock():
    PRIVSEP_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(PRIVSEP_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def sshd_running(exclude: set[int] = frozenset()) -> list[int]:
    """Every live sshd on this machine (listeners and sessions) but those of
    exclude."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{d}/exe")
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if exe == SSHD and state != b"Z" and int(d) not in exclude:
            found.append(int(d))
    return found


def sshd_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (runs sshd on a loopback port)"
    if not os.access(SSHD, os.X_OK):
        return "openssh-server not installed (scripts/deps.sh installs it)"
    for tool in ("ssh", "ssh-keygen", "tar"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SshDeployTest(E2ETestCase):
    def setUp(self) -> None:
        why = sshd_unavailable()
        if why:
            self.skipTest(why)
        super().setUp()
        self.made_privsep = False
        self.addCleanup(self.stop_sshd)
        self.start_sshd()

    # -- sshd on loopback -------------------------------------------------
    def start_sshd(self) -> None:
        h = self.h
        d = h.dir / "ssh"
        d.mkdir(mode=0o700)
        for name in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "es-e2e",
                            "-f", str(d / name)], check=True, capture_output=True, timeout=30)
        shutil.copy(d / "user_key.pub", d / "authorized_keys")
        os.chmod(d / "authorized_keys", 0o600)
        self.key = d / "user_key"
        self.known = d / "known_hosts"
        with privsep_lock():
            # sshd insists on its privilege separation directory.
            if not PRIVSEP.is_dir():
                PRIVSEP.mkdir(mode=0o755)
                PRIVSEP_MADE.touch()
            self.made_privsep = PRIVSEP_MADE.exists()
            self._start_sshd(d)

    def _start_sshd(self, d: Path) -> None:
        h = self.h
        for attempt in range(3):
            self.port = free_port()
            conf = d / "sshd_config"
            conf.write_text(
                f"ListenAddress 127.0.0.1\nPort {self.port}\nHostKey {d / 'host_key'}\n"
                f"AuthorizedKeysFile {d / 'authorized_keys'}\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "PermitRootLogin prohibit-password\nPidFile none\nMaxSessions 50\n"
                "MaxStartups 50\nX11Forwarding no\nAllowTcpForwarding no\n"
                "PrintMotd no\nLogLevel ERROR\n")
            self.sshd = h.start(f"sshd-{attempt}", [SSHD, "-D", "-e", "-f", conf])
            # Listening, seen in /proc (a probe connection would leave an
            # sshd child behind for a moment).
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.sshd.returncode is None:
                if self.port in listening_ports():
                    break
                time.sleep(0.05)
            if self.sshd.returncode is None:
                break
        else:
            self.fail(f"sshd did not start:\n{self.sshd.tail()}")
        self.h.ports.discard(self.port)

    def stop_sshd(self) -> None:
        if getattr(self, "sshd", None) is not None:
            self.h.stop(self.sshd, grace_s=2.0)
        if self.made_privsep:
            self.made_privsep = False
            with privsep_lock():
                # Made by a test and used by no other sshd (of a test beside
                # this one): gone.
                ending = {pid for pid, _ in self.h.leftovers()}   # this test's sessions
                if PRIVSEP_MADE.exists() and not sshd_running(ending):
                    shutil.rmtree(PRIVSEP, ignore_errors=True)
                    PRIVSEP_MADE.unlink()

    # -- topologies ---------------------------------------------------------
    def topology(self, bin_dir: Path | None = None, events: int = 5000,
                 rate: float = 5000) -> dict:
        """Two hosts, evb (builder and reader 1: shared memory) and ro
        (reader 0 and its sources: TCP to the builder), both this machine."""
        hosts = {}
        for name in ("evb", "ro"):
            # (the harness writes "hosts.evb" as the table [hosts.evb])
            hosts[f"hosts.{name}"] = {"address": "127.0.0.1"}
            if bin_dir is not None:
                hosts[f"hosts.{name}"]["bin"] = str(bin_dir)
        return {
            "deploy": {"backend": "ssh"},
            "ssh": {"user": "root", "port": self.port, "workdir": str(self.h.dir / "remote"),
                    "options": ["-i", str(self.key), "-o", "IdentitiesOnly=yes",
                                "-o", f"UserKnownHostsFile={self.known}",
                                "-o", "StrictHostKeyChecking=accept-new",
                                "-o", "LogLevel=ERROR"]},
            **hosts,
            "run": {"run": 1, "seed": 1, "events": events, "payload": 128, "rate": rate},
            "builder": {"host": "evb"},
            "reader": [{"id": 0, "sources": [0, 1], "host": "ro"},
                       {"id": 1, "sources": [2, 3], "host": "evb"}],
        }

    def wait_started(self, out: Path, proc, count: int = 7) -> dict:
        deadline = time.monotonic() + 60
        while True:
            try:
                params = read_json(out / "params.json")
                if len(params.get("processes", [])) == count:
                    return params
            except HarnessError:
                pass
            if proc.returncode is not None or time.monotonic() > deadline:
                self.fail(f"the run did not start:\n{proc.tail(40)}")
            time.sleep(0.1)

    def remote_daemons(self) -> list[tuple[int, str]]:
        """Daemons this test started anywhere on the machine (the ssh backend
        passes ES_E2E_TAG on to them)."""
        return [(pid, cmd) for pid, cmd in self.h.leftovers()
                if any(d in cmd for d in ("builderd", "readoutd", "sourced"))
                and "daqrun-wrap" not in cmd]

    def assert_clean(self) -> None:
        """Nothing of the test left: the sshd listener is stopped first (it
        is the test's own), then no daemon, ssh client or sshd session may
        remain."""
        self.stop_sshd()
        self.h.assert_clean()

    # -- tests --------------------------------------------------------------
    def test_run_over_ssh(self) -> None:
        if not all(os.access(self.h.bin / d, os.X_OK) for d in ("builderd", "readoutd", "sourced")):
            self.skipTest(f"daemons not built in {self.h.bin}")
        # Recording on ([output]): the builder writes its files in its remote
        # run directory, which comes back with the logs.
        r = self.h.daqrun(self.topology(), timeout_s=120, sets=['output.format="raw"'])
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertIn(f"PASS refbuild data {r.run_dir}: every payload byte", r.output)
        files = json.loads((r.run_dir / "files.json").read_text())
        self.assertEqual(sorted(f["name"] for f in files["files"]),
                         sorted(p.name for p in r.run_dir.glob("run*_b0_s*_f*.dat")))
        self.assertGreater(files["totals"]["events"], 0)
        argv = next(p["argv"] for p in r.params()["processes"] if p["name"] == "builder-0")
        self.assertRegex(argv[argv.index("--record-dir") + 1], r"/remote/evb/run-1(/\.)?$")
        self.assertRegex(r.output, r"ssh: evb = root@127\.0\.0\.1, address 127\.0\.0\.1, run "
                                   r"directory .*/remote/evb/run-1, binaries copied to "
                                   r".*/remote/evb/bin")
        self.assertRegex(r.output, r"reader-0 pid \d+ on ro: .*to the builder over tcp")
        self.assertRegex(r.output, r"reader-1 pid \d+ on evb: .*over shared memory")
        m = self.assertBalanced(r)
        self.assertEqual({x["id"]: x["transport"] for x in m["reader_links"]},
                         {0: "tcp", 1: "shm"})
        # Every log came back, and the daemons ran from the copies.
        for name in ("builder-0", "reader-0", "reader-1", "source-0", "source-3"):
            self.assertTrue((r.run_dir / "logs" / f"{name}.log").exists(), name)
            self.assertIn(f"daqrun-exit 0", (r.run_dir / "logs" / f"{name}.ssh.log").read_text())
        procs = {p["name"]: p for p in r.params()["processes"]}
        self.assertTrue(procs["source-0"]["argv"][0].endswith("/remote/ro/bin/sourced"), procs)
        self.assertTrue(all(p["status"] == 0 and p["pid"] > 0 for p in procs.values()), procs)
        self.assertTrue((self.h.dir / "remote" / "ro" / "run-1" / "logs" / "reader-0.log").exists())
        pid = int(r.params()["shm_name"].removeprefix("daq"))
        self.assertFalse(Path(f"/tmp/esdq{pid}-ssh").exists())
        self.assertEqual(sorted(Path("/dev/shm").glob(f"es-daq{pid}-*")), [])
        self.assert_clean()

    def test_interrupt_stops_remote_daemons(self) -> None:
        topo = self.h.write_topology(self.topology(FAKE_BIN, events=2000, rate=0))
        out = self.h.dir / "interrupted"
        p = self.h.start("daqrun-int", [sys.executable, DAQRUN, topo, "--out", out,
                                        "--bin", FAKE_BIN, "--timeout", "60"],
                         env={"ES_FAKE_HANG": "builderd"})
        self.wait_started(out, p)
        # One entry per daemon: a process may briefly show up twice while an
        # interpreter shim execs into it.
        def started() -> set:
            found = set()
            for _, cmd in self.remote_daemons():
                words = cmd.split()
                role = next((d for d in ("builderd", "readoutd", "sourced")
                             if any(w.endswith("/" + d) for w in words)), None)
                ident = words[words.index("--id") + 1] if "--id" in words else "0"
                if role:
                    found.add((role, ident))
            return found
        deadline = time.monotonic() + 20
        seen = started()
        while len(seen) < 7 and time.monotonic() < deadline:
            time.sleep(0.1)
            seen = started()
        self.assertEqual(len(seen), 7, self.remote_daemons())
        os.kill(p.pid, signal.SIGINT)
        self.assertEqual(self.h.wait(p, 30), 130, p.tail(30))
        self.assertIn("interrupted (SIGINT)", p.log())
        statuses = {x["name"]: x["status"] for x in read_json(out / "params.json")["processes"]}
        self.assertEqual(statuses["builder-0"], -signal.SIGTERM, statuses)
        self.assert_clean()

    def test_killed_launcher_leaves_no_remote_daemon(self) -> None:
        topo = self.h.write_topology(self.topology(FAKE_BIN, events=2000, rate=0))
        out = self.h.dir / "killed"
        p = self.h.start("daqrun-kill", [sys.executable, DAQRUN, topo, "--out", out,
                                         "--bin", FAKE_BIN, "--timeout", "60"],
                         env={"ES_FAKE_HANG": "builderd"})
        params = self.wait_started(out, p)
        pid = int(params["shm_name"].removeprefix("daq"))
        deadline = time.monotonic() + 20
        while len(self.remote_daemons()) < 7 and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(p.pid, signal.SIGKILL)
        p.popen.wait(timeout=10)
        # The sessions close; each remote wrapper stops its daemon (SIGTERM).
        deadline = time.monotonic() + 15
        while self.remote_daemons() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.remote_daemons(), [])
        # What is left is the shared connection's master and its directory.
        c = self.h.run("cleanup", [sys.executable, DAQRUN, "--cleanup", str(pid)], 60)
        self.assertEqual(c.returncode, 0, c.describe())
        self.assertFalse(Path(f"/tmp/esdq{pid}-ssh").exists(), c.output)
        self.assert_clean()
