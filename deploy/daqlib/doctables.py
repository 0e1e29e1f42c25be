"""The launcher's tables in docs/ made from its declarations: the command
line (cli.OPTIONS), every topology table (schema, and each backend's
options and host keys). A table sits between

    <!-- table NAME: made by `make launcher-docs` from deploy/daqlib; do not edit -->
    <!-- end table -->

`make launcher-docs` (python3 -m daqlib.doctables --write) rewrites them;
tests/e2e/test_launcher.py fails when a document differs from them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .backends import BACKENDS, host_keys
from .cli import OPTIONS, Option
from .schema import ARRAYS, BUILDER_ARRAY_KEYS, CORE_TABLES, HOST_KEYS, Key, bound

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
FILES = ("TOPOLOGY.md", "DEPLOY.md")
BLOCK_RE = re.compile(r"(<!-- table (\S+): [^\n]*-->\n)(.*?)(<!-- end table -->)", re.S)
BEGIN = "<!-- table {name}: made by `make launcher-docs` from deploy/daqlib; do not edit -->\n"


def words(names: list[str], last: str) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} {last} {quoted[-1]}"


def fill(text: str) -> str:
    """The placeholders a declaration's text may use."""
    return (text.replace("{backends}", words(list(BACKENDS), "or"))
            .replace("{backends_with_hosts}",
                     words([n for n, c in BACKENDS.items() if c.needs_hosts], "and")))


def cell(text: str) -> str:
    """Markdown for a table cell: | escaped, and < > outside `code`."""
    parts = text.replace("|", "\\|").replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def kind_of(k: Key) -> str:
    span = f" {k.lo} … {bound(k.hi) if k.kind != 'number' else k.hi}"
    return {"int": "integer" + span, "number": "number" + span, "bool": "boolean",
            "str": "string", "strlist": "list of strings",
            "intlist": "list of integers" + span}[k.kind]


def default_of(k: Key) -> str:
    if k.shown is not None:
        return k.shown
    if k.default is None:
        return "daemon default"
    if isinstance(k.default, bool):
        return f"`{str(k.default).lower()}`"
    if isinstance(k.default, str):
        return f'`"{k.default}"`'
    return f"`{k.default}`"


def rows(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in body]
    return "\n".join(lines) + "\n"


def key_table(keys: dict[str, Key]) -> str:
    return rows(["key", "type", "default", "meaning"],
                [[f"`{n}`", kind_of(k), default_of(k), fill(k.doc)] for n, k in keys.items()])


def hosts_table() -> str:
    owner = {key: name for name, cls in BACKENDS.items() for key in cls.host_keys}
    return rows(["key", "backend", "type", "default", "meaning"],
                [[f"`{n}`", k.used_by or owner.get(n, "all"), kind_of(k), default_of(k),
                  fill(k.doc)] for n, k in host_keys().items()])


def backends_tables() -> str:
    """One section per backend with a table of its own."""
    parts = []
    for name, cls in BACKENDS.items():
        if cls.options:
            parts.append(f"### `[{name}]` (optional): {cls.options_title}\n\n"
                         + key_table(cls.options))
    return "\n".join(parts)


def option_name(o: Option) -> str:
    if not o.flag.startswith("-"):
        return f"`{o.metavar}`"
    if o.kind == "choice":
        return f"`{o.flag} {'|'.join(o.choices)}`"
    if o.kind == "pids":
        return f"`{o.flag} [{o.metavar} ...]`"
    return f"`{o.flag} {o.metavar}`" if o.metavar else f"`{o.flag}`"


def cli_table() -> str:
    return rows(["option", "default", "meaning"],
                [[option_name(o), f"`{o.default}`" if o.default else "", o.help_text()]
                 for o in OPTIONS])


def tables() -> dict[str, str]:
    """{block name: its text}."""
    out = {"cli": cli_table()}
    out.update({name: key_table(keys) for name, keys in {**CORE_TABLES, **ARRAYS}.items()})
    out["builders"] = key_table(BUILDER_ARRAY_KEYS)
    out["hosts"] = hosts_table()
    out["backends"] = backends_tables()
    assert set(HOST_KEYS) <= set(host_keys())
    return out


def render(text: str, made: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        name = m.group(2)
        if name not in made:
            raise KeyError(f"no declarations for a table {name!r}")
        return BEGIN.format(name=name) + made[name] + m.group(4)
    return BLOCK_RE.sub(one, text)


def differences() -> list[str]:
    """What differs between docs/ and the declarations (empty: nothing)."""
    made, found, problems = tables(), [], []
    for f in FILES:
        text = (DOCS / f).read_text(encoding="utf-8")
        found += [m.group(2) for m in BLOCK_RE.finditer(text)]
        if render(text, made) != text:
            problems.append(f"docs/{f}: a table differs from deploy/daqlib's declarations "
                            f"(make launcher-docs rewrites it)")
    for name in made:
        if found.count(name) != 1:
            problems.append(f"docs: table {name!r} appears {found.count(name)} times in "
                            f"{', '.join(FILES)} (once expected)")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        made = tables()
        for f in FILES:
            path = DOCS / f
            text = path.read_text(encoding="utf-8")
            path.write_text(render(text, made), encoding="utf-8")
    problems = differences()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
