#!/usr/bin/python3
"""What an open operator's console costs a run (docs/RUNCONTROL.md "The
console", docs/PERFORMANCE.md): one deploy/daqrun --serve session on this
host (the hub and its peers on loopback: 1 builder, 2 readers x 2 sources,
tcp) kept for the whole benchmark, and on it, round after round, two runs
configured and started with deploy/daqctl, EVENTS events per source of
64 B, unpaced:

- console: the hub's page open in Debian's chromium, headless
  (console/test/poll.mjs, playwright-core), given the run key and left
  polling /state (at the page's own period, POLL_MS) from before the run's
  start until its books are written;
- none: no browser at all.

With --poller the console arm makes the page's requests (a signed GET
/state at the same period) from a thread of this script instead of a browser:
the hub's side of an open console without the browser's CPU on this host
(DIR/poller.json and poller.md).

The order alternates round by round (ABBA...) so that the shared machine's
drifts fall on both; a round during which anything else on the host (not
the session's processes, not the browser) took more than MAX_OTHER_CORES
is done again, at most as many times as there are rounds, and each round
waits first (up to QUIET_WAIT_S) for the host to be that quiet. A first
run, no console, warms up and is not counted.
Per run: the rate (the books' rates.accepted_events_per_s), the hub
process's CPU (utime + stime of builderd from /proc/PID/stat just before
the start and when metrics.json appears) over the fragments the books
count (cpu.fragments), the requests the hub served meanwhile (its
control_http.http_requests) and, with the console, the /state requests the
page made and the CPU of the browser's processes.

Usage: analysis/bench_console.py [--rounds N] [--quick] [--events N] [--poller] [--out DIR]
Writes DIR/console.json and DIR/console.md; exits 1 when a run failed
(a daqctl refusal, a run not balanced, a console that did not poll).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN, DAQCTL = REPO / "deploy" / "daqrun", REPO / "deploy" / "daqctl"
POLL = REPO / "console" / "test" / "poll.mjs"
sys.path.insert(0, str(REPO / "deploy"))
from daqlib.hubclient import Hub, HubError, read_key  # noqa: E402

EVENTS, QUICK_EVENTS = 5_000_000, 1_000_000
ROUNDS, QUICK_ROUNDS = 10, 2
PROBE_REQUESTS, PROBE_QUIET_S = 500, 3.0
SETTLE_S = 3.0          # after the browser is up (its start is not the run's) and the configure
# The host's CPU outside the session and the browser in a quiet round:
# the kernel writing events.jsonl back, daqctl, this script, ~0.2 cores.
MAX_OTHER_CORES = 0.4
QUIET_WAIT_S = 300      # before a round, the longest wait for a quiet host
# The page's own period (console/src/main.js, POLL_MS), read from its code.
POLL_S = int(re.search(r"const POLL_MS = (\d+);",
                       (REPO / "console" / "src" / "main.js").read_text()).group(1)) / 1000
LIMIT = 0.05            # within 5 %
TICK = os.sysconf("SC_CLK_TCK")
ARMS = ("console", "none")

# The session's topology: bench_scan's (one builder, two readers of two
# sources each over tcp, all on loopback).
from bench_scan import TOPOLOGY  # noqa: E402


class BenchError(Exception):
    pass


class CountingHub(Hub):
    """The hub as daqlib's client sees it, counting the /state requests
    made here (the hub counts them among those it served)."""
    states = 0

    def state(self) -> dict:
        self.states += 1
        return super().state()


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command's name: [0] is the state."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def cpu_s(pid: int) -> float:
    """The process's utime + stime, seconds."""
    f = stat_fields(pid)
    return (int(f[11]) + int(f[12])) / TICK


def process_kind(pid: int) -> str:
    """node, or chromium's process by its --type (browser, renderer, gpu-process, ...;
    chromium's children rewrite their command line as one string)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    kind = next((a[7:].decode() for a in argv if a.startswith(b"--type=")), None)
    return kind or ("node" if Path(argv[0].decode()).name == "node" else "browser")


def tree_cpu_s(root: int) -> dict[str, float]:
    """utime + stime + cutime + cstime of root and every live descendant
    (children that ended count in their waiting parent's cutime), by kind
    of process, and the sum as "all"."""
    parent, cpu = {}, {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = stat_fields(int(d.name))
        except (OSError, ValueError):
            continue
        parent[int(d.name)] = int(f[1])
        cpu[int(d.name)] = sum(int(x) for x in f[11:15]) / TICK
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree and p not in tree}
        tree |= more
        grew = bool(more)
    out: dict[str, float] = {"all": 0.0}
    for p in tree & cpu.keys():
        try:
            kind = process_kind(p)
        except (OSError, UnicodeDecodeError):
            kind = "other"
        out[kind] = out.get(kind, 0.0) + cpu[p]
        out["all"] += cpu[p]
    return out


def busy_s() -> float:
    """The machine's CPU time not idle, all CPUs (/proc/stat: user, nice,
    system, irq, softirq, steal), seconds."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(f[i]) for i in (0, 1, 2, 5, 6, 7)) / TICK


def wait_quiet(max_cores: float, most_s: float = QUIET_WAIT_S) -> float:
    """Waits (at most most_s) until the host's busy CPU over 2 s is at
    most max_cores (the session idle between runs); the seconds waited."""
    t0 = time.monotonic()
    while True:
        b0, w0 = busy_s(), time.monotonic()
        time.sleep(2.0)
        if (busy_s() - b0) / (time.monotonic() - w0) <= max_cores \
                or time.monotonic() - t0 > most_s:
            return time.monotonic() - t0 - 2.0


def hub_pid(session: dict) -> int:
    """The hub: the builderd that daqrun (session.json's pid) started."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (int(stat_fields(int(d.name))[1]) == session["pid"]
                        and (d / "comm").read_text().strip() == "builderd"):
                    return int(d.name)
            except (OSError, ValueError):
                continue
    raise BenchError(f"no builderd child of daqrun (pid {session['pid']})")


class Console:
    """console/test/poll.mjs: the page open and polling until stopped."""

    def __init__(self, hub_url: str, key_file: str, log: Path):
        env = {**os.environ, "HUB_URL": hub_url, "KEY_FILE": key_file,
               "OPERATOR": "bench-console"}
        self.log = log.open("w")
        self.p = subprocess.Popen(["node", str(POLL)], cwd=REPO / "console", env=env,
                                  stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            ready = json.loads(self.lines.get(timeout=90))
        except (queue.Empty, TypeError, ValueError):
            self.stop()
            raise BenchError(f"the console never polled; see {log}") from None
        if not ready.get("ready"):
            self.stop()
            raise BenchError(f"the console said {ready}; see {log}")

    def _read(self) -> None:
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def cpu(self) -> dict[str, float]:
        return tree_cpu_s(self.p.pid)

    def stop(self) -> dict:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()
        last = None
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            last = line
        try:
            out = json.loads(last) if last else {}
        except ValueError:
            out = {}
        out["exit"] = self.p.returncode
        return out


class Poller:
    """--poller: the page's requests without the page, a signed GET /state
    every POLL_S from a thread here; Console's interface."""

    def __init__(self, hub_url: str, key_file: str, log: Path):
        self.hub = Hub(hub_url, read_key(Path(key_file)), 10.0)
        self.n, self.cpu_s, self.failed = 0, 0.0, None
        self.going, self.t0 = threading.Event(), time.monotonic()
        self.going.set()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while self.going.is_set():
            t, c = time.monotonic(), time.thread_time()
            try:
                self.hub.state()
                self.n += 1
            except HubError as e:
                self.failed = str(e)
                return
            self.cpu_s += time.thread_time() - c
            time.sleep(max(0.0, POLL_S - (time.monotonic() - t)))

    def cpu(self) -> dict[str, float]:
        return {"all": self.cpu_s}

    def stop(self) -> dict:
        self.going.clear()
        self.thread.join(30)
        seconds = time.monotonic() - self.t0
        return {"exit": 1 if self.failed else 0, "failed": self.failed, "seconds": seconds,
                "state_requests": self.n, "state_per_s": self.n / seconds}


def daqctl(session_dir: Path, *args: object) -> str:
    r = subprocess.run([sys.executable, str(DAQCTL), "--session", str(session_dir),
                        "--operator", "bench-console", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise BenchError(f"daqctl {' '.join(map(str, args))}: exit {r.returncode}: "
                         f"{(r.stdout + r.stderr)[-600:]}")
    return r.stdout


def wait_state(hub: Hub, done, what: str, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        st = hub.state()
        if done(st):
            return st
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: the hub is still {st['state']} after {timeout_s:g} s")
        time.sleep(0.05)


def read_books(path: Path, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise BenchError(f"{path} unreadable") from None
            time.sleep(0.02)


def one_run(ctx: dict, arm: str, number: int, settle_s: float) -> dict:
    """Configure and start run `number` on the serving daemons, the console
    open (arm "console") or not; its figures."""
    sdir, hub, pid = ctx["dir"], ctx["hub"], ctx["hub_pid"]
    run = {"arm": arm, "run": number}
    console = None
    try:
        daqctl(sdir, "configure", ctx["topology"], "--run", number)
        wait_state(hub, lambda s: s["state"] in ("configured", "error"), f"run {number}: configure")
        if arm == "console":
            console = ctx["page"](ctx["hub_url"], ctx["key_file"],
                              ctx["work"] / f"console-{number}.log")
        time.sleep(settle_s)
        st0 = hub.state()
        mine0 = hub.states
        if st0["state"] != "configured":
            raise BenchError(f"run {number}: the hub is {st0['state']}: {st0.get('error')}")
        books = sdir / f"run-{number}" / "metrics.json"
        browser0 = console.cpu() if console else {}
        machine0, daq0 = busy_s(), tree_cpu_s(ctx["daqrun_pid"])["all"]
        cpu0, t0 = cpu_s(pid), time.monotonic()
        daqctl(sdir, "start", "--run", number)
        deadline = t0 + 600
        while not books.exists():
            if time.monotonic() > deadline:
                raise BenchError(f"run {number}: no books after 600 s")
            time.sleep(0.02)
        cpu1, t1 = cpu_s(pid), time.monotonic()
        browser1 = console.cpu() if console else {}
        machine1, daq1 = busy_s(), tree_cpu_s(ctx["daqrun_pid"])["all"]
        m = read_books(books, 30)
        st1 = wait_state(hub, lambda s: s["state"] in ("idle", "error")
                         and any(r["run"] == number for r in s["runs"]), f"run {number}: its end")
    except (BenchError, HubError) as e:
        run["failed"] = str(e)
        m, st0, st1 = {}, None, None
    finally:
        if console:
            run["console"] = console.stop()
    if m:
        summary = [r for r in st1["runs"] if r["run"] == number][-1]
        builder = [p for p in m.get("processes", []) if p["role"] == "builder"]
        fragments = m["cpu"]["fragments"]
        run.update({
            "balanced": bool(m.get("balanced")) and bool(summary.get("balanced")),
            "status": m.get("status"), "exit_status": m.get("exit_status"),
            "ended_by": summary.get("ended_by"),
            "events_generated": m["rates"]["events_generated"],
            "fragments": fragments,
            "accepted_events_per_s": m["rates"]["accepted_events_per_s"],
            "offered_events_per_s": m["rates"]["offered_events_per_s"],
            "build_duration_s": m["rates"]["build_duration_s"],
            "start_to_books_s": t1 - t0,
            "hub_cpu_s": cpu1 - cpu0,
            # The machine's busy CPU and the session's (daqrun and every
            # daemon), cores over the run; other_cores (below): the rest
            # less the browser's, what else ran on the host meanwhile.
            "machine_cores": (machine1 - machine0) / (t1 - t0),
            "daq_cores": (daq1 - daq0) / (t1 - t0),
            "hub_us_per_fragment": (cpu1 - cpu0) / fragments * 1e6 if fragments else None,
            "books_builder_cpu_s": (builder[0]["cpu_user_s"] + builder[0]["cpu_sys_s"]
                                    if builder else None),
            "books_us_per_fragment_all": m["cpu"].get("us_per_fragment"),
            # Served after the /state before the start up to the one after
            # the end (the hub counts a request before it answers): less
            # daqctl start and the /state requests made here, the console's.
            "hub_http_requests": (st1["control_http"]["http_requests"]
                                  - st0["control_http"]["http_requests"]),
            "others_http_requests": (st1["control_http"]["http_requests"]
                                     - st0["control_http"]["http_requests"]
                                     - 1 - (hub.states - mine0)),
        })
        if st1["state"] == "error":
            try:
                daqctl(sdir, "reset")
            except BenchError as e:
                run["failed"] = str(e)
        if arm == "console":
            # node (playwright) and chromium's processes, by kind.
            run["browser_cpu_s"] = {k: v - browser0.get(k, 0.0) for k, v in browser1.items()}
            run["browser_cores"] = run["browser_cpu_s"]["all"] / (t1 - t0)
        run["other_cores"] = run["machine_cores"] - run["daq_cores"] - run.get("browser_cores", 0)
        if "failed" not in run and (not run["balanced"] or run["exit_status"] != 0):
            run["failed"] = f"run {number}: status {run['status']} (exit {run['exit_status']}), " \
                            f"{'balanced' if run['balanced'] else 'NOT balanced'}"
    if arm == "console" and "failed" not in run:
        c = run.get("console", {})
        # The page polls every POLL_S: most of its /state requests served, hub-side.
        if c.get("exit") != 0 or \
                run["others_http_requests"] < 0.8 * run["start_to_books_s"] / POLL_S:
            run["failed"] = (f"run {number}: the console did not poll through the run "
                             f"(exit {c.get('exit')}, {run['others_http_requests']} of its "
                             f"requests served in {run['start_to_books_s']:.1f} s)")
    for name in ("events.jsonl", "expired.jsonl"):      # hundreds of MB a run
        (sdir / f"run-{number}" / name).unlink(missing_ok=True)
    return run


def probe_state(ctx: dict, number: int, requests: int = PROBE_REQUESTS) -> dict:
    """The hub's CPU per GET /state while a run is on, the console's request:
    a paced run (100 events/s a source) holds the run object and the live
    view the page polls during a run; the hub's CPU over PROBE_QUIET_S
    without a request is taken off that over `requests` back to back."""
    sdir, hub, pid = ctx["dir"], ctx["hub"], ctx["hub_pid"]
    out = {"run": number, "requests": requests}
    try:
        daqctl(sdir, "configure", ctx["topology"], "--run", number,
               "--set", "run.rate=100", "--set", "run.events=1000000")
        wait_state(hub, lambda s: s["state"] in ("configured", "error"), f"run {number}: configure")
        daqctl(sdir, "start", "--run", number)
        wait_state(hub, lambda s: s["state"] != "configured", f"run {number}: start")
        time.sleep(1.0)
        status, _, raw = hub.exchange("GET", "/state")
        st = json.loads(raw)
        if status != 200 or st["state"] != "running" or not st.get("live"):
            raise BenchError(f"run {number}: the hub is {st.get('state')}, live "
                             f"{'shown' if st.get('live') else 'absent'}")
        out["state_bytes"] = len(raw)
        c0, t0 = cpu_s(pid), time.monotonic()
        time.sleep(PROBE_QUIET_S)
        c1, t1 = cpu_s(pid), time.monotonic()
        for _ in range(requests):
            hub.state()
        c2, t2 = cpu_s(pid), time.monotonic()
        out["quiet_cores"] = (c1 - c0) / (t1 - t0)
        out["requests_s"], out["requests_cpu_s"] = t2 - t1, c2 - c1
        out["us_per_state"] = ((c2 - c1) - out["quiet_cores"] * (t2 - t1)) / requests * 1e6
        daqctl(sdir, "stop", "--run", number)
        st = wait_state(hub, lambda s: s["state"] in ("idle", "error")
                        and any(r["run"] == number for r in s["runs"]), f"run {number}: its stop")
        if (st["state"] == "error"
                or not [r for r in st["runs"] if r["run"] == number][-1]["balanced"]):
            out["failed"] = f"run {number}: {st['state']}, not balanced after its stop"
    except (BenchError, HubError, ValueError) as e:
        out["failed"] = str(e)
    for name in ("events.jsonl", "expired.jsonl"):
        (sdir / f"run-{number}" / name).unlink(missing_ok=True)
    return out


def spread(values: list[float]) -> dict:
    if not values:
        return {}
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "q1": q[0], "q3": q[2], "n": len(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=None,
                    help=f"default {ROUNDS} ({QUICK_ROUNDS} quick)")
    ap.add_argument("--events", type=int, default=None,
                    help=f"events per source a run (default {EVENTS:,}; {QUICK_EVENTS:,} quick)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds, shorter runs")
    ap.add_argument("--max-other-cores", type=float, default=MAX_OTHER_CORES, metavar="C",
                    help="a round during which anything else on the host took more than C "
                         f"cores is done again (default {MAX_OTHER_CORES:g})")
    ap.add_argument("--poller", action="store_true",
                    help="the console's requests from a thread here, no browser "
                         "(DIR/poller.json, poller.md)")
    ap.add_argument("--settle", type=float, default=SETTLE_S, metavar="S",
                    help="seconds between the configure (and the browser up) and the start")
    ap.add_argument("--out", default=str(REPO / "results" /
                                         f"bench-console-{datetime.date.today().isoformat()}"))
    a = ap.parse_args()
    rounds = a.rounds or (QUICK_ROUNDS if a.quick else ROUNDS)
    events = a.events or (QUICK_EVENTS if a.quick else EVENTS)
    if not Path("/usr/bin/chromium").exists() and not os.environ.get("CHROMIUM"):
        print("bench_console: no /usr/bin/chromium (scripts/deps.sh test installs it)",
              file=sys.stderr)
        return 2
    if shutil.which("node") is None or \
            not (REPO / "console" / "node_modules" / "playwright-core").is_dir():
        print("bench_console: needs node and console/node_modules (make)", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs, warmup, probe = [], None, None
    started = datetime.datetime.now().isoformat(timespec="seconds")
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        work = Path(tmp)
        topo = work / "topology.toml"
        topo.write_text(TOPOLOGY.format(events=events))
        sdir = work / "session"
        serve_log = (work / "daqrun.log").open("w")
        serving = subprocess.Popen([sys.executable, str(DAQRUN), str(topo), "--serve", "--quiet",
                                    "--out", str(sdir)], stdout=serve_log, stderr=subprocess.STDOUT)
        try:
            t0 = time.monotonic()
            while not (sdir / "session.json").exists():
                if serving.poll() is not None or time.monotonic() - t0 > 60:
                    raise BenchError("daqrun --serve wrote no session.json: " +
                                     (work / "daqrun.log").read_text()[-800:])
                time.sleep(0.05)
            time.sleep(0.2)
            session = json.loads((sdir / "session.json").read_text())
            key = read_key(Path(session["run_key_file"]))
            ctx = {"dir": sdir, "work": work, "topology": topo, "hub_url": session["hub"],
                   "key_file": session["run_key_file"], "hub_pid": hub_pid(session),
                   "daqrun_pid": session["pid"], "page": Poller if a.poller else Console,
                   "hub": CountingHub(session["hub"], key, 30.0, operator="bench-console")}
            number = 1
            warmup = one_run(ctx, "none", number, a.settle)
            print(f"bench_console: warm-up run {number}: "
                  f"{warmup.get('accepted_events_per_s', 0):,.0f} events/s"
                  f"{'; ' + warmup['failed'] if 'failed' in warmup else ''}", flush=True)
            done, attempt, redone = 0, 0, 0
            while done < rounds:
                attempt += 1
                waited = wait_quiet(a.max_other_cores)
                if waited:
                    print(f"bench_console: waited {waited:.0f} s for the host to be quiet",
                          flush=True)
                pair = []
                for arm in ARMS if done % 2 == 0 else ARMS[::-1]:
                    number += 1
                    r = one_run(ctx, arm, number, a.settle)
                    r["round"], r["waited_for_quiet_s"] = attempt, waited
                    pair.append(r)
                    print(f"bench_console: round {done + 1}/{rounds} run {number} {arm:7}: "
                          + (r["failed"] if "failed" in r else
                             f"{r['accepted_events_per_s']:,.0f} events/s, hub "
                             f"{r['hub_us_per_fragment']:.4f} us/fragment, "
                             f"{r['others_http_requests']} console requests served, "
                             f"else on the host {r['other_cores']:.2f} cores"
                             + (f", browser {r['browser_cores'] * 100:.1f} % of a core"
                                if arm == "console" else "")), flush=True)
                # Another's work on the shared host during either run: the
                # round is done again (at most `rounds` times in all).
                busy = max(r.get("other_cores", 0.0) for r in pair)
                again = busy > a.max_other_cores and redone < rounds
                for r in pair:
                    r["counted"] = not again
                runs.extend(pair)
                if again:
                    redone += 1
                    print(f"bench_console: {busy:.2f} cores of other work on the host during "
                          f"the round (more than {a.max_other_cores:g}): done again",
                          flush=True)
                else:
                    done += 1
            probe = probe_state(ctx, number + 1)
            print(f"bench_console: run {number + 1}, paced: "
                  + (probe["failed"] if "failed" in probe else
                     f"the hub's CPU per GET /state {probe['us_per_state']:.0f} us "
                     f"({probe['requests']} requests, {probe['state_bytes']:,} bytes each)"),
                  flush=True)
            daqctl(sdir, "shutdown")
            serving.wait(120)
        except (BenchError, HubError) as e:
            print(f"bench_console: {e}", file=sys.stderr)
            runs.append({"failed": str(e)})
        finally:
            if serving.poll() is None:
                serving.send_signal(signal.SIGTERM)
                try:
                    serving.wait(60)
                except subprocess.TimeoutExpired:
                    serving.kill()
            serve_log.close()
    doc = summarize(runs, warmup, probe, rounds, events, started, load0)
    doc["max_other_cores"] = a.max_other_cores
    doc["page"] = "poller" if a.poller else "chromium"
    name = "poller" if a.poller else "console"
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    md = report(doc)
    (out / f"{name}.md").write_text(md)
    print(md, end="")
    failed = [r for r in runs if "failed" in r] + \
        [x for x in (warmup, probe) if x and "failed" in x]
    if failed or serving.returncode != 0:
        print(f"bench_console: {len(failed)} failed run(s), daqrun exit {serving.returncode}; "
              f"see {out / (name + '.json')}", file=sys.stderr)
        return 1
    return 0


def summarize(runs: list[dict], warmup: dict | None, probe: dict | None, rounds: int,
              events: int, started: str, load0: tuple) -> dict:
    good = [r for r in runs if "failed" not in r and "arm" in r and r.get("counted")]
    arms = {}
    for arm in ARMS:
        rs = [r for r in good if r["arm"] == arm]
        arms[arm] = {"runs": len(rs),
                     "accepted_events_per_s": spread([r["accepted_events_per_s"] for r in rs]),
                     "hub_us_per_fragment": spread([r["hub_us_per_fragment"] for r in rs]),
                     "hub_cores": spread([r["hub_cpu_s"] / r["start_to_books_s"] for r in rs]),
                     "daq_cores": spread([r["daq_cores"] for r in rs]),
                     "other_cores": spread([r["other_cores"] for r in rs]),
                     "console_requests_per_s": spread([r["others_http_requests"]
                                                       / r["start_to_books_s"] for r in rs]),
                     "build_duration_s": spread([r["build_duration_s"] for r in rs])}
    c = [r for r in good if r["arm"] == "console"]
    arms["console"]["browser_cores"] = spread([r["browser_cores"] for r in c])
    kinds = sorted({k for r in c for k in r["browser_cpu_s"] if k != "all"})
    arms["console"]["browser_cores_by_kind"] = {
        k: spread([r["browser_cpu_s"].get(k, 0.0) / r["start_to_books_s"] for r in c])
        for k in kinds}
    arms["console"]["page_state_per_s"] = spread([r["console"]["state_per_s"] for r in c
                                                  if r["console"].get("state_per_s")])
    ratios, paired = {}, {}
    for key in ("accepted_events_per_s", "hub_us_per_fragment"):
        a, b = arms["console"][key], arms["none"][key]
        ratios[key] = a["median"] / b["median"] if a and b else None
        by_round = {}
        for r in good:
            by_round.setdefault(r["round"], {})[r["arm"]] = r[key]
        paired[key] = spread([x["console"] / x["none"] for x in by_round.values()
                              if len(x) == 2])
    # The verdict on the rounds' own ratios: the two runs of a round are
    # back to back, so a drift of the shared machine's load between rounds
    # cancels in them (the ratio of the medians is shown beside it).
    within = {k: bool(v) and abs(v["median"] - 1) <= LIMIT for k, v in paired.items()}
    # What serving the page costs the hub, from the probe: its CPU per
    # /state at the page's rate, against its CPU in a run without a console.
    serving = None
    none = [r for r in good if r["arm"] == "none"]
    if probe and "us_per_state" in probe and none and arms["console"]["page_state_per_s"]:
        per_s = arms["console"]["page_state_per_s"]["median"]
        serving = {"us_per_state": probe["us_per_state"], "states_per_s": per_s,
                   "hub_cores": probe["us_per_state"] * per_s / 1e6,
                   "share_of_hub_cpu": probe["us_per_state"] * per_s / 1e6
                   / arms["none"]["hub_cores"]["median"]}
    return {"format": "bench-console/1", "date": started,
            "host": {"cpus": os.cpu_count(), "loadavg_before": load0,
                     "loadavg_after": os.getloadavg()},
            "rounds": rounds,
            "rounds_done_again": len({r["round"] for r in runs
                                      if "round" in r and not r.get("counted")}),
            "events_per_source": events, "sources": 4, "readers": 2,
            "payload": 64, "transport": "tcp", "limit": LIMIT,
            "arms": arms, "ratio_console_over_none": ratios, "paired_ratios": paired,
            "within_limit": within,
            "verdict": "PASS" if all(within.values()) and good and
                       not any("failed" in r for r in runs) else "FAIL",
            "state_probe": probe, "hub_serving_the_page": serving,
            "warmup": warmup, "runs": runs}


def report(doc: dict) -> str:
    arms, ratios, paired = doc["arms"], doc["ratio_console_over_none"], doc["paired_ratios"]

    def cell(s: dict, fmt: str, scale: float = 1.0) -> str:
        if not s:
            return "—"
        f = lambda v: format(v * scale, fmt)  # noqa: E731
        return f"{f(s['median'])} ({f(s['min'])}–{f(s['max'])}; IQR {f(s['q1'])}–{f(s['q3'])})"

    def ratio(key: str) -> str:
        v = ratios[key]
        if v is None:
            return "—"
        p = paired[key]
        return (f"by round {p['median']:.3f} ({(p['median'] - 1) * 100:+.1f} %; "
                f"{p['min']:.3f}–{p['max']:.3f}, IQR {p['q1']:.3f}–{p['q3']:.3f}); "
                f"of the medians {v:.3f}")

    con, none = arms["console"], arms["none"]
    page = doc.get("page") == "chromium"
    lines = [f"# An open console against none ({doc['date']})" if page else
             f"# The console's requests without a browser against none ({doc['date']})", "",
             f"One daqrun --serve session on this host ({doc['host']['cpus']} CPUs): the hub "
             f"and 1 builder, 2 readers x 2 sources over tcp, all on loopback; each run "
             f"{doc['events_per_source']:,} events per source of {doc['payload']} B, unpaced, "
             f"configured and started with daqctl. {doc['rounds']} rounds of two runs, the "
             "order alternating (ABBA); console: "
             + ("the hub's page open in headless chromium (console/test/poll.mjs) with the "
                f"run key, polling /state every {POLL_S * 1000:.0f} ms through the run" if page else
                f"no browser, the page's requests (a signed GET /state every {POLL_S * 1000:.0f} "
                "ms) made by a "
                "thread of analysis/bench_console.py --poller through the run")
             + "; none: no browser. Medians (min–max; IQR) over the runs of each arm; "
             "console / none: the median (min–max, IQR) of the rounds' own ratios, on which "
             "the verdict is taken, and the ratio of the arms' medians."
             + (f" {doc['rounds_done_again']} round(s) during which other work on the host "
                f"took more than {doc['max_other_cores']:g} cores were done again and are "
                "not counted." if doc["rounds_done_again"] else ""), "",
             "| | console | none | console / none |", "|---|---|---|---|",
             f"| rate, accepted events/s | {cell(con['accepted_events_per_s'], ',.0f')} "
             f"| {cell(none['accepted_events_per_s'], ',.0f')} "
             f"| {ratio('accepted_events_per_s')} |",
             f"| hub CPU per fragment, µs | {cell(con['hub_us_per_fragment'], '.4f')} "
             f"| {cell(none['hub_us_per_fragment'], '.4f')} "
             f"| {ratio('hub_us_per_fragment')} |",
             f"| hub CPU, cores | {cell(con['hub_cores'], '.3f')} "
             f"| {cell(none['hub_cores'], '.3f')} | |",
             f"| every daemon's CPU, cores | {cell(con['daq_cores'], '.3f')} "
             f"| {cell(none['daq_cores'], '.3f')} | |",
             f"| anything else on the host (not the browser), cores "
             f"| {cell(con['other_cores'], '.3f')} | {cell(none['other_cores'], '.3f')} | |",
             f"| the console's requests the hub served, per s of the run "
             f"| {cell(con['console_requests_per_s'], '.2f')} "
             f"| {cell(none['console_requests_per_s'], '.2f')} | |",
             f"| browser CPU (node and chromium), % of one core "
             f"| {cell(con['browser_cores'], '.1f', 100)} | — | |" if page else
             f"| the poller's CPU, % of one core "
             f"| {cell(con['browser_cores'], '.1f', 100)} | — | |", ""]
    if con.get("browser_cores_by_kind"):
        lines.append("The browser's CPU by process, % of one core (median): " + ", ".join(
            f"{k} {v['median'] * 100:.1f}" for k, v in con["browser_cores_by_kind"].items()
            if v) + ".")
    probe, serving = doc["state_probe"], doc["hub_serving_the_page"]
    if probe and "us_per_state" in probe:
        lines.append(f"The hub's CPU per GET /state during a run (a paced run, "
                     f"{probe['requests']} requests back to back, {probe['state_bytes']:,} bytes "
                     f"each, its CPU without them taken off): {probe['us_per_state']:.0f} µs" +
                     (f"; at the page's {serving['states_per_s']:.2f} a second "
                      f"{serving['hub_cores'] * 1e6:.0f} µs of CPU a second, "
                      f"{serving['share_of_hub_cpu'] * 100:.2f} % of the hub's CPU in a run "
                      f"without a console." if serving else "."))
    elif probe:
        lines.append(f"The /state probe failed: {probe.get('failed')}.")
    lines.append("")
    verdicts = []
    for key, name in (("accepted_events_per_s", "rate"), ("hub_us_per_fragment",
                                                          "hub CPU per fragment")):
        v = paired[key]["median"] if paired[key] else None
        if v is None:
            verdicts.append(f"{name}: no figure")
        elif doc["within_limit"][key]:
            verdicts.append(f"{name} within {doc['limit'] * 100:.0f} % ({(v - 1) * 100:+.1f} %)")
        else:
            verdicts.append(f"{name} off by {(v - 1) * 100:+.1f} %, beyond "
                            f"{doc['limit'] * 100:.0f} %")
    failed = [r for r in doc["runs"] if "failed" in r]
    lines.append(f"**{doc['verdict']}**: " + "; ".join(verdicts) +
                 (f"; {len(failed)} run(s) failed" if failed else "") + ".")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
