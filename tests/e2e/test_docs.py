"""The generated regions of docs/PROTOCOL.md, docs/METRICS.md and README.md
match the code (tools/docgen writes them from the control codec's field
tables and the books' equation kinds), and the check fails on each kind of drift it exists
to catch: a changed row, a missing field, a region without its end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENDOCS = ROOT / "scripts" / "gendocs.py"
DOCGEN = os.environ.get("ES_DOCGEN", str(ROOT / "build" / "tools" / "docgen"))
DOCS = [ROOT / "docs" / "PROTOCOL.md", ROOT / "README.md", ROOT / "docs" / "METRICS.md"]


def gendocs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GENDOCS), "--docgen", DOCGEN, *args],
                          capture_output=True, text=True, timeout=60)


@unittest.skipUnless(os.access(DOCGEN, os.X_OK), f"no docgen at {DOCGEN} (make)")
class GeneratedDocsTest(unittest.TestCase):
    def _copy(self, path: Path, edit) -> Path:
        d = Path(tempfile.mkdtemp(prefix="es-docs-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(d)])
        out = d / path.name
        text = path.read_text()
        changed = edit(text)
        self.assertNotEqual(changed, text, "the edit must change the copy")
        out.write_text(changed)
        return out

    def test_committed_documents_match_the_code(self):
        r = gendocs("--check", *map(str, DOCS))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("generated regions match the code", r.stdout)

    def test_protocol_names_the_codes_version_and_every_field(self):
        text = DOCS[0].read_text()
        version = subprocess.run([DOCGEN, "version"], capture_output=True, text=True, check=True)
        self.assertIn(version.stdout.strip(), text)
        header = (ROOT / "common" / "wire" / "control.h").read_text()
        m = re.search(r"#define CTL_PROTOCOL_VERSION (\d+)u", header)
        self.assertIsNotNone(m)
        self.assertIn(f"This is version {m.group(1)} of the protocol", text)
        for row in ("| `proof` | str |", "| `at_realtime_ns` | uint |", "| `reason` | str |"):
            self.assertIn(row, text)

    def test_drifted_row_fails_and_make_docs_repairs_it(self):
        doc = self._copy(DOCS[0], lambda t: t.replace("| `run_id` | uint | 0 .. 2^32−1 | run the sender",
                                                      "| `run_id` | uint | 0 .. 2^16−1 | run the sender", 1))
        r = gendocs("--check", str(doc))
        self.assertEqual(r.returncode, 1)
        self.assertIn("region 'fields hello' differs from the code", r.stderr)
        self.assertIn("-| `run_id` | uint | 0 .. 2^16−1", r.stderr)
        self.assertIn("`make docs` rewrites them", r.stderr)
        r = gendocs(str(doc))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(doc.read_text(), DOCS[0].read_text())

    def test_missing_field_fails(self):
        doc = self._copy(DOCS[0], lambda t: "\n".join(
            l for l in t.split("\n") if not l.startswith("| `at_realtime_ns` |")))
        r = gendocs("--check", str(doc))
        self.assertEqual(r.returncode, 1)
        self.assertIn("region 'fields start' differs from the code", r.stderr)

    def test_missing_equation_fails(self):
        doc = self._copy(DOCS[1], lambda t: "\n".join(
            l for l in t.split("\n") if not l.startswith("| builder: expired = ")))
        r = gendocs("--check", str(doc))
        self.assertEqual(r.returncode, 1)
        self.assertIn("region 'equations' differs from the code", r.stderr)

    def test_changed_side_of_an_equation_fails(self):
        doc = self._copy(DOCS[2], lambda t: t.replace("| `frags_unique` |", "| `frags_received` |", 1))
        r = gendocs("--check", str(doc))
        self.assertEqual(r.returncode, 1)
        self.assertIn("region 'equations metrics' differs from the code", r.stderr)

    def test_region_without_end_fails(self):
        doc = self._copy(DOCS[0], lambda t: t.replace("<!-- end -->", "", 1))
        r = gendocs("--check", str(doc))
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no '<!-- end -->' line", r.stderr)

    def test_unknown_message_type_fails(self):
        doc = self._copy(DOCS[0], lambda t: t.replace("<!-- generated: fields bye -->",
                                                      "<!-- generated: fields goodbye -->", 1))
        r = gendocs("--check", str(doc))
        self.assertEqual(r.returncode, 1)
        self.assertIn("no message type 'goodbye'", r.stderr)



DEPS = ROOT / "scripts" / "deps.sh"


class SetUpTest(unittest.TestCase):
    """README's two commands install what they need: make run what running
    needs, make test that and the tests' packages (scripts/deps.sh)."""

    @staticmethod
    def packages(*args: str, extra: str = "") -> list[str]:
        r = subprocess.run(["sh", str(DEPS), "--list", *args], capture_output=True, text=True,
                           timeout=30, env={**os.environ, "DEPS_EXTRA": extra})
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    def test_run_installs_no_test_tool(self):
        run = self.packages("run")
        self.assertIn("libevent-dev", run)
        self.assertIn("python3-matplotlib", run)  # the run's report
        for tool in ("chromium", "prometheus", "openssh-server", "check"):
            self.assertNotIn(tool, run)

    def test_test_installs_the_run_set_and_the_rest(self):
        run, test = self.packages("run"), self.packages("test", extra="iperf3")
        self.assertEqual(test, self.packages(extra="iperf3"), "test is the default set")
        self.assertLessEqual(set(run), set(test))
        for tool in ("chromium", "prometheus", "openssh-server", "check", "iperf3"):
            self.assertIn(tool, test)

    def test_an_unknown_set_fails_by_name(self):
        r = subprocess.run(["sh", str(DEPS), "--list", "bench"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no set 'bench' (run or test)", r.stderr)

    def test_make_run_and_make_test_ask_for_their_sets(self):
        dry = {t: subprocess.run(["make", "-n", "-C", str(ROOT), t], capture_output=True,
                                 text=True, timeout=60).stdout for t in ("run", "test")}
        self.assertRegex(dry["run"], r"scripts/deps\.sh run\b")
        self.assertNotRegex(dry["run"], r"scripts/deps\.sh( test)?\n")
        self.assertRegex(dry["test"], r"DEPS_EXTRA=\"iperf3 *\" scripts/deps\.sh test\b")


if __name__ == "__main__":
    unittest.main()


class CodeMapTest(unittest.TestCase):
    """docs/CODE.md is the map of the tree: every C file is on it, and every
    file it names is there."""

    TREES = ("common", "builderd", "readoutd", "sourced", "tools", "examples")
    # Names the map uses as examples of what a newcomer would add, and
    # placeholders (NAME.json): not files of the tree.
    EXAMPLES = {"kubernetes.py"}

    def test_every_c_file_is_on_the_map(self):
        code = (ROOT / "docs" / "CODE.md").read_text()
        ticks = set(re.findall(r"`([^`\s]+)`", code))
        missing = []
        for tree in self.TREES:
            for p in sorted((ROOT / tree).rglob("*.c")):
                rel = p.relative_to(ROOT)
                names = {p.stem, p.name, str(rel), str(rel.with_suffix("")),
                         str(p.relative_to(ROOT / tree)),
                         str(p.relative_to(ROOT / tree).with_suffix(""))}
                if not names & ticks:
                    missing.append(str(rel))
        self.assertEqual(missing, [], "C files docs/CODE.md does not name")

    def test_every_file_on_the_map_exists(self):
        code = (ROOT / "docs" / "CODE.md").read_text()
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts
                 and not any(part == "build" or part.startswith("build-")
                             for part in p.relative_to(ROOT).parts)]
        rels = {str(p.relative_to(ROOT)) for p in files}
        names = {p.name for p in files}
        absent = []
        for t in sorted(set(re.findall(r"`([^`\s]+)`", code))):
            # Source files and documents of the tree; a bare data file
            # name (metrics.json, running.json) is what a run writes.
            if not (re.fullmatch(r"[\w./-]+\.(c|h|py|md|sh)", t)
                    or re.fullmatch(r"[\w.-]+/[\w./-]+\.(json|toml)", t)) or t in self.EXAMPLES \
                    or re.search(r"[A-Z]{2,}", t.rsplit("/", 1)[-1].split(".")[0]):
                continue
            if t not in rels and t not in names and not any(r.endswith("/" + t) for r in rels):
                absent.append(t)
        self.assertEqual(absent, [], "files docs/CODE.md names that are not in the tree")
