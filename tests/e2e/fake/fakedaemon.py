#!/usr/bin/env python3
"""Stand-ins for builderd, readoutd and sourced, for testing the launcher
and the harness without the C daemons (ES_BIN=tests/e2e/fake).

They honour the daemons' command lines, port files, start order
independence and exit rules, but not the protocol: a fake daemon talks
newline-separated words over its TCP connections ("hello ROLE ID", "end",
"bye") and the fake builder writes the outputs the reference builder
predicts (analysis/refbuild.py), so a fake run proves only the plumbing.

With --role hub and --role builder (several builders) the hub waits for
every builder's hello and every source's end, then each builder writes the
records of its own IDs (static routing: batch k is builder k mod M's) in
its --out, and the hub writes metrics.json with a "builders" section.

Test knobs (environment): ES_FAKE_FAIL=ROLE (exit 3 at once),
ES_FAKE_HANG=ROLE (never finish), ES_FAKE_IGNORE_TERM=1 (ignore SIGTERM),
where ROLE is builderd, readoutd or sourced.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "analysis"))


def log(role: str, msg: str) -> None:
    print(f"{role}[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


def split_addr(text: str) -> tuple[str, int]:
    text = text.removeprefix("tcp://")
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def listen(addr: str) -> socket.socket:
    host, port = split_addr(addr)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(64)
    return s


def listen_shm(name: str) -> socket.socket:
    """The abstract Unix socket builderd --shm-listen NAME greets readers on."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(f"\0es-{name}")
    s.listen(64)
    return s


def connect(addr: str, timeout_s: float = 10.0) -> socket.socket:
    """tcp://HOST:PORT, HOST:PORT or shm://NAME (the builder's Unix socket)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        try:
            if addr.startswith("shm://"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(f"\0es-{addr[6:]}")
                except OSError:
                    s.close()
                    raise
                return s
            return socket.create_connection(split_addr(addr), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def write_port_file(path: str, ports: dict[str, int]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for k, v in ports.items():
            f.write(f"{k} {v}\n")
    os.replace(tmp, path)


def drain(sock: socket.socket) -> None:
    """Reads and discards until EOF, in a daemon thread."""
    def run():
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
    threading.Thread(target=run, daemon=True).start()


def accept_forever(server: socket.socket, on_conn) -> None:
    def run():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            on_conn(conn)
    threading.Thread(target=run, daemon=True).start()


def read_lines(sock: socket.socket):
    buf = b""
    while True:
        try:
            data = sock.recv(4096)
        except OSError:
            return
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode()


def knobs(role: str) -> None:
    if os.environ.get("ES_FAKE_FAIL") == role:
        log(role, "failing on purpose (ES_FAKE_FAIL)")
        sys.exit(3)
    if os.environ.get("ES_FAKE_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def hang_if_asked(role: str) -> None:
    if os.environ.get("ES_FAKE_HANG") == role:
        log(role, "hanging on purpose (ES_FAKE_HANG)")
        while True:
            time.sleep(3600)


def expected_outputs(args, gen: dict[str, int], mine=lambda event: True):
    """The events and expired records the reference predicts, of the IDs
    mine() keeps."""
    import refbuild
    p = refbuild.RunParams(seed=gen["seed"], run=args.run, sources=args.sources,
                           events=args.events, first_event=args.first_event,
                           payload=gen["payload"], missing_every=gen["missing_every"],
                           filter_modulo=args.filter_modulo)
    exp = refbuild.expected_events(p)
    events = [{"run": p.run, "event": e, "crc": exp.accepted[e], "bytes": exp.bytes_per_event,
               "latency_ns": 0} for e in sorted(exp.accepted) if mine(e)]
    expired = []
    for e in range(p.first_event, p.first_event + p.events):
        gone = [s for s in range(p.sources)
                if refbuild.is_omitted(p.seed, p.run, e, s, p.missing_every)]
        if gone and len(gone) < p.sources and mine(e):
            expired.append({"run": p.run, "event": e, "reason": "timeout", "missing": gone})
    return events, expired


def hub(args) -> int:
    """--role hub: the control port only. Once every source has ended it
    tells each builder the run's parameters ("go ..."), waits for each
    builder's "done B N", writes metrics.json with a builders section and
    says bye to everyone."""
    control = listen(args.control_listen)
    write_port_file(args.port_file, {"control": control.getsockname()[1]})
    log("builderd", f"hub of {args.builders} builders: control {control.getsockname()[1]}")
    lock = threading.Lock()
    peers: list[socket.socket] = []
    builders: dict[int, socket.socket] = {}
    hellos: list[tuple[str, int, int]] = []
    gen: dict[str, int] = {}
    done: dict[int, int] = {}
    ended, joined, finished = (threading.Semaphore(0) for _ in range(3))

    def on_control(conn):
        with lock:
            peers.append(conn)

        def run():
            for line in read_lines(conn):
                words = line.split()
                if words[:1] == ["hello"]:
                    with lock:
                        hellos.append((words[1], int(words[2]), int(words[3])))
                        gen.update((k, int(v)) for k, _, v in (w.partition("=")
                                                               for w in words[4:]))
                        if words[1] == "builder":
                            builders[int(words[2])] = conn
                            joined.release()
                elif words[:1] == ["end"]:
                    ended.release()
                elif words[:1] == ["done"]:
                    done[int(words[1])] = int(words[2])
                    finished.release()
        threading.Thread(target=run, daemon=True).start()

    accept_forever(control, on_control)
    for _ in range(args.builders):
        joined.acquire()
    for _ in range(args.sources):
        ended.acquire()
    hang_if_asked("builderd")
    go = " ".join(f"{k}={v}" for k, v in gen.items())
    for b, conn in sorted(builders.items()):
        conn.sendall(f"go {go} batch={args.batch}\n".encode())
    for _ in range(args.builders):
        finished.acquire()
    out = Path(args.out)
    procs = [{"role": "hub", "id": 0, "host": "127.0.0.1", "pid": os.getpid()}]
    procs += [{"role": r, "id": i, "host": "127.0.0.1", "pid": pid} for r, i, pid in hellos]
    (out / "metrics.json").write_text(json.dumps({
        "balanced": True, "equations": [{"name": "fake", "lhs": 1, "rhs": 1, "ok": True}],
        "errors": [], "counters": {"": {"events_accepted": sum(done.values())}},
        "builders": [{"id": b, "events_complete": n, "rate": {"events_per_s": 0.0}}
                     for b, n in sorted(done.items())],
        "processes": procs}))
    with lock:
        for conn in peers:
            try:
                conn.sendall(b"bye\n")
            except OSError:
                pass
    print(f"fake builderd hub: run {args.run}: {sum(done.values())} accepted by "
          f"{args.builders} builders; balanced")
    return 0


def builder(args) -> int:
    """--role builder: a data port (and rings), a control link to the hub;
    on "go" it writes the records of its own IDs, batch k being builder
    k mod M's (static routing), reports "done B N" and waits for bye."""
    data = listen(args.listen)
    if args.shm_listen:
        accept_forever(listen_shm(args.shm_listen), drain)
    write_port_file(args.port_file, {"data": data.getsockname()[1]})
    log("builderd", f"builder {args.id} of {args.builders}: data {data.getsockname()[1]}")
    accept_forever(data, drain)
    ctl = connect(args.hub)
    ctl.settimeout(None)
    ctl.sendall(f"hello builder {args.id} {os.getpid()}\n".encode())
    for line in read_lines(ctl):
        words = line.split()
        if words[:1] == ["go"]:
            gen = {k: int(v) for k, _, v in (w.partition("=") for w in words[1:])}
            events, expired = expected_outputs(
                args, gen, lambda e: (e // gen["batch"]) % args.builders == args.id)
            out = Path(args.out)
            with open(out / "events.jsonl", "w") as f:
                f.write("".join(json.dumps(x) + "\n" for x in events))
            (out / "expired.jsonl").write_text("".join(json.dumps(x) + "\n" for x in expired))
            ctl.sendall(f"done {args.id} {len(events)}\n".encode())
        elif line == "bye":
            return 0
    log("builderd", "control connection closed without bye")
    return 1


def builderd(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="builderd")
    for flag in ("--run", "--sources", "--readers", "--first-event", "--events",
                 "--filter-modulo", "--builders", "--id", "--batch"):
        ap.add_argument(flag, type=int, default={"--filter-modulo": 1, "--builders": 1,
                                                 "--batch": 64}.get(flag, 0))
    for flag in ("--out", "--port-file"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--role", choices=("both", "hub", "builder"), default="both")
    for flag in ("--listen", "--control-listen", "--shm-listen", "--hub", "--routing"):
        ap.add_argument(flag)
    ap.add_argument("--version", action="version", version="fake builderd")
    args, _ = ap.parse_known_args(argv)
    knobs("builderd")
    if args.role == "hub":
        return hub(args)
    if args.role == "builder":
        return builder(args)
    data, control = listen(args.listen), listen(args.control_listen)
    if args.shm_listen:
        accept_forever(listen_shm(args.shm_listen), drain)
    write_port_file(args.port_file, {"data": data.getsockname()[1],
                                     "control": control.getsockname()[1]})
    log("builderd", f"listening data {data.getsockname()[1]} control {control.getsockname()[1]}")
    accept_forever(data, drain)
    lock = threading.Lock()
    peers: list[socket.socket] = []
    hellos: list[tuple[str, int, int]] = []
    gen: dict[str, int] = {}          # seed, payload, missing_every, from the sources
    ended = threading.Semaphore(0)

    def on_control(conn):
        with lock:
            peers.append(conn)

        def run():
            for line in read_lines(conn):
                words = line.split()
                if words[:1] == ["hello"]:
                    with lock:
                        hellos.append((words[1], int(words[2]), int(words[3])))
                        for word in words[4:]:
                            k, _, v = word.partition("=")
                            gen[k] = int(v)
                elif words[:1] == ["end"]:
                    ended.release()
        threading.Thread(target=run, daemon=True).start()

    accept_forever(control, on_control)
    for _ in range(args.sources):
        ended.acquire()
    hang_if_asked("builderd")

    events, expired = expected_outputs(args, gen)
    out = Path(args.out)
    with open(out / "events.jsonl", "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in events))
    (out / "expired.jsonl").write_text("".join(json.dumps(x) + "\n" for x in expired))
    procs = [{"role": "builder", "id": 0, "host": "127.0.0.1", "pid": os.getpid()}]
    procs += [{"role": r, "id": i, "host": "127.0.0.1", "pid": pid} for r, i, pid in hellos]
    (out / "metrics.json").write_text(json.dumps({
        "balanced": True, "equations": [{"name": "fake", "lhs": 1, "rhs": 1, "ok": True}],
        "errors": [], "counters": {"": {"events_accepted": len(events)}},
        "processes": procs}))
    with lock:
        for conn in peers:
            try:
                conn.sendall(b"bye\n")
            except OSError:
                pass
    print(f"fake builderd: run {args.run}: {len(events)} accepted; balanced")
    return 0


def wait_bye(role: str, ctl: socket.socket) -> None:
    for line in read_lines(ctl):
        if line == "bye":
            return
    log(role, "control connection closed without bye")
    sys.exit(1)


def readoutd(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="readoutd")
    ap.add_argument("--id", type=int, required=True)
    for flag in ("--listen", "--port-file", "--sources", "--control"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--builder", action="append", required=True)
    ap.add_argument("--version", action="version", version="fake readoutd")
    args, _ = ap.parse_known_args(argv)
    knobs("readoutd")
    server = listen(args.listen)
    write_port_file(args.port_file, {"data": server.getsockname()[1]})
    accept_forever(server, drain)
    # One URL (the one builder), or B=URL for each builder of several.
    ups = [connect(url.split("=", 1)[1] if "=" in url else url) for url in args.builder]
    ctl = connect(args.control)
    ctl.settimeout(None)
    ctl.sendall(f"hello reader {args.id} {os.getpid()}\n".encode())
    for up in ups:
        up.sendall(b"x" * 1000)
    hang_if_asked("readoutd")
    wait_bye("readoutd", ctl)
    return 0


def sourced(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="sourced")
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--events", type=int, default=0)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--payload", type=int, default=0)
    ap.add_argument("--missing-every", type=int, default=0)
    for flag in ("--connect", "--control"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--version", action="version", version="fake sourced")
    args, _ = ap.parse_known_args(argv)
    knobs("sourced")
    data = connect(args.connect)
    ctl = connect(args.control)
    ctl.settimeout(None)
    ctl.sendall(f"hello source {args.id} {os.getpid()} seed={args.seed} payload={args.payload} "
                f"missing_every={args.missing_every}\n".encode())
    data.sendall(b"y" * 1000)
    hang_if_asked("sourced")
    time.sleep(min(args.events / args.rate, 2.0) if args.rate else 0.1)
    ctl.sendall(b"end\n")
    data.close()
    wait_bye("sourced", ctl)
    return 0


if __name__ == "__main__":
    role = os.path.basename(sys.argv[0])
    main = {"builderd": builderd, "readoutd": readoutd, "sourced": sourced}.get(role)
    if main is None:
        sys.exit(f"fakedaemon: run me as builderd, readoutd or sourced, not {role}")
    sys.exit(main(sys.argv[1:]))
