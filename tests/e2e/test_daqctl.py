"""deploy/daqctl against the real HTTP control endpoint (common/io/ctlhttp)
served by tests/unit/ctlhttp_serve.c, a small in-memory hub (idle ->
configured -> running -> idle): the client's signing and the module's check
agree, each transition's answer comes back as JSON on stdout with exit 0, a
refused one exits 1 with the reason on stderr, a wrong or missing key is a
401 (exit 1), an unreachable hub exits 3 naming the URL, and a usage error
exits 2 without sending anything."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, E2ETestCase, HarnessError

sys.path.insert(0, str(REPO / "deploy"))
from daqlib.hubclient import authorization, read_key  # noqa: E402

PROGRAMS = Path(os.environ.get("ES_TEST_PROGRAMS", REPO / "build" / "tests"))
SERVE = PROGRAMS / "ctlhttp_serve"
DAQCTL = REPO / "deploy" / "daqctl"


def held_for(text: str) -> str:
    """text with the seconds control has been held as N."""
    return re.sub(r"in control for \d+ s", "in control for N s", text)


def post_signed(url: str, key: Path, path: str, doc: dict) -> tuple[int, dict]:
    """A signed POST of exactly doc (no operator added)."""
    body = json.dumps(doc).encode()
    u = url.removeprefix("http://")
    host, port = u.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", path, body=body, headers={
            "Authorization": authorization(read_key(key), "POST", path, body)})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


class DaqctlTest(E2ETestCase):
    def setUp(self) -> None:
        super().setUp()
        if not os.access(SERVE, os.X_OK):
            self.skipTest(f"no {SERVE} (make all, or set ES_TEST_PROGRAMS)")
        self.key = self.write_key("run.key")

    def write_key(self, name: str, text: str | None = None) -> Path:
        path = self.h.path(name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text if text is not None else os.urandom(32).hex() + "\n")
        return path

    def serve(self, key: Path | None) -> tuple[object, str]:
        """Starts the endpoint; returns the process and its URL."""
        out = self.h.path("serve.out")
        argv = [SERVE] + (["--run-key-file", key] if key else [])
        proc = self.h.start("ctlhttp_serve", argv, stdout_path=out)
        deadline = time.monotonic() + 10
        while not out.read_text().endswith("\n"):
            if proc.returncode is not None or time.monotonic() > deadline:
                raise HarnessError(f"ctlhttp_serve printed no port:\n{proc.tail()}")
            time.sleep(0.02)
        port = int(out.read_text().split()[1])
        return proc, f"http://127.0.0.1:{port}"

    def daqctl(self, *args: object, env: dict[str, str] | None = None,
               ) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("DAQ_")}
        full_env.update(env or {})
        return subprocess.run([str(DAQCTL)] + [str(a) for a in args], capture_output=True,
                              text=True, timeout=30, env=full_env)

    def accepted(self, *args: object, **kw) -> dict:
        r = self.daqctl(*args, **kw)
        self.assertEqual(r.returncode, 0, f"daqctl {args}: {r.stdout}{r.stderr}")
        self.assertEqual(r.stderr, "")
        return json.loads(r.stdout)

    def refused(self, reason: str, *args: object) -> subprocess.CompletedProcess:
        r = self.daqctl(*args)
        self.assertEqual(r.returncode, 1, f"daqctl {args}: {r.stdout}{r.stderr}")
        self.assertIn(reason, held_for(r.stderr))
        return r

    def test_a_run_through_its_states(self) -> None:
        proc, url = self.serve(self.key)
        hub = ["--hub", url, "--run-key-file", self.key]
        self.assertEqual(self.accepted(*hub, "status"),
                         {"state": "idle", "run": 0, "peers": [], "missing": [], "runs": [],
                          "control": {"operator": None, "since_unix_ms": None, "previous": "",
                                      "takes": 0, "takeovers": 0, "releases": 0,
                                      "refused": 0}})
        args = self.h.path("configure.json")
        args.write_text(json.dumps({"run": 3, "args": {"hub": ["--events", "100"],
                                                       "source.0": ["--seed", "5"]}}))
        self.assertEqual(self.accepted(*hub, "configure", "--run", 7, "--args-file", args),
                         {"accepted": True, "state": "configured"})
        self.assertEqual(self.accepted(*hub, "status")["run"], 7)
        r = self.refused("daqctl: start refused (HTTP 409 Conflict): start run 8: the hub is "
                         "configured (run 7)", *hub, "start", "--run", 8)
        self.assertEqual(json.loads(r.stdout)["accepted"], False)
        self.refused("configure refused (HTTP 409 Conflict): the hub is configured for run 7; "
                     "reset it first", *hub, "configure", "--args-file", args)
        self.assertEqual(self.accepted(*hub, "start", "--run", 7)["state"], "running")
        self.refused("stop run 6: the hub is running (run 7)", *hub, "stop", "--run", 6)
        self.assertEqual(self.accepted(*hub, "stop", "--run", 7)["state"], "stopping")
        state = self.accepted(*hub, "status")
        self.assertEqual((state["state"], state["runs"]),
                         ("idle", [{"run": 7, "status": 0, "balanced": True}]))
        # The file's own run, then a reset back to idle.
        self.assertEqual(self.accepted(*hub, "configure", "--args-file", args)["state"],
                         "configured")
        self.assertEqual(self.accepted(*hub, "status")["run"], 3)
        self.assertEqual(self.accepted(*hub, "reset")["state"], "idle")
        self.assertEqual(self.accepted(*hub, "shutdown")["state"], "shutdown")
        self.assertEqual(self.h.wait(proc, 10), 0, proc.tail())

    def test_one_operator_in_control(self) -> None:
        proc, url = self.serve(self.key)
        hub = ["--hub", url, "--run-key-file", self.key]
        alice, bob = [*hub, "--operator", "alice"], [*hub, "--operator", "bob"]
        args = self.h.path("configure.json")
        args.write_text(json.dumps({"run": 3, "args": {"hub": []}}))
        # Nobody in control: any operator's request is taken.
        self.assertEqual(self.accepted(*bob, "configure", "--args-file", args)["state"],
                         "configured")
        self.assertEqual(self.accepted(*alice, "control")["control"]["operator"], "alice")
        self.accepted(*alice, "control")    # taking one's own control again is fine
        self.refused("daqctl: control refused (HTTP 409 Conflict): control is held by 'alice' "
                     "(in control for N s); 'bob' may take it over explicitly", *bob, "control")
        for command in (["start", "--run", 3], ["reset"], ["shutdown"]):
            with self.subTest(command=command):
                self.refused("refused (HTTP 409 Conflict): control is held by 'alice' (in "
                             "control for N s), not 'bob'; take control over explicitly first",
                             *bob, *command)
        self.refused("release refused (HTTP 409 Conflict): control is held by 'alice', not "
                     "'bob'; only its holder releases it", *bob, "release")
        # Reading stays open to everyone; the refusals changed nothing.
        state = self.accepted(*bob, "status")
        self.assertEqual((state["state"], state["control"]["operator"],
                          state["control"]["refused"]), ("configured", "alice", 3))
        # The explicit take-over, logged by the hub; then alice is refused by name.
        self.assertEqual(self.accepted(*bob, "--take-control", "start", "--run", 3)["state"],
                         "running")
        self.assertIn("Control taken over by 'bob' from 'alice'", proc.log())
        self.refused("control is held by 'bob' (in control for N s), not 'alice'", *alice,
                     "stop", "--run", 3)
        state = self.accepted(*alice, "status")
        self.assertEqual((state["state"], state["control"]["operator"],
                          state["control"]["previous"], state["control"]["takeovers"]),
                         ("running", "bob", "alice", 1))
        self.assertEqual(self.accepted(*bob, "release")["control"]["operator"], None)
        self.refused("control is not held by anyone; 'bob' has none to release", *bob,
                     "release")
        self.assertEqual(self.accepted(*alice, "stop", "--run", 3)["state"], "stopping")
        # Bad names, refused by the hub before anything changes.
        for name, reason in (("", "operator: a name of 1 to 64 characters is needed, not 0"),
                             ("x" * 65, "operator: a name of 1 to 64 characters is needed")):
            with self.subTest(name=name):
                r = self.daqctl(*hub, "--operator", name, "control")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--operator:", r.stderr)
        status, answer = post_signed(url, self.key, "/control", {"operator": "tab\there"})
        self.assertEqual((status, answer["error"]),
                         (400, "operator: character 4 is not printable ASCII"))
        status, answer = post_signed(url, self.key, "/control", {})
        self.assertEqual((status, answer["error"]), (400, "operator: the request names no "
                                                          "operator (\"operator\": \"NAME\" "
                                                          "in its body)"))
        self.accepted(*alice, "control")
        status, answer = post_signed(url, self.key, "/reset", {})
        self.assertEqual((status, held_for(answer["reason"])),
                         (409, "control is held by 'alice' (in control for N s); this request "
                               "names no operator"))
        self.assertEqual(self.accepted(*alice, "shutdown")["state"], "shutdown")
        self.assertEqual(self.h.wait(proc, 10), 0, proc.tail())

    def test_wrong_or_missing_key_is_refused(self) -> None:
        proc, url = self.serve(self.key)
        other = self.write_key("other.key")
        self.refused("daqctl: status refused (HTTP 401 Unauthorized): wrong proof: the request "
                     "was not signed with this hub's run key", "--hub", url,
                     "--run-key-file", other, "status")
        self.refused("start refused (HTTP 401 Unauthorized): wrong proof", "--hub", url,
                     "--run-key-file", other, "start", "--run", 1)
        self.refused("status refused (HTTP 401 Unauthorized): no Authorization header",
                     "--hub", url, "status")
        # Nothing refused reached the state; DAQ_HUB and DAQ_RUN_KEY_FILE stand
        # in for the options.
        state = self.accepted("status", env={"DAQ_HUB": url, "DAQ_RUN_KEY_FILE": str(self.key)})
        self.assertEqual(state["state"], "idle")
        self.assertIn("refused (401)", proc.log())
        self.h.stop(proc)

    def test_a_hub_without_a_key(self) -> None:
        proc, url = self.serve(None)
        self.assertEqual(self.accepted("--hub", url.removeprefix("http://"), "status")["state"],
                         "idle")
        self.assertEqual(self.accepted("--hub", url, "shutdown")["state"], "shutdown")
        self.assertEqual(self.h.wait(proc, 10), 0, proc.tail())

    def test_unreachable_hub(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        r = self.daqctl("--hub", f"http://127.0.0.1:{port}", "--run-key-file", self.key,
                        "start", "--run", 2)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stderr, f"daqctl: cannot reach the hub at http://127.0.0.1:{port} "
                                   "(POST /start): Connection refused\n")
        self.assertEqual(r.stdout, "")

    def test_usage_errors(self) -> None:
        not_json = self.h.path("bad.json")
        not_json.write_text("{\"run\": 1, ")
        no_args = self.h.path("noargs.json")
        no_args.write_text("{\"run\": 1}")
        no_run = self.h.path("norun.json")
        no_run.write_text("{\"args\": {}}")
        short = self.write_key("short.key", "short\n")
        args_ok = self.h.path("ok.json")
        args_ok.write_text("{\"run\": 1, \"args\": {}}")
        cases = [
            (["start"], "the following arguments are required: --run"),
            (["stop", "--run", "0"], "0 is not a run number (1 .. 4294967295)"),
            (["start", "--run", "seven"], "'seven' is not a run number"),
            (["launch"], "invalid choice: 'launch'"),
            ([], "the following arguments are required: COMMAND"),
            (["configure", "--run", "2"],
             "configure: --args-file FILE.json or TOPOLOGY is required"),
            (["configure", "--args-file", not_json], "is not JSON"),
            (["configure", "--args-file", no_args], "is not {\"run\": N, \"args\": {...}}"),
            (["configure", "--args-file", no_run], "no run number: give --run N"),
            (["configure", "--args-file", self.h.dir / "absent.json"], "cannot read"),
            (["configure", "--run", "2", "topo.toml"],
             "configure topo.toml needs --session DIR (the directory of daqrun --serve)"),
            (["--session", self.h.dir, "configure", "topo.toml"],
             f"--session: cannot read {self.h.dir / 'session.json'}: No such file"),
            (["configure", "--args-file", args_ok, "--set", "rate=5"],
             "configure: --set needs a TOPOLOGY"),
            (["scan", "x.toml"], "scan needs --session DIR"),
            (["--hub", "ftp://x:1", "status"], "--hub: 'ftp://x:1' is not http://HOST:PORT"),
            (["--hub", "127.0.0.1:port", "status"], "has a bad port"),
            (["--run-key-file", self.h.dir / "absent.key", "status"],
             "--run-key-file: cannot read"),
            (["--run-key-file", short, "status"], "holds 5 bytes; a key is 16 to 4096 bytes"),
            (["--timeout", "0", "status"], "--timeout: must be more than 0 seconds"),
        ]
        for args, reason in cases:
            with self.subTest(args=args):
                # An unreachable hub: a usage error is found before any request.
                r = self.daqctl("--hub", "127.0.0.1:1", *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(reason, r.stderr)
                self.assertEqual(r.stdout, "")
        r = self.daqctl("--help")
        self.assertEqual(r.returncode, 0)
        for words in ("status", "configure", "start", "stop", "reset", "shutdown", "scan",
                      "--session DIR",
                      "--run-key-file", "$DAQ_HUB", "http://127.0.0.1:7190",
                      "3 the hub cannot be reached"):
            self.assertIn(words, " ".join(r.stdout.split()))
