#!/usr/bin/env python3
"""Runs the end-to-end tests: tests/e2e/test_*.py (unittest, stdlib only).

    tests/e2e/run.py [FILTER ...]

A FILTER keeps the tests whose id (module.Class.method) contains it; with
several, a test matching any is kept. Prints one line per test, failures
with their tracebacks, and ends with exactly "N passed, N failed" (plus
", N skipped" when any were). Exits 1 when a test failed or none matched.

Environment: ES_BIN (daemon binaries; tests that need them skip when they
are absent), ES_E2E_TEST_TIMEOUT (seconds per test, default 900),
ES_E2E_KEEP=1 (keep every test's temp directory).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent


class TestTimeout(Exception):
    pass


def iter_tests(suite: unittest.TestSuite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from iter_tests(item)
        else:
            yield item


class LineResult(unittest.TestResult):
    """Prints a line per test as it finishes."""

    def __init__(self) -> None:
        super().__init__()
        self.passed = 0
        self.failed_ids: list[str] = []
        self.skipped_count = 0
        self._t0 = 0.0

    def startTest(self, test) -> None:
        super().startTest(test)
        self._t0 = time.monotonic()
        if sys.stdout.isatty():
            print(f"....  {test.id()}", end="\r", flush=True)

    def _line(self, word: str, test, extra: str = "") -> None:
        print(f"{word:<5} {test.id()} ({time.monotonic() - self._t0:.1f} s){extra}", flush=True)

    def addSuccess(self, test) -> None:
        super().addSuccess(test)
        self.passed += 1
        self._line("ok", test)

    def addExpectedFailure(self, test, err) -> None:
        super().addExpectedFailure(test, err)
        self.passed += 1
        self._line("ok", test, " (expected failure)")

    def _failed(self, word: str, test, text: str, shown=None) -> None:
        """Counts test as failed (once, however many of its subtests fail)
        and prints `shown` (the test or its subtest) with the traceback."""
        if test.id() not in self.failed_ids:
            self.failed_ids.append(test.id())
        self._line(word, shown or test)
        print("\n".join("    " + line for line in text.rstrip().splitlines()), flush=True)

    # TestResult stores each traceback already stripped of unittest's frames.
    def addFailure(self, test, err) -> None:
        super().addFailure(test, err)
        self._failed("FAIL", test, self.failures[-1][1])

    def addError(self, test, err) -> None:
        super().addError(test, err)
        self._failed("ERROR", test, self.errors[-1][1])

    def addSubTest(self, test, subtest, err) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = self.failures if issubclass(err[0], test.failureException) else self.errors
            self._failed("FAIL", test, kind[-1][1], shown=subtest)

    def addUnexpectedSuccess(self, test) -> None:
        super().addUnexpectedSuccess(test)
        self._failed("FAIL", test, "unexpected success")

    def addSkip(self, test, reason) -> None:
        super().addSkip(test, reason)
        self.skipped_count += 1
        self._line("skip", test, f": {reason}")


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    sys.path.insert(0, str(HERE))
    suite = unittest.defaultTestLoader.discover(str(HERE), pattern="test_*.py",
                                                top_level_dir=str(HERE))
    tests = [t for t in iter_tests(suite)
             if not argv or any(f in t.id() for f in argv)]
    if not tests:
        print(f"no test matches {' '.join(argv)}" if argv else "no tests found")
        print("0 passed, 0 failed")
        return 1

    per_test_s = float(os.environ.get("ES_E2E_TEST_TIMEOUT", "900"))

    def on_alarm(_signum, _frame):
        raise TestTimeout(f"test took longer than {per_test_s:g} s (ES_E2E_TEST_TIMEOUT)")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    result = LineResult()
    t0 = time.monotonic()
    for test in tests:
        signal.setitimer(signal.ITIMER_REAL, per_test_s)
        try:
            test.run(result)
        except KeyboardInterrupt:
            # unittest lets it through without running cleanups: run them
            # here so that no daemon of the test outlives the runner.
            signal.setitimer(signal.ITIMER_REAL, 0)
            test.doCleanups()
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if result.shouldStop:
            break
    failed = len(result.failed_ids)
    print(f"e2e: {len(tests)} tests in {time.monotonic() - t0:.1f} s")
    if failed:
        print("failed: " + ", ".join(result.failed_ids))
    line = f"{result.passed} passed, {failed} failed"
    if result.skipped_count:
        line += f", {result.skipped_count} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("\ninterrupted")
        sys.exit(130)
