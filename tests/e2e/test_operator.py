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
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=64, rate=20000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        base = f"http://127.0.0.1:{ports['metrics']}"
        time.sleep(1.2)
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
