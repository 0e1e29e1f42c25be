"""A serving daemon as systemd's Type=notify service sees it
(docs/RUNCONTROL.md, "systemd"): the real sourced started with --session and
$NOTIFY_SOCKET naming a datagram socket this test owns, as systemd names
its own, against a hub played by the test over a real socket. READY=1
comes only once the hub has welcomed the session, from the daemon's own
pid (what NotifyAccess=main accepts); each transition sets STATUS= (the
configured run, its end with the status, idle after a reset); shutdown
sends STOPPING=1. A $NOTIFY_SOCKET nobody listens on is logged and the
daemon serves all the same."""

from __future__ import annotations

import os
import socket
import struct
import tempfile
import time
from pathlib import Path

from harness import E2ETestCase
from fakesource import message, read_message
import test_session_peer


class NotifySocket:
    """The service manager's end: a datagram socket that receives each
    sd_notify() with the sender's credentials."""

    def __init__(self) -> None:
        # sun_path is 108 bytes; the test's directory may be longer.
        self.dir = tempfile.mkdtemp(prefix="es-notify-")
        self.path = str(Path(self.dir) / "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    def next(self, timeout_s: float = 10) -> tuple[str, int]:
        """The next datagram's text and the pid that sent it."""
        self.sock.settimeout(timeout_s)
        data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = next((struct.unpack("3i", d[:12])[0] for level, kind, d in anc
                    if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS), -1)
        return data.decode(), pid

    def assert_quiet(self, test: E2ETestCase, settle_s: float = 0.3) -> None:
        time.sleep(settle_s)
        self.sock.setblocking(False)
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            return
        finally:
            self.sock.setblocking(True)
        test.fail(f"unexpected notification {data!r}")

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


class SessionNotifyTest(E2ETestCase):
    def setUp(self) -> None:
        super().setUp()
        self.hub = test_session_peer.SessionHub()
        self.addCleanup(self.hub.close)
        self.notify = NotifySocket()
        self.addCleanup(self.notify.close)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.dead_port = s.getsockname()[1]
        s.close()

    def source(self, name: str, notify_socket: str):
        # Nothing listens on dead_port: each run object ends on its own
        # once its connect timeout is over.
        return self.h.start(name, [str(self.h.bin / "sourced"), "--id", "2", "--run", "1",
                                   "--events", "10", "--payload", "64", "--rate", "0",
                                   "--connect", f"127.0.0.1:{self.dead_port}",
                                   "--control", f"127.0.0.1:{self.dead_port}",
                                   "--session", f"127.0.0.1:{self.hub.port}"],
                            env={"NOTIFY_SOCKET": notify_socket})

    @staticmethod
    def run_args(connect_timeout_ms: int) -> str:
        """A run's command line: the per-run options a source requires."""
        return "\n".join(["--events", "10", "--payload", "64", "--rate", "0",
                           "--connect-timeout-ms", str(connect_timeout_ms)])

    def test_ready_status_stopping(self) -> None:
        src = self.source("source", self.notify.path)
        # The greeting by hand: not ready while the hub has not welcomed it.
        self.hub.listener.settimeout(10)
        self.hub.conn, _ = self.hub.listener.accept()
        self.hub.conn.settimeout(10)
        self.hub.send({"type": "challenge", "nonce": self.hub.NONCE})
        hello = read_message(self.hub.conn)
        self.assertEqual((hello["role"], hello["id"], hello["channel"]), ("source", 2, "session"))
        self.notify.assert_quiet(self)
        self.hub.welcome(hello)
        self.assertEqual(self.notify.next(), ("READY=1\nSTATUS=joined the hub's session; idle",
                                              src.pid))
        self.assertEqual(self.hub.state()["state"], "idle")

        self.hub.send({"type": "configure", "run": 7, "args": self.run_args(300)})
        self.assertEqual(self.hub.state()["state"], "configured")
        self.assertEqual(self.notify.next(), ("STATUS=configured for run 7", src.pid))
        over = self.hub.state()
        self.assertEqual(over["reason"], "run over")
        self.assertEqual(self.notify.next(),
                         (f"STATUS=run 7 over (status {over['status']})", src.pid))

        # A refused configure changes nothing systemd shows.
        self.hub.send({"type": "configure", "run": 8, "args": "--rate\nfast"})
        self.assertFalse(self.hub.state()["accepted"])
        self.notify.assert_quiet(self)
        # A reset stops the run it finds, and the status says so.
        self.hub.send({"type": "configure", "run": 9, "args": self.run_args(20000)})
        self.assertEqual(self.hub.state()["state"], "configured")
        self.assertEqual(self.notify.next()[0], "STATUS=configured for run 9")
        self.hub.send({"type": "reset", "reason": "operator"})
        self.assertTrue(self.hub.state()["accepted"])
        self.assertEqual(self.hub.state()["state"], "idle")
        self.assertRegex(self.notify.next()[0], r"^STATUS=run 9 over \(status -?\d+\)$")
        self.hub.send({"type": "reset", "reason": "again"})
        self.assertTrue(self.hub.state()["accepted"])
        self.assertEqual(self.notify.next()[0], "STATUS=idle")

        self.hub.send({"type": "shutdown", "reason": "end of the shift"})
        self.assertEqual(self.notify.next(), ("STOPPING=1", src.pid))
        self.assertEqual(self.h.wait(src, 10), 0, src.tail())
        self.notify.assert_quiet(self, settle_s=0)
        self.assertNotIn("Cannot notify", src.log())

    def test_lost_hub_stops_and_unreachable_socket(self) -> None:
        # The hub's loss: STOPPING=1 and exit 1, which Restart=on-failure restarts.
        src = self.source("source", self.notify.path)
        self.hub.accept()
        self.hub.state()
        self.assertTrue(self.notify.next()[0].startswith("READY=1\n"))
        self.hub.conn.close()
        self.hub.conn = self.hub.link = None
        self.assertEqual(self.notify.next(), ("STOPPING=1", src.pid))
        self.assertEqual(self.h.wait(src, 10), 1, src.tail())
        # A manager that went away: said once, and the daemon serves on.
        gone = self.source("gone", str(Path(self.notify.dir) / "nobody"))
        self.hub.accept()
        self.assertEqual(self.hub.state()["state"], "idle")
        self.hub.send({"type": "configure", "run": 3, "args": self.run_args(300)})
        self.assertEqual(self.hub.state()["state"], "configured")
        self.assertEqual(self.hub.state()["reason"], "run over")
        self.hub.send({"type": "shutdown", "reason": "done"})
        self.assertEqual(self.hub.state()["reason"], "shutting down")
        self.assertEqual(self.h.wait(gone, 10), 0, gone.tail())
        log = gone.log()
        self.assertIn(f"Cannot notify the service manager at {self.notify.dir}/nobody: "
                      "No such file or directory; carrying on without", log)
        self.assertEqual(log.count("Cannot notify"), 1, log)
