"""Every daemon explains itself: --help and --version exit 0, and a bad or
missing flag exits 2 naming the flag; the committed man pages are what
--help gives."""

from __future__ import annotations

import subprocess
import sys

from harness import REPO, E2ETestCase

DAEMONS = ("sourced", "readoutd", "builderd")


class CliTest(E2ETestCase):
    needs_daemons = True

    def run_daemon(self, name, *args):
        return self.h.run(f"{name}-cli-{self.h._next()}", [self.h.bin / name, *args], 10)

    def test_help_and_version(self) -> None:
        for d in DAEMONS:
            r = self.run_daemon(d, "--help")
            self.assertEqual(r.returncode, 0, r.describe())
            self.assertIn("Usage:", r.output)
            self.assertIn("Example:", r.output)
            r = self.run_daemon(d, "--version")
            self.assertEqual(r.returncode, 0)
            self.assertIn(d, r.output)

    def test_bad_flags_name_the_flag(self) -> None:
        cases = [
            ("sourced", ["--id", "0", "--run", "1", "--events", "x"], "--events"),
            ("sourced", ["--id", "0"], "--run is required"),
            ("sourced", ["--inject", "bogus@1"], "--inject"),
            ("readoutd", ["--sources", "0,0"], "listed twice"),
            ("readoutd", ["--builder", "127.0.0.1:5"], "tcp://HOST:PORT"),
            ("builderd", ["--run", "1", "--sources", "0"], "--sources"),
            ("builderd", ["--listen", "nohostport"], "HOST:PORT"),
        ]
        for daemon, args, words in cases:
            with self.subTest(daemon=daemon, args=args):
                r = self.run_daemon(daemon, *args)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(words, r.output)

    def test_usage_errors_word_for_word(self) -> None:
        """The messages operators and the launcher's users know, exactly: one
        per kind of option, each cross-option check and the listen rule."""
        src = ["--id", "0", "--run", "1", "--events", "1", "--payload", "1", "--rate", "0",
               "--connect", "127.0.0.1:1", "--control", "127.0.0.1:2"]
        rdr = ["--id", "0", "--run", "1", "--listen", "127.0.0.1:0", "--sources", "0",
               "--builder", "tcp://127.0.0.1:1", "--control", "127.0.0.1:2"]
        bld = ["--run", "1", "--sources", "2", "--readers", "1", "--listen", "127.0.0.1:0",
               "--control-listen", "127.0.0.1:0", "--out", str(self.h.dir / "never")]
        cases = [
            ("sourced", ["--id", "0", "--run", "1", "--events", "x"],
             "--events: expected an integer from 0 to 9223372036854775807, got 'x'"),
            ("sourced", ["--payload", "1048577"],
             "--payload: expected an integer from 0 to 1048576, got '1048577'"),
            ("sourced", ["--connect", "nohost"],
             "--connect: expected HOST:PORT with a port from 1 to 65535, got 'nohost'"),
            ("sourced", ["--inject", "bogus@1"],
             "--inject: expected KIND@N with KIND one of crc, magic, version, flags, length, "
             "run, truncate, noend, got 'bogus@1'"),
            ("sourced", ["--stall", "x@1"],
             "--stall: expected KIND@N with KIND dribble or blackhole, got 'x@1'"),
            ("sourced", ["--clock-offset-ns", "1.5"],
             "--clock-offset-ns: expected a signed integer, got '1.5'"),
            ("sourced", ["--id", "0", "--run", "1"], "sourced: --events is required (see --help)"),
            ("sourced", [*src, "--delay-every", "3"], "sourced: --delay-every needs --delay-ms"),
            ("sourced", [*src, "extra"], "sourced: unexpected argument 'extra' (see --help)"),
            ("readoutd", ["--sources", "0,0"], "--sources: ID 0 is listed twice in '0,0'"),
            ("readoutd", ["--builder", "127.0.0.1:5"],
             "--builder: expected tcp://HOST:PORT or shm://NAME, got '127.0.0.1:5'"),
            ("readoutd", ["--builder", "shm://.x"],
             "--builder: expected shm://NAME with NAME of 1 to 48 letters, digits, '.', '_' "
             "or '-' (not starting with '.'), got 'shm://.x'"),
            ("readoutd", ["--shm-inject", "bad@1"],
             "--shm-inject: expected KIND@N with KIND one of record, crc, length, head, "
             "got 'bad@1'"),
            ("readoutd", ["--id", "0", "--run", "1"], "readoutd: --listen is required (see --help)"),
            ("readoutd", [*rdr, "--shm-inject", "crc@3"],
             "readoutd: --shm-inject needs --builder shm://NAME"),
            ("readoutd", ["--builder", "0=shm://r", "--builder", "0=tcp://127.0.0.1:2"],
             "--builder: '0=tcp://127.0.0.1:2': builder 0 is given again, but a shared-memory "
             "link is one ring whatever the rails: it takes one shm://NAME and no other URL"),
            ("readoutd", ["--builder", "x=tcp://127.0.0.1:1"],
             "--builder: expected B=URL with B a builder ID of 0 .. 255, got 'x=tcp://127.0.0.1:1'"),
            ("readoutd", ["--builder", "256=shm://r"],
             "--builder: expected B=URL with B a builder ID of 0 .. 255, got '256=shm://r'"),
            ("readoutd", ["--builder", "1=127.0.0.1:5"],
             "--builder: expected tcp://HOST:PORT or shm://NAME, got '1=127.0.0.1:5'"),
            ("readoutd", ["--builder", "tcp://127.0.0.1:1", "--builder", "0=tcp://127.0.0.1:2"],
             "--builder: '0=tcp://127.0.0.1:2': B=URL links cannot follow a URL without B= "
             "(the one builder of the run)"),
            ("readoutd", ["--builder", "0=tcp://127.0.0.1:2", "--builder", "tcp://127.0.0.1:1"],
             "--builder: 'tcp://127.0.0.1:1': a URL without B= names the one builder of the "
             "run, so it is never given with B=URL links"),
            ("readoutd", [*rdr[:8], "--builder", "0=tcp://127.0.0.1:1", "--builder",
                          "2=shm://r", *rdr[10:]],
             "readoutd: --builder: no link for builder 1; the links given go up to builder 2, "
             "so each of 0 .. 2 needs one"),
            ("readoutd", [*rdr[:8], "--builder", "0=shm://r", *rdr[10:], "--shm-inject", "crc@3"],
             "readoutd: --shm-inject takes the one builder of a run (--builder shm://NAME "
             "without B=)"),
            ("readoutd", [*rdr, "--pending-frames", "0"],
             "--pending-frames: expected an integer from 1 to 1048576, got '0'"),
            ("readoutd", [*rdr, "--listen", "10.1.1.1:0"],
             "readoutd: --listen 10.1.1.1 is not a loopback address: without a run key only "
             "peers on this host could connect; give --run-key-file (the same file on every "
             "host)"),
            ("builderd", ["--run", "1", "--sources", "0"],
             "--sources: expected an integer from 1 to 1024, got '0'"),
            ("builderd", ["--listen", "nohostport"],
             "--listen: expected HOST:PORT with a port from 0 to 65535, got 'nohostport'"),
            ("builderd", ["--shm-listen", ".x"],
             "--shm-listen: expected a NAME of 1 to 48 letters, digits, '.', '_' or '-' "
             "(not starting with '.'), got '.x'"),
            ("builderd", ["--stall-timeout-ms", "499"],
             "--stall-timeout-ms: expected an integer from 500 to 86400000, got '499'"),
            ("builderd", [*bld, "--readers", "3"],
             "builderd: --readers 3 exceeds --sources 2: every reader serves at least one source"),
            ("builderd", [*bld, "--shm-capacity", "1Mi"],
             "builderd: --shm-capacity needs --shm-listen NAME"),
            ("builderd", [*bld[:6], *bld[8:]], "builderd: --role both needs --listen"),
            ("builderd", [*bld, "--builders", "2"],
             "builderd: --builders 2 needs --role hub and --role builder processes; --role "
             "both is the one builder of a run"),
            ("builderd", [*bld, "--hub", "127.0.0.1:1"], "builderd: --role both does not take --hub"),
            ("builderd", ["--role", "hub", *bld],
             "builderd: --role hub needs --events (the event manager assigns every ID of the run)"),
            ("builderd", ["--role", "boss"],
             "--role: expected one of both, hub, builder, got 'boss'"),
            ("builderd", [*bld, "--control-listen", "10.1.1.1:0"],
             "builderd: --control-listen 10.1.1.1 is not a loopback address: without a run "
             "key only peers on this host could connect; give --run-key-file (the same file "
             "on every host)"),
        ]
        for daemon, args, message in cases:
            with self.subTest(daemon=daemon, args=args):
                r = self.run_daemon(daemon, *args)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertEqual(r.output.strip(), message, r.describe())

    def test_unknown_option_and_missing_argument(self) -> None:
        """getopt's words, then the usage, on stderr; exit 2."""
        for d in DAEMONS:
            with self.subTest(daemon=d):
                r = self.run_daemon(d, "--bogus")
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(f"unrecognized option '--bogus'\nUsage: {d} ", r.output)
                r = self.run_daemon(d, "--run")
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(f"option '--run' requires an argument\nUsage: {d} ", r.output)

    def test_man_pages_match_help(self) -> None:
        """man/*.1 as committed is what make man writes from --help today."""
        for d in DAEMONS:
            with self.subTest(daemon=d):
                r = subprocess.run([sys.executable, str(REPO / "scripts" / "mkman.py"), "--check",
                                    str(self.h.bin / d), str(REPO / "man" / f"{d}.1")],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
