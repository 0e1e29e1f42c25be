"""deploy/prometheus/esdaq-alerts.yml: the rules pass `promtool check rules`
and their tests (`promtool test rules`, one case per alert, each with a
series that fires it and one that must not); and every metric a rule names
is served by a live daemon: a hub, its builders and readers are scraped in
the middle of a real run and each name is found."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from harness import E2ETestCase
from test_builders import builders_topology
from test_builders_report import metrics_ports
from test_operator import parse_exposition, scrape

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "esdaq-alerts.yml"
RULE_TESTS = RULES_DIR / "esdaq-alerts.test.yml"
# Prometheus's own series, not a daemon's.
PROMETHEUS_OWN = {"up"}


def promtool() -> str | None:
    return shutil.which("promtool")


def rule_metrics() -> set[str]:
    """The metric names in the rules' expressions."""
    names = set()
    for line in RULES.read_text().splitlines():
        m = re.match(r"\s*expr:\s*(.*)", line)
        if m:
            names |= set(re.findall(r"\b(es_[a-z_]+|up)\b(?=\s*[{><=!]|\s*$|\s+and)", m.group(1)))
    return names


class AlertRulesTest(E2ETestCase):
    def test_rules_pass_promtool(self):
        tool = promtool()
        if tool is None:
            self.skipTest("promtool not found (scripts/deps.sh test installs prometheus)")
        c = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        self.assertIn("SUCCESS: 7 rules found", c.stdout)
        t = subprocess.run([tool, "test", "rules", str(RULE_TESTS)], capture_output=True,
                           text=True, timeout=60, cwd=RULES_DIR)
        self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
        alerts = set(re.findall(r"alert: (\w+)", RULES.read_text()))
        tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
        self.assertEqual(alerts, tested, "every alert has its test case")

    def test_the_rule_tests_can_fail(self):
        tool = promtool()
        if tool is None:
            self.skipTest("promtool not found")
        bad = self.h.path("bad.test.yml")
        shutil.copy(RULES, self.h.path("esdaq-alerts.yml"))
        bad.write_text(RULE_TESTS.read_text().replace("out of tokens for 10 s",
                                                      "out of tokens for 11 s"))
        t = subprocess.run([tool, "test", "rules", str(bad)], capture_output=True, text=True,
                           timeout=60, cwd=self.h.dir)
        self.assertNotEqual(t.returncode, 0, t.stdout)
        self.assertIn("EsdaqBuilderOutOfTokens", t.stdout + t.stderr)


class AlertMetricsServedTest(E2ETestCase):
    needs_daemons = True

    def test_every_metric_a_rule_names_is_served(self):
        wanted = rule_metrics() - PROMETHEUS_OWN
        self.assertGreaterEqual(len(wanted), 7, wanted)
        topo = builders_topology(2, events=24000)
        topo["run"]["rate"] = 4000           # 6 s: time to scrape every daemon mid-run
        topo["output"] = {"format": "raw"}   # the builders' event files: their free space
        for r in topo["reader"]:
            r["extra"] = ["--metrics-listen", "127.0.0.1:0"]
        out = self.h.dir / "alerts-run"
        done: dict = {}
        t = threading.Thread(target=lambda: done.update(r=self.h.daqrun(topo, out=out,
                                                                        timeout_s=120)))
        t.start()
        served: set[str] = set()
        deadline = time.monotonic() + 60
        while t.is_alive() and time.monotonic() < deadline and not wanted <= served:
            time.sleep(0.3)
            for name, port in metrics_ports(out).items():
                try:
                    served |= set(parse_exposition(scrape(port)))
                except OSError:
                    continue
        t.join(150)
        self.assertRunOk(done["r"])
        self.assertEqual(sorted(wanted - served), [], "metrics the alert rules name that no "
                                                     "daemon served")
