#!/usr/bin/env python3
"""Checks the include structure of the C tree (docs/CODE.md).

    scripts/check_layers.py [--root DIR]

Rules, each failing with the file, the line and the include:
  - common/ is layered, bottom to top: wire/ core/ sys/ io/. A module may
    include its own layer and the layers below it, never one above.
  - A daemon's folder (builderd/ readoutd/ sourced/) sits above every layer
    and includes no other daemon's folder.
  - builderd/ is in role folders (docs/CODE.md), each of which includes its
    own, the root's headers (options.h, peer.h, snapshot.h, ...) and only
    the folders below it: data/ < clock/ < report/ < hub/ and builder/ <
    serve/; hub/ never includes builder/ or serve/, builder/ never hub/ or
    serve/. A root file but main.c includes no folder, and a folder the
    rule does not know is refused.
  - An include of a common/ header names its layer ("wire/frame.h"); a bare
    name reaches only a header of the including file's own folder.
  - No cycle: modules (x.c with x.h) that include each other in a loop,
    anywhere in the tree, tests included.
  - No call circle: C files that call each other in a loop (a.c calls a
    function b.c defines, and b.c one a.c defines, or a longer loop), within
    a daemon's folder or within common/. A function handed over as a
    callback is no call: only a name followed by "(" is.
Exits 0 and prints one summary line when every rule holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_sizes import COMMENTS, functions  # noqa: E402  the one reader of definitions

LAYERS = ["wire", "core", "sys", "io"]
DAEMONS = ["builderd", "readoutd", "sourced"]
TREES = ["common", *DAEMONS, "tests/unit", "tests/fuzz", "tests/bench", "examples", "tools"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# builderd's role folders and the folders each may include besides its own
# and the root (builderd/*.h); main.c at the root wires them all.
BUILDERD_FOLDERS = {
    "data": set(),
    "clock": {"data"},
    "report": {"data", "clock"},
    "hub": {"data", "clock", "report"},
    "builder": {"data", "clock", "report"},
    "serve": {"data", "clock", "report", "hub"},
}

# Cycles that exist today and are removed by a later step of the layout
# work; each is reported as a warning so it stays visible. Keep this empty
# once that step lands.
KNOWN_CYCLES: list[frozenset[str]] = []
# The same for call circles between C files.
KNOWN_CALL_CIRCLES: list[frozenset[str]] = []


def rank(module: str) -> int | None:
    """Layer rank of a module path (no extension); None outside the layers."""
    parts = module.split("/")
    if parts[0] == "common" and len(parts) == 3 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    if parts[0] in DAEMONS:
        return len(LAYERS)
    return None


def resolve(root: Path, src: Path, name: str) -> str | None:
    """Module path an include names, or None for a generated or system one.
    A daemon's folder is on its own files' include path (builderd's role
    folders include "data/ingest.h"), as the Makefile has it."""
    rel = src.relative_to(root).parts
    daemon = [root / rel[0]] if rel[0] in DAEMONS else []
    for base in (src.parent, *daemon, root / "common", root):
        p = (base / name).resolve()
        if p.is_file():
            return str(p.relative_to(root).with_suffix(""))
    for layer in LAYERS:
        p = root / "common" / layer / name
        if p.is_file():
            return str(p.relative_to(root).with_suffix(""))
    return None


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
STRINGS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
CALL_GROUPS = ["common", *DAEMONS]


def definitions_and_calls(text: str) -> tuple[set[str], dict[str, str]]:
    """The functions a C file defines for other files (not static), and each
    name it calls with the first function that calls it."""
    lines = text.splitlines()
    exported: set[str] = set()
    calls: dict[str, str] = {}
    for name, first, length in functions(lines):
        body = "\n".join(lines[first - 1:first - 1 + length])
        head, _, inner = body.partition("\n{")
        if not re.match(r"\s*static\b", head) and not head.lstrip().startswith("inline"):
            exported.add(name)
        inner = STRINGS.sub('""', COMMENTS.sub(" ", inner))
        for m in CALL.finditer(inner):
            calls.setdefault(m.group(1), name)
    return exported, calls


def a_circle(graph: dict[str, dict[str, tuple[str, str]]], comp: set[str]) -> list[str]:
    """One loop through the first file of comp, found breadth-first inside comp."""
    start = min(comp)
    came: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w not in comp:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if w not in came:
                came[w] = v
                todo.append(w)
    return [start, start]


def call_circles(root: Path) -> list[tuple[set[str], str]]:
    """Each loop of calls between the C files of a group, named by its files
    and one call along each step."""
    errors = []
    for group in CALL_GROUPS:
        files = sorted((root / group).rglob("*.c")) if (root / group).is_dir() else []
        owner: dict[str, str] = {}
        calls: dict[str, dict[str, str]] = {}
        for src in files:
            rel = str(src.relative_to(root))
            exported, called = definitions_and_calls(src.read_text(errors="replace"))
            calls[rel] = called
            for name in exported:
                owner.setdefault(name, rel)
        graph: dict[str, dict[str, tuple[str, str]]] = {f: {} for f in calls}
        for src, called in calls.items():
            for name, caller in called.items():
                dst = owner.get(name)
                if dst is not None and dst != src:
                    graph[src].setdefault(dst, (caller, name))
        plain = {v: set(ws) for v, ws in graph.items()}
        for comp in strongly_connected(plain):
            loop = a_circle(graph, comp)
            steps = ", ".join(f"{graph[a][b][0]}() calls {graph[a][b][1]}()"
                              for a, b in zip(loop, loop[1:]))
            errors.append((comp, f"call circle: {' -> '.join(loop)} ({steps})"))
    return errors


def builderd_folder(module: str) -> str | None:
    """builderd's folder of a module: "" at the root, None outside builderd."""
    parts = module.split("/")
    if parts[0] != "builderd":
        return None
    return parts[1] if len(parts) > 2 else ""


def builderd_folder_violations(root: Path, lines: list[tuple[str, str, str]]) -> list[str]:
    errors = []
    unknown = sorted({p.parent.name for p in (root / "builderd").glob("*/*.[ch]")
                      if p.parent.name not in BUILDERD_FOLDERS})
    for u in unknown:
        errors.append(f"builderd/{u}/: not a role folder of builderd (docs/CODE.md: "
                      f"{', '.join(BUILDERD_FOLDERS)})")
    for where, module, target in lines:
        src, dst = builderd_folder(module), builderd_folder(target)
        if src is None or dst is None or dst == "" or dst == src:
            continue
        if src == "":
            if module != "builderd/main":
                errors.append(f"{where}: builderd's root ({module}) includes no role folder "
                              f"({dst}/); only main.c wires them")
        elif src in BUILDERD_FOLDERS and dst not in BUILDERD_FOLDERS[src]:
            errors.append(f"{where}: builderd/{src}/ may not include builderd/{dst}/ (it may "
                          f"include {', '.join(sorted(BUILDERD_FOLDERS[src])) or 'no other folder'})")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=Path(__file__).resolve().parent.parent, type=Path)
    root = ap.parse_args().root.resolve()

    errors: list[str] = []
    graph: dict[str, set[str]] = {}
    graph_lines: list[tuple[str, str, str]] = []   # (where, module, target) of every include
    files = sorted(p for t in TREES if (root / t).is_dir()
                   for p in (root / t).rglob("*") if p.suffix in (".c", ".h"))
    for src in files:
        rel = src.relative_to(root)
        module = str(rel.with_suffix(""))
        graph.setdefault(module, set())
        text = src.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            name = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            where = f"{rel}:{line}: #include \"{name}\""
            target = resolve(root, src, name)
            if target is None:
                continue
            if target != module:
                graph[module].add(target)
                graph_lines.append((where, module, target))
            if target.startswith("common/") and not name.startswith(tuple(l + "/" for l in LAYERS)):
                errors.append(f"{where}: a common/ header is included by its layer path")
            src_rank, dst_rank = rank(module), rank(target)
            if src_rank is not None and dst_rank is not None and dst_rank > src_rank:
                errors.append(f"{where}: {module.split('/')[1]}/ may not include a layer "
                              f"above it ({target.split('/')[1]}/)")
            if module.split("/")[0] in DAEMONS and target.split("/")[0] in DAEMONS \
                    and module.split("/")[0] != target.split("/")[0]:
                errors.append(f"{where}: one daemon's folder includes another's")

    errors += builderd_folder_violations(root, graph_lines)
    warnings = []
    for comp in strongly_connected(graph):
        if any(comp <= known for known in KNOWN_CYCLES):
            warnings.append("known cycle, to be removed: " + " -> ".join(sorted(comp)))
        else:
            errors.append("include cycle: " + " -> ".join(sorted(comp)))

    for comp, circle in call_circles(root):
        if any(comp <= known for known in KNOWN_CALL_CIRCLES):
            warnings.append("known " + circle + ", to be removed")
        else:
            errors.append(circle)

    for w in warnings:
        print(f"check_layers: warning: {w}")
    for e in errors:
        print(f"check_layers: {e}", file=sys.stderr)
    modules = len(graph)
    edges = sum(len(v) for v in graph.values())
    if errors:
        print(f"check_layers: {len(errors)} violation(s) in {modules} modules", file=sys.stderr)
        return 1
    print(f"check_layers: {modules} modules, {edges} includes: layers and cycles OK, no call circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
