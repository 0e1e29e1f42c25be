"""scripts/check_layers.py: the tree keeps its layers, and the check fails on
each kind of violation it exists to catch (fed a small tree that has it)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_layers.py"


def run_check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


class LayerCheckTest(unittest.TestCase):
    def test_tree_keeps_its_layers(self):
        r = run_check(ROOT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("layers and cycles OK", r.stdout)

    def _tree(self, files: dict[str, str]) -> Path:
        d = Path(tempfile.mkdtemp(prefix="es-layers-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(d)])
        for name, text in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return d

    def test_clean_small_tree_passes(self):
        d = self._tree({"common/wire/a.h": "", "common/core/b.c": '#include "wire/a.h"\n',
                        "builderd/x.c": '#include "core/b.h"\n#include "y.h"\n',
                        "builderd/y.h": "", "common/core/b.h": ""})
        self.assertEqual(run_check(d).returncode, 0)

    def test_include_up_a_layer_fails(self):
        d = self._tree({"common/io/net.h": "", "common/core/b.c": '#include "io/net.h"\n'})
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("common/core/b.c:1", r.stderr)
        self.assertIn("core/ may not include a layer above it (io/)", r.stderr)

    def test_bare_common_include_fails(self):
        d = self._tree({"common/wire/frame.h": "", "sourced/s.c": '#include "frame.h"\n'})
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("included by its layer path", r.stderr)

    def test_cycle_fails(self):
        d = self._tree({"common/io/a.h": '#include "io/b.h"\n',
                        "common/io/b.h": '#include "io/a.h"\n'})
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("include cycle: common/io/a -> common/io/b", r.stderr)

    def test_daemon_including_another_daemon_fails(self):
        d = self._tree({"readoutd/reader.h": "", "builderd/hub.c": '#include "../readoutd/reader.h"\n'})
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("one daemon's folder includes another's", r.stderr)


    def test_builderd_role_folders_keep_their_order(self):
        base = {"builderd/options.h": "", "builderd/data/ingest.h": '#include "options.h"\n',
                "builderd/report/live.h": "", "builderd/hub/hub.h": "",
                "builderd/builder/brun.h": "", "builderd/serve/serve_session.h": "",
                "builderd/main.c": '#include "hub/hub.h"\n#include "builder/brun.h"\n'
                                   '#include "serve/serve_session.h"\n',
                "builderd/hub/hub.c": '#include "hub/hub.h"\n#include "data/ingest.h"\n'
                                      '#include "report/live.h"\n'}
        self.assertEqual(run_check(self._tree(base)).returncode, 0)
        bad = {
            "builderd/data/link_tcp.c": ('#include "report/live.h"\n',
                                    "builderd/data/ may not include builderd/report/"),
            "builderd/hub/fleet.c": ('#include "builder/brun.h"\n',
                                     "builderd/hub/ may not include builderd/builder/"),
            "builderd/builder/hublink.c": ('#include "hub/hub.h"\n',
                                           "builderd/builder/ may not include builderd/hub/"),
            "builderd/hub/books.c": ('#include "serve/serve_session.h"\n',
                                     "builderd/hub/ may not include builderd/serve/"),
            "builderd/peer.c": ('#include "data/ingest.h"\n',
                                 "builderd's root (builderd/peer) includes no role folder"),
            "builderd/misc/x.c": ("", "builderd/misc/: not a role folder"),
        }
        for name, (text, message) in bad.items():
            with self.subTest(name):
                r = run_check(self._tree({**base, name: text}))
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(message, r.stderr)

    def test_call_circle_fails_naming_it(self):
        # Three files of one daemon calling round in a loop, and two of
        # common/ calling each other across modules.
        d = self._tree({
            "builderd/a.c": "void a_start(void)\n{\n\tb_step(1);\n}\n",
            "builderd/b.c": "void b_step(int n)\n{\n\tif (n)\n\t\tc_end();\n}\n",
            "builderd/c.c": "static void c_inner(void)\n{\n\ta_start();\n}\n\n"
                            "void c_end(void)\n{\n\tc_inner();\n}\n",
            "common/io/p.c": "const struct q *p_get(void)\n{\n\treturn q_find();\n}\n",
            "common/io/q.c": "const struct q *q_find(void)\n{\n\treturn p_get() ? 0 : 0;\n}\n",
        })
        r = run_check(d)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("call circle: builderd/a.c -> builderd/b.c -> builderd/c.c -> builderd/a.c "
                      "(a_start() calls b_step(), b_step() calls c_end(), c_inner() calls a_start())",
                      r.stderr)
        self.assertIn("call circle: common/io/p.c -> common/io/q.c -> common/io/p.c "
                      "(p_get() calls q_find(), q_find() calls p_get())", r.stderr)

    def test_callback_comment_or_string_is_no_call(self):
        # A function handed over by its address, or named in a comment or a
        # string, does not make a circle; nor does a static namesake.
        d = self._tree({
            "readoutd/a.c": "void a_ready(int n)\n{\n\tb_watch(a_ready);\n}\n",
            "readoutd/b.c": "void b_watch(void (*cb)(int))\n{\n\t/* a_ready(1) */\n"
                            "\tlog_line(\"a_ready(\");\n\tb_helper();\n}\n\n"
                            "static void a_helper(void)\n{\n}\n",
            "readoutd/c.c": "static void b_helper(void)\n{\n\ta_ready(0);\n}\n",
        })
        r = run_check(d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("no call circle", r.stdout)


SIZES = ROOT / "scripts" / "check_sizes.py"


class SizeCheckTest(unittest.TestCase):
    """scripts/check_sizes.py: no C file over 600 lines, no function over 80
    (docs/CODE.md), on the real tree and on small trees that break it."""

    def _tree(self, files: dict[str, str]) -> Path:
        d = Path(tempfile.mkdtemp(prefix="es-sizes-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(d)])
        for name, text in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return d

    def run_sizes(self, root: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SIZES), str(root)],
                              capture_output=True, text=True, timeout=60)

    @staticmethod
    def function(name: str, body_lines: int, header: str = "static int") -> str:
        return (f"{header} {name}(int a,\n\t\tint b)\n{{\n" + "\ta += b;\n" * body_lines
                + "\treturn a;\n}\n")

    def test_tree_within_limits(self):
        r = self.run_sizes(ROOT)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("every file and function within the limits", r.stdout)

    def test_long_function_and_file_fail_by_name(self):
        d = self._tree({
            "common/core/short.c": self.function("short_enough", 75),
            "builderd/long.c": "/* a file */\n" + self.function("too_long", 80, "int"),
            "sourced/big.c": "".join(self.function(f"f{i}", 10) for i in range(50)),
        })
        r = self.run_sizes(d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("builderd/long.c:2: too_long() is 85 lines (limit 80)", r.stdout)
        self.assertRegex(r.stdout, r"sourced/big\.c: \d+ lines \(limit 600\)")
        self.assertNotIn("short_enough", r.stdout)
        self.assertIn("check_sizes: 2 over the limits", r.stdout)

    def test_a_declared_exception_passes(self):
        # The msgpack scan's state machine is the one long function allowed.
        d = self._tree({"common/wire/scan.c": self.function("mps_scan", 100, "bool")})
        self.assertEqual(self.run_sizes(d).returncode, 0)

    def test_every_return_type_is_seen(self):
        # Return types that open with struct, enum or const, a function
        # pointer returned and a wrapped header count like any other.
        d = self._tree({
            "common/core/kinds.c": (
                "/* return types of every shape */\n"
                + self.function("long_struct_ptr", 90, "static const struct x *")
                + self.function("long_enum", 90, "enum y")
                + self.function("long_struct_value", 90, "struct z")
                + "static void (*long_handler_for(int kind))(int)\n{\n"
                + "\tkind++;\n" * 90 + "\treturn 0;\n}\n"
                + self.function("short_struct_ptr", 10, "static const struct x *")),
            "common/core/plain.c": (
                "static const struct x *f(void)\n{\n" + "\tn++;\n" * 88 + "\treturn 0;\n}\n\n"
                "enum y g(void)\n{\n" + "\tn++;\n" * 88 + "\treturn Y0;\n}\n"),
        })
        r = self.run_sizes(d)
        self.assertEqual(r.returncode, 1, r.stdout)
        for name in ("long_struct_ptr", "long_enum", "long_struct_value", "long_handler_for"):
            self.assertRegex(r.stdout, rf"common/core/kinds\.c:\d+: {name}\(\) is \d+ lines \(limit 80\)")
        self.assertNotIn("short_struct_ptr", r.stdout)
        self.assertIn("common/core/plain.c:1: f() is 92 lines (limit 80)", r.stdout)
        self.assertIn("common/core/plain.c:94: g() is 92 lines (limit 80)", r.stdout)
        self.assertIn("check_sizes: 6 over the limits", r.stdout)

    def test_a_table_or_a_struct_is_no_function(self):
        rows = "".join(f"\t{{ {i}, f({i}) }},\n" for i in range(100))
        d = self._tree({"common/wire/table.c": (
            "static const struct row rows[] =\n{\n" + rows + "};\n"
            "struct big\n{\n" + "\tint a;\n" * 90 + "};\n")})
        self.assertEqual(self.run_sizes(d).returncode, 0, self.run_sizes(d).stdout)


PREFIXES = ROOT / "scripts" / "check_prefixes.py"


class PrefixCheckTest(unittest.TestCase):
    """scripts/check_prefixes.py: a builderd function's prefix is its
    module's file name (docs/CODE.md), on the real tree and on small trees
    that break it."""

    def _tree(self, files: dict[str, str]) -> Path:
        d = Path(tempfile.mkdtemp(prefix="es-prefixes-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(d)])
        for name, text in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return d

    def run_prefixes(self, root: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(PREFIXES), str(root)],
                              capture_output=True, text=True, timeout=60)

    def test_tree_follows_its_file_names(self):
        r = self.run_prefixes(ROOT)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("every builderd function starts with its module's name", r.stdout)

    def test_a_prefix_not_from_the_file_name_fails_by_name(self):
        d = self._tree({
            "builderd/hub/hub.h": "struct hub;\nstruct hub *hub_create(void);\n"
                                  "const struct x *bd_view(const struct hub *b);\n",
            "builderd/hub/hub_stop.c": "int hub_stop(void)\n{\n\treturn 0;\n}\n\n"
                                       "enum y run_over(void)\n{\n\treturn 0;\n}\n\n"
                                       "static int helper(void)\n{\n\treturn 0;\n}\n\n"
                                       "__attribute__((format(printf, 1, 2))) static void "
                                       "say(const char *fmt, ...)\n{\n\t(void)fmt;\n}\n",
            "builderd/hub/stray.c": "int stray(void)\n{\n\treturn 0;\n}\n",
            "builderd/main.c": "int wire(void)\n{\n\treturn 0;\n}\n\nint main(void)\n{\n\treturn 0;\n}\n",
        })
        r = self.run_prefixes(d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("builderd/hub/hub.h:3: bd_view() does not start with hub_", r.stdout)
        self.assertIn("builderd/hub/hub_stop.c:6: run_over() does not start with hub_", r.stdout)
        self.assertIn("builderd/hub/stray.c: no header names its module", r.stdout)
        self.assertIn("builderd/main.c:1: wire() is not static", r.stdout)
        self.assertNotIn("helper", r.stdout)
        self.assertNotIn("say", r.stdout)
        self.assertNotIn("format", r.stdout)
        self.assertIn("check_prefixes: 4 function(s)", r.stdout)


if __name__ == "__main__":
    unittest.main()
