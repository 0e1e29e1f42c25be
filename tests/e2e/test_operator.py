"""What an operator sees while a run goes: builderd's /metrics endpoint in
the Prometheus text exposition format, scraped mid-run and checked line by
line, and /status as JSON."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

from harness import REPO, E2ETestCase

REPO_REPORT = REPO / "analysis" / "report.py"

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
        self.assertIn("es_reader_frames_forwarded_total", rfams)
        self.assertEqual(len(rfams["es_reader_frames_verified_total"]["samples"]), 2)
        line = next(l for l in sources[0].log().splitlines() if l.startswith("listening metrics"))
        sport = int(line.rsplit(":", 1)[1])
        h.ports.add(sport)
        with urllib.request.urlopen(f"http://127.0.0.1:{sport}/metrics", timeout=5) as r:
            sfams = parse_exposition(r.read().decode())
        self.assertGreater(sfams["es_source_frames_wire_total"]["samples"][0][2], 0)
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


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def metrics_port(proc) -> int:
    """The port a daemon printed in its `listening metrics HOST:PORT` line."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = next((l for l in proc.log().splitlines() if l.startswith("listening metrics")),
                    None)
        if line:
            return int(line.rsplit(":", 1)[1])
        if proc.returncode is not None:
            break
        time.sleep(0.02)
    raise AssertionError(f"{proc.name} printed no metrics port:\n{proc.tail()}")


class PromtoolTest(E2ETestCase):
    """Every daemon's /metrics, scraped during a real run, passes the real
    `promtool check metrics`: names, types, units and suffixes follow the
    Prometheus conventions, not only the text format."""
    needs_daemons = True

    def test_every_scrape_passes_promtool(self) -> None:
        import shutil
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool not found (scripts/deps.sh installs prometheus as root)")
        h = self.h
        events, name = 60000, f"prom{h.tag[-8:]}"
        # One reader on a ring and one over TCP, so that every family shows.
        builder, ports = h.start_builder(run=1, sources=2, readers=2, events=events,
                                         shm_listen=name, metrics_listen="127.0.0.1:0")
        ports = h.wait_port_file(h.path("ports", "builder-0.port"), ("metrics",), 15, builder)
        rpf = h.path("ports", "reader-0.port")
        ring_reader = h.daemon("readoutd", "reader-0",
                               ["--id", 0, "--run", 1, "--listen", "127.0.0.1:0", "--port-file",
                                rpf, "--sources", "0", "--builder", f"shm://{name}",
                                "--control", f"127.0.0.1:{ports['control']}",
                                "--metrics-listen", "127.0.0.1:0"])
        rport0 = h.wait_port_file(rpf, ("data",), 15, ring_reader)["data"]
        tcp_reader, rport1 = h.start_reader(id=1, run=1, sources=(1,), builder=ports,
                                            metrics_listen="127.0.0.1:0")
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=64, rate=20000,
                                  reader_port=rp, builder=ports, metrics_listen="127.0.0.1:0",
                                  delay_every=500, delay_ms=5)
                   for s, rp in ((0, rport0), (1, rport1))]
        daemons = {"builder-0": builder, "reader-0": ring_reader, "reader-1": tcp_reader,
                   "source-0": sources[0], "source-1": sources[1]}
        mports = {n: (ports["metrics"] if n == "builder-0" else metrics_port(p))
                  for n, p in daemons.items()}
        h.ports.update(mports.values())
        time.sleep(1.0)
        families = {}
        for n, port in mports.items():
            text = scrape(port)
            families[n] = parse_exposition(text)
            self.assertGreater(len(families[n]), 5, text)
            c = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual((c.returncode, c.stdout + c.stderr), (0, ""),
                             f"promtool check metrics on {n}'s scrape:\n{text}")
        for n, fams in families.items():
            for fam, f in fams.items():
                # The conventions promtool checks, and those it cannot see.
                self.assertEqual(f["type"] == "counter", fam.endswith("_total"), (n, fam))
                self.assertNotRegex(fam, r"_(ns|us|ms|count|sum|bucket)(_total)?$", (n, fam))
        self.assertIn("es_reader_ring_records_total", families["reader-0"])
        self.assertEqual(families["source-0"]["es_source_events"]["type"], "gauge")
        self.assertEqual(families["source-0"]["es_source_events"]["samples"][0][2], events)
        self.assertEqual(len(families["reader-1"]["es_reader_frames_verified_total"]["samples"]),
                         1)
        for p in daemons.values():
            if p is not builder:
                h.wait(p, 60)
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
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

    def load_report(self):
        """analysis/report.py as a module, for its figures' geometry."""
        import importlib.util
        from importlib.machinery import SourceFileLoader
        from harness import REPO
        try:
            import matplotlib
        except ImportError:
            self.skipTest("matplotlib is not installed (scripts/deps.sh installs it as root)")
        matplotlib.use("Agg")
        loader = SourceFileLoader("report_under_test", str(REPO / "analysis" / "report.py"))
        spec = importlib.util.spec_from_loader(loader.name, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module

    def assert_figure_fits(self, fig, what: str) -> None:
        """Every text and legend of fig lies inside the figure and no two
        of them overlap (the title, axis labels, tick labels, legends)."""
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        page = fig.bbox
        boxes = []
        for ax in fig.axes:
            items = [ax.title, ax.xaxis.label, ax.yaxis.label, ax.get_legend(), *ax.texts]
            for item in items:
                if item is None or not item.get_visible() or \
                        (hasattr(item, "get_text") and not item.get_text()):
                    continue
                bb = item.get_window_extent(renderer)
                name = getattr(item, "get_text", lambda: "legend")()
                self.assertTrue(page.x0 - 1 <= bb.x0 and bb.x1 <= page.x1 + 1 and
                                page.y0 - 1 <= bb.y0 and bb.y1 <= page.y1 + 1,
                                f"{what}: {name!r} {bb} runs off the figure {page}")
                # A text the axes hold must stay inside them.
                if item in ax.texts or item is ax.get_legend():
                    inner = ax.get_window_extent(renderer)
                    self.assertTrue(inner.x0 - 1 <= bb.x0 and bb.x1 <= inner.x1 + 1 and
                                    inner.y0 - 1 <= bb.y0 and bb.y1 <= inner.y1 + 1,
                                    f"{what}: {name!r} {bb} runs off its axes {inner}")
                boxes.append((name, bb))
        for i, (na, a) in enumerate(boxes):
            for nb, b in boxes[i + 1:]:
                self.assertFalse(a.overlaps(b), f"{what}: {na!r} {a} covers {nb!r} {b}")

    def test_report_figures_of_a_clean_a_failed_and_an_offset_run(self) -> None:
        """The figures as report.py draws them, for a run with expired
        events (several outcomes, U = 0), one whose reader was killed and one
        with a source's clock offset (U > 0): legends clear of axis labels,
        the percentiles inside the axes, the captions saying what is drawn
        (a band only where U > 0), the rate's bins all whole."""
        import statistics
        import signal as sig
        report = self.load_report()
        h = self.h
        runs = {}
        for case in ("clean", "failed", "offset"):
            out = h.dir / case
            events = 30000
            for f in h.dir.joinpath("ports").glob("*.port"):
                f.unlink()      # the first run's, which the second must not read
            builder, ports = h.start_builder(run=5, sources=2, readers=2, events=events, out=out,
                                             timeout_ms=200, stall_timeout_ms=800)
            readers = [h.start_reader(id=r, run=5, sources=(r,), builder=ports)
                       for r in range(2)]
            sources = [h.start_source(id=s, run=5, seed=3, events=events, payload=64,
                                      rate=15000, reader_port=readers[s][1], builder=ports,
                                      missing_every=40 if case == "clean" else None,
                                      clock_offset_ns=50000 if case == "offset" and s else None)
                       for s in range(2)]
            if case == "failed":
                time.sleep(1.0)
                os.killpg(readers[1][0].pid, sig.SIGKILL)
            rc = h.wait(builder, 60)
            self.assertEqual(rc, 1 if case == "failed" else 0, builder.tail())
            for p in [r for r, _ in readers] + sources:
                h.wait(p, 20)
            runs[case] = out
        for case, out in runs.items():
            with self.subTest(case=case):
                m, times = report.load(out)
                self.assertEqual(m["status"], "failed" if case == "failed" else "ok")
                self.assertGreater(len(times), 1000)
                self.assert_figure_fits(report.build_latency(m), f"{case} latency")
                self.assert_figure_fits(report.build_outcomes(m), f"{case} outcomes")
                self.assert_figure_fits(report.build_rate(times), f"{case} rate")
                # Percentiles at the histogram's two ends, where a run with
                # few accepted events has them: still inside the axes.
                edge = json.loads(json.dumps(m))
                buckets = edge["latency"]["buckets"]
                edge["latency"]["p50_ns"], edge["latency"]["p99_ns"] = buckets[0][1], buckets[-1][1]
                self.assert_figure_fits(report.build_latency(edge), f"{case} latency at the ends")
                legend = [t.get_text() for t in report.build_latency(m).axes[0]
                          .get_legend().get_texts()]
                self.assertTrue(any(t.startswith("p99 ") for t in legend), legend)
                # The caption says whether a band is drawn, and it is drawn
                # exactly when the clock uncertainty U is not 0 (one clock
                # here, but for the source faking an offset).
                caption = report.latency_caption(m)
                ax = report.build_latency(m).axes[0]
                u = m["latency"]["uncertainty_ns"]
                if case == "offset":
                    self.assertGreater(u, 0)
                    self.assertIn("with its band", caption)
                    self.assertEqual(len(ax.collections), 1, "no band drawn")
                    band = ax.collections[0].get_paths()[0].vertices
                    self.assertLessEqual(band[:, 0].min(), m["latency"]["p50_ns"] / 1e3 - u / 1e3)
                else:
                    self.assertEqual(u, 0)
                    self.assertIn("no band", caption)
                    self.assertNotIn("with its band", caption)
                    self.assertEqual(len(ax.collections), 0, "a band drawn at U = 0")
                # The axis starts near the first bucket, not at a clamp far below it.
                first = m["latency"]["buckets"][0][1] / 1e3
                self.assertGreaterEqual(ax.get_xlim()[0], first / 4)
                # Whole bins from the first record to the last; sources paced
                # at a steady rate, so no bin, the last included, collapses.
                edges, rates, width = report.rate_bins(times)
                span = (max(times) - min(times)) / 1e9
                self.assertAlmostEqual(edges[-1], span, places=6)
                self.assertGreaterEqual(width, 0.1)
                self.assertEqual(sum(round(r * width) for r in rates), len(times))
                median = statistics.median(rates)
                self.assertGreater(rates[-1], 0.5 * median, rates)
                self.assertGreater(rates[0], 0.5 * median, rates)
                r = h.run(f"report-{case}", [sys.executable, REPO_REPORT, out], 120)
                self.assertEqual(r.returncode, 0, r.describe())
                text = (out / "report.html").read_text()
                self.assertIn(html.escape(caption), text)
                self.assertIn(html.escape(report.rate_caption(times)), text)
                # The header: one element per field, in a grid with gaps.
                header = re.search(r'<div class="kv" id="header">(.*?)</div>', text, re.S)
                self.assertIsNotNone(header)
                fields = re.findall(r"<(b|span)>([^<]*)</\1>", header.group(1))
                self.assertIn(("span", f"generated {events}"), fields)
                self.assertIn(("b", "latency"), fields)
                import matplotlib.pyplot as plt
                plt.close("all")
        h.assert_clean()
