"""deploy/daqrun --cleanup: removes what launchers that no longer run left
behind on this machine, found by name:

- network namespaces esdq<pid>-* (every process still in them is killed
  first; deleting them removes their veths and bridge);
- directories /tmp/esdq<pid>-* (chrony sockets and configurations, ssh
  control sockets), after stopping any process that uses them (chronyd, an
  ssh master connection);
- shared-memory segments /dev/shm/es-daq<pid>-r* and, of a run of several
  builders, /dev/shm/es-daq<pid>-b<id>-r* (rings of a builder that was
  killed before its reader attached);
- Slurm allocations esdq<pid>-daqrun-<this machine> of the user's (scancel),
  should one outlive its launcher.

<pid> is the launcher's (or analysis/railcap.py's, which builds its
cluster with the netns backend): objects of one that still runs are left
alone, so --cleanup is safe while other runs go on.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

from .backends.base import PREFIX, launcher_alive

NS_RE = re.compile(rf"^{PREFIX}(\d+)-")
TMP_RE = re.compile(rf"^{PREFIX}(\d+)-")
SHM_RE = re.compile(r"^es-daq(\d+)-(?:b\d+-)?r\d+$")   # a builder of several: -b<id>


def _users_of(path: str) -> list[int]:
    """Processes whose command line mentions path."""
    me, pids = os.getpid(), []
    needle = path.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if needle in f.read():
                    pids.append(int(d))
        except OSError:
            continue
    return pids


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def cleanup(say=print, include_live: bool = False) -> tuple[list[str], list[str]]:
    """Removes leftovers of dead launchers (of every launcher with
    include_live). Returns (what was removed, problems)."""
    removed, problems = [], []

    def stale(pid: int) -> bool:
        return include_live or (pid != os.getpid() and not launcher_alive(pid))

    if shutil.which("ip") is not None and os.geteuid() == 0:
        from .backends.netns import delete_netns, netns_names
        for ns in netns_names():
            m = NS_RE.match(ns)
            if m and stale(int(m.group(1))):
                p = delete_netns(ns)
                if p:
                    problems.append(p)
                else:
                    removed.append(f"network namespace {ns}")
    for d in sorted(Path("/tmp").glob(f"{PREFIX}*-*")):
        m = TMP_RE.match(d.name)
        if not m or not stale(int(m.group(1))):
            continue
        users = _users_of(str(d))
        _kill_all(users)
        if users:
            time.sleep(0.2)
            removed.append(f"{len(users)} process(es) using {d}")
        shutil.rmtree(d, ignore_errors=True)
        if d.exists():
            problems.append(f"cannot remove {d}")
        else:
            removed.append(f"directory {d}")
    shm = Path("/dev/shm")
    if shm.is_dir():
        for seg in sorted(shm.iterdir()):
            m = SHM_RE.match(seg.name)
            if m and stale(int(m.group(1))):
                try:
                    seg.unlink()
                    removed.append(f"shared-memory segment /dev/shm/{seg.name}")
                except OSError as e:
                    problems.append(f"cannot remove /dev/shm/{seg.name}: {e.strerror}")
    from .backends.slurm import cancel_jobs, stale_jobs
    jobs = stale_jobs(stale)
    problems += cancel_jobs(jobs)
    removed += [f"Slurm job {job} ({name})" for job, name in jobs]
    for line in removed:
        say(f"removed {line}")
    for line in problems:
        say(f"problem: {line}")
    if not removed and not problems:
        say("nothing to clean up")
    return removed, problems
