#!/usr/bin/env python3
"""Fails when a C file or function outgrows what a reader takes in at once.

docs/CODE.md: no .c file over FILE_LIMIT lines, no function over
FUNCTION_LIMIT lines; a decoder's state machine or a usage text may be
longer when it is listed in LONG_ALLOWED with the reason. Every function
definition counts, whatever its return type (struct, enum, const, a pointer,
a function pointer) and however its header wraps.
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
    # Its switch reads as the msgpack spec's table of type bytes; cut into
    # parts, each part would take the walk's whole state (position, depth,
    # counts) and the table would no longer be read in one place.
    "mps_scan": "the msgpack pre-scan's state machine, one case per type byte",
}

# A definition's header starts at column 0 and may wrap over several lines;
# its body opens with "{" alone at column 0 and closes with "}" at column 0
# (the tree's one style). Whatever the return type (struct, enum, const,
# pointers, a function pointer), the function's name is the first
# identifier followed by a parameter list that does not open with "*".
NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\((?!\s*\*)")
NOT_NAMES = {"__attribute__", "__declspec", "alignas", "_Alignas", "sizeof", "typeof"}
COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# __attribute__((format(printf, 2, 3))) before or after a declarator.
ATTRIBUTES = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")


def function_name(header):
    """The name a definition's header declares, or None when it is no function
    (a struct, an initialiser, a macro's body)."""
    text = ATTRIBUTES.sub(" ", COMMENTS.sub(" ", header)).strip()
    if not text or "=" in text.split("(")[0]:
        return None
    for m in NAME.finditer(text):
        if m.group(1) not in NOT_NAMES:
            return m.group(1)
    return None


def functions(lines):
    """Yields (name, first line, length) of each function definition."""
    header, hstart = [], None
    name, start = None, None
    in_comment = False
    for i, line in enumerate(lines):
        if name is not None:
            if line.startswith("}"):
                yield name, start + 1, i - start + 1
                name = None
            continue
        stripped = line.strip()
        if in_comment:
            in_comment = "*/" not in line
            continue
        if stripped.startswith("/*") and "*/" not in stripped:
            in_comment = True
            continue
        if line.startswith("{"):
            candidate = function_name("\n".join(header))
            if candidate is not None and stripped.endswith("}"):
                yield candidate, hstart + 1, i - hstart + 1  # a body on one line
            elif candidate is not None:
                name, start = candidate, hstart
            header, hstart = [], None
            continue
        ends_statement = stripped.endswith((";", "}", "\\")) or stripped.startswith("}")
        if not stripped or stripped.startswith(("#", "//", "/*")) or ends_statement \
                or (not header and line[0] in " \t"):
            header, hstart = [], None
            continue
        if not header:
            hstart = i
        header.append(line)


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
