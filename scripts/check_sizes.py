#!/usr/bin/env python3
"""Fails when a C file or function outgrows what a reader takes in at once.

docs/CODE.md: no .c file over FILE_LIMIT lines, no function over
FUNCTION_LIMIT lines; a decoder's state machine or a usage text may be
longer when it is listed in LONG_ALLOWED with the reason.
"""
import argparse
import pathlib
import re
import sys

FILE_LIMIT = 600
FUNCTION_LIMIT = 80
FOLDERS = ("common", "builderd", "readoutd", "sourced", "tools", "examples")

# function name -> why it may be longer than FUNCTION_LIMIT
LONG_ALLOWED = {
    "mps_scan": "the msgpack pre-scan's state machine, one case per type byte",
}

# A definition starts at column 0 with a name followed by "(", its body
# opens with "{" alone at column 0 and closes with "}" at column 0.
DEFINITION = re.compile(r"^[A-Za-z_][\w\s\*]*?\b(\w+)\s*\(")


def functions(lines):
    """Yields (name, first line, length) of each function definition."""
    name, start = None, None
    for i, line in enumerate(lines):
        if name is None:
            m = DEFINITION.match(line)
            if m and not line.rstrip().endswith(";") and not line.startswith(("typedef", "struct", "enum", "static const", "const")):
                candidate, cstart = m.group(1), i
                # the header may wrap; the body opens at column 0
                for j in range(i, min(i + 6, len(lines))):
                    if lines[j].startswith("{"):
                        name, start = candidate, cstart
                        break
                    if lines[j].rstrip().endswith(";"):
                        break
        elif line.startswith("}"):
            yield name, start + 1, i - start + 1
            name = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=".", help="the checkout (default .)")
    ap.add_argument("--report", action="store_true", help="list every file and function over half the limit")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    problems = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.c")):
            rel = path.relative_to(root)
            lines = path.read_text(encoding="utf-8").splitlines()
            if len(lines) > FILE_LIMIT:
                problems.append(f"{rel}: {len(lines)} lines (limit {FILE_LIMIT})")
            elif args.report and len(lines) > FILE_LIMIT // 2:
                print(f"  {rel}: {len(lines)} lines")
            for name, first, length in functions(lines):
                if length > FUNCTION_LIMIT and name not in LONG_ALLOWED:
                    problems.append(f"{rel}:{first}: {name}() is {length} lines (limit {FUNCTION_LIMIT})")
    for p in problems:
        print(p)
    if problems:
        print(f"check_sizes: {len(problems)} over the limits (docs/CODE.md)")
        return 1
    print("check_sizes: every file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
