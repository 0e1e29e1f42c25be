"""deploy/daqrun's backends: where and how the daemons of a run start.

- core.py:    Handle, HostSpec, the Backend interface, LocalBackend, errors
- netns.py:   NetnsBackend, a virtual cluster of network namespaces
- ssh.py:     SshBackend, real hosts reached over ssh
- cleanup.py: leftovers of crashed runs (deploy/daqrun --cleanup)

Standard library only; the stock tools ip, tc, unshare, chronyd, chronyc,
ssh and tar do the work. docs/DEPLOY.md describes them.
"""

from .core import (BACKENDS, Backend, Handle, HostSpec, LaunchError, LocalBackend,  # noqa: F401
                   TeardownError, register)
from . import netns, ssh  # noqa: F401  (they register themselves in BACKENDS)
