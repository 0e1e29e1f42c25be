#!/usr/bin/python3
"""The capacity of each rail of the virtual cluster: TCP throughput between
two hosts with iperf3, one stream and N streams, per rail and on every rail
at once, on links made exactly as a run's are (the launcher's netns backend,
deploy/daqlib/backends/netns.py: a bridge per rail, the MTU and the tbf
shaping on both ends of every link).

Usage: analysis/railcap.py [--rails K] [--mtu M] [--shaping RATE]
       [--burst B] [--latency L] [--streams N] [--seconds S] [--json FILE]

Prints MB/s (10^6 bytes of TCP payload per second, as the receiver counts
them) per rail and, with shaping, the share of the tbf rate: tbf counts
whole frames, so the payload is about 95% of it at MTU 1500 (66 bytes of
headers in 1514) and 99% at 9000. Needs root,
iproute2's ip and tc, and iperf3 (scripts/deps.sh with DEPS_EXTRA=iperf3).
Everything lives in network namespaces esdq<pid>-* on 198.18.R.0/24 that
this script creates and removes, also when it fails or is interrupted;
after a SIGKILL, deploy/daqrun --cleanup removes them.

measure_rails() measures an existing cluster (a backend already prepared:
netns, or ssh for real hosts, analysis/cms2003.py --hosts), so that a run
can measure its own links; the commands on the hosts come from the backend
(Iperf below).
"""

from __future__ import annotations

import argparse
import json
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "deploy"))

from daqlib.backends import Backend, Handle, HostSpec                   # noqa: E402
from daqlib.backends.base import LaunchError, die_with_parent_fn       # noqa: E402
from daqlib.backends.netns import NetnsBackend, rail_subnet            # noqa: E402
from daqlib.schema import TopologyError, resolve_table                 # noqa: E402
from daqlib.sockbuf import rate_bits                                   # noqa: E402, F401

PORT = 5201                 # iperf3's; rail R's server listens on PORT + R
HOSTS = ("cap0", "cap1")    # the client's host, the server's


class Iperf:
    """iperf3 servers on one host's rails, clients from another host, on
    any backend: the servers start as the backend starts daemons (their
    logs and lifetime its: a netns child dies with this process, an ssh
    session's command when its session closes), each client runs through
    the backend's host_command (`ip netns exec NS`, `ssh HOST`) with its
    JSON report on this process's pipe."""

    def __init__(self, backend: Backend, client: str, server: str, port: int = PORT,
                 program: str = "iperf3"):
        self.be, self.client, self.server = backend, client, server
        self.port, self.program = port, program
        self.servers: list[Handle] = []

    def check(self) -> None:
        """Raises LaunchError naming the host where iperf3 does not run."""
        for host in dict.fromkeys((self.client, self.server)):
            argv = self.be.host_command(host, [self.program, "--version"])
            try:
                r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise LaunchError(f"iperf3 on host {host}: {e}") from e
            if r.returncode != 0 or b"iperf" not in r.stdout:
                err = (r.stderr or r.stdout).decode(errors="replace").strip()
                raise LaunchError(f"host {host} has no {self.program} (`{shlex.join(argv)}`: "
                                  f"status {r.returncode}: {err}); install iperf3 there "
                                  f"(Debian: apt-get install iperf3)")

    def start_servers(self) -> None:
        logs = self.be.run_dir / "logs"
        for rail, addr in enumerate(self.be.rail_addresses(self.server)):
            argv = [self.program, "-s", "-B", addr, "-p", str(self.port + rail)]
            self.servers.append(self.be.start(f"iperf3-rail{rail}", argv,
                                              logs / f"iperf3-{self.server}-rail{rail}.log",
                                              host=self.server))

    def check_servers(self) -> None:
        """Raises LaunchError with its log when a server has exited (its
        port taken, its address on no interface of the host)."""
        for h in self.servers:
            status = self.be.wait(h, 0)
            if status is not None:
                log = (self.be.log_text(h) or "").strip().splitlines()[-3:]
                raise LaunchError(f"iperf3 server on {self.server} ({' '.join(h.argv)}) "
                                  f"exited with status {status}: {' / '.join(log)}")

    def stop(self) -> None:
        for h in self.servers:
            self.be.stop(h, grace_s=2.0)

    def client_argv(self, rail: int, streams: int, seconds: float) -> list[str]:
        return self.be.host_command(self.client, [
            self.program, "-J", "-c", self.be.rail_addresses(self.server)[rail],
            "-p", str(self.port + rail), "-B", self.be.rail_addresses(self.client)[rail],
            "-P", str(streams), "-t", f"{seconds:g}", "-O", "0.5"])

    def run(self, rails: list[int], streams: int, seconds: float) -> dict[int, float]:
        """{rail: bytes/s received} of clients on every rail of rails at once,
        each with streams parallel streams, for seconds. A server not yet
        listening is retried for a few seconds."""
        deadline = time.monotonic() + 10
        while True:
            procs = {r: subprocess.Popen(self.client_argv(r, streams, seconds),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, preexec_fn=die_with_parent_fn())
                     for r in rails}
            out, errors = {}, {}
            for r, p in procs.items():
                stdout, stderr = p.communicate(timeout=seconds + 60)
                try:
                    doc = json.loads(stdout or b"{}")
                except json.JSONDecodeError:
                    doc = {"error": (stdout + stderr).decode(errors="replace").strip()}
                if p.returncode != 0 or "error" in doc:
                    errors[r] = doc.get("error") or stderr.decode(errors="replace").strip()
                else:
                    out[r] = doc["end"]["sum_received"]["bits_per_second"] / 8
            if not errors:
                return out
            self.check_servers()
            if time.monotonic() > deadline or not all("connect" in e for e in errors.values()):
                raise LaunchError("iperf3: " + "; ".join(f"rail {r}: {e}"
                                                         for r, e in sorted(errors.items())))
            time.sleep(0.2)


def measure_rails(backend: Backend, client: str, server: str, streams: int = 4,
                  seconds: float = 3, say=print, port: int = PORT,
                  program: str = "iperf3") -> dict:
    """Each rail alone with one stream and with `streams` streams, then
    (several rails) every rail at once with `streams` each, from client to
    server of a prepared cluster (netns, ssh). Returns the numbers in
    bytes/s, and the client's command line (`command`)."""
    ip = Iperf(backend, client, server, port, program)
    ip.check()
    ip.start_servers()
    try:
        rails = list(range(len(backend.rail_addresses(server))))
        per_rail = []
        for r in rails:
            one = ip.run([r], 1, seconds)[r]
            many = ip.run([r], streams, seconds)[r]
            per_rail.append({"rail": r, "subnet": str(rail_subnet(r))
                             if isinstance(backend, NetnsBackend) else None,
                             "client": backend.rail_addresses(client)[r],
                             "server": backend.rail_addresses(server)[r],
                             "one_stream_Bps": one, "streams_Bps": many})
            say(f"railcap: rail {r}: 1 stream {one / 1e6:.2f} MB/s, {streams} streams "
                f"{many / 1e6:.2f} MB/s")
        together = ip.run(rails, streams, seconds) if len(rails) > 1 else None
        if together:
            say(f"railcap: every rail at once: " + ", ".join(
                f"rail {r} {b / 1e6:.2f}" for r, b in sorted(together.items()))
                + f" MB/s, total {sum(together.values()) / 1e6:.2f} MB/s")
    finally:
        ip.stop()
    return {"streams": streams, "seconds": seconds, "rails": per_rail,
            "backend": backend.name, "client": client, "server": server,
            "command": ip.client_argv(0, 1, seconds),
            "all_rails_Bps": {str(r): b for r, b in sorted(together.items())}
            if together else None}


def cluster(run_dir: Path, rails: int = 1, mtu: int | None = None, shaping: str = "none",
            burst: str = "16kb", latency: str = "10ms", say=print) -> NetnsBackend:
    """Two hosts, cap0 and cap1, not yet prepared: the netns backend made
    from its own option table (its checks and errors), without chronyd."""
    table = {"rails": rails, "shaping": shaping, "shaping_burst": burst,
             "shaping_latency": latency, "chrony": False}
    if mtu is not None:
        table["mtu"] = mtu
    options = resolve_table("railcap: [netns]", table, NetnsBackend.options)
    keys = {k: None for k in NetnsBackend.host_keys}
    NetnsBackend.validate("railcap:", {h: {"addresses": None, **keys} for h in HOSTS}, options)
    hosts = {h: HostSpec(name=h, extra=dict(keys)) for h in HOSTS}
    return NetnsBackend(hosts, run_dir, REPO / "bin", options, say=say)


def table(result: dict, rate: float | None) -> str:
    n = result["streams"]
    head = f"| rail | subnet | 1 stream MB/s | {n} streams MB/s |"
    lines = [head + (" of tbf rate |" if rate else ""),
             "|---|---|---|---|" + ("---|" if rate else "")]
    for r in result["rails"]:
        best = max(r["one_stream_Bps"], r["streams_Bps"])
        lines.append(f"| {r['rail']} | {r['subnet']} | {r['one_stream_Bps'] / 1e6:.2f} | "
                     f"{r['streams_Bps'] / 1e6:.2f} |"
                     + (f" {100 * best * 8 / rate:.1f}% |" if rate else ""))
    if result["all_rails_Bps"]:
        total = sum(result["all_rails_Bps"].values())
        lines.append(f"| all at once | | | {total / 1e6:.2f} |"
                     + (f" {100 * total * 8 / (rate * len(result['rails'])):.1f}% |"
                        if rate else ""))
    return "\n".join(lines)


def unavailable() -> str | None:
    why = NetnsBackend.unavailable(chrony=False, shaping=True)
    if why is None and shutil.which("iperf3") is None:
        why = "railcap needs iperf3, which is not installed (DEPS_EXTRA=iperf3 scripts/deps.sh)"
    return why


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rails", type=int, default=1, help="rails (1 .. 4)")
    ap.add_argument("--mtu", type=int, default=None, help="MTU of every rail (default 1500)")
    ap.add_argument("--shaping", default="none", help='tbf rate, e.g. 1gbit; "none" = off')
    ap.add_argument("--burst", default="16kb", help="tbf burst")
    ap.add_argument("--latency", default="10ms", help="tbf queue length")
    ap.add_argument("--streams", type=int, default=4, help="streams of the N-stream test")
    ap.add_argument("--seconds", type=float, default=3, help="length of each test")
    ap.add_argument("--json", type=Path, help="also write the numbers there")
    args = ap.parse_args(argv)
    try:
        rate = rate_bits(args.shaping)
    except ValueError as e:
        print(f"railcap: --shaping: {e}", file=sys.stderr)
        return 2
    if args.streams < 1 or args.seconds <= 0:
        print("railcap: --streams and --seconds must be positive", file=sys.stderr)
        return 2
    why = unavailable()
    if why:
        print(f"railcap: {why}", file=sys.stderr)
        return 2

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    with tempfile.TemporaryDirectory(prefix="railcap-") as tmp:
        try:
            be = cluster(Path(tmp), args.rails, args.mtu, args.shaping, args.burst,
                         args.latency, say=lambda line: print(f"railcap: {line}", flush=True))
        except TopologyError as e:
            print(str(e), file=sys.stderr)
            return 2
        status = 0
        try:
            be.prepare(HOSTS[1])
            result = measure_rails(be, HOSTS[0], HOSTS[1], args.streams, args.seconds)
        except (LaunchError, KeyboardInterrupt) as e:
            print(f"railcap: {e}", file=sys.stderr)
            status = 1 if isinstance(e, LaunchError) else 130
        finally:
            problems = be.teardown()
        for p in problems:
            print(f"railcap: teardown: {p}", file=sys.stderr)
        if status or problems:
            return status or 1
    result.update({"mtu": args.mtu or 1500, "shaping": args.shaping, "rate_bps": rate,
                   "burst": args.burst, "latency": args.latency})
    print(f"railcap: {args.rails} rail(s), mtu {args.mtu or 1500}, "
          + (f"tbf {args.shaping} (burst {args.burst}, latency {args.latency})"
             if rate else "no shaping") + f", {args.seconds:g} s per test")
    print(table(result, rate))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
