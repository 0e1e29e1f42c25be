"""The operator's console in a real browser (docs/RUNCONTROL.md, "The
console"): daqrun --serve starts the hub and its peers on loopback;
console/test/console.test.mjs drives Debian's chromium headless with
playwright-core (console/package.json) against the hub's page: a wrong
key refused with the hub's words, the key from its file, control taken,
a run configured from the body daqctl built from the topology
(`configure TOPOLOGY --print-body`), a start of the wrong run refused
with the hub's reason, the run started and its rate above zero, a second
browser context that sees everything and can change nothing (its take of
control refused naming the holder), the run stopped and balanced in the
history, control released; while it runs, each source's last event sent
(its STATS), the reader's credits and the builder's event files; the
run's report from its books (GET /runs/N/metrics.json) and its
report.html; a three-point scan from the plan `daqctl scan FILE
--print-bodies` printed, run from the console to its table (JSON and CSV,
each point balanced, the hub's books agreeing); every request the pages
made went to the hub's address. Skips, saying so, only when chromium is
absent."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness import REPO

import test_scan

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCRIPT = REPO / "console" / "test" / "console.test.mjs"
RUN = 1


SCAN = """\
stop = { events = 3000 }
[[point]]
payload = 64
[[point]]
payload = 256
rate = 0
[[point]]
rate = 2000
stop = { seconds = 1.5 }
"""


class ConsoleTest(test_scan.SessionCase):
    # A paced run that lasts until the console stops it, its events recorded.
    topology = {**test_scan.TOPOLOGY,
                "run": {**test_scan.TOPOLOGY["run"], "events": 10_000_000, "rate": 20000},
                "output": {"format": "raw"}}

    def setUp(self) -> None:
        if not os.access(CHROMIUM, os.X_OK):
            self.skipTest(f"no chromium at {CHROMIUM}: the console's browser test needs "
                          f"Debian's chromium (scripts/deps.sh test installs it as root)")
        if shutil.which("node") is None:
            self.skipTest("no node: make builds the console with node and npm")
        if not (REPO / "console" / "node_modules" / "playwright-core").is_dir():
            self.skipTest("console/node_modules has no playwright-core: run make (npm ci)")
        super().setUp()

    def test_a_run_from_the_browser(self) -> None:
        body = self.h.path("configure-body.json")
        r = self.ok("configure", self.topo, "--run", RUN, "--print-body")
        body.write_text(r.stdout)
        self.assertEqual(json.loads(r.stdout)["run"], RUN)
        self.assertEqual(self.hub.state()["state"], "idle", "--print-body sends nothing")
        # A report.html in the run's directory, as analysis/report.py would
        # leave one there (a served run gets none by itself): the hub serves
        # what the directory holds.
        report = "<!doctype html><title>run 1</title><p>the run's report</p>\n"
        (self.dir / f"run-{RUN}" / "report.html").write_text(report)
        scan = self.h.path("three.toml")
        scan.write_text(f'topology = "{self.topo.name}"\n' + SCAN)
        plan = self.h.path("plan.json")
        r = self.ok("scan", scan, "--print-bodies", "--first-run", RUN + 1)
        plan.write_text(r.stdout)
        shot = Path(os.environ.get("ES_CONSOLE_SCREENSHOT") or self.h.path("console.png"))
        s = json.loads((self.dir / "session.json").read_text())
        env = {**os.environ, "HUB_URL": s["hub"], "KEY_FILE": s["run_key_file"],
               "BODY_FILE": str(body), "RUN": str(RUN), "SCREENSHOT": str(shot),
               "PLAN_FILE": str(plan), "CHROMIUM": CHROMIUM}
        p = subprocess.run(["node", str(SCRIPT)], capture_output=True, text=True, timeout=300,
                           env=env, cwd=REPO / "console")
        self.assertEqual(p.returncode, 0, f"{p.stdout}\n{p.stderr}")
        seen = json.loads(p.stdout.strip().splitlines()[-1])
        log = (self.dir / "logs" / "builder-0.log").read_text()
        # The hub's refusals, word for word.
        self.assertEqual(seen["wrong_key"], "wrong proof: the request was not signed with this "
                                            "hub's run key (or was changed on the way)")
        self.assertIn(f"refused (401): {seen['wrong_key']}", log)
        self.assertRegex(seen["refused_start"], rf"^start refused: .*run {RUN + 1}")
        self.assertIn(f"builderd WARN {seen['refused_start']}\n", log)
        self.assertRegex(seen["bob_refused"], r"^control is held by 'alice' \(in control for "
                                              r"\d+ s\); 'bob' may take it over explicitly$")
        self.assertIn("Control taken by 'alice'", log)
        self.assertIn("Control released by 'alice'", log)
        self.assertNotIn("Control taken by 'bob'", log)
        # What the browser saw against what the hub says.
        self.assertGreater(seen["rate_running"], 0)
        self.assertEqual(len(seen["peer_rows"]), 3)
        self.assertEqual(seen["history"][:2], [str(RUN), "balanced"])
        st = self.hub.state()
        run = [x for x in st["runs"] if x["run"] == RUN]
        self.assertEqual(len(run), 1)
        self.assertTrue(run[0]["balanced"], run)
        self.assertEqual(run[0]["ended_by"], "operator stop")
        self.assertEqual(seen["history"][3], f"{run[0]['events_decided']:,}")
        self.assertEqual((st["state"], st["control"]["operator"], st["control"]["takes"]),
                         ("idle", None, 1))
        # The live view while it ran: both sources' last event sent, the
        # reader's credits, the builder's event files.
        sources = [row for row in seen["peer_rows"] if row[0] == "source"]
        self.assertEqual(len(sources), 2, seen["peer_rows"])
        reader = [row for row in seen["peer_rows"] if row[0] == "reader"][0]
        self.assertRegex(reader[8], r"^limit [\d,]+ \([\d,]+ credits\), held [\d,]+× [\d.]+ s, "
                                    r"[\d,]+ verified$")
        self.assertRegex(seen["builder_rows"][0][7], r"^[\d.]+ MB/s$")
        # The run's report: its books, and the report.html of its directory.
        m = json.loads((self.dir / f"run-{RUN}" / "metrics.json").read_text())
        self.assertEqual(seen["report_equations"],
                         f"all {len(m['equations'])} equations balanced")
        figures = dict(seen["report_figures"])
        self.assertEqual(figures["events complete"], f"{m['counters']['builder']['events_complete']:,}")
        self.assertEqual(seen["report_html"], {"name": f"run-{RUN}-report.html", "text": report})
        # The scan: a row per point, every run balanced, as the hub's books say.
        self.assertRegex(seen["scan_status"], r"^scan PASS: 3 of 3 points balanced")
        self.assertEqual(seen["scan_points_bar"], ["3", 3])
        self.assertTrue(seen["scan_progress"], "no progress of a point shown")
        table = seen["scan_table"]
        self.assertEqual((table["json_name"], table["csv_name"]),
                         (f"scan-runs-{RUN + 1}.json", f"scan-runs-{RUN + 1}.csv"))
        rows = table["json"]["rows"]
        self.assertEqual(table["json"]["format"], "daq-console-scan/1")
        self.assertEqual([(row["point"], row["runs"], row["payload"], row["rate"], row["stop"])
                          for row in rows],
                         [(1, [RUN + 1], 64, None, "events=3000"),
                          (2, [RUN + 2], 256, 0, "events=3000"),
                          (3, [RUN + 3], None, 2000, "seconds=1.5")])
        runs = {x["run"]: x for x in self.hub.state()["runs"]}
        for row in rows:
            number = row["runs"][0]
            self.assertEqual((row["verdict"], row["balanced"], row["status"]),
                             ("balanced", True, 0), row)
            books = json.loads((self.dir / f"run-{number}" / "metrics.json").read_text())
            self.assertTrue(books["balanced"], number)
            self.assertTrue(runs[number]["balanced"], runs[number])
            self.assertEqual(row["events_decided"], runs[number]["events_decided"])
            self.assertAlmostEqual(row["accepted_events_per_s"],
                                   books["rates"]["accepted_events_per_s"], delta=0.001)
            self.assertAlmostEqual(row["start_to_first_event_ms"],
                                   runs[number]["start_to_first_event_ms"], delta=0.001)
            for key in ("p50_us", "p99_us", "offered_events_per_s", "seconds"):
                self.assertIsNotNone(row[key], (key, row))
        self.assertEqual([row["events_decided"] for row in rows[:2]], [3000, 3000])
        self.assertIsNone(rows[0]["stop_to_books_ms"])
        self.assertIsNotNone(rows[2]["stop_to_books_ms"], "the seconds point ends by a stop")
        self.assertEqual(len(seen["scan_rows_shown"]), 3)
        # The CSV holds the JSON's rows, as daqctl's table does.
        lines = list(csv.DictReader(io.StringIO(table["csv"])))
        self.assertEqual(len(lines), 3)
        for row, line in zip(rows, lines):
            self.assertEqual(list(line), list(row))
            for key, value in row.items():
                shown = (" ".join(map(str, value)) if isinstance(value, list) else
                         "" if value is None else
                         ("true" if value else "false") if isinstance(value, bool) else
                         str(value))
                self.assertEqual(line[key], shown, key)
        # Only the hub's own paths were asked for (the script checked the origin).
        self.assertEqual(set(seen["paths"]), {
            "GET /", "GET /console/console.css", "GET /console/console.js", "GET /state",
            f"GET /runs/{RUN}/metrics.json", f"GET /runs/{RUN}/report.html",
            *(f"GET /runs/{n}/metrics.json" for n in range(RUN + 1, RUN + 4)),
            "POST /configure", "POST /control", "POST /release", "POST /start", "POST /stop"})
        self.assertGreater(shot.stat().st_size, 50000, "the screenshot is blank")
        self.shut_down()
