#!/usr/bin/env python3
"""Turn the conformance vectors (JSON) into a C header the unit tests include.

Usage: gen_vectors.py VECTORS_JSON OUTPUT_H

Every top-level section except "about" becomes C data. C types follow the
JSON values, so a new field or section in the vectors needs no change here:

    JSON value                          C field(s)
    integer (0 .. 2^64-1)               uint64_t NAME                    (ULL literal)
    true / false                        bool NAME
    string in a field "hex" / "X_hex"   const uint8_t *NAME; size_t NAME_len
                                        (NAME is "bytes" for "hex", X for "X_hex")
    other string                        const char *NAME
    list of integers                    const uint64_t *NAME; size_t n_NAME
    list of integer lists of length k   const uint64_t (*NAME)[k]; size_t n_NAME
    list of objects                     const struct vec_SECTION_NAME *NAME; size_t n_NAME

A section that is a list of objects becomes
    struct vec_SECTION { ... };
    static const struct vec_SECTION vec_SECTION[] = { ... };
    #define VEC_SECTION_COUNT n
and a section that is one object becomes
    static const struct vec_SECTION vec_SECTION = { ... };

Byte strings and lists live in their own arrays, named after the section,
the entry index and the field (vec_payload_3_bytes). An empty one is still
a one-element array with length 0, so tests may hand it to memcmp().
"""

import json
import os
import re
import sys

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern
    float for goto if inline int long register restrict return short signed
    sizeof static struct switch typedef union unsigned void volatile while
    bool true false
""".split())

U64_MAX = (1 << 64) - 1


class VectorError(Exception):
    pass


def c_ident(name):
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit() or ident in C_KEYWORDS:
        ident = "v_" + ident
    return ident


def is_hex_field(name):
    return name == "hex" or name.endswith("_hex")


def field_c_name(name):
    if name == "hex":
        return "bytes"
    if name.endswith("_hex"):
        return c_ident(name[: -len("_hex")])
    return c_ident(name)


def is_int(v):
    # bool is an int subclass in Python; keep them apart.
    return isinstance(v, int) and not isinstance(v, bool)


class Shape:
    """The C type of one field, inferred from its values in every entry."""

    def __init__(self, kind, width=None, record=None):
        self.kind = kind      # u64 bool str bytes u64list tuples records
        self.width = width    # tuple length, for "tuples"
        self.record = record  # Record, for "records"


class Record:
    """A C struct for a set of JSON objects sharing their fields."""

    def __init__(self, tag, objects, where):
        self.tag = tag
        self.fields = []  # (json name, C name, Shape)
        names = []
        for obj in objects:
            if not isinstance(obj, dict):
                raise VectorError(f"{where}: expected objects, got {type(obj).__name__}")
            for key in obj:
                if key not in names:
                    names.append(key)
        taken = {}
        for key in names:
            values = [obj[key] for obj in objects if key in obj]
            if len(values) != len(objects):
                raise VectorError(f"{where}: field {key!r} is missing from some entries")
            cname = field_c_name(key)
            shape = infer_shape(f"{tag}_{cname}", key, values, f"{where}.{key}")
            self.fields.append((key, cname, shape))
            for member in member_names(cname, shape):
                if member in taken:
                    raise VectorError(f"{where}: C member {member!r} of {key!r} "
                                      f"clashes with {taken[member]!r}")
                taken[member] = key

    def nested(self):
        """Records this one refers to, innermost first."""
        out = []
        for _, _, shape in self.fields:
            if shape.kind == "records":
                out += shape.record.nested() + [shape.record]
        return out


def member_names(cname, shape):
    if shape.kind == "bytes":
        return [cname, cname + "_len"]
    if shape.kind in ("u64list", "tuples", "records"):
        return [cname, "n_" + cname]
    return [cname]


def infer_shape(tag, key, values, where):
    if all(isinstance(v, bool) for v in values):
        return Shape("bool")
    if all(is_int(v) for v in values):
        for v in values:
            if not 0 <= v <= U64_MAX:
                raise VectorError(f"{where}: {v} does not fit uint64_t")
        return Shape("u64")
    if all(isinstance(v, str) for v in values):
        if is_hex_field(key):
            for v in values:
                if len(v) % 2 or re.fullmatch(r"[0-9a-fA-F]*", v) is None:
                    raise VectorError(f"{where}: {v!r} is not a hex byte string")
            return Shape("bytes")
        return Shape("str")
    if all(isinstance(v, list) for v in values):
        items = [item for v in values for item in v]
        if not items:
            raise VectorError(f"{where}: only empty lists, element type unknown")
        if all(is_int(i) for i in items):
            infer_shape(tag, key, items, where)  # range check
            return Shape("u64list")
        if all(isinstance(i, list) and all(is_int(x) for x in i) for i in items):
            widths = {len(i) for i in items}
            if len(widths) != 1 or 0 in widths:
                raise VectorError(f"{where}: inner lists differ in length: {sorted(widths)}")
            infer_shape(tag, key, [x for i in items for x in i], where)
            return Shape("tuples", width=widths.pop())
        if all(isinstance(i, dict) for i in items):
            return Shape("records", record=Record(tag, items, where))
    raise VectorError(f"{where}: unsupported or mixed value types")


def c_string(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode())
    return '"' + "".join(out) + '"'


def wrap(items, per_line, indent="\t"):
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n".join(indent + line for line in lines)


def emit_array(ctype, name, items, per_line, arrays, inner_dims=""):
    """Appends a static array definition; returns its name and length."""
    if items:
        arrays.append(f"static const {ctype} {name}[]{inner_dims} = {{\n"
                      f"{wrap(items, per_line)}\n}};\n")
    else:
        arrays.append(f"static const {ctype} {name}[1]{inner_dims}; /* empty */\n")
    return name, len(items)


def initializer(record, obj, prefix, arrays, indent):
    """C initializer of one entry; its byte strings and lists go to arrays."""
    inner = indent + "\t"
    members = []
    for key, cname, shape in record.fields:
        value = obj[key]
        aux = f"{prefix}_{cname}"
        if shape.kind == "u64":
            members.append((cname, f"{value}ULL"))
        elif shape.kind == "bool":
            members.append((cname, "true" if value else "false"))
        elif shape.kind == "str":
            members.append((cname, c_string(value)))
        elif shape.kind == "bytes":
            items = [f"0x{b:02x}" for b in bytes.fromhex(value)]
            name, n = emit_array("uint8_t", aux, items, 12, arrays)
            members += [(cname, name), (cname + "_len", str(n))]
        elif shape.kind == "u64list":
            items = [f"{v}ULL" for v in value]
            name, n = emit_array("uint64_t", aux, items, 4, arrays)
            members += [(cname, name), ("n_" + cname, str(n))]
        elif shape.kind == "tuples":
            items = ["{ " + ", ".join(f"{x}ULL" for x in t) + " }" for t in value]
            name, n = emit_array("uint64_t", aux, items, 4, arrays, f"[{shape.width}]")
            members += [(cname, name), ("n_" + cname, str(n))]
        elif shape.kind == "records":
            sub = shape.record
            items = [initializer(sub, o, f"{aux}_{i}", arrays, "\t") for i, o in enumerate(value)]
            name, n = emit_array(f"struct {sub.tag}", aux, items, 1, arrays)
            members += [(cname, name), ("n_" + cname, str(n))]
    one_line = "{ " + ", ".join(f".{m} = {v}" for m, v in members) + " }"
    if len(indent) + len(one_line) <= 90:
        return one_line
    body = ",\n".join(f"{inner}.{m} = {v}" for m, v in members)
    return f"{{\n{body},\n{indent}}}"


def struct_definition(record):
    lines = [f"struct {record.tag} {{"]
    for _, cname, shape in record.fields:
        if shape.kind == "u64":
            lines.append(f"\tuint64_t {cname};")
        elif shape.kind == "bool":
            lines.append(f"\tbool {cname};")
        elif shape.kind == "str":
            lines.append(f"\tconst char *{cname};")
        elif shape.kind == "bytes":
            lines += [f"\tconst uint8_t *{cname};", f"\tsize_t {cname}_len;"]
        elif shape.kind == "u64list":
            lines += [f"\tconst uint64_t *{cname};", f"\tsize_t n_{cname};"]
        elif shape.kind == "tuples":
            lines += [f"\tconst uint64_t (*{cname})[{shape.width}];", f"\tsize_t n_{cname};"]
        elif shape.kind == "records":
            lines += [f"\tconst struct {shape.record.tag} *{cname};", f"\tsize_t n_{cname};"]
    lines.append("};\n")
    return "\n".join(lines)


def section_code(section, data):
    tag = "vec_" + c_ident(section)
    entries = data if isinstance(data, list) else [data]
    if not entries:
        raise VectorError(f"{section}: empty section")
    record = Record(tag, entries, section)
    out = [f"/* {section} */\n"]
    out += [struct_definition(r) for r in record.nested() + [record]]
    arrays = []
    if isinstance(data, list):
        items = [initializer(record, e, f"{tag}_{i}", arrays, "\t") for i, e in enumerate(data)]
        main = (f"static const struct {tag} {tag}[] = {{\n\t" + ",\n\t".join(items) + "\n};\n"
                f"#define {tag.upper()}_COUNT {len(data)}\n")
    else:
        main = f"static const struct {tag} {tag} = {initializer(record, data, tag, arrays, '')};\n"
    return "\n".join(out + arrays + [main])


def generate(vectors, source_name):
    if not isinstance(vectors, dict):
        raise VectorError("top level: expected an object of sections")
    about = str(vectors.get("about", "")).replace("*/", "* /")
    parts = [
        f"/* Generated from {source_name} by tests/gen_vectors.py; do not edit.\n"
        f" * {about} */\n"
        "#ifndef ES_VECTORS_H\n#define ES_VECTORS_H\n\n"
        "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n"
    ]
    for section, data in vectors.items():
        if section == "about":
            continue
        parts.append(section_code(section, data))
    parts.append("#endif\n")
    return "\n".join(parts)


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} VECTORS_JSON OUTPUT_H", file=sys.stderr)
        return 2
    src, dst = argv[1], argv[2]
    try:
        with open(src, encoding="utf-8") as f:
            vectors = json.load(f)
        text = generate(vectors, os.path.basename(src))
    except (OSError, ValueError, VectorError) as e:
        print(f"{argv[0]}: {src}: {e}", file=sys.stderr)
        return 1
    # Write then rename, so an interrupted run never leaves a half header
    # that make would take as up to date.
    tmp = dst + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
