"""Every daemon explains itself: --help and --version exit 0, and a bad or
missing flag exits 2 naming the flag."""

from __future__ import annotations

from harness import E2ETestCase

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
