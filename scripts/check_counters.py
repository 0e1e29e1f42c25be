#!/usr/bin/env python3
"""Checks that every counter is named once, in common/wire/counters.h.

    scripts/check_counters.py [--root DIR]

The names are those of the counter lists (#define CNT_LIST_<L>(X) ...
X(name) ...) and of the groups (#define CNT_GROUP_<G> "name") in
common/wire/counters.h. Everywhere else in the C tree (common/, builderd/,
readoutd/, sourced/, tools/, examples/, tests/fuzz/, tests/bench/), each of
these fails with the file, the line and the literal:

  - a string literal that is a counter's or a group's name ("frames_wire",
    "process"): a read or a write by name, which a rename would break only
    at run time; use the list's symbol, CNT_SOURCE(frames_wire), or
    CNT_GROUP_PROCESS;
  - a counter's name as a quoted key inside a literal ("{\\"frames_wire\\": %u"):
    a hand-written JSON field of that counter; pass the name to "%s";
  - a group name built by hand ("source.%u", "reader.%u", "from_reader.%u"):
    use cnt_group_peer() or cnt_group_builder_link().

Adjacent literals are joined first, as the compiler does. A counter named in
prose (a log line, an equation's description in core/acct's kind table,
from which README's table is written) is not a read of it, nor is an
option's name (OPT_UINT("events", ...), getopt's { "events",
required_argument, ... }), nor a control message's key or type in the
codec's tables (CTL_FIELD("events", ...), [CTL_TOKEN] = "token"); none is
checked. tests/unit/ is exempt: its tests spell the wire names out on
purpose, so that a rename in counters.h breaks them rather than the other
processes and analysis/.

Exits 0 and prints one summary line when no literal is found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HEADER = Path("common/wire/counters.h")
OWN = {HEADER, Path("common/wire/counters.c")}
TREES = ["common", "builderd", "readoutd", "sourced", "tools", "examples",
         "tests/fuzz", "tests/bench"]
LIST = re.compile(r"^#define\s+(CNT_LIST_\w+)\(X\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
ITEM = re.compile(r"\bX\((\w+)\)")
GROUP = re.compile(r'^#define\s+(CNT_GROUP_\w+)\s+"([^"]+)"', re.M)
# An option's name (sys/opt's OPT_UINT("events", ...) or getopt's
# { "events", required_argument, ... }) is not a counter's.
OPTION_BEFORE = re.compile(r"\bOPT_[A-Z_]+\(\s*$")
OPTION_AFTER = re.compile(r"\s*,\s*(?:required|no|optional)_argument\b")
# A control message's key (wire/control_table.c's CTL_FIELD("events", ...))
# or a name of its enums ([CTL_TOKEN] = "token") is a wire word, not a counter.
CONTROL_BEFORE = re.compile(r"(?:\bCTL_FIELD\w*\(|\[CTL_[A-Z_]+\]\s*=)\s*$")
GROUP_FORMAT = re.compile(r"(?<![A-Za-z0-9_])(?:source|reader|from_reader)\.%")


def names(root: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Counter name -> the lists that hold it; group name -> its macro."""
    text = (root / HEADER).read_text()
    counters: dict[str, list[str]] = {}
    for m in LIST.finditer(text):
        for item in ITEM.findall(m.group(2)):
            counters.setdefault(item, []).append(m.group(1))
    groups = {m.group(2): m.group(1) for m in GROUP.finditer(text)}
    return counters, groups


def literals(text: str):
    """(line, content, before, after) of each string literal, adjacent ones
    joined: the content as written in the source, escapes and all, and a
    little of the text on either side. Comments, character constants and
    #include lines are skipped."""
    i, n, line = 0, len(text), 1
    pending: tuple[int, str, int] | None = None   # a literal that may be continued

    def done(p, end):
        return p[0], p[1], text[max(0, p[2] - 40):p[2]], text[end:end + 40]
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r\f\v":
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == "#" and re.match(r"#\s*include\b", text[i:i + 20]):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            body = text[i + 1:j]
            line += body.count("\n")   # a backslash-newline inside it
            if c == '"':
                pending = (pending[0], pending[1] + body, pending[2]) if pending else (line, body, i)
            elif pending:
                yield done(pending, i)
                pending = None
            i = j + 1
        else:
            if pending:
                yield done(pending, i)
                pending = None
            i += 1
    if pending:
        yield done(pending, n)


def symbol(lists: list[str], name: str) -> str:
    return " or ".join(f"{l.replace('CNT_LIST_', 'CNT_')}({name})" for l in lists)


def check_file(path: Path, rel: Path, counters: dict[str, list[str]],
               groups: dict[str, str]) -> list[str]:
    errors = []
    for line, s, before, after in literals(path.read_text(errors="replace")):
        if OPTION_BEFORE.search(before) or OPTION_AFTER.match(after) or \
                CONTROL_BEFORE.search(before):
            continue
        where = f"{rel}:{line}: \"{s}\""
        if s in counters:
            errors.append(f"{where}: counter name as a string literal; use {symbol(counters[s], s)}")
            continue
        if s in groups:
            errors.append(f"{where}: group name as a string literal; use {groups[s]}")
            continue
        for key in re.findall(r'\\"(\w+)\\"', s):
            if key in counters:
                errors.append(f"{where}: counter name {key} as a key in a literal; "
                              f"pass {symbol(counters[key], key)} to \"%s\"")
        if GROUP_FORMAT.search(s):
            errors.append(f"{where}: a group name built by hand; use cnt_group_peer() "
                          f"or cnt_group_builder_link()")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=Path(__file__).resolve().parent.parent, type=Path)
    root = ap.parse_args().root.resolve()
    if not (root / HEADER).is_file():
        print(f"check_counters: {HEADER} not found under {root}", file=sys.stderr)
        return 1
    counters, groups = names(root)
    if not counters:
        print(f"check_counters: no counter list (CNT_LIST_*) in {HEADER}", file=sys.stderr)
        return 1
    files = sorted(p for t in TREES if (root / t).is_dir()
                   for p in (root / t).rglob("*") if p.suffix in (".c", ".h"))
    errors = []
    for path in files:
        rel = path.relative_to(root)
        if rel not in OWN:
            errors += check_file(path, rel, counters, groups)
    for e in errors:
        print(f"check_counters: {e}", file=sys.stderr)
    if errors:
        print(f"check_counters: {len(errors)} counter name(s) outside {HEADER}", file=sys.stderr)
        return 1
    print(f"check_counters: {len(counters)} counters and {len(groups)} groups named once "
          f"in {HEADER}; {len(files)} files checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
