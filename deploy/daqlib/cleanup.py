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

<pid> is the owner's: the launcher's, or that of any other program that
builds a cluster with a backend in its own process (analysis/railcap.py,
analysis/cms2003.py, a test). An object whose owner still runs is left
alone, whatever that program is, so --cleanup is safe while other runs go
on: the owner runs when pid is a live process (not a zombie) that started
before the object was made; a pid that runs but started later is another
process that was given a dead owner's number. `--cleanup PID ...` looks at
those owners' objects only.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

from .backends.base import PREFIX, owner_alive, process_name

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


def _made_at(path: str | Path) -> float | None:
    """When path was made, as near as its times tell (a namespace's nsfs
    inode keeps its creation time; a directory's change with its
    entries, never to before it was made)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return min(st.st_mtime, st.st_ctime)


def cleanup(say=print, include_live: bool = False,
            owners: set[int] | None = None) -> tuple[list[str], list[str]]:
    """Removes leftovers of dead owners (of every owner with include_live),
    of the owners pids only when given. Says what it left alone because its
    owner runs. Returns (what was removed, problems)."""
    removed, problems = [], []
    spared: dict[int, list[str]] = {}

    def stale(pid: int, made_at: float | None, what: str) -> bool:
        if owners is not None and pid not in owners:
            return False
        if include_live:
            return True
        if pid != os.getpid() and not owner_alive(pid, made_at):
            return True
        spared.setdefault(pid, []).append(what)
        return False

    if shutil.which("ip") is not None and os.geteuid() == 0:
        from .backends.netns import delete_netns, netns_names
        for ns in netns_names():
            m = NS_RE.match(ns)
            if m and stale(int(m.group(1)), _made_at(f"/run/netns/{ns}"),
                           f"network namespace {ns}"):
                p = delete_netns(ns)
                if p:
                    problems.append(p)
                else:
                    removed.append(f"network namespace {ns}")
    for d in sorted(Path("/tmp").glob(f"{PREFIX}*-*")):
        m = TMP_RE.match(d.name)
        if not m or not stale(int(m.group(1)), _made_at(d), f"directory {d}"):
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
            if m and stale(int(m.group(1)), _made_at(seg),
                           f"shared-memory segment /dev/shm/{seg.name}"):
                try:
                    seg.unlink()
                    removed.append(f"shared-memory segment /dev/shm/{seg.name}")
                except OSError as e:
                    problems.append(f"cannot remove /dev/shm/{seg.name}: {e.strerror}")
    from .backends.slurm import cancel_jobs, stale_jobs
    jobs = stale_jobs(lambda pid, made_at, name: stale(pid, made_at, f"Slurm job {name}"))
    problems += cancel_jobs(jobs)
    removed += [f"Slurm job {job} ({name})" for job, name in jobs]
    for line in removed:
        say(f"removed {line}")
    for pid, what in sorted(spared.items()):
        say(f"left alone {len(what)} object(s) of pid {pid}, which still runs "
            f"({process_name(pid)}): {', '.join(what)}")
    for line in problems:
        say(f"problem: {line}")
    if not removed and not problems:
        say("nothing to clean up" if owners is None else
            f"nothing of pid {', '.join(map(str, sorted(owners)))} to clean up")
    return removed, problems
