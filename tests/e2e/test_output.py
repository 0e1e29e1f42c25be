"""[output] in the topology (docs/TOPOLOGY.md, docs/RECORDING.md): daqrun
turns every builder's recording on from the topology, on one builder and
several, on the local and the netns backends and with --runs N (each run its
own files); refbuild checks every payload byte; RUN_DIR/files.json lists
exactly the event files on disk, with the manifests' counts; every file
carries the SHA-256 of the resolved topology; the summary, report.html and
builderd's live /metrics show what was written; and a bad [output] value
is refused by name before anything starts."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
import urllib.request
from pathlib import Path

from harness import REPO, E2ETestCase
from test_deploy import TOPOLOGIES, netns_unavailable
from test_operator import parse_exposition

sys.path.insert(0, str(REPO / "analysis"))
import evfile  # noqa: E402

LOCAL = TOPOLOGIES / "local.toml"
TWO = TOPOLOGIES / "two-builders.toml"
SMALL = ["run.events=6000", "run.rate=0"]
EVENT_FILE = re.compile(r"run\d{6}_b\d+_s\d{4}_f\d{4}\.(dat|h5)$")


def files_on_disk(root: Path) -> list[str]:
    """Every closed event file under root, relative to it."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if EVENT_FILE.fullmatch(p.name))


def canonical_sha(params: dict) -> str:
    text = json.dumps(params["topology"], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class OutputRunTest(E2ETestCase):
    needs_daemons = True

    def check_files(self, r, events: int, builders: int = 1) -> dict:
        """The run passed with every payload byte checked; files.json lists
        exactly the files on disk with their manifests' counts, and every
        file carries the run's configuration hash."""
        self.assertRunOk(r)
        self.assertIn(f"PASS refbuild data {r.run_dir}: every payload byte of {events} written "
                      f"events checked against the generator", r.output)
        doc = json.loads((r.run_dir / "files.json").read_text())
        self.assertEqual(doc["format"], "daqrun-files/1")
        listed = sorted(f["name"] for f in doc["files"])
        self.assertEqual(listed, files_on_disk(r.run_dir))
        self.assertEqual(doc["unclosed"], [])
        self.assertEqual(doc["problems"], [])
        self.assertEqual(sum(f["events"] for f in doc["files"]), events)
        self.assertEqual(doc["totals"], {"files": len(listed), "events": events,
                                         "bytes": sum(f["bytes"] for f in doc["files"])})
        self.assertEqual(sorted({f["builder"] for f in doc["files"]}), list(range(builders)))
        params = r.params()
        sha = canonical_sha(params)
        self.assertEqual(params["output"]["config_sha256"], sha)
        self.assertEqual(doc["config_sha256"], sha)
        for f in doc["files"]:
            path = r.run_dir / f["name"]
            self.assertEqual(f["bytes"], path.stat().st_size, f)
            manifest = json.loads(Path(str(path) + ".json").read_text())
            self.assertEqual((f["events"], f["first_event"], f["last_event"], f["file_crc"]),
                             (manifest["event_count"], manifest["first_event"],
                              manifest["last_event"], manifest["file_crc"]))
            if f["format"] == "raw":
                self.assertEqual(evfile.Reader(path).header.config_sha256.hex(), sha)
        m = r.metrics()
        written = m["counters"]["builder"]["data_bytes_written"]
        self.assertRegex(r.output, rf"builder 0 recorded {doc['output']}: \d+ files, \d+ events, "
                                   rf"[\d.]+ MB in [^;]+; [\d.]+ MB/s over the build span")
        self.assertIn(f"files.json: {len(listed)} files, {events} events", r.output)
        self.assertGreater(written, 0)
        report = (r.run_dir / "report.html").read_text()
        self.assertIn("<h2>Recording:", report)
        self.assertIn('<table id="files">', report)
        return doc

    def test_local_raw_by_default_in_local_toml(self):
        r = self.h.daqrun(LOCAL, sets=SMALL)
        doc = self.check_files(r, 6000)
        self.assertEqual(doc["directories"], {"0": "."})
        argv = next(p["argv"] for p in r.params()["processes"] if p["name"] == "builder-0")
        i = argv.index("--record-max-payload")
        self.assertEqual(argv[i + 1], "256", "the cells sized to the run's payload")
        self.assertIn("--config-sha256", argv)

    def test_directory_under_the_run_and_a_rerun_into_it(self):
        sets = [*SMALL, 'output.directory="data"', 'output.sync="batch"',
                "output.max_file_bytes=2097152"]
        r = self.h.daqrun(LOCAL, sets=sets)
        doc = self.check_files(r, 6000)
        self.assertGreater(len(doc["files"]), 1, "files roll at max_file_bytes")
        self.assertTrue(all(f["name"].startswith("data/") for f in doc["files"]), doc)
        self.assertGreater(r.metrics()["counters"]["builder"]["data_sync_calls"],
                           len(doc["files"]), "sync = batch syncs after batches too")
        # The same run again into the same directory: the earlier files go,
        # the builder does not refuse names that exist.
        again = self.h.daqrun(LOCAL, sets=sets, out=r.run_dir)
        self.check_files(again, 6000)

    def test_hdf5(self):
        r = self.h.daqrun(LOCAL, sets=[*SMALL, 'output.format="hdf5"'])
        doc = self.check_files(r, 6000)
        self.assertEqual({f["format"] for f in doc["files"]}, {"hdf5"})

    def test_none_records_nothing(self):
        r = self.h.daqrun(LOCAL, sets=[*SMALL, 'output.format="none"'])
        self.assertRunOk(r)
        self.assertFalse((r.run_dir / "files.json").exists())
        self.assertEqual(files_on_disk(r.run_dir), [])
        self.assertNotIn("PASS refbuild data", r.output)
        self.assertEqual(r.params()["output"]["directories"], {})

    def test_two_builders_each_their_files(self):
        # Paced: unpaced, two builders under ASan on a busy machine fall
        # behind the sources by more than the event timeout.
        r = self.h.daqrun(TWO, sets=["run.events=6000", "run.rate=10000", 'output.format="raw"',
                                     'output.directory="data"'])
        doc = self.check_files(r, 6000, builders=2)
        self.assertEqual(doc["directories"], {"0": "data/builders/0", "1": "data/builders/1"})
        for f in doc["files"]:
            self.assertTrue(f["name"].startswith(f"data/builders/{f['builder']}/"), f)
        m = r.metrics()
        for b in (0, 1):
            c = m["builders"][str(b)]["counters"]["builder"]
            self.assertEqual(c["data_events_written"],
                             sum(f["events"] for f in doc["files"] if f["builder"] == b))
            self.assertRegex(r.output, rf"builder {b} recorded raw: {c['data_files']} files, "
                                       rf"{c['data_events_written']} events")
        self.assertIn("recorded in all:", r.output)

    def test_runs_each_their_own_files(self):
        r = self.h.daqrun(LOCAL, sets=["run.events=3000", "run.rate=0"], args=["--runs", "2"],
                          timeout_s=200)
        self.assertRunOk(r)
        hashes = set()
        for number in (1, 2):
            d = r.run_dir / f"run-{number}"
            self.assertIn(f"PASS refbuild data {d}: every payload byte of 3000 written events",
                          r.output)
            doc = json.loads((d / "files.json").read_text())
            self.assertEqual(doc["run"], number)
            self.assertEqual(sorted(f["name"] for f in doc["files"]), files_on_disk(d))
            self.assertTrue(all(f["name"].startswith(f"run{number:06d}_b0_") for f in doc["files"]))
            body = json.loads((d / "configure.json").read_text())["args"]["hub"]
            self.assertEqual(body[body.index("--record-dir") + 1], str(d))
            sha = body[body.index("--config-sha256") + 1]
            self.assertEqual(sha, doc["config_sha256"])
            hashes.add(sha)
            self.assertIn(f"daqrun: run {number}: builder 0 recorded raw:", r.output)
        self.assertEqual(len(hashes), 2, "each run's topology (its run number) its own hash")
        self.assertEqual(files_on_disk(r.run_dir), [f"run-{n}/{name}" for n in (1, 2)
                                                    for name in files_on_disk(r.run_dir /
                                                                              f"run-{n}")])

    def test_bad_values_refused_by_name_before_anything_starts(self):
        cases = [('output.format="tar"', "[output] format: expected 'raw', 'hdf5' or 'none', "
                                         "got 'tar'"),
                 ('output.sync="always"', "[output] sync: expected 'close', 'batch' or 'never', "
                                          "got 'always'"),
                 ('output.keep="ring"', "[output] keep: expected 'copy' or 'in-place', "
                                        "got 'ring'"),
                 ("output.max_payload=100", "[output] max_payload: 100 is smaller than payload 256"),
                 ("output.max_file_bytes=4096", "[output] max_file_bytes: expected an integer in "
                                                "1048576..2^64-1, got 4096"),
                 ('output.directory=""', "[output] directory: expected a non-empty string"),
                 ("output.format=1", "[output] format: expected a non-empty string, got 1"),
                 ("output.slices=3", "unknown key 'slices' in [output]")]
        for assignment, message in cases:
            with self.subTest(assignment):
                out = self.h.dir / f"bad-{len(message)}"
                r = self.h.daqrun(LOCAL, sets=[assignment], out=out, timeout_s=30)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertIn(message, r.output)
                self.assertFalse((out / "params.json").exists(), "nothing started")
                self.assertFalse((out / "logs").exists(), "nothing started")


class OutputNetnsTest(E2ETestCase):
    """The virtual cluster: the builder in its own namespace records too."""
    needs_daemons = True

    def setUp(self) -> None:
        why = netns_unavailable()
        if why:
            self.skipTest(why)
        super().setUp()

    def test_three_hosts_record(self):
        r = self.h.daqrun(TOPOLOGIES / "three-hosts.toml", timeout_s=150,
                          sets=["events=6000", "rate=0", 'output.format="raw"'])
        self.assertRunOk(r)
        self.assertIn(f"PASS refbuild data {r.run_dir}: every payload byte of 6000 written "
                      f"events checked against the generator", r.output)
        doc = json.loads((r.run_dir / "files.json").read_text())
        self.assertEqual(sorted(f["name"] for f in doc["files"]), files_on_disk(r.run_dir))
        self.assertEqual(doc["totals"]["events"], 6000)
        self.assertEqual(r.metrics()["counters"]["builder"]["data_events_written"], 6000)
        self.h.assert_clean()


class OutputMetricsTest(E2ETestCase):
    """builderd's live /metrics carries the event files' counters."""
    needs_daemons = True

    def test_scrape_data_counters_mid_run(self):
        h = self.h
        events = 60000
        builder, ports = h.start_builder(run=1, sources=2, readers=1, events=events,
                                         metrics_listen="127.0.0.1:0", record="raw",
                                         record_max_payload=64)
        ports = h.wait_port_file(h.path("ports", "builder-0.port"), ("metrics",), 15, builder)
        reader, rport = h.start_reader(id=0, run=1, sources=(0, 1), builder=ports)
        sources = [h.start_source(id=s, run=1, seed=1, events=events, payload=64, rate=20000,
                                  reader_port=rport, builder=ports) for s in (0, 1)]
        time.sleep(1.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics']}/metrics",
                                    timeout=5) as resp:
            fams = parse_exposition(resp.read().decode())
        for name in ("es_builder_data_files_total", "es_builder_data_events_written_total",
                     "es_builder_data_bytes_written_total", "es_builder_data_events_unwritten_total",
                     "es_builder_data_events_unrecorded_total", "es_builder_data_sync_calls_total",
                     "es_builder_data_write_seconds_total"):
            self.assertEqual(fams[name]["type"], "counter", name)
        written = fams["es_builder_data_events_written_total"]["samples"][0][2]
        self.assertGreater(written, 0, "events written while the run goes")
        self.assertLess(written, events, "scraped during the run")
        self.assertGreater(fams["es_builder_data_bytes_written_total"]["samples"][0][2], 0)
        self.assertEqual(h.wait(builder, 60), 0, builder.tail())
        for p in [reader] + sources:
            h.wait(p, 15)
        h.assert_clean()
