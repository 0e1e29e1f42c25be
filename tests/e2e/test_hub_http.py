"""The serving hub's operator endpoint (builderd --control-http) against
hostile and unlucky clients, on loopback: signed requests captured and sent
again (each refused by name, the hub's state unchanged, every run in
/state once); hundreds of clients dribbling a byte now and then (the
operator's signed /state still answered at once, the slow ones cut at the
door's deadline, the hub's CPU and log quiet, all of it counted); the hub
out of descriptors (accept backs off without spinning or flooding its log,
and serves again once descriptors are free); a finished run's metrics.json
and report.html served signed and read only, and nothing else of its
directory or beyond. docs/RUNCONTROL.md, "HTTP"."""

from __future__ import annotations

import http.client
import json
import os
import resource
import selectors
import socket
import sys
import time
from pathlib import Path

from harness import E2ETestCase

import test_runs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy"))
from daqlib.hubclient import Hub, authorization, read_key  # noqa: E402

# The door's limits and deadline (common/io/httplisten.h).
MAX_CONNECTIONS, MAX_PER_ADDRESS, DEADLINE_S = 64, 16, 5.0
TICK = os.sysconf("SC_CLK_TCK")


def write_key(test: E2ETestCase) -> Path:
    path = test.h.path("run.key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path


def send(port: int, method: str, path: str, body: bytes, auth: str) -> tuple[int, dict]:
    """One request with the Authorization given (a captured one, say)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Authorization": auth}
        if method == "POST":
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body if method == "POST" else None, headers=headers)
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def cpu_s(pid: int) -> float:
    """User and system CPU time of pid so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Dribblers:
    """count connections to port from loopback addresses 127.0.0.2 and up
    (per_address each), each sending a request's first bytes one at a time
    every interval_s; remembers when each was connected and cut."""

    def __init__(self, port: int, count: int, per_address: int):
        self.sel = selectors.DefaultSelector()
        self.socks: list[socket.socket] = []
        self.connected: dict[int, float] = {}
        self.cut: dict[int, float] = {}
        self.sent: dict[int, int] = {}
        self.request = b"GET /state HTTP/1.1\r\nHost: hub\r\nX-Slow: " + b"a" * 4096
        for i in range(count):
            s = socket.socket()
            s.setblocking(False)
            s.bind((f"127.0.0.{2 + i // per_address}", 0))
            s.connect_ex(("127.0.0.1", port))
            self.socks.append(s)
            self.sent[i] = 0
            self.sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, i)

    def turn(self, interval_s: float, now: float) -> None:
        """Sends each open connection its next byte when due; notes the cut."""
        for key, events in self.sel.select(timeout=0):
            i, s = key.data, key.fileobj
            if events & selectors.EVENT_WRITE and i not in self.connected:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    self.connected[i] = now
                self.sel.modify(s, selectors.EVENT_READ, i)
            if events & selectors.EVENT_READ:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self.cut[i] = now
                    self.sel.unregister(s)
        for i, t in self.connected.items():
            if i in self.cut or now - t < interval_s * self.sent[i]:
                continue
            try:
                self.socks[i].send(self.request[self.sent[i]:self.sent[i] + 1])
                self.sent[i] += 1
            except OSError:
                pass

    def close(self) -> None:
        for s in self.socks:
            s.close()
        self.sel.close()


class HubHttpTest(E2ETestCase):
    needs_daemons = True

    def start_hub(self, key: Path, *extra: object, name: str = "hub") -> tuple[object, Hub]:
        """A serving hub alone (its peers never come): /state answers."""
        pf = self.h.path("ports", f"{name}.port")
        hub = self.h.daemon("builderd", name, [
            "--run", "1", "--sources", "1", "--readers", "1", "--listen", "127.0.0.1:0",
            "--control-listen", "127.0.0.1:0", "--out", self.h.path("base"),
            "--port-file", pf, "--run-key-file", key, "--session-listen", "127.0.0.1:0",
            "--control-http", "127.0.0.1:0", *extra])
        ports = self.h.wait_port_file(pf, ("http",), proc=hub)
        return hub, Hub(f"http://127.0.0.1:{ports['http']}", read_key(key), timeout_s=10)

    def timed_state(self, client: Hub) -> float:
        t = time.monotonic()
        st = client.state()
        self.assertIn("control_http", st)
        return time.monotonic() - t

    def test_the_console_files_and_nothing_else(self):
        """GET / and /console/NAME from --console-dir, unsigned, with their
        types and a policy that keeps the page on the hub; nothing outside
        the directory, no link, nothing over the cap, no unknown type."""
        key = write_key(self)
        site = self.h.path("site")
        site.mkdir()
        (site / "index.html").write_text("<!doctype html><p>console</p>")
        (site / "console.js").write_text("let x = 1;")
        (site / "console.css").write_text("p {}")
        (site / "empty.json").write_text("")
        (site / "notes.txt").write_text("not served")
        (site / ".hidden.js").write_text("hidden")
        (site / "link.js").symlink_to(key)
        with open(site / "big.js", "wb") as f:
            f.truncate(8 * 1024 * 1024 + 1)
        os.mkfifo(site / "fifo.js")
        secret = self.h.path("secret.js")
        secret.write_text("secret")
        hub, client = self.start_hub(key, "--console-dir", site)

        def get(path: str) -> tuple[int, dict, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=10)
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                return r.status, dict(r.getheaders()), r.read()
            finally:
                conn.close()

        for path, body, ctype in (("/", b"<!doctype html><p>console</p>", "text/html; charset=utf-8"),
                                  ("/console/index.html", b"<!doctype html><p>console</p>",
                                   "text/html; charset=utf-8"),
                                  ("/console/console.js", b"let x = 1;",
                                   "text/javascript; charset=utf-8"),
                                  ("/console/console.css", b"p {}", "text/css; charset=utf-8"),
                                  ("/console/empty.json", b"", "application/json")):
            with self.subTest(path=path):
                status, headers, got = get(path)
                self.assertEqual((status, got, headers["Content-Type"]), (200, body, ctype))
                self.assertIn("connect-src 'self'", headers["Content-Security-Policy"])
                self.assertIn("default-src 'none'", headers["Content-Security-Policy"])
                self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        no_file = ("no such console file; the console is GET / and its files GET "
                   "/console/NAME (letters, digits, '.', '_', '-')")
        for path, status, reason in (
                ("/console/../secret.js", 404, no_file),
                ("/console/..%2fsecret.js", 404, no_file),
                ("/console/%2e%2e/secret.js", 404, no_file),
                ("/console/sub/console.js", 404, no_file),
                ("/console/.hidden.js", 404, no_file),
                ("/console/", 404, no_file),
                ("/console/notes.txt", 404, no_file),
                ("/console/console.js?v=1", 404, no_file),
                ("/console/absent.js", 404, "console file absent.js: No such file or directory"),
                ("/console/link.js", 404, "console file link.js: Too many levels of symbolic links"),
                ("/console/fifo.js", 404, "console file fifo.js is not a regular file"),
                ("/console/big.js", 413, "console file big.js is 8388609 bytes; at most 8388608 "
                                         "are served"),
                ("/../secret.js", 404, "no such path /../secret.js")):
            with self.subTest(path=path):
                got_status, _, got = get(path)
                self.assertEqual(got_status, status, got)
                self.assertIn(reason, json.loads(got)["error"])
        # A POST to / is no console request, and /state still wants the key.
        self.assertEqual(send(client.port, "GET", "/state", b"", "none")[0], 401)
        self.assertEqual(client.state()["state"], "idle")
        # A hub whose directory has no console says where it comes from.
        hub2, client2 = self.start_hub(key, "--console-dir", self.h.path("absent"),
                                     name="hub2")
        conn = http.client.HTTPConnection("127.0.0.1", client2.port, timeout=10)
        conn.request("GET", "/")
        r = conn.getresponse()
        self.assertEqual(r.status, 404)
        self.assertIn("console file index.html: No such file or directory (the console is "
                      "built by make into build/console; builderd --console-dir)",
                      json.loads(r.read())["error"])
        conn.close()
        self.h.stop(hub2)
        self.h.stop(hub)

    def test_a_finished_runs_files_and_nothing_else(self):
        """GET /runs/N/metrics.json (and report.html when the run has one),
        signed, read only, of the runs /state lists; an unknown run, another
        name, a path out of the run's directory and a link refused."""
        key = write_key(self)
        c = test_runs.Cluster(self, key_file=key)
        self.assertTrue(c.hub.post("/configure", c.body(1, self.h.path("run-1")))[0])
        c.wait_state(("configured",))
        self.assertTrue(c.hub.post("/start", {"run": 1})[0])
        while not [r for r in c.wait_state(("idle",), 60)["runs"] if r["run"] == 1]:
            time.sleep(0.05)
        # Run 2 configured and reset: listed, its books say so.
        self.assertTrue(c.hub.post("/configure", c.body(2, self.h.path("run-2")))[0])
        c.wait_state(("configured",))
        self.assertTrue(c.hub.post("/reset", {})[0])
        c.wait_state(("idle",))

        def get(path: str, signed: bool = True) -> tuple[int, dict, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", c.hub.port, timeout=10)
            try:
                headers = {"Authorization": authorization(c.hub.key, "GET", path, b"")} \
                    if signed else {}
                conn.request("GET", path, headers=headers)
                r = conn.getresponse()
                return r.status, dict(r.getheaders()), r.read()
            finally:
                conn.close()

        run1 = self.h.path("run-1")
        status, headers, got = get("/runs/1/metrics.json")
        self.assertEqual((status, headers["Content-Type"]), (200, "application/json"), got)
        self.assertEqual(got, (run1 / "metrics.json").read_bytes())
        self.assertTrue(json.loads(got)["balanced"])
        self.assertIn("default-src 'none'", headers["Content-Security-Policy"])
        (run1 / "report.html").write_text("<!doctype html><p>run 1</p>")
        status, headers, got = get("/runs/1/report.html")
        self.assertEqual((status, headers["Content-Type"], got),
                         (200, "text/html; charset=utf-8", b"<!doctype html><p>run 1</p>"))
        status, _, got = get("/runs/2/metrics.json")
        self.assertEqual(status, 200, got)
        self.assertEqual((json.loads(got)["balanced"], json.loads(got)["errors"]),
                         (False, ["Run 2 stopped: reset by the operator"]))
        # A run's directory is its summary's; an unlisted run has none.
        no_file = ("no such run file; a finished run's are GET /runs/N/metrics.json and "
                   "/runs/N/report.html")
        for path, status, reason in (
                ("/runs/9/metrics.json", 404, "no finished run 9; the hub serves the files of "
                                              "the runs GET /state lists"),
                ("/runs/2/report.html", 404, "/runs/2/report.html: No such file or directory"),
                ("/runs/1/params.json", 404, no_file),
                ("/runs/1/../../run.key", 404, no_file),
                ("/runs/1/..%2f..%2frun.key", 404, no_file),
                ("/runs/1/logs/hub.log", 404, no_file),
                ("/runs/01/metrics.json", 404, no_file),
                ("/runs/4294967296/metrics.json", 404, no_file),
                ("/runs/1/metrics.json?x=1", 404, no_file),
                ("/runs/1", 404, no_file),
                ("/runs/", 404, no_file)):
            with self.subTest(path=path):
                got_status, _, got = get(path)
                self.assertEqual(got_status, status, got)
                self.assertIn(reason, json.loads(got)["error"])
        (run1 / "report.html").unlink()
        (run1 / "report.html").symlink_to(key)
        status, _, got = get("/runs/1/report.html")
        self.assertEqual(status, 404, got)
        self.assertIn("Too many levels of symbolic links", json.loads(got)["error"])
        # Signed like /state, and read only.
        self.assertEqual(get("/runs/1/metrics.json", signed=False)[0], 401)
        body = b"{}"
        status, answer = send(c.hub.port, "POST", "/runs/1/metrics.json", body,
                              authorization(c.hub.key, "POST", "/runs/1/metrics.json", body))
        self.assertEqual(status, 405, answer)
        self.assertIn("the method is GET (read only)", answer["error"])
        self.assertEqual(c.hub.state()["state"], "idle")
        c.shutdown()
        self.h.assert_clean()

    def test_replayed_requests_are_refused_by_name(self):
        key = write_key(self)
        c = test_runs.Cluster(self, key_file=key)
        port, k = c.hub.port, c.hub.key

        def signed(path: str, doc: dict) -> tuple[bytes, str, tuple[int, dict]]:
            body = json.dumps(doc).encode()
            auth = authorization(k, "POST", path, body)
            return body, auth, send(port, "POST", path, body, auth)

        def replayed(path: str, body: bytes, auth: str) -> None:
            status, answer = send(port, "POST", path, body, auth)
            self.assertEqual(status, 401, answer)
            self.assertIn("replayed request", answer["error"])

        # Run 1, configured and started with requests captured on the way.
        conf1, conf1_auth, (status, _) = signed("/configure", c.body(1, self.h.path("run-1")))
        self.assertEqual(status, 200)
        c.wait_state(("configured",))
        replayed("/configure", conf1, conf1_auth)
        self.assertEqual(c.hub.state()["state"], "configured")
        start1, start1_auth, (status, _) = signed("/start", {"run": 1})
        self.assertEqual(status, 200)
        st = c.wait_state(("idle",), 60)
        # Two seconds later, as a captured configure and start would come.
        time.sleep(2)
        replayed("/configure", conf1, conf1_auth)
        replayed("/start", start1, start1_auth)
        self.assertEqual(c.hub.state()["state"], "idle")
        # Run 2 configured, reset, configured again: the reset replayed
        # leaves it configured.
        self.assertTrue(c.hub.post("/configure", c.body(2, self.h.path("run-2")))[0])
        c.wait_state(("configured",))
        reset, reset_auth, (status, _) = signed("/reset", {})
        self.assertEqual(status, 200)
        c.wait_state(("idle",))
        self.assertTrue(c.hub.post("/configure", c.body(2, self.h.path("run-2")))[0])
        c.wait_state(("configured",))
        time.sleep(1)
        replayed("/reset", reset, reset_auth)
        st = c.hub.state()
        self.assertEqual((st["state"], st["run"]), ("configured", 2))
        self.assertTrue(c.hub.post("/start", {"run": 2})[0])
        while not [r for r in c.wait_state(("idle",), 60)["runs"] if r["run"] == 2]:
            time.sleep(0.05)
        st = c.hub.state()
        # Run 2's first configure, reset before it started, is listed too.
        started = [r for r in st["runs"] if r["started"]]
        self.assertEqual([r["run"] for r in started], [1, 2], st["runs"])
        self.assertEqual(len(st["runs"]), 3, st["runs"])
        self.assertTrue(all(r["balanced"] for r in started), st["runs"])
        self.assertEqual(st["control_http"]["http_replayed"], 4)
        self.assertIn("replayed request", c.hub_proc.log())
        c.shutdown()
        self.h.assert_clean()

    def test_slow_clients_cannot_shut_the_endpoint(self):
        key = write_key(self)
        hub_proc, client = self.start_hub(key)
        count, per_address, interval_s = 200, 20, 0.5
        cpu0, t0 = cpu_s(hub_proc.pid), time.monotonic()
        slow = Dribblers(client.port, count, per_address)
        answers = []
        try:
            while time.monotonic() - t0 < DEADLINE_S + 3 and len(slow.cut) < count:
                slow.turn(interval_s, time.monotonic())
                if len(answers) < 6 and time.monotonic() - t0 > len(answers) * 1.0:
                    answers.append(self.timed_state(client))
                    self.assertLessEqual(open_fds(hub_proc.pid), 2 * MAX_CONNECTIONS + 64)
                time.sleep(0.01)
            window = time.monotonic() - t0
            cpu = cpu_s(hub_proc.pid) - cpu0
            cut_after = sorted(slow.cut[i] - slow.connected.get(i, t0) for i in slow.cut)
        finally:
            slow.close()
        self.assertEqual(len(slow.cut), count, f"{count - len(slow.cut)} slow clients still open")
        self.assertLess(max(answers), 2.0, answers)
        # None outlives the deadline by much (the busy machine's margin).
        self.assertLess(cut_after[-1], DEADLINE_S + 1.5, cut_after[-10:])
        self.assertLess(cpu, 0.25 * window, f"{cpu:.2f} s of CPU in {window:.1f} s")
        st = client.state()["control_http"]
        self.assertEqual(st["http_evicted"] + st["http_timed_out"], count, st)
        self.assertGreaterEqual(st["http_evicted"], count - MAX_CONNECTIONS, st)
        # Rate-limited: a handful of lines a second, the rest summed up.
        lines = [l for l in hub_proc.log().splitlines() if "control endpoint" in l]
        self.assertLess(len(lines), 8 * (window + 1), lines[-20:])
        self.assertGreater(st["http_log_suppressed"], 0, st)
        self.assertTrue(client.post("/shutdown", {})[0])
        self.assertEqual(self.h.wait(hub_proc, 15), 0)

    def test_out_of_descriptors_the_hub_backs_off_and_recovers(self):
        key = write_key(self)
        hub_proc, client = self.start_hub(key)
        client.state()
        # A few descriptors to spare, then connections that take them all
        # and more wait in the backlog.
        spare = 6
        soft, hard = resource.prlimit(hub_proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(hub_proc.pid, resource.RLIMIT_NOFILE,
                         (open_fds(hub_proc.pid) + spare, hard))
        cpu0, t0 = cpu_s(hub_proc.pid), time.monotonic()
        held = []
        for i in range(3 * spare):
            s = socket.socket()
            s.bind((f"127.0.0.{2 + i}", 0))
            s.connect(("127.0.0.1", client.port))
            s.send(b"G")
            held.append(s)
        while time.monotonic() - t0 < 3:
            for s in held:
                try:
                    s.send(b"E")
                except OSError:
                    pass
            time.sleep(0.25)
        window = time.monotonic() - t0
        cpu = cpu_s(hub_proc.pid) - cpu0
        log = hub_proc.log()
        emfile = [l for l in log.splitlines() if "Too many open files" in l]
        self.assertTrue(emfile, "accept never failed for want of descriptors")
        self.assertLess(len(emfile), 8 * (window + DEADLINE_S), emfile[-10:])
        self.assertLess(cpu, 0.25 * window, f"{cpu:.2f} s of CPU in {window:.1f} s")
        # Descriptors free again: the operator is served.
        for s in held:
            s.close()
        resource.prlimit(hub_proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
        t = time.monotonic()
        st = client.state()["control_http"]
        self.assertLess(time.monotonic() - t, DEADLINE_S + 2)
        backoffs_seen = st["http_accept_backoffs"]
        self.assertGreater(backoffs_seen, 0, st)
        # 10 ms doubling to 1 s: a few tries a second, not a spin.
        self.assertLess(backoffs_seen, 10 + 2 * (time.monotonic() - t0), st)
        self.assertLess(len(log.encode()), 64 * 1024)
        self.assertTrue(client.post("/shutdown", {})[0])
        self.assertEqual(self.h.wait(hub_proc, 15), 0)
