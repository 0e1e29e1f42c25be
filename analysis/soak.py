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
another protocol version (docs/PROTOCOL.md, "Greeting"). A run passes when
metrics.json exists and every equation balances, whatever else happened to
it.

Usage: analysis/soak.py [--runs N] [--seed S] [--out DIR] [--bin DIR]
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


def topology(run: dict, extras: dict) -> str:
    lines = ["[run]"] + [f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}"
                         for k, v in run.items()]
    lines += ["", "[builder]", 'host = "127.0.0.1"', f"extra = {json.dumps(extras['builder'])}", ""]
    for r in range(2):
        lines += ["[[reader]]", f"id = {r}", f"sources = [{2 * r}, {2 * r + 1}]",
                  'host = "127.0.0.1"', f'transport = "{"shm" if r == 0 else "tcp"}"',
                  f"extra = {json.dumps(extras['reader'] + extras.get('reader_stall', {}).get(r, []))}",
                  ""]
    for ident, extra in extras["source"].items():
        lines += ["[[source]]", f"id = {ident}", f"extra = {json.dumps(extra)}", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--out", type=Path,
                    default=REPO / "results" / f"soak-{datetime.date.today()}")
    ap.add_argument("--bin", type=Path, default=REPO / "bin")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"soak: {args.runs} runs, seed {args.seed}", flush=True)
    results, failed = [], 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="es-soak-") as tmp:
        for n in range(args.runs):
            run, extra, what, extras = draw(rng, n)
            kind = run.pop("attack", None)
            topo = Path(tmp) / f"{n}.toml"
            topo.write_text(topology(run, extras))
            out = Path(tmp) / f"run-{n}"
            hostile = None
            if kind is not None:
                hostile = threading.Thread(target=attack, args=(kind, out, run["run"]),
                                           daemon=True)
                hostile.start()
            p = subprocess.run([sys.executable, str(DAQRUN), str(topo), "--out", str(out),
                                "--bin", str(args.bin), "--check", "never", "--timeout", "120",
                                *extra], capture_output=True, text=True, timeout=300)
            if hostile is not None:
                hostile.join(30)
            problem = None
            marker = out / "running.json"
            try:
                if marker.exists():
                    raise OSError(f"{marker} remains: the run did not finish")
                m = json.loads((out / "metrics.json").read_text())
                if not m["balanced"]:
                    problem = "unbalanced: " + "; ".join(
                        f"{e['name']} {e['lhs']} != {e['rhs']}" for e in m["equations"] if not e["ok"])
            except (OSError, ValueError, KeyError) as e:
                problem = f"no usable metrics.json ({e}); daqrun status {p.returncode}"
            ok = problem is None
            failed += not ok
            faulted = "fault: sending" in p.stdout
            stalled = bool(extras["source"] or extras.get("reader_stall"))
            results.append({"run": n, "what": what, "status": p.returncode, "balanced": ok,
                            "fault_delivered": faulted, "stalled_source": stalled,
                            "problem": problem})
            print(f"soak: [{n + 1}/{args.runs} {time.monotonic() - t0:5.0f} s] "
                  f"{'balanced' if ok else 'FAILED'} (exit {p.returncode}): {what}"
                  + (f"\n      {problem}\n{p.stdout[-1500:]}" if problem else ""), flush=True)
    balanced = args.runs - failed
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
                                                    "balanced": balanced, "results": results},
                                                   indent=1))
    print(f"soak: {balanced} of {args.runs} runs balanced their books (seed {args.seed}); "
          f"{args.out}/soak.json")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
