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
history, control released; every request the pages made went to the
hub's address. Skips, saying so, only when chromium is absent."""

from __future__ import annotations

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


class ConsoleTest(test_scan.SessionCase):
    # A paced run that lasts until the console stops it.
    topology = {**test_scan.TOPOLOGY,
                "run": {**test_scan.TOPOLOGY["run"], "events": 10_000_000, "rate": 20000}}

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
        shot = Path(os.environ.get("ES_CONSOLE_SCREENSHOT") or self.h.path("console.png"))
        s = json.loads((self.dir / "session.json").read_text())
        env = {**os.environ, "HUB_URL": s["hub"], "KEY_FILE": s["run_key_file"],
               "BODY_FILE": str(body), "RUN": str(RUN), "SCREENSHOT": str(shot),
               "CHROMIUM": CHROMIUM}
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
        # Only the hub's own paths were asked for (the script checked the origin).
        self.assertEqual(set(seen["paths"]), {
            "GET /", "GET /console/console.css", "GET /console/console.js", "GET /state",
            "POST /configure", "POST /control", "POST /release", "POST /start", "POST /stop"})
        self.assertGreater(shot.stat().st_size, 50000, "the screenshot is blank")
        self.shut_down()
