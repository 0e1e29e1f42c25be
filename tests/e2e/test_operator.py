"""What an operator sees while a run goes: builderd's /metrics endpoint in
the Prometheus text exposition format, scraped mid-run and checked line by
line, and /status as JSON."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

from harness import E2ETestCase

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
VALUE = r"(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)"
SAMPLE = re.compile(rf"^({NAME})(?:\{{({LABEL}(?:,{LABEL})*)?\}})? ({VALUE})(?: -?\d+)?$")
HELP = re.compile(rf"^# HELP ({NAME}) .*$")
TYPE = re.compile(rf"^# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)$")


def parse_exposition(text: str) -> dict:
    """Checks every line against the text format 0.0.4 and returns
    {family: {"type": t, "samples": [(name, labels, value)]}}."""
    families: dict = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith("#"):
            m = HELP.match(line) or TYPE.match(line)
            if m is None:
                raise AssertionError(f"line {n} is not a valid comment: {line!r}")
            if line.startswith("# TYPE"):
                if m.group(1) in families:
                    raise AssertionError(f"line {n}: family {m.group(1)} typed twice")
                families[m.group(1)] = {"type": m.group(2), "samples": []}
            continue
        m = SAMPLE.match(line)
        if m is None:
            raise AssertionError(f"line {n} is not a valid sample: {line!r}")
        name = m.group(1)
        family = next((f for f in (name, re.sub(r"_(bucket|sum|count)$", "", name))
                       if f in families), None)
        if family is None:
            raise AssertionError(f"line {n}: sample {name} before its # TYPE")
        families[family]["samples"].append((name, m.group(2) or "", float(m.group(3))))
    return families


class MetricsEndpointTest(E2ETestCase):
    needs_daemons = True

    def test_scrape_mid_run(self) -> None:
        h = self.h
        events = 60000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=events,
                                         metrics_listen="127.0.0.1:0")
        ports = h.wait_port_file(h.path("ports", "builder-0.port"), ("metrics",), 15, builder)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports,
                                       metrics_listen="127.0.0.1:0")
        rports = h.wait_port_file(h.path("ports", "reader-0.port"), ("metrics",), 15, reader)
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=64, rate=20000,
                                  reader_port=rport, builder=ports,
                                  metrics_listen="127.0.0.1:0" if s == 0 else None)
                   for s in (0, 1)]
        base = f"http://127.0.0.1:{ports['metrics']}"
        time.sleep(1.2)
        # The reader's and a source's endpoints, checked the same way.
        with urllib.request.urlopen(f"http://127.0.0.1:{rports['metrics']}/metrics", timeout=5) as r:
            rfams = parse_exposition(r.read().decode())
        self.assertIn("es_reader_frames_forwarded", rfams)
        self.assertEqual(len(rfams["es_reader_frames_verified"]["samples"]), 2)
        line = next(l for l in sources[0].log().splitlines() if l.startswith("listening metrics"))
        sport = int(line.rsplit(":", 1)[1])
        h.ports.add(sport)
        with urllib.request.urlopen(f"http://127.0.0.1:{sport}/metrics", timeout=5) as r:
            sfams = parse_exposition(r.read().decode())
        self.assertGreater(sfams["es_source_frames_wire"]["samples"][0][2], 0)
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            self.assertIn("text/plain", r.headers["Content-Type"])
            text = r.read().decode()
        fams = parse_exposition(text)
        for name, kind in (("es_builder_events_complete_total", "counter"),
                           ("es_builder_frags_received_total", "counter"),
                           ("es_builder_admission_limit", "gauge"),
                           ("es_builder_pending_events", "gauge"),
                           ("es_builder_latency_seconds", "histogram")):
            self.assertIn(name, fams, sorted(fams))
            self.assertEqual(fams[name]["type"], kind)
        complete = fams["es_builder_events_complete_total"]["samples"][0][2]
        self.assertGreater(complete, 0)
        self.assertLess(complete, events, "scraped after the run, not during it")
        hist = fams["es_builder_latency_seconds"]["samples"]
        buckets = [v for n, _, v in hist if n.endswith("_bucket")]
        self.assertEqual(buckets, sorted(buckets), "histogram buckets must be cumulative")
        count = next(v for n, _, v in hist if n.endswith("_count"))
        self.assertEqual(buckets[-1], count)
        self.assertIn('le="+Inf"', text)
        offsets = fams["es_builder_peer_clock_offset_seconds"]["samples"]
        self.assertTrue(any('role="source"' in labels for _, labels, _ in offsets), offsets)

        with urllib.request.urlopen(base + "/status", timeout=5) as r:
            status = json.loads(r.read())
        self.assertEqual(status["phase"], "running")
        self.assertEqual(status["events_expected"], events)
        self.assertGreater(status["events_complete"], 0)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/other", timeout=5)
        self.assertEqual(e.exception.code, 404)

        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            h.wait(p, 15)
        h.assert_clean()


class ReportTest(E2ETestCase):
    """analysis/report.py's page, rendered by headless Chromium."""
    needs_daemons = True

    def test_report_renders(self) -> None:
        import shutil
        import sys
        h = self.h
        chromium = shutil.which("chromium")
        if chromium is None:
            self.skipTest("chromium is not installed (scripts/deps.sh installs it as root)")
        events = 20000
        builder, ports = h.start_builder(run=4, sources=2, readers=1, events=events)
        reader, rport = h.start_reader(id=0, run=4, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=4, seed=2, events=events, payload=64, rate=20000,
                                  reader_port=rport, builder=ports, missing_every=40)
                   for s in (0, 1)]
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            h.wait(p, 15)
        run_dir = h.dir / "run"
        from harness import REPO
        r = h.run("report", [sys.executable, REPO / "analysis" / "report.py", run_dir], 120)
        self.assertEqual(r.returncode, 0, r.describe())
        page = run_dir / "report.html"
        text = page.read_text()
        self.assertNotIn("http://", text.replace("http://www.w3.org", ""),
                         "the page must not fetch anything")
        for png in ("latency.png", "rate.png", "outcomes.png"):
            self.assertGreater((run_dir / png).stat().st_size, 5000, png)
        profile = h.dir / "chromium-profile"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}"]
        dom = h.run("chromium-dom", [chromium, *flags, "--dump-dom", page.as_uri()], 120)
        self.assertEqual(dom.returncode, 0, dom.describe())
        self.assertIn('id="equations"', dom.output)
        self.assertIn("5 run: event IDs generated = complete + expired + never observed",
                      dom.output)
        self.assertGreaterEqual(dom.output.count("<img"), 3)
        shot = h.dir / "report-screenshot.png"
        s = h.run("chromium-shot", [chromium, *flags, "--window-size=1000,2000",
                                    f"--screenshot={shot}", page.as_uri()], 120)
        self.assertEqual(s.returncode, 0, s.describe())
        self.assertGreater(shot.stat().st_size, 50000, "the screenshot is blank")
        h.assert_clean()
