"""The hub's HTTP control endpoint as a client sees it (builderd
--control-http, docs/RUNCONTROL.md "HTTP"): requests signed
`Authorization: es-hmac <unix-ms> <hex>` with the run key."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from pathlib import Path


class HubError(Exception):
    """The hub could not be reached, or answered something that is not JSON."""


def read_key(path: Path) -> bytes:
    """The run key's bytes as the daemons read them (common/sys/auth.c): the
    file's raw bytes without one trailing newline."""
    key = Path(path).read_bytes()
    return key[:-1] if key.endswith(b"\n") else key


def authorization(key: bytes, method: str, path: str, body: bytes) -> str:
    ms = str(int(time.time() * 1000))
    msg = b"\n".join([method.encode(), path.encode(), ms.encode(), body])
    return f"es-hmac {ms} {hmac.new(key, msg, hashlib.sha256).hexdigest()}"


class Hub:
    def __init__(self, url: str, key: bytes | None, timeout_s: float = 5.0):
        self.url, self.key, self.timeout_s = url.rstrip("/"), key, timeout_s

    def request(self, method: str, path: str, doc: dict | None = None) -> tuple[int, dict]:
        """(HTTP status, the answer's JSON)."""
        body = b"" if doc is None else json.dumps(doc).encode()
        req = urllib.request.Request(self.url + path, data=body if method == "POST" else None,
                                     method=method)
        req.add_header("Content-Type", "application/json")
        if self.key is not None:
            req.add_header("Authorization", authorization(self.key, method, path, body))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (OSError, ValueError) as e:
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
        """(accepted, the reason when refused)."""
        status, answer = self.request("POST", path, doc)
        if status == 200 and answer.get("accepted"):
            return True, ""
        return False, str(answer.get("reason") or answer.get("error") or f"HTTP {status}")
