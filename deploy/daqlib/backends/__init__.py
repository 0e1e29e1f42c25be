"""Where and how the daemons of a run start: one module per backend.

- base.py:  the Backend interface, HostSpec, Handle, the registry, shared helpers
- local.py: LocalBackend, every daemon a child process of the launcher
- netns.py: NetnsBackend, a virtual cluster of network namespaces
- ssh.py:   SshBackend, real hosts reached over ssh

Importing this package imports every module in this folder, and each
registers its backend (@register), with its options, host keys and
validation: a new backend is one new module here (docs/CODE.md).
"""

from __future__ import annotations

import importlib
import pkgutil

from ..schema import HOST_KEYS, Key
from .base import BACKENDS, Backend, Handle, HostSpec, LaunchError, TeardownError, register

__all__ = ["BACKENDS", "Backend", "Handle", "HostSpec", "LaunchError", "TeardownError",
           "register", "host_keys", "option_tables"]

for _module in pkgutil.iter_modules(__path__):       # in name order: local first
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")


def host_keys() -> dict[str, Key]:
    """Every key of [hosts.NAME]: those every backend may read, then each
    backend's own, in registration order. A topology that names its hosts
    runs on every backend, so each backend accepts them all."""
    keys = dict(HOST_KEYS)
    for name, cls in BACKENDS.items():
        for key, spec in cls.host_keys.items():
            if key in keys:
                raise RuntimeError(f"backend {name}: host key {key!r} is declared twice")
            keys[key] = spec
    return keys


def option_tables() -> dict[str, dict[str, Key]]:
    """{backend name: its table's keys} for each backend with options."""
    return {name: cls.options for name, cls in BACKENDS.items() if cls.options}
