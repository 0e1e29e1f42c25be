#!/usr/bin/env python3
"""Writes a daemon's man page from its --help, so the two never disagree.

Usage: scripts/mkman.py BINARY OUT.1
       scripts/mkman.py --check BINARY PAGE.1
--check writes nothing: it exits 1, naming the first line that differs,
when PAGE.1 is not what BINARY's --help gives (the date aside).
The first line of --help is the synopsis, the paragraph after it the
description, "Group:" lines become subsections, "  --flag ARG  text" lines
become tagged paragraphs, and "Example:" the EXAMPLES section.
"""

import datetime
import re
import subprocess
import sys
from pathlib import Path


def esc(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


TH_DATE = re.compile(r'^(\.TH \S+ 1 )"[^"]*"')


def render(binary: Path) -> str:
    name = binary.name
    lines = subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    synopsis = [re.sub(r"^Usage:\s*", "", lines[0]).strip()]
    i = 1
    while i < len(lines) and lines[i].startswith(" "):
        synopsis.append(lines[i].strip())
        i += 1
    desc = []
    while i < len(lines) and lines[i].strip():
        desc.append(lines[i].strip())
        i += 1
    rest = lines[i:]
    title = re.split(r"[:.]", desc[0])[0] if desc else name
    page = [f'.TH {name.upper()} 1 "{datetime.date.today():%B %Y}" "{esc(version)}" "Event builder"',
            ".SH NAME", f"{name} \\- {esc(title[0].lower() + title[1:])}",
            ".SH SYNOPSIS", ".nf", *[esc(s) for s in synopsis], ".fi",
            ".SH DESCRIPTION", esc(" ".join(desc)), ".SH OPTIONS"]
    example = []
    in_example = False
    for line in rest:
        if not line.strip():
            continue
        if line.startswith("Example"):
            in_example = True
            continue
        if in_example:
            example.append(line.strip())
            continue
        m = re.match(r"^(\S.*):$", line)
        if m:
            page += [f".SS {esc(m.group(1))}"]
            continue
        m = re.match(r"^\s{2}(-\S+(?:, --\S+)?(?: [A-Z][A-Z_:/.]*(?:\|[A-Za-z_:/.]+)*)?)\s{2,}(.*)$", line)
        if m:
            page += [".TP", f"\\fB{esc(m.group(1))}\\fR", esc(m.group(2))]
        elif re.match(r"^\s{2}-", line):
            page += [".TP", f"\\fB{esc(line.strip())}\\fR"]
        else:
            page.append(esc(line.strip()))
    if example:
        page += [".SH EXAMPLES", ".nf", *[esc(e.rstrip("\\").rstrip()) for e in example], ".fi"]
    page += [".SH SEE ALSO", "sourced(1), readoutd(1), builderd(1); README.md and docs/ of the project"]
    return "\n".join(page) + "\n"


def check(binary: Path, page: Path) -> int:
    """0 when page is what binary's --help gives, but for the month it was made."""
    committed = page.read_text().splitlines()
    made = render(binary).splitlines()
    if committed and made:
        date = TH_DATE.match(committed[0])
        if date:
            made[0] = TH_DATE.sub(lambda m: date.group(0), made[0])
    for i, (want, got) in enumerate(zip(made, committed), 1):
        if want != got:
            print(f"{page}:{i}: is {got!r}, {binary.name} --help gives {want!r}; run make man",
                  file=sys.stderr)
            return 1
    if len(made) != len(committed):
        print(f"{page}: {len(committed)} lines, {binary.name} --help gives {len(made)}; "
              "run make man", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if sys.argv[1] == "--check":
        return check(Path(sys.argv[2]), Path(sys.argv[3]))
    Path(sys.argv[2]).write_text(render(Path(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
