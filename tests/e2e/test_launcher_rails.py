"""deploy/daqrun's rails and socket buffers (docs/BUILDERS.md, "Rails";
deploy/daqlib/sockbuf.py): a builder listens on every rail of its host, a
reader's TCP link to a builder on another host has one URL per rail both
hosts have (one on a shared host, none over shared memory), and
`socket_buffer` (auto, 0, bytes) becomes each daemon's --socket-buffer."""

from __future__ import annotations

from pathlib import Path

from harness import E2ETestCase

from daqlib import daemons, sockbuf
from daqlib import topology as daqrun
from daqlib.backends.local import LocalBackend

PORTS = {"hub": {"control": 7000}, "builder-0": {"data": 7100, "control": 7001},
         "builder-1": {"data": 7101}, "reader-0": {"data": 7200}, "reader-1": {"data": 7201}}


def two_by_two(**run) -> dict:
    """Readers on hosts r0 (two rails) and r1 (one), builders on b0 and b1
    (two rails each), the hub on b0."""
    return {
        "run": {"run": 1, "seed": 1, "events": 1000, "payload": 4096, "rate": 0,
                "batch": 128, **run},
        "hosts": {"b0": {"addresses": ["127.0.0.1", "127.0.1.1"]},
                  "b1": {"addresses": ["127.0.0.2", "127.0.1.2"]},
                  "r0": {"addresses": ["127.0.0.3", "127.0.1.3"]},
                  "r1": {"address": "127.0.0.4"}},
        "hub": {"host": "b0"},
        "builder": [{"id": 0, "host": "b0"}, {"id": 1, "host": "b1"}],
        "reader": [{"id": 0, "sources": [0], "host": "r0"},
                   {"id": 1, "sources": [1, 2], "host": "r1"}],
    }


def toml(doc: dict) -> str:
    """The topology as TOML: [run], [hosts.NAME], [hub], [builder] or
    [[builder]], [[reader]]."""
    def v(x):
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, str):
            return f'"{x}"'
        if isinstance(x, list):
            return "[" + ", ".join(v(y) for y in x) + "]"
        return str(x)

    def table(head: str, d: dict) -> list[str]:
        return [head] + [f"{k} = {v(x)}" for k, x in d.items()] + [""]
    out = table("[run]", doc["run"])
    for name, h in doc["hosts"].items():
        out += table(f"[hosts.{name}]", h)
    if "hub" in doc:
        out += table("[hub]", doc["hub"])
    if isinstance(doc["builder"], dict):
        out += table("[builder]", doc["builder"])
    else:
        for b in doc["builder"]:
            out += table("[[builder]]", b)
    for r in doc["reader"]:
        out += table("[[reader]]", r)
    return "\n".join(out)


def flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


class RailsCommandLinesTest(E2ETestCase):
    def lines(self, doc: dict, *sets: str) -> dict[str, list[str]]:
        path = self.h.dir / "rails.toml"
        path.write_text(toml(doc), encoding="utf-8")
        t = daqrun.load_topology(str(path), list(sets))
        be = LocalBackend(t.host_specs(), self.h.dir / "run", Path("/opt/es/bin"))
        return {name: argv for name, _host, argv in
                daemons.command_lines(t, be, self.h.dir / "run", PORTS)}

    def test_builders_listen_on_every_rail_and_readers_use_the_shared_ones(self) -> None:
        got = self.lines(two_by_two())
        self.assertEqual(flag_values(got["builder-0"], "--listen"),
                         ["127.0.0.1:0", "127.0.1.1:0"])
        self.assertEqual(flag_values(got["builder-1"], "--listen"),
                         ["127.0.0.2:0", "127.0.1.2:0"])
        self.assertEqual(flag_values(got["reader-0"], "--builder"),
                         ["0=tcp://127.0.0.1:7100", "0=tcp://127.0.1.1:7100",
                          "1=tcp://127.0.0.2:7101", "1=tcp://127.0.1.2:7101"])
        # Reader 1's host has one rail: one connection per builder.
        self.assertEqual(flag_values(got["reader-1"], "--builder"),
                         ["0=tcp://127.0.0.1:7100", "1=tcp://127.0.0.2:7101"])
        self.assertEqual(flag_values(got["hub"], "--listen"), [])

    def test_a_reader_on_its_builders_host_has_one_connection(self) -> None:
        doc = two_by_two()
        doc["reader"][0]["host"] = "b0"
        doc["reader"][0]["transport"] = "tcp"
        got = self.lines(doc)
        self.assertEqual(flag_values(got["reader-0"], "--builder"),
                         ["0=tcp://127.0.0.1:7100", "1=tcp://127.0.0.2:7101",
                          "1=tcp://127.0.1.2:7101"])

    def test_socket_buffers_auto_zero_and_bytes(self) -> None:
        got = self.lines(two_by_two())
        # Reader 0: one source, 128 frames of 4096 + 42 bytes = 530 176
        # bytes on each rail (a batch goes whole on one), above twice 10 GbE
        # x 200 us (500 kB): 1 MiB.
        self.assertEqual(flag_values(got["reader-0"], "--socket-buffer"), [str(1 << 20)])
        # Reader 1: two sources over one rail = 1 060 352 bytes: 2 MiB; the
        # builders take their largest link's.
        self.assertEqual(flag_values(got["reader-1"], "--socket-buffer"), [str(2 << 20)])
        self.assertEqual(flag_values(got["builder-0"], "--socket-buffer"), [str(2 << 20)])
        self.assertEqual(flag_values(got["hub"], "--socket-buffer"), [])
        got = self.lines(two_by_two(socket_buffer=0))
        self.assertEqual(flag_values(got["reader-0"], "--socket-buffer"), [])
        got = self.lines(two_by_two(socket_buffer=3 << 20))
        self.assertEqual(flag_values(got["reader-1"], "--socket-buffer"), [str(3 << 20)])
        self.assertEqual(flag_values(got["builder-1"], "--socket-buffer"), [str(3 << 20)])

    def test_one_builder_leaves_the_kernel_alone(self) -> None:
        doc = two_by_two()
        for k in ("hub",):
            del doc[k]
        doc["builder"] = {"host": "b0"}
        del doc["run"]["batch"]
        got = self.lines(doc)
        self.assertEqual(flag_values(got["reader-0"], "--builder"),
                         ["tcp://127.0.0.1:7100", "tcp://127.0.1.1:7100"])
        self.assertEqual(flag_values(got["reader-0"], "--socket-buffer"), [])
        self.assertEqual(flag_values(got["builder-0"], "--listen"),
                         ["127.0.0.1:0", "127.0.1.1:0"])


class SocketBufferFormulaTest(E2ETestCase):
    def test_formula(self) -> None:
        # A 100 Mbit/s link: the batch decides; 64 KiB fragments, batch 128,
        # one rail: 8.4 MB -> 16 MiB; capped at 64 MiB.
        self.assertEqual(sockbuf.auto_bytes(100e6, 128, 65536, 1), 16 << 20)
        self.assertEqual(sockbuf.auto_bytes(100e6, 128, 65536, 8), 64 << 20)
        # Small fragments: at least 256 KiB; a 100 Gbit/s link: its BDP.
        self.assertEqual(sockbuf.auto_bytes(100e6, 128, 256, 1), 256 << 10)
        self.assertEqual(sockbuf.auto_bytes(100e9, 64, 256, 1), 8 << 20)
        self.assertIsNone(sockbuf.auto_bytes(10e9, None, 4096, 1))
        self.assertEqual(sockbuf.rate_bits("100mbit"), 100e6)
        self.assertIsNone(sockbuf.rate_bits("none"))
        with self.assertRaises(ValueError):
            sockbuf.rate_bits("fast")
