"""A run of two builders with the real daemons (docs/BUILDERS.md): daqrun on
deploy/topologies/two-builders.toml, one host, a hub, two builders and
shared memory between every reader and builder; refbuild agrees with the
union of the builders' records, the books balance and nothing is left.
And the 2 x 2 virtual cluster (netns-two-by-two.toml) where netns runs.

Skipped, saying which, while builderd's roles hub and builder or readoutd's
--builder B=URL are not built yet (docs/BUILDERS.md, steps 3 and 4)."""

from __future__ import annotations

import subprocess

from harness import REPO, E2ETestCase, read_jsonl

TOPOLOGIES = REPO / "deploy" / "topologies"
NOT_BUILT = "not built yet"
_verdict: dict[str, str | None] = {}     # the daemons' answer, asked once per session


def probe(h, name: str, argv: list[str]) -> str:
    """What a quick invocation says within 3 s (a daemon that took its
    command line waits for its peers, and is stopped)."""
    p = h.start(name, [str(h.bin / argv[0])] + argv[1:])
    try:
        p.popen.wait(timeout=3)
    except subprocess.TimeoutExpired:
        h.stop(p)
    return p.log()


def several_builders_unsupported(h) -> str | None:
    """Why the daemons in h.bin cannot run several builders yet, or None;
    asked once per session."""
    if "why" in _verdict:
        return _verdict["why"]
    out = h.dir / "probe"
    out.mkdir(exist_ok=True)
    why = None
    if NOT_BUILT in probe(h, "probe-hub", [
            "builderd", "--role", "hub", "--builders", "2", "--run", "1", "--sources", "1",
            "--readers", "1", "--events", "1", "--control-listen", "127.0.0.1:0",
            "--peer-timeout-ms", "100", "--out", str(out)]):
        why = "builderd --role hub is not built yet (docs/BUILDERS.md, step 3)"
    elif NOT_BUILT in probe(h, "probe-builder", [
            "builderd", "--role", "builder", "--id", "0", "--builders", "2",
            "--hub", "127.0.0.1:9", "--run", "1", "--sources", "1", "--readers", "1",
            "--listen", "127.0.0.1:0", "--out", str(out / "b0"), "--peer-timeout-ms", "100"]):
        why = "builderd --role builder is not built yet (docs/BUILDERS.md, step 3)"
    else:
        said = probe(h, "probe-reader", [
            "readoutd", "--id", "0", "--run", "1", "--listen", "127.0.0.1:0", "--sources", "0",
            "--builder", "0=tcp://127.0.0.1:9", "--builder", "1=tcp://127.0.0.1:9",
            "--control", "127.0.0.1:9", "--connect-timeout-ms", "100"])
        if "got '0=tcp://" in said or NOT_BUILT in said:
            why = "readoutd --builder B=URL is not built yet (docs/BUILDERS.md, step 4)"
    _verdict["why"] = why
    return why


class TwoBuildersRunTest(E2ETestCase):
    needs_daemons = True

    def setUp(self) -> None:
        super().setUp()
        why = several_builders_unsupported(self.h)
        if why:
            self.skipTest(why)

    def check_run(self, r, builders: int = 2, event_ids: int = 20000) -> None:
        self.assertRunOk(r)
        self.assertIn("PASS refbuild", r.output)
        self.assertIn(f"({builders} builders)", r.output)
        m = self.assertBalanced(r)
        for b in range(builders):
            records = read_jsonl(r.run_dir / "builders" / str(b) / "events.jsonl")
            self.assertTrue(records, f"builder {b} recorded nothing")
            self.assertRegex(r.output, rf"builder {b} \(\S+\): {len(records)} events recorded")
        self.assertFalse((r.run_dir / "events.jsonl").exists(),
                         "the hub wrote records of its own")
        section = m.get("builders")
        if isinstance(section, dict):       # the hub's view: every ID assigned once
            self.assertEqual(sum(b.get("assigned", 0) for b in section.values()), event_ids,
                             section)
            self.assertTrue(all(b.get("misrouted", 0) == 0 for b in section.values()), section)
        self.h.assert_clean()

    def test_two_builders_on_one_host(self) -> None:
        r = self.h.daqrun(TOPOLOGIES / "two-builders.toml", timeout_s=180,
                          sets=["events=20000", "rate=0", "payload=256", "missing_every=50"])
        self.check_run(r)
        argv = {p["name"]: " ".join(p["argv"]) for p in r.params()["processes"]}
        self.assertIn("--builder 0=shm://", argv["reader-0"])
        self.assertIn("--role hub --builders 2", argv["hub"])

    def test_static_routing_and_mixed_links(self) -> None:
        r = self.h.daqrun(TOPOLOGIES / "two-builders.toml", timeout_s=180,
                          sets=["events=20000", "rate=0", "payload=256", "routing=static",
                                "reader.1.transport=tcp"])
        self.check_run(r)
        self.assertIn("misplaced=0", r.output)

    def test_two_by_two_virtual_cluster(self) -> None:
        from test_deploy import netns_unavailable
        why = netns_unavailable()
        if why:
            self.skipTest(why)
        # Recording on: each builder writes its own files on its own host.
        r = self.h.daqrun(TOPOLOGIES / "netns-two-by-two.toml", timeout_s=240,
                          sets=["events=20000", 'output.format="raw"'])
        self.check_run(r)
        self.assertIn(f"PASS refbuild data {r.run_dir}: every payload byte of 20000 written "
                      f"events checked against the generator", r.output)
        for b in (0, 1):
            self.assertTrue(list((r.run_dir / "builders" / str(b)).glob(f"run*_b{b}_*.dat")),
                            f"builder {b} wrote no file")
        self.assertEqual({p["host"] for p in r.params()["processes"]
                          if p["name"].startswith("builder-")}, {"builder0", "builder1"})
