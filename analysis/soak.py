#!/usr/bin/python3
"""Soak: many short runs of the real daemons with every kind of fault, each
of which must close its books.

Each run draws, from its own seed: the seed's fragment faults (missing,
duplicate, delay, reorder, alone or together), overload (unpaced sources and
a small window, with or without admission), and in some runs a daemon
killed or stopped at a random moment (deploy/daqrun --fault), or a source
whose data stream stalls after a random number of frames while its control
link goes on (sourced --stall dribble or blackhole), given up by its
reader's inactivity limit or, with that limit off, by the builder's
watchdog, or a reader whose forwarding to the builder stalls (readoutd
--forward-stall), named by the watchdog. In some runs, too, a
hostile peer at the builder's door as soon as it listens, racing the
readers and sources: 64 idle connections to its data port, a HELLO
dribbled a byte per 20 ms, a flood of refused greetings, or HELLOs of
another protocol version (docs/PROTOCOL.md, "Greeting"). 
Three kinds of run are mixed (--mix, by default 60 % single, 25 % builders,
15 % serving):
- single: one builder on processes made for the run, as above;
- builders: a hub and two builders (manager or static routing), with in
  some runs a builder killed, or stopped past the hub's stall limit and
  continued after the run (fenced: what it writes afterwards must not
  count), or slowed by a filter cost, or a reader killed;
- serving: daqrun --runs 3 on processes that live across the runs (the
  hub's session and signed HTTP control), each run with its own fragment
  faults, in some a drained stop mid-run, a reader killed or a source
  stopped at a random moment of the session (between runs or during one).

A one-shot run passes when metrics.json exists and every equation balances,
whatever else happened to it; with several builders also when every
builder's records are the events the books say it decided, no more. A
serving session passes when every run it ended balanced its books and, if
daqrun failed, it said why (a killed daemon is named by the hub).

Usage: analysis/soak.py [--runs N] [--seed S] [--out DIR] [--bin DIR] [--mix S,B,V]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAQRUN = REPO / "deploy" / "daqrun"
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from wire import hello, read_message  # noqa: E402  (the protocol spoken by hand)

ATTACKS = ("crowd", "dribble", "flood", "protocol")


def builder_ports(out: Path, timeout_s: float = 30) -> dict[str, int] | None:
    """The builder's ports from its port file, once daqrun has started it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            words = [line.split() for line in
                     (out / "ports" / "builder-0.port").read_text().splitlines()]
            ports = {w[0]: int(w[1]) for w in words if len(w) == 2 and w[1].isdigit()}
            if "data" in ports and "control" in ports:
                return ports
        except OSError:
            pass
        time.sleep(0.005)
    return None


def attack(kind: str, out: Path, run_id: int) -> None:
    """A hostile peer at the builder's door while the run starts. Every
    socket error is the door doing its job, not a failure of the soak."""
    ports = builder_ports(out)
    if ports is None:
        return
    try:
        if kind == "crowd":
            crowd = [socket.create_connection(("127.0.0.1", ports["data"]), timeout=5)
                     for _ in range(64)]
            time.sleep(3)
            for c in crowd:
                c.close()
        elif kind == "dribble":
            # About 8 s of bytes, past the default 5 s deadline; of another
            # run, so that it is refused should it ever be read whole.
            with socket.create_connection(("127.0.0.1", ports["control"]), timeout=5) as c:
                for byte in hello("source", 0, run=run_id + 1, channel="control", sources=(),
                                  host="d" * 250):
                    c.send(bytes([byte]))
                    time.sleep(0.02)
        elif kind == "flood":
            for _ in range(300):
                with socket.create_connection(("127.0.0.1", ports["control"]), timeout=5) as c:
                    read_message(c)
                    c.sendall(hello("source", 0, run=run_id + 1, channel="control", sources=()))
                    read_message(c)
        elif kind == "protocol":
            for port in (ports["data"], ports["control"]):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    read_message(c)
                    c.sendall(hello("reader", 0, run=run_id, protocol=999, sources=(0, 1),
                                    channel="data" if port == ports["data"] else "control"))
                    read_message(c)
    except OSError:
        pass


def draw(rng: random.Random, n: int) -> tuple[dict, list[str], str, dict]:
    """One run's topology keys, daqrun arguments, a description and the
    daemons' extra arguments ({"builder": [...], "reader": [...],
    "source": {id: [...]}})."""
    run = {"run": 1 + n % 1000, "seed": rng.randrange(1 << 32), "payload": rng.choice([16, 64, 256]),
           "timeout_ms": rng.choice([50, 200]), "max_inflight": rng.choice([64, 512, 4096])}
    faults = []
    for key, values in (("missing_every", [0, 0, 7, 31]), ("duplicate_every", [0, 0, 5, 17]),
                        ("delay_every", [0, 0, 11])):
        v = rng.choice(values)
        if v:
            run[key] = v
            faults.append(f"{key}={v}")
    if "delay_every" in run:
        run["delay_ms"] = rng.choice([2, 20])
    if rng.random() < 0.3:
        run["reorder"] = True
        faults.append("reorder")
    overload = rng.random() < 0.3
    if overload:
        run.update(rate=0, events=rng.choice([5000, 20000]))
        if rng.random() < 0.3:
            run["no_admission"] = True
            faults.append("no admission")
        faults.append("unpaced")
    else:
        run.update(rate=rng.choice([5000, 20000]), events=rng.choice([4000, 10000]))
    args = []
    killed = None
    if rng.random() < 0.25:
        role = rng.choice(["source", "reader"])
        ident = rng.randrange(4 if role == "source" else 2)
        sig = rng.choice(["KILL", "STOP"])
        at = round(rng.uniform(0.1, 0.5), 2)
        killed = f"{role}:{ident}:{sig}@{at}"
        args += ["--fault", killed]
        faults.append(f"fault {killed}")
    extras: dict = {"builder": ["--stall-timeout-ms", "700"], "reader": [], "source": {}}
    if killed is None and rng.random() < 0.05:
        # A reader's data path to the builder stops delivering: the
        # watchdog names the reader and has its sources stop and report.
        ident = rng.randrange(2)
        at = rng.randrange(1000, 200000)
        extras["reader_stall"] = {ident: ["--forward-stall", str(at)]}
        extras["builder"] += ["--peer-timeout-ms", "1500"]
        faults.append(f"reader {ident} --forward-stall {at}")
    elif killed is None and rng.random() < 0.15:
        ident = rng.randrange(4)
        stall = f"{rng.choice(['dribble', 'blackhole'])}@{rng.randrange(50, 2000)}"
        extras["source"][ident] = ["--stall", stall]
        if rng.random() < 0.5:
            extras["reader"] = ["--source-idle-timeout-ms", "500"]
            ender = "its reader"
        else:
            extras["reader"] = ["--source-idle-timeout-ms", "0"]
            extras["builder"] += ["--peer-timeout-ms", "1500"]
            ender = "the watchdog"
        faults.append(f"source {ident} --stall {stall}, given up by {ender}")
    if rng.random() < 0.25:
        run["attack"] = rng.choice(ATTACKS)
        faults.append(f"door {run['attack']}")
    return run, args, ", ".join(faults) or "no faults", extras


def toml_value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else json.dumps(v)


def topology(run: dict, extras: dict, builders: int = 1) -> str:
    """One host: 2 readers (the first through shared memory, the second over
    TCP) of 4 sources, and one builder or a hub and `builders` builders."""
    lines = ["[run]"] + [f"{k} = {toml_value(v)}" for k, v in run.items()]
    if builders == 1:
        lines += ["", "[builder]", 'host = "127.0.0.1"', f"extra = {json.dumps(extras['builder'])}",
                  ""]
    else:
        lines += ["", "[hub]", 'host = "127.0.0.1"', f"extra = {json.dumps(extras['hub'])}", ""]
        for b in range(builders):
            lines += ["[[builder]]", f"id = {b}", 'host = "127.0.0.1"',
                      f"extra = {json.dumps(extras['builder'] + extras.get('builder_own', {}).get(b, []))}",
                      ""]
    for r in range(2):
        lines += ["[[reader]]", f"id = {r}", f"sources = [{2 * r}, {2 * r + 1}]",
                  'host = "127.0.0.1"', f'transport = "{"shm" if r == 0 else "tcp"}"',
                  f"extra = {json.dumps(extras['reader'] + extras.get('reader_stall', {}).get(r, []))}",
                  ""]
    for ident, extra in extras["source"].items():
        lines += ["[[source]]", f"id = {ident}", f"extra = {json.dumps(extra)}", ""]
    return "\n".join(lines)


def fragment_faults(rng: random.Random) -> tuple[dict, list[str]]:
    """The seed's fragment faults of one run: [run] keys and their words."""
    run, words = {}, []
    for key, values in (("missing_every", [0, 0, 7, 31]), ("duplicate_every", [0, 0, 5, 17])):
        v = rng.choice(values)
        if v:
            run[key] = v
            words.append(f"{key}={v}")
    if rng.random() < 0.3:
        run["reorder"] = True
        words.append("reorder")
    return run, words


def draw_builders(rng: random.Random, n: int) -> tuple[dict, list[str], str, dict]:
    """A run of a hub and two builders, and what goes wrong in it."""
    run = {"run": 1 + n % 1000, "seed": rng.randrange(1 << 32), "payload": rng.choice([16, 256]),
           "timeout_ms": rng.choice([50, 200]), "routing": rng.choice(["manager", "manager", "static"]),
           "batch": rng.choice([16, 64]), "rate": rng.choice([5000, 20000]),
           "events": rng.choice([4000, 10000])}
    faulted, words = fragment_faults(rng)
    run.update(faulted)
    # The hub gives a builder up after 700 ms without an answer: well above
    # the builders' event timeouts, so only a stopped one is given up.
    extras: dict = {"hub": ["--stall-timeout-ms", "700"], "builder": [], "builder_own": {},
                    "reader": [], "source": {}}
    args = []
    what = rng.random()
    if what < 0.2:
        fault = f"builder:{rng.randrange(2)}:KILL@{round(rng.uniform(0.1, 0.5), 2)}"
    elif what < 0.4:
        fault = f"builder:{rng.randrange(2)}:STOP@{round(rng.uniform(0.1, 0.5), 2)}"
    elif what < 0.5:
        fault = f"reader:{rng.randrange(2)}:KILL@{round(rng.uniform(0.1, 0.5), 2)}"
    else:
        fault = None
    if fault is not None:
        args += ["--fault", fault]
        words.append(f"fault {fault}")
    elif rng.random() < 0.5:
        slow = rng.randrange(2)
        cost = rng.choice([20, 100])
        extras["builder_own"][slow] = ["--filter-cost-us", str(cost)]
        words.append(f"builder {slow} slow ({cost} us per event)")
    words.insert(0, f"2 builders, {run['routing']} routing")
    return run, args, ", ".join(words), extras


def draw_serving(rng: random.Random, n: int) -> tuple[dict, list[str], str, dict]:
    """A session of three runs on processes that serve them all."""
    run = {"run": 1 + n % 1000, "seed": rng.randrange(1 << 32), "payload": rng.choice([16, 256]),
           "timeout_ms": 200, "rate": rng.choice([5000, 20000]), "events": rng.choice([4000, 10000])}
    args = ["--runs", "3"]
    words = ["serving 3 runs"]
    for k in (1, 2, 3):
        faulted, fw = fragment_faults(rng)
        for key, v in faulted.items():
            args += ["--set", f"runs.{k}.{key}={toml_value(v)}"]
        if fw:
            words.append(f"run {k}: {' '.join(fw)}")
    if rng.random() < 0.3:
        # A drained stop well before the sources' end.
        run["events"] = 200000
        args += ["--run-seconds", str(round(rng.uniform(0.3, 1.5), 2))]
        words.append("each run stopped mid-run")
    what = rng.random()
    if what < 0.25:
        fault = f"reader:{rng.randrange(2)}:KILL@{round(rng.uniform(0.2, 4.0), 2)}"
    elif what < 0.4:
        fault = f"source:{rng.randrange(4)}:STOP@{round(rng.uniform(0.2, 2.0), 2)}"
    else:
        fault = None
    if fault is not None:
        args += ["--fault", fault]
        words.append(f"fault {fault} (from the first run's start)")
    extras: dict = {"builder": ["--stall-timeout-ms", "700"], "reader": [], "source": {}}
    return run, args, ", ".join(words), extras


def lines_of(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def records_below(path: Path, fence: int | None) -> int:
    """Records of an events.jsonl or expired.jsonl, those of an event below
    fence only when one is given."""
    if fence is None:
        return lines_of(path)
    n = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if json.loads(line)["event"] < fence:
                    n += 1
    except OSError:
        pass
    return n


def books_problem(out: Path) -> str | None:
    """Why a one-shot run's books fail the soak, or None."""
    marker = out / "running.json"
    if marker.exists():
        return f"{marker} remains: the run did not finish"
    try:
        m = json.loads((out / "metrics.json").read_text())
        if not m["balanced"]:
            return "unbalanced: " + "; ".join(
                f"{e['name']} {e['lhs']} != {e['rhs']}" for e in m["equations"] if not e["ok"])
    except (OSError, ValueError, KeyError) as e:
        return f"no usable metrics.json ({e})"
    for b, doc in (m.get("builders") or {}).items():
        # A builder's records are exactly the events the books say it
        # decided: a given-up builder that went on writing breaks this. A
        # builder given up counts its records below its fence only, the
        # hub's decided_below (docs/BUILDERS.md, "A given-up builder is
        # fenced"); one that was killed may have left more in its files.
        fence = doc.get("decided_below") if doc.get("lost_reason") else None
        written = records_below(out / "builders" / b / "events.jsonl", fence) + \
            records_below(out / "builders" / b / "expired.jsonl", fence)
        own = (doc.get("counters") or {}).get("builder")
        if fence is None and own:
            # It reported: a record for each event it accepted or let
            # expire (an ID it never saw is decided, and has none).
            want = own["events_accepted"] + own["events_expired"]
            if written != want:
                return (f"builder {b} ({doc.get('status')}): {written} records written, its "
                        f"report counts {want} accepted or expired")
        elif doc.get("decided") is not None and written > doc["decided"]:
            return (f"builder {b} ({doc.get('status')}): {written} records below its fence, "
                    f"the books count {doc['decided']} decided")
    return None


def serving_problem(out: Path, stdout: str, status: int) -> tuple[str | None, int]:
    """Why a serving session fails the soak, or None; and how many runs it
    ended."""
    try:
        rows = json.loads((out / "runs.json").read_text())["runs"]
    except (OSError, ValueError, KeyError) as e:
        return f"no usable runs.json ({e}); daqrun status {status}", 0
    for row in rows:
        problem = books_problem(out / f"run-{row['run']}")
        if problem is not None:
            return f"run {row['run']}: {problem}", len(rows)
    if status != 0 and "daqrun: error:" not in stdout and "FAIL" not in stdout:
        return f"daqrun status {status} without a reason", len(rows)
    if status != 0 and "--fault" not in stdout and "fault: sending" not in stdout:
        return f"daqrun status {status} though nothing was done to the session", len(rows)
    return None, len(rows)


KINDS = ("single", "builders", "serving")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--out", type=Path,
                    default=REPO / "results" / f"soak-{datetime.date.today()}")
    ap.add_argument("--bin", type=Path, default=REPO / "bin")
    ap.add_argument("--mix", default="60,25,15",
                    help="weights of single, builders and serving runs (default 60,25,15)")
    args = ap.parse_args()
    try:
        weights = [float(w) for w in args.mix.split(",")]
        if len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError
    except ValueError:
        ap.error(f"--mix {args.mix}: three weights, e.g. 60,25,15")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"soak: {args.runs} runs, seed {args.seed}, mix single/builders/serving {args.mix}",
          flush=True)
    results, failed = [], 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="es-soak-") as tmp:
        for n in range(args.runs):
            kind = rng.choices(KINDS, weights)[0]
            drawn = {"single": draw, "builders": draw_builders, "serving": draw_serving}[kind]
            run, extra, what, extras = drawn(rng, n)
            door = run.pop("attack", None)
            topo = Path(tmp) / f"{n}.toml"
            topo.write_text(topology(run, extras, 2 if kind == "builders" else 1))
            out = Path(tmp) / f"run-{n}"
            hostile = None
            if door is not None:
                hostile = threading.Thread(target=attack, args=(door, out, run["run"]),
                                           daemon=True)
                hostile.start()
            p = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out),
                                "--bin", str(args.bin), "--check", "never", "--timeout", "120",
                                "--quiet", *extra], capture_output=True, text=True, timeout=400)
            if hostile is not None:
                hostile.join(30)
            ended = 1
            if kind == "serving":
                problem, ended = serving_problem(out, p.stdout, p.returncode)
            else:
                problem = books_problem(out)
                if problem is not None and problem.startswith("no usable"):
                    problem += f"; daqrun status {p.returncode}"
            ok = problem is None
            failed += not ok
            faulted = "fault: sending" in p.stdout
            stalled = bool(extras["source"] or extras.get("reader_stall"))
            results.append({"run": n, "kind": kind, "what": what, "status": p.returncode,
                            "balanced": ok, "runs_ended": ended, "fault_delivered": faulted,
                            "stalled_source": stalled, "problem": problem})
            print(f"soak: [{n + 1}/{args.runs} {time.monotonic() - t0:5.0f} s] "
                  f"{'balanced' if ok else 'FAILED'} (exit {p.returncode}): {kind}: {what}"
                  + (f"\n      {problem}\n{p.stdout[-1500:]}" if problem else ""), flush=True)
    balanced = args.runs - failed
    for kind in KINDS:
        of = [r for r in results if r["kind"] == kind]
        print(f"soak: {kind}: {sum(r['balanced'] for r in of)} of {len(of)} balanced"
              + (f" ({sum(r['runs_ended'] for r in of)} runs ended in the sessions)"
                 if kind == "serving" else ""))
    hit = [r for r in results if r["fault_delivered"]]
    print(f"soak: {len(hit)} runs had a daemon killed or stopped while running; "
          f"{sum(r['status'] != 0 for r in hit)} of them ended non-zero (the others had "
          "already reported), every one of them balanced: "
          f"{all(r['balanced'] for r in hit)}")
    stuck = [r for r in results if r["stalled_source"]]
    print(f"soak: {len(stuck)} runs had a source or a reader whose data stream stalled; "
          f"{sum(r['status'] != 0 for r in stuck)} of them ended non-zero, every one of them "
          f"balanced: {all(r['balanced'] for r in stuck)}")
    (args.out / "soak.json").write_text(json.dumps({"seed": args.seed, "runs": args.runs,
                                                    "mix": args.mix, "balanced": balanced,
                                                    "results": results}, indent=1))
    print(f"soak: {balanced} of {args.runs} runs balanced their books (seed {args.seed}); "
          f"{args.out}/soak.json")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
