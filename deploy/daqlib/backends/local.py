"""The local backend: every daemon a child process of the launcher, on this
machine. A host's address (127.0.0.1 unless [hosts.NAME] address says
otherwise) is where its daemons listen; several hosts may share one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

from .base import Backend, Handle, LaunchError, SharedRunDir, register


@register("local")
class LocalBackend(SharedRunDir, Backend):
    """Every daemon is a child process on this machine. A host's address is
    where its daemons listen (127.0.0.1 unless [hosts.NAME] address says
    otherwise); several hosts may share one address."""

    needs_hosts = False

    def status_address(self, host):
        return "127.0.0.1"

    def wrap(self, host: str, argv: list[str]) -> list[str]:
        """The command line that runs argv on host (subclasses prefix it)."""
        return argv

    def preexec(self) -> Callable[[], None] | None:
        return None

    def start(self, name, argv, log_path, *, host, stdout_path=None):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        err = open(log_path, "ab")
        out = open(stdout_path, "ab") if stdout_path else err
        extra = self.env(host)
        env = dict(os.environ, **extra) if extra else None
        try:
            proc = subprocess.Popen(self.wrap(host, argv), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True, close_fds=True,
                                    env=env, preexec_fn=self.preexec())
        except OSError as e:
            raise LaunchError(f"cannot start {name} ({argv[0]}): {e.strerror}") from e
        finally:
            err.close()
            if out is not err:
                out.close()
        return Handle(name=name, host=host, argv=list(argv), log_path=log_path,
                      stdout_path=stdout_path, pid=proc.pid, started=time.monotonic(),
                      impl=proc)

    def wait(self, handle, timeout=0):
        if handle.returncode is not None:
            return handle.returncode
        proc: subprocess.Popen = handle.impl
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        handle.returncode = rc
        handle.ended = time.monotonic()
        return rc

    def kill(self, handle, sig=signal.SIGTERM):
        # Once the leader is reaped its PID may be reused: signal only before.
        if handle.returncode is not None or handle.impl.poll() is not None:
            return
        try:
            os.killpg(handle.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            handle.impl.send_signal(sig)

