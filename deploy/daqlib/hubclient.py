"""The hub's HTTP control endpoint as a client sees it (builderd
--control-http, docs/RUNCONTROL.md "HTTP"): requests signed
`Authorization: es-hmac <unix-ms> <nonce> <hex>` with the run key, each
with a nonce of its own (the hub takes a signed request once). Standard
library only: deploy/daqctl imports it as well as the launcher."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import http.client
import json
import os
import secrets
import socket
import threading
import time
import urllib.parse
from pathlib import Path

CLONE_NEWNET = 0x40000000
# The sizes of a key the daemons take (common/sys/auth.h).
KEY_MIN, KEY_MAX = 16, 4096


class HubError(Exception):
    """The hub could not be reached, or answered something that is not JSON."""


class RunKeyError(ValueError):
    """A run key file of a size no daemon takes."""


def read_key(path: Path) -> bytes:
    """The run key's bytes as the daemons read them (common/sys/auth.c): the
    file's raw bytes without one trailing newline. OSError when it cannot be
    read; RunKeyError when no daemon would take it, so a client finds out
    before a hub refuses every request."""
    key = Path(path).read_bytes()
    if key.endswith(b"\n"):
        key = key[:-1]
    if not KEY_MIN <= len(key) <= KEY_MAX:
        raise RunKeyError(f"{path} holds {len(key)} bytes; a key is {KEY_MIN} to {KEY_MAX} "
                          f"bytes")
    return key


def authorization(key: bytes, method: str, path: str, body: bytes,
                  nonce: str | None = None) -> str:
    """The header's value: HMAC-SHA256 under key of
    METHOD\\nPATH\\nUNIX-MS\\nNONCE\\nBODY, the nonce 32 hex digits
    drawn afresh unless given (tests replay one on purpose)."""
    ms = str(int(time.time() * 1000))
    nonce = nonce or secrets.token_hex(16)
    msg = b"\n".join([method.encode(), path.encode(), ms.encode(), nonce.encode(), body])
    return f"es-hmac {ms} {nonce} {hmac.new(key, msg, hashlib.sha256).hexdigest()}"


def connect_in_netns(netns: str, address: tuple[str, int], timeout_s: float) -> socket.socket:
    """A TCP connection made from inside the network namespace netns (a
    path, /run/netns/NAME): a thread enters it, connects and ends, and the
    socket stays in the namespace it was made in."""
    out: dict = {}

    def work() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            fd = os.open(netns, os.O_RDONLY)
        except OSError as e:
            out["error"] = e
            return
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"cannot enter {netns}: {os.strerror(err)}")
            out["sock"] = socket.create_connection(address, timeout_s)
        except OSError as e:
            out["error"] = e
        finally:
            os.close(fd)

    t = threading.Thread(target=work, name="hub-netns")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["sock"]


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, timeout_s: float, netns: str | None):
        super().__init__(host, port, timeout=timeout_s)
        self.netns = netns

    def connect(self) -> None:
        if self.netns is None:
            super().connect()
        else:
            self.sock = connect_in_netns(self.netns, (self.host, self.port), self.timeout)


class Hub:
    """netns: the hub's network namespace when it is not reachable from
    here (the netns backend's virtual hosts). key None: unsigned requests,
    as the launcher reads a builder's /status on its --metrics-listen.
    operator: the name post() gives the hub in every body (docs/RUNCONTROL.md,
    "One operator in control"); None names none, which the hub takes only
    while nobody holds control."""

    def __init__(self, url: str, key: bytes | None, timeout_s: float = 5.0,
                 netns: str | None = None, operator: str | None = None):
        self.url, self.key, self.timeout_s = url.rstrip("/"), key, timeout_s
        self.operator = operator
        self.netns = netns
        u = urllib.parse.urlsplit(self.url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80

    def exchange(self, method: str, path: str, body: bytes = b"") -> tuple[int, str, bytes]:
        """(HTTP status, reason phrase, the answer's raw bytes) of one signed
        request, whatever the status; body is posted with POST and ignored
        otherwise (the signature covers it, b"" for a GET). OSError or
        http.client.HTTPException when the hub cannot be reached."""
        headers = {}
        if method == "POST":
            headers["Content-Type"] = "application/json"
        if self.key is not None:
            headers["Authorization"] = authorization(self.key, method, path, body)
        conn = _Connection(self.host, self.port, self.timeout_s, self.netns)
        try:
            conn.request(method, path, body=body if method == "POST" else None,
                         headers=headers)
            r = conn.getresponse()
            return r.status, r.reason, r.read()
        finally:
            conn.close()

    def request(self, method: str, path: str, doc: dict | None = None) -> tuple[int, dict]:
        """(HTTP status, the answer's JSON)."""
        body = b"" if doc is None else json.dumps(doc).encode()
        try:
            status, _, raw = self.exchange(method, path, body)
        except (OSError, http.client.HTTPException) as e:
            raise HubError(f"the hub at {self.url} is unreachable: {e}") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise HubError(f"the hub at {self.url} answered {path} with no JSON "
                           f"(HTTP {status})") from None
        return status, answer if isinstance(answer, dict) else {"answer": answer}

    def state(self) -> dict:
        status, answer = self.request("GET", "/state")
        if status != 200:
            raise HubError(f"GET /state: HTTP {status}: {answer.get('error', answer)}")
        return answer

    def post(self, path: str, doc: dict) -> tuple[bool, str]:
        """(accepted, the reason when refused). The body names the
        operator when this client has one (the hub's control rule)."""
        if self.operator is not None and "operator" not in doc:
            doc = {**doc, "operator": self.operator}
        status, answer = self.request("POST", path, doc)
        if status == 200 and answer.get("accepted"):
            return True, ""
        return False, str(answer.get("reason") or answer.get("error") or f"HTTP {status}")
