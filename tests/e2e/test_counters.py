"""scripts/check_counters.py: the tree names every counter once, in
common/wire/counters.h, and the check fails on each kind of stray name it
exists to catch (fed a small tree that has it), naming the file and line."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_counters.py"
HEADER = ROOT / "common" / "wire" / "counters.h"


def run_check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


class CounterCheckTest(unittest.TestCase):
    def test_tree_names_counters_once(self):
        r = run_check(ROOT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("named once in common/wire/counters.h", r.stdout)

    def _tree(self, files: dict[str, str]) -> Path:
        """A tree with the real counters.h and these files."""
        d = Path(tempfile.mkdtemp(prefix="es-counters-"))
        self.addCleanup(shutil.rmtree, d, True)
        (d / "common" / "wire").mkdir(parents=True)
        shutil.copy(HEADER, d / "common" / "wire" / "counters.h")
        for name, text in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return d

    def _fails(self, files: dict[str, str], *wants: str) -> str:
        r = run_check(self._tree(files))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        for want in wants:
            self.assertIn(want, r.stderr)
        return r.stderr

    def test_clean_small_tree_passes(self):
        d = self._tree({"builderd/books.c": (
            '#include "wire/counters.h"\n'
            '/* reads "frames_wire" of each source */\n'
            'static const char *n(void) { return CNT_SOURCE(frames_wire); }\n'
            'static void f(void) { log_info("source %u\'s frames_wire = %u", 1, 2); }\n'
            'static const char c = \'"\';\n')})
        r = run_check(d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_stray_literal_fails_with_file_and_line(self):
        err = self._fails({"builderd/metrics.c": (
            '#include "wire/counters.h"\n'
            '\n'
            'uint64_t v = acct_value(r, "", "frames_wire", &found);\n')},
            'builderd/metrics.c:3: "frames_wire": counter name as a string literal; '
            'use CNT_SOURCE(frames_wire)')
        self.assertIn("1 counter name(s) outside", err)

    def test_name_in_two_lists_offers_both(self):
        self._fails({"readoutd/metrics.c": 'ctl_group_set(g, "greetings_busy", 1);\n'},
                    "readoutd/metrics.c:1:", "use CNT_READER(greetings_busy) or "
                    "CNT_BUILDER(greetings_busy)")

    def test_every_tree_is_checked(self):
        files = {f"{t}/x.c": 'const char *s =\n  "err_crc";\n'
                 for t in ("common/core", "builderd", "readoutd", "sourced", "tools",
                           "examples", "tests/fuzz", "tests/bench")}
        err = self._fails(files)
        for t in files:
            self.assertIn(f"{t}:2: \"err_crc\"", err)

    def test_unit_tests_and_counters_c_are_exempt(self):
        d = self._tree({"tests/unit/test_acct.c": 'set(r, "", "frames_wire", 1);\n',
                        "common/wire/counters.c": 'const char *s = "frames_wire";\n'})
        self.assertEqual(run_check(d).returncode, 0)

    def test_joined_literals_fail(self):
        self._fails({"sourced/source.c": 'x = "frags_" /* split */ "sent";\n'},
                    'sourced/source.c:1: "frags_sent": counter name')

    def test_group_name_literal_fails(self):
        self._fails({"builderd/metrics.c": 'f(r, "process", n);\n'},
                    'builderd/metrics.c:1: "process": group name as a string literal; '
                    'use CNT_GROUP_PROCESS')

    def test_hand_built_group_name_fails(self):
        self._fails({"readoutd/metrics.c": 'snprintf(name, sizeof name, "source.%u", id);\n',
                     "builderd/metrics.c": 'snprintf(n, 9, "builder.from_reader.%u", r);\n'},
                    'readoutd/metrics.c:1: "source.%u": a group name built by hand',
                    'builderd/metrics.c:1: "builder.from_reader.%u": a group name built by hand')

    def test_json_key_in_format_fails(self):
        self._fails({"sourced/source.c": (
            'printf("{\\"source\\": %u, \\"frames_wire\\": %" PRIu64 "}", s, w);\n')},
            'sourced/source.c:1:', "counter name frames_wire as a key in a literal")

    def test_option_names_are_not_counters(self):
        d = self._tree({"sourced/options.c": 'OPT_UINT("events", "N", O, events, 0, 9),\n',
                        "examples/x.c": '{ "events", required_argument, NULL, \'n\' },\n'})
        r = run_check(d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_control_keys_are_not_counters(self):
        """The codec's tables name wire keys and types that a counter may
        share; a read by that name elsewhere is still caught."""
        d = self._tree({"common/wire/control_table.c": (
            '\t[CTL_TOKEN] = "token",\n'
            '\tCTL_FIELD_RANGE("events", CTL_KIND_U64, routing.events, 1, UINT64_MAX,\n'
            '\tCTL_FIELD("events", CTL_KIND_U64, x.events, "IDs"),\n')})
        r = run_check(d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self._fails({"builderd/books.c": 'v = acct_value(r, "", "events", NULL);\n'},
                    'builderd/books.c:1: "events": counter name as a string literal')

    def test_renamed_counter_leaves_its_readers_failing(self):
        """The check follows the header: rename a counter there, and a
        literal of its new name elsewhere is caught."""
        d = self._tree({"builderd/books.c": 'v = acct_value(r, "", "frames_on_wire", NULL);\n'})
        self.assertEqual(run_check(d).returncode, 0)
        h = d / "common" / "wire" / "counters.h"
        h.write_text(h.read_text().replace("X(frames_wire)", "X(frames_on_wire)"))
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn('builderd/books.c:1: "frames_on_wire"', r.stderr)

    def test_missing_header_fails(self):
        d = Path(tempfile.mkdtemp(prefix="es-counters-"))
        self.addCleanup(shutil.rmtree, d, True)
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("common/wire/counters.h not found", r.stderr)


if __name__ == "__main__":
    unittest.main()
