"""A daemon serving many runs (docs/RUNCONTROL.md) against a hub played by
this test over a real socket: the real readoutd and sourced started with
--session join the hub's session port (channel "session", run 0), answer
each configure with a state (a refused one with the option parser's own
words), make a run object per configure in the same process, report each
run's end with its status, take reset and shutdown, and exit 1 when the
hub's link is lost."""

from __future__ import annotations

import os
import socket
import time

from harness import E2ETestCase
from fakesource import Link, message, read_message


class SessionHub:
    """The hub's session port: greets one peer and speaks to it."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.conn: socket.socket | None = None
        self.link: Link | None = None     # once welcomed: the sealed messages

    def accept(self, timeout_s: float = 10) -> dict:
        self.listener.settimeout(timeout_s)
        self.conn, _ = self.listener.accept()
        self.conn.settimeout(timeout_s)
        self.conn.sendall(message({"type": "challenge", "nonce": self.NONCE}))
        hello = read_message(self.conn)
        self.welcome(hello)
        return hello

    NONCE = "0" * 64

    def welcome(self, hello: dict) -> None:
        self.conn.sendall(message({"type": "welcome", "run_id": 0, "role": "builder", "id": 0}))
        self.link = Link.listener(self.conn, self.NONCE, hello)

    def send(self, body: dict) -> None:
        """The greeting's messages go as they are, the rest sealed."""
        if self.link is None:
            self.conn.sendall(message(body))
        else:
            self.link.send(body)

    def state(self) -> dict:
        m = self.link.read()
        assert m is not None and m["type"] == "state", m
        return m

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.listener.close()


class SessionPeerTest(E2ETestCase):
    def setUp(self) -> None:
        super().setUp()
        self.hub = SessionHub()
        self.addCleanup(self.hub.close)
        # Nothing listens here: a run's control link cannot be made, so
        # each run object ends on its own after its connect timeout.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.dead_port = s.getsockname()[1]
        s.close()

    def reader_args(self) -> list[str]:
        return ["--id", "1", "--run", "1", "--listen", "127.0.0.1:0", "--sources", "0",
                "--builder", f"tcp://127.0.0.1:{self.dead_port}",
                "--control", f"127.0.0.1:{self.dead_port}",
                "--session", f"127.0.0.1:{self.hub.port}"]

    def test_runs_in_one_process(self) -> None:
        reader = self.h.daemon("readoutd", "reader", self.reader_args())
        hello = self.hub.accept()
        self.assertEqual((hello["type"], hello["role"], hello["id"], hello["channel"],
                          hello["run_id"], hello["pid"]),
                         ("hello", "reader", 1, "session", 0, reader.pid))
        self.assertEqual(self.hub.state(), {"type": "state", "run": 0, "state": "idle",
                                            "accepted": True, "reason": "", "status": 0})
        # Refusals, in the parser's and the checks' own words.
        for args, want in (("--max-fragment\nlots",
                            "--max-fragment: expected an integer"),
                           ("--listen\n127.0.0.1:7999",
                            "--listen is fixed for this daemon's life (127.0.0.1:0); restart "
                            "it to change it"),
                           ("--no-such-option", "unrecognized option '--no-such-option'")):
            self.hub.send({"type": "configure", "run": 5, "args": args})
            st = self.hub.state()
            self.assertFalse(st["accepted"], st)
            self.assertEqual(st["state"], "idle")
            self.assertIn(want, st["reason"])
        # Two runs in turn, in the same process.
        for run in (7, 8):
            self.hub.send({"type": "configure", "run": run,
                           "args": "--connect-timeout-ms\n300"})
            st = self.hub.state()
            self.assertEqual((st["accepted"], st["state"], st["run"]), (True, "configured", run),
                             st)
            self.hub.send({"type": "configure", "run": run + 10, "args": ""})
            st = self.hub.state()
            self.assertFalse(st["accepted"])
            self.assertEqual(st["reason"], f"readoutd is in run {run}; stop it first")
            over = self.hub.state()     # its control link could not be made
            self.assertEqual((over["state"], over["run"], over["reason"]), ("idle", 0, "run over"),
                             over)
            self.assertNotEqual(over["status"], 0)
            self.assertIsNone(reader.popen.poll(), "the process lives on")
        log = reader.log()
        self.assertIn("Configured for run 7", log)
        self.assertIn("Run 8 over", log)
        # A reset stops a run that has not ended on its own.
        self.hub.send({"type": "configure", "run": 9, "args": "--connect-timeout-ms\n20000"})
        self.assertEqual(self.hub.state()["state"], "configured")
        self.hub.send({"type": "reset", "reason": "operator"})
        self.assertTrue(self.hub.state()["accepted"])
        self.assertEqual(self.hub.state()["state"], "idle")
        self.hub.send({"type": "shutdown", "reason": "end of the shift"})
        st = self.hub.state()
        self.assertEqual(st["reason"], "shutting down")
        self.assertEqual(self.h.wait(reader, 10), 0, reader.tail())
        self.assertIn("Shut down by the hub: end of the shift", reader.log())

    def test_hub_gone_and_wrong_hub(self) -> None:
        source = self.h.daemon("sourced", "source", [
            "--id", "0", "--run", "1", "--events", "10", "--payload", "64", "--rate", "0", "--connect", f"127.0.0.1:{self.dead_port}",
            "--control", f"127.0.0.1:{self.dead_port}", "--session", f"127.0.0.1:{self.hub.port}"])
        hello = self.hub.accept()
        self.assertEqual((hello["role"], hello["channel"]), ("source", "session"))
        self.hub.state()
        self.hub.conn.close()
        self.hub.conn = self.hub.link = None
        self.assertEqual(self.h.wait(source, 10), 1, source.tail())
        self.assertIn("Lost the hub's session link", source.log())
        # No hub at all: it says so and exits 1 once its dial gives up.
        lone = self.h.daemon("sourced", "lone", [
            "--id", "0", "--run", "1", "--events", "10", "--payload", "64", "--rate", "0", "--connect", f"127.0.0.1:{self.dead_port}",
            "--control", f"127.0.0.1:{self.dead_port}", "--session", f"127.0.0.1:{self.dead_port}"])
        self.assertEqual(self.h.wait(lone, 30), 1, lone.tail())
        self.assertIn("Cannot join the hub's session", lone.log())
        # The hub (--role both) serves runs with --session-listen, and says so.
        r = self.h.run("builderd", [str(self.h.bin / "builderd"), "--run", "1", "--sources", "1",
                                    "--readers", "1", "--listen", "127.0.0.1:0",
                                    "--control-listen", "127.0.0.1:0", "--out",
                                    str(self.h.path("b")), "--session",
                                    f"127.0.0.1:{self.hub.port}"], 30)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("--session is for a --role builder; the hub serves runs with "
                      "--session-listen", r.output)
