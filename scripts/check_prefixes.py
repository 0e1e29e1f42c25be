#!/usr/bin/env python3
"""Fails when a builderd function's prefix does not follow from its file name.

docs/CODE.md: every function a builderd header declares starts with the
header's name (`data/ingest.h` declares `ingest_...`; `X_internal.h` is
part of X), and every function a .c file defines for others (not static)
starts with the name of its module's header: `X.c` and `X_part.c` implement
`X.h` in the same folder. main.c defines only main(). A newcomer who meets
a call finds the file it lives in from its name.
"""
import argparse
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_sizes import functions, function_name  # noqa: E402

FOLDERS = ("builderd",)
COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def header_module(stem):
    return stem[: -len("_internal")] if stem.endswith("_internal") else stem


def declarations(text):
    """(line, name) of each function a header declares at file scope."""
    text = COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    statement, start = [], 0
    for i, line in enumerate(text.splitlines()):
        if not statement:
            if not line or line[0] in " \t#}" or line.startswith(("typedef", "extern \"C\"")):
                continue
            start = i + 1
        statement.append(line)
        if line.rstrip().endswith((";", "{")):
            whole = "\n".join(statement)
            statement = []
            if whole.rstrip().endswith("{") or "(" not in whole:
                continue
            name = function_name(whole)
            if name is not None:
                yield start, name


def module_of(c_path, stems):
    """The header stem a .c file implements: its own name, or the longest
    header name it starts with followed by '_'."""
    own = c_path.stem
    best = None
    for s in stems:
        if own == s or own.startswith(s + "_"):
            if best is None or len(s) > len(best):
                best = s
    return best


def check(root):
    problems = []
    for folder in FOLDERS:
        for directory in sorted({p.parent for p in (root / folder).rglob("*.[ch]")}):
            headers = sorted(directory.glob("*.h"))
            stems = {header_module(h.stem) for h in headers}
            for h in headers:
                want = header_module(h.stem) + "_"
                for line, name in declarations(h.read_text(encoding="utf-8")):
                    if not name.startswith(want):
                        problems.append(f"{h.relative_to(root)}:{line}: {name}() does not start "
                                        f"with {want} (the header's name)")
            for c in sorted(directory.glob("*.c")):
                lines = c.read_text(encoding="utf-8").splitlines()
                rel = c.relative_to(root)
                if c.name == "main.c":
                    want = None
                else:
                    module = module_of(c, stems)
                    if module is None:
                        problems.append(f"{rel}: no header names its module (X.c or X_part.c implements X.h)")
                        continue
                    want = module + "_"
                for name, first, _ in functions(lines):
                    if re.search(r"\bstatic\b", lines[first - 1]):
                        continue
                    if want is None and name != "main":
                        problems.append(f"{rel}:{first}: {name}() is not static; main.c defines only main()")
                    elif want is not None and not name.startswith(want):
                        problems.append(f"{rel}:{first}: {name}() does not start with {want} "
                                        f"(the module's name)")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=".", help="the checkout (default .)")
    root = pathlib.Path(ap.parse_args().root)
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_prefixes: {len(problems)} function(s) whose prefix is not their file's (docs/CODE.md)")
        return 1
    print("check_prefixes: every builderd function starts with its module's name")
    return 0


if __name__ == "__main__":
    sys.exit(main())
