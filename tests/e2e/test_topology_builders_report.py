"""analysis/refbuild.py, report.py and compare.py on the layout of a run of
two builders (RUN_DIR/builders/B/{events,expired}.jsonl, metrics.json with
the hub's "builders" section), made from a real run of one builder whose
records are dealt out as static routing would (batch k to builder k mod 2).
The per-builder figures come from the records and from metrics.json, and
each tolerates the other's absence."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from harness import REPO, E2ETestCase, read_json, read_jsonl

TOPOLOGIES = REPO / "deploy" / "topologies"
REPORT = REPO / "analysis" / "report.py"
COMPARE = REPO / "analysis" / "compare.py"
SYSTEM_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
BATCH = 64


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


class BuildersAnalysisTest(E2ETestCase):
    needs_daemons = True

    def two_builder_run(self, hub_section: bool = True) -> tuple[Path, Path, list[int]]:
        """(the run of one builder, the same records as two builders' run,
        events recorded per builder)."""
        r = self.h.daqrun(TOPOLOGIES / "local.toml", timeout_s=120, args=["--quiet"],
                          sets=["events=4000", "rate=0", "payload=64", "missing_every=40",
                                # records made into two builders' below; no event files
                                'output.format="none"'])
        self.assertRunOk(r)
        one, two = r.run_dir, self.h.dir / "two-builders"
        shutil.copytree(one, two)
        for name in ("events.jsonl", "expired.jsonl", "latency_exact.json", "report.html"):
            (two / name).unlink(missing_ok=True)
        owner = lambda rec: (rec["event"] // BATCH) % 2   # noqa: E731
        recorded = []
        for b in (0, 1):
            d = two / "builders" / str(b)
            d.mkdir(parents=True)
            events = [x for x in read_jsonl(one / "events.jsonl") if owner(x) == b]
            write_jsonl(d / "events.jsonl", events)
            write_jsonl(d / "expired.jsonl",
                        [x for x in read_jsonl(one / "expired.jsonl") if owner(x) == b])
            recorded.append(len(events))
        params = read_json(two / "params.json")
        params["run"].update(routing="static", batch=BATCH)
        params["builders"] = [{"id": b, "host": "127.0.0.1", "out": f"builders/{b}"}
                              for b in (0, 1)]
        (two / "params.json").write_text(json.dumps(params))
        if hub_section:
            metrics = read_json(two / "metrics.json")
            # As the hub writes it: by id, the END report's groups in "counters".
            metrics["builders"] = {str(b): {"host": "127.0.0.1", "pid": 1,
                                            "assigned": 2000 + b,
                                            "counters": {"builder": {"events_complete": n}}}
                                   for b, n in enumerate(recorded)}
            (two / "metrics.json").write_text(json.dumps(metrics))
        return one, two, recorded

    def test_refbuild_and_report(self) -> None:
        _, two, recorded = self.two_builder_run()
        r = self.h.refbuild(two)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("static routing, batch 64", r.output)
        self.assertIn("misplaced=0", r.output)
        self.assertIn(f"refbuild: builder 1: {recorded[1]} events", r.output)
        rep = self.h.run("report", [SYSTEM_PYTHON, REPORT, two], 180)
        if "No module named 'matplotlib'" in rep.output:
            self.skipTest("matplotlib is not installed (scripts/deps.sh installs it as root)")
        self.assertEqual(rep.returncode, 0, rep.describe())
        page = (two / "report.html").read_text()
        self.assertIn("<h2>Builders: 2</h2>", page)
        self.assertIn(f"<tr><td>1</td><td>127.0.0.1</td><td>2,001</td><td>{recorded[1]:,}</td>"
                      f"<td>{recorded[1]:,}</td>", page)
        self.assertIn("<td>events.jsonl</td>", page)      # no rate from the hub: the records'
        self.assertEqual((two / "builders.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
        self.assertIn("Accepted events per second in", page)   # the rate figure has records
        self.assertNotIn("no accepted events", page)

    def test_compare_and_no_hub_section(self) -> None:
        one, two, recorded = self.two_builder_run(hub_section=False)
        out = self.h.dir / "compare"
        c = self.h.run("compare", [SYSTEM_PYTHON, COMPARE, one, two, "--label", "one",
                                   "--label", "two", "--out", out, "--no-plot"], 120)
        self.assertEqual(c.returncode, 0, c.describe())
        table = (out / "compare.md").read_text()
        self.assertIn("| builders | 1 | 2 |", table)
        self.assertIn(f"| events per builder | n/a | b0 {recorded[0]:,}, b1 {recorded[1]:,} |",
                      table)
        self.assertRegex(table, r"\| rate per builder \| n/a \| b0 [\d,]+ ev/s, b1 [\d,]+ ev/s \|")
        doc = json.loads((out / "compare.json").read_text())
        self.assertEqual([b["recorded"] for b in doc[1]["builders"]], recorded)
        self.assertEqual(doc[1]["builders"][0]["assigned"], None)
        # The exact percentiles pool the builders' records: the same events, the same values.
        self.assertEqual(doc[0]["latency"], doc[1]["latency"])
        rep = self.h.run("report", [SYSTEM_PYTHON, REPORT, two], 180)
        if "No module named 'matplotlib'" not in rep.output:
            self.assertEqual(rep.returncode, 0, rep.describe())
            self.assertIn("<h2>Builders: 2</h2>", (two / "report.html").read_text())
