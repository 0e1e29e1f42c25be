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
        d = self._tree({"readoutd/reader.h": "", "builderd/run.c": '#include "../readoutd/reader.h"\n'})
        r = run_check(d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("one daemon's folder includes another's", r.stderr)


if __name__ == "__main__":
    unittest.main()
