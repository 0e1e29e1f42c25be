#!/usr/bin/env python3
"""Refreshes, or checks, the generated regions of the documents.

    scripts/gendocs.py --docgen PATH [--check] FILE...

A region is the lines between "<!-- generated: ARGS -->" and "<!-- end -->";
its text is the output of `docgen ARGS` (tools/docgen.c), which writes it from
the code's own tables (the control codec's fields, the books' equations).
Without --check the files are rewritten in place (make docs). With --check
nothing is written and the exit status is 1 when a committed region differs
from what the code generates, naming the file, the line and the region, with
a diff (make test).
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import subprocess
import sys
from pathlib import Path

BEGIN = re.compile(r"^<!-- generated: (.+?) -->$")
END = "<!-- end -->"


def regenerate(path: Path, docgen: str) -> tuple[str, list[str]]:
    """The file's text with every region refreshed, and one complaint per
    region that differed (or was malformed)."""
    lines = path.read_text().split("\n")
    out: list[str] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = BEGIN.match(line)
        i += 1
        if not m:
            continue
        start = i
        while i < len(lines) and lines[i] != END:
            if BEGIN.match(lines[i]):
                break
            i += 1
        if i == len(lines) or lines[i] != END:
            problems.append(f"{path}:{start}: region '{m.group(1)}' has no '{END}' line")
            out.extend(lines[start:i])
            continue
        r = subprocess.run([docgen, *shlex.split(m.group(1))], capture_output=True, text=True)
        if r.returncode != 0:
            problems.append(f"{path}:{start}: docgen {m.group(1)} failed: {r.stderr.strip()}")
            out.extend(lines[start:i])
            continue
        fresh = r.stdout.rstrip("\n").split("\n")
        old = lines[start:i]
        if old != fresh:
            diff = "\n".join(difflib.unified_diff(old, fresh, "committed", "generated", lineterm=""))
            problems.append(f"{path}:{start}: region '{m.group(1)}' differs from the code:\n{diff}")
        out.extend(fresh)
    return "\n".join(out), problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docgen", required=True, help="the docgen binary")
    ap.add_argument("--check", action="store_true", help="fail on a difference, write nothing")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    failed = False
    regions = 0
    for path in args.files:
        text, problems = regenerate(path, args.docgen)
        regions += sum(1 for l in path.read_text().split("\n") if BEGIN.match(l))
        if args.check:
            for p in problems:
                print(p, file=sys.stderr)
            failed = failed or bool(problems)
        else:
            malformed = [p for p in problems if "differs from the code" not in p]
            for p in malformed:
                print(p, file=sys.stderr)
            failed = failed or bool(malformed)
            if text != path.read_text():
                path.write_text(text)
                print(f"gendocs: rewrote {path}")
    if failed:
        if args.check:
            print("gendocs: the documents differ from the code; `make docs` rewrites them",
                  file=sys.stderr)
        return 1
    if regions == 0:
        print("gendocs: no generated region in " + " ".join(map(str, args.files)), file=sys.stderr)
        return 1
    if args.check:
        print(f"gendocs: {regions} generated regions match the code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
