"""What the hub of several builders reports (docs/BUILDERS.md, docs/METRICS.md):
real daemons on one host, two builders behind a hub. A source whose clock
is 5 ms behind has its latencies corrected by each builder with the clock
the hub sends it, the uncertainty merged into metrics.json; the rates and
CPU cost come from every process; the summary names the hub and each
builder; the builders' sections carry a latency summary, not raw buckets;
and while the run goes, the hub's /status, /metrics and progress line show
each builder from its STATS and the manager; a serving hub's /state shows
each builder's tokens and event files and each source's last event sent,
from their STATS."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request

from harness import E2ETestCase, read_json, read_jsonl
from test_builders import builders_topology
from test_operator import parse_exposition, scrape
import test_scan

INJECTED_NS = 5_000_000   # source 1's clock behind the others' by this


class HubReportTest(E2ETestCase):
    needs_daemons = True

    def test_a_source_clock_offset_corrected_per_builder(self) -> None:
        topo = builders_topology(2, events=6000, timeout_ms=10000)
        topo["run"]["rate"] = 4000   # paced: the clock rounds run while events flow
        topo["source"] = [{"id": 1, "extra": ["--clock-offset-ns", str(-INJECTED_NS)]}]
        r = self.h.daqrun(topo, timeout_s=240)
        self.assertRunOk(r)
        m = self.assertBalanced(r)
        for b in range(2):
            d = r.run_dir / "builders" / str(b)
            lat = [e["latency_ns"] for e in read_jsonl(d / "events.jsonl")]
            self.assertTrue(lat, f"builder {b} recorded nothing")
            # Source 1's timestamps are the earliest of every event:
            # uncorrected, every latency would be 5 ms too long.
            lat.sort()
            self.assertLess(lat[len(lat) // 2], INJECTED_NS // 2, f"builder {b}")
            self.assertGreater(lat[0], 0, f"builder {b}")
            self.assertNotIn("ignoring unexpected clock", (r.run_dir / "logs" /
                                                           f"builder-{b}.log").read_text())
            own = m["builders"][str(b)]["counters"]["builder"]
            self.assertEqual(own["negative_latencies"], 0, own)
            self.assertGreater(own["clocks_received"], 0, own)
        lat = m["latency"]
        self.assertEqual(lat["unbounded_samples"], 0, lat)
        self.assertIsNotNone(lat["uncertainty_ns"], lat)
        self.assertLess(lat["uncertainty_ns"], INJECTED_NS // 10, lat)
        self.assertTrue(lat["clock_corrected"], lat)
        self.assertLess(lat["max_ns"], 1_000_000_000, lat)
        self.assertRegex(r.output, r"latency: p50 .*\(\+/- [0-9.]+ [num]?s")
        self.check_rates_and_cpu(m, r.output)
        self.check_builder_sections(m, r.run_dir)
        self.assertRegex(r.output, r"peak RSS: hub [0-9.]+ MiB, .*builder 0 [0-9.]+ MiB, "
                                   r"builder 1 [0-9.]+ MiB")
        self.h.assert_clean()

    def check_rates_and_cpu(self, m: dict, output: str) -> None:
        rates = m["rates"]
        self.assertGreater(rates["build_duration_s"], 0.5, rates)   # 6000 events at 4000/s
        self.assertGreater(rates["accepted_events_per_s"], 0, rates)
        self.assertAlmostEqual(rates["accepted_events_per_s"] * rates["build_duration_s"],
                               m["counters"]["builder"]["events_accepted"], delta=2)
        self.assertNotIn("accepted 0 events/s", output)
        cpu, procs = m["cpu"], m["processes"]
        self.assertTrue(cpu["all_processes_reported"], procs)
        roles = sorted(p["role"] for p in procs)
        self.assertEqual(roles, ["builder", "builder", "hub", "reader", "reader"] + ["source"] * 4)
        total = sum(p["cpu_user_s"] + p["cpu_sys_s"] for p in procs)
        self.assertAlmostEqual(cpu["total_s"], total, delta=0.001 * len(procs))
        self.assertEqual(cpu["fragments"], 4 * 6000)
        self.assertAlmostEqual(cpu["us_per_fragment"], total * 1e6 / cpu["fragments"], delta=0.01)

    def check_builder_sections(self, m: dict, run_dir) -> None:
        for b, section in m["builders"].items():
            groups = section["counters"]
            self.assertFalse([g for g in groups if g == "hist" or g.startswith("hist.")], groups)
            self.assertIn("builder", groups)
            self.assertIn("reader.0", groups)
            lat = section["latency"]
            self.assertEqual(lat["samples"], groups["builder"]["events_written"], lat)
            self.assertLessEqual(lat["p50_ns"], lat["p99_ns"])
            self.assertLessEqual(lat["p99_ns"], lat["max_ns"] * 1.07)
            self.assertIsNotNone(lat["uncertainty_ns"], lat)
            full = json.loads((run_dir / "builders" / b / "builder.json").read_text())
            self.assertIn("hist.0", full["groups"])


def status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        return json.loads(r.read())


def metrics_ports(run_dir) -> dict[str, int]:
    ports = {}
    for f in (run_dir / "ports").glob("*.port"):
        for line in f.read_text().splitlines():
            kind, _, port = line.partition(" ")
            if kind == "metrics" and port.isdigit() and int(port) > 0:
                ports[f.stem] = int(port)
    return ports


class HubLiveViewTest(E2ETestCase):
    needs_daemons = True

    def test_hub_shows_each_builder_while_running(self) -> None:
        topo = builders_topology(2, events=24000)
        topo["run"]["rate"] = 4000           # 6 s: several STATS of every builder
        out = self.h.dir / "live-run"
        done: dict = {}
        t = threading.Thread(target=lambda: done.update(r=self.h.daqrun(topo, out=out,
                                                                        timeout_s=120)))
        t.start()
        seen_hub, seen_builder, text = None, 0.0, ""
        deadline = time.monotonic() + 60
        while t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.3)
            ports = metrics_ports(out)
            if "hub" not in ports or "builder-0" not in ports:
                continue
            try:
                st = status(ports["hub"])
                own = status(ports["builder-0"])
                if seen_hub is None and all(b["events_complete_per_s"] > 0
                                            for b in st.get("builders", [])):
                    seen_hub, text = st, scrape(ports["hub"])
                seen_builder = max(seen_builder, own.get("events_per_s", 0))
            except OSError:
                continue
            if seen_hub is not None and seen_builder > 0:
                break
        t.join(150)
        r = done["r"]
        self.assertRunOk(r)
        self.assertIsNotNone(seen_hub, "the hub's /status never showed every builder's rate")
        self.assertGreater(seen_builder, 0, "builder 0's /status never showed a rate")
        builders = seen_hub["builders"]
        self.assertEqual([b["id"] for b in builders], [0, 1])
        for b in builders:
            self.assertGreater(b["events_complete"], 0, b)
            self.assertLessEqual(b["in_flight"] + b["tokens"], 4096, b)
            self.assertGreater(b["backlog_cap"], 0, b)
        self.assertGreaterEqual(seen_hub["assignment_backlog"],
                                sum(b["in_flight"] for b in builders) - 1)
        self.assertGreater(seen_hub["events_complete"], 0, seen_hub)
        fams = parse_exposition(text)
        for fam in ("es_hub_builder_events_per_second", "es_hub_builder_events_complete_total",
                    "es_hub_builder_tokens", "es_hub_builder_in_flight_events",
                    "es_hub_builder_backlog_cap_events", "es_hub_assignment_backlog_events"):
            self.assertIn(fam, fams)
        self.assertEqual(sorted(str(labels) for _, labels, _ in
                                fams["es_hub_builder_tokens"]["samples"]),
                         sorted(str(labels) for _, labels, _ in
                                fams["es_hub_builder_in_flight_events"]["samples"]))
        self.assertEqual(len(fams["es_hub_builder_tokens"]["samples"]), 2)
        self.assertIn('builder="1"', text)
        promtool = shutil.which("promtool")
        if promtool:
            c = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual((c.returncode, c.stdout + c.stderr), (0, ""), text)
        hub_log = (out / "logs" / "hub.log").read_text()
        self.assertRegex(hub_log, r"backlog \d+; b0 \d+/s \d+ built, \d+ tokens, \d+/\d+ held/cap")
        self.h.assert_clean()


class ServingHubLiveTest(test_scan.SessionCase):
    """daqrun --serve of a hub and two builders recording their events:
    /state's live while a run goes (docs/RUNCONTROL.md, "The console")."""
    topology = {**builders_topology(2, events=24000, readers=((0, 1),)),
                "output": {"format": "raw"}}
    topology["run"] = {**topology["run"], "rate": 4000, "window_batches": 8}

    def test_each_builder_and_source_from_its_stats(self) -> None:
        self.ok("configure", self.topo, "--run", 1)
        self.wait_state(("configured",))
        self.ok("start", "--run", 1)
        seen = None
        deadline = time.monotonic() + 60
        while seen is None and time.monotonic() < deadline:
            time.sleep(0.2)
            live = self.hub.state()["live"] or {}
            peers = live.get("peers", [])
            builders = [p for p in peers if p["role"] == "builder"]
            sources = [p for p in peers if p["role"] == "source"]
            if len(builders) == 2 and all(b.get("tokens_sent", 0) > 0 and
                                          b.get("recording", {}).get("data_bytes_written", 0) > 0
                                          for b in builders) and \
                    len({s.get("run_second") for s in sources} - {None}) == 1 and \
                    all(s.get("run_second", 0) >= 2 for s in sources):
                seen = live
        self.assertIsNotNone(seen, "the hub's /state never showed both builders' files and "
                                   "tokens and both sources at one second")
        self.assertEqual(seen["window_events"], self.topology["run"]["batch"] * 8)
        self.assertIsNone(seen["recording"], "with several builders the files are theirs")
        self.assertGreater(seen["decided_below"], 0, seen)
        for b in (p for p in seen["peers"] if p["role"] == "builder"):
            self.assertGreaterEqual(b["tokens"], 0, b)
            rec = b["recording"]
            self.assertGreater(rec["data_free_bytes"], 0, b)
            self.assertEqual(rec["data_files"], 0, b)     # one file each, still open
        sources = [p for p in seen["peers"] if p["role"] == "source"]
        # Paced alike from one START: at the same second, within a window.
        last = [s["last_event_sent"] for s in sources]
        self.assertLess(max(last) - min(last), seen["window_events"], sources)
        for s in sources:
            self.assertEqual(s["last_event_sent"] + 1, s["send_positions"], s)
        readers = [p for p in seen["peers"] if p["role"] == "reader"]
        self.assertNotIn("credit_limit", readers[0], "a hub of several builders sends no credits")
        self.assertGreater(readers[0]["frames_verified"], 0, readers)
        done = self.summary(1)
        self.assertTrue(done["balanced"], done)
        m = read_json(self.dir / "run-1" / "metrics.json")
        written = sum(m["builders"][str(b)]["counters"]["builder"]["data_bytes_written"]
                      for b in range(2))
        self.assertGreater(written, 0)
        self.shut_down()
