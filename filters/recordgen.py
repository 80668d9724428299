"""Generate every copy of the wirelens record from its one definition, filters/record.yaml.

As the OpenTelemetry Collector's mdatagen generates a component from its
metadata.yaml, this writes from the record's table:

  filters/core/src/names.rs        whole: keys::*, wire::*, KEYS, WIRE_KEYS, published::* (the
                                   positions of format 2), attribute_name
  collector/config.yaml            transform/wirelens_record: format 2 read by position into the
                                   cache, then one OTTL line per field, for logs and for spans
                                   (Int(...) for int and bool fields, Double(...) for numbers)
  queries/schema/001_requests.sql  the record's columns of wirelens.requests, the view's
                                   lines for them, one ADD COLUMN IF NOT EXISTS per column
  filters/README.md                the table of "The record object"

In the last three only what stands between the marker comments
`BEGIN generated: <part> (...)` and `END generated: <part>` is the generator's;
the rest of each file is hand-written. filters/core/src/record.rs writes the
fields (the conditions are code, not data); a native test there holds its keys
to KEYS.

    python -m filters.recordgen            write every generated part that changed
    python -m filters.recordgen --check    exit 1 naming each out-of-date file and its first differing line
    python -m filters.recordgen --root DIR the same on a copy of the checkout (tests)

Reading the table (load(), short_names()) is for the programs that play the
filter's part too: envoy/wiring.py record_short_names(), bench/ingest.py, tests.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = "filters/record.yaml"
GENERATOR = "filters/recordgen.py"
NAMES_RS = "filters/core/src/names.rs"
COLLECTOR = "collector/config.yaml"
SCHEMA = "queries/schema/001_requests.sql"
DOCS = "filters/README.md"
CONFIG_RS = "filters/core/src/config.rs"  # Fields::GROUPS: the optional_fields groups

TYPES = ("string", "int", "bool", "number")
FIELD_KEYS = {"attribute", "wire", "rust", "type", "group", "grpc_family", "column", "column_type", "view",
              "description"}
REQUIRED = ("attribute", "wire", "rust", "type", "column", "column_type", "description")

# Column layout of 001_requests.sql: names padded to 22, the view's expressions to 58.
COLUMN_WIDTH = 22
VIEW_WIDTH = 58


class RecordError(ValueError):
    """The table is invalid, or a file lacks its markers; the message names the file."""


@dataclass(frozen=True)
class Field:
    attribute: str
    wire: str
    rust: str
    type: str
    column: str
    column_type: str
    description: str
    group: str | None = None
    grpc_family: bool = False
    view: str | None = None

    @property
    def span_int(self) -> bool:
        """The span tag is Int(...): ParseJSON reads every JSON number as a double."""
        return self.type in ("int", "bool")

    @property
    def docs_type(self) -> str:
        return "string" if self.type == "string" else "number"

    @property
    def view_expression(self) -> str:
        return self.view if self.view is not None else default_view(self.attribute, self.column_type)


@dataclass(frozen=True)
class Key:
    """The operation map's key a published record carries instead of the fields it restores."""
    wire: str
    rust: str
    attribute: str


@dataclass(frozen=True)
class Record:
    fields: tuple[Field, ...]
    # the attribute after whose column Envoy's hand-written columns sit, and those columns
    between_after: str
    between_columns: tuple[str, ...]
    # format 2: the short names by position (the key's among them), the fields restored from the map
    key: Key
    positions: tuple[str, ...]
    restored: tuple[str, ...]

    def by_wire(self, wire: str) -> Field | None:
        return next((f for f in self.fields if f.wire == wire), None)

    def published(self) -> list[tuple[int, str, str]]:
        """(position, short name, type) of every published value, the key's type `string`."""
        return [(i, w, "string" if w == self.key.wire else self.by_wire(w).type)
                for i, w in enumerate(self.positions)]

    def runs(self) -> list[tuple[Field, ...]]:
        """The fields in the two runs the SQL's record columns are generated in."""
        i = [f.attribute for f in self.fields].index(self.between_after) + 1
        return [self.fields[:i], self.fields[i:]]


def default_view(attribute: str, column_type: str) -> str:
    attr = f"attr('{attribute}')"
    if re.fullmatch(r"(LowCardinality\()?String\)?( CODEC\(.*\))?", column_type):
        return attr
    if m := re.fullmatch(r"UInt(8|16|32|64)", column_type):
        return f"toUInt{m[1]}OrZero({attr})"
    if m := re.fullmatch(r"Nullable\(UInt(8|16|32|64)\)", column_type):
        return f"toUInt{m[1]}OrNull({attr})"
    if column_type == "Bool":
        return f"{attr} = '1'"
    raise RecordError(f"{TABLE}: {attribute}: no default view expression for column type {column_type!r}; "
                      "give one (view:)")


def _yaml_load(text: str):
    from ruamel.yaml import YAML  # noqa: PLC0415  (requirements.txt)

    return YAML(typ="safe", pure=True).load(text)


def optional_groups(root: Path = ROOT) -> list[str]:
    """The optional_fields groups the filter knows (Fields::GROUPS in config.rs): to check the table against."""
    source = (root / CONFIG_RS).read_text()
    m = re.search(r"pub const GROUPS\b.*?\];", source, re.S)
    groups = re.findall(r'\("(\w+)", Fields::', m[0]) if m else []
    if not groups:
        raise RecordError(f"{CONFIG_RS}: no `pub const GROUPS` listing the optional_fields groups "
                          f"(checked against {TABLE})")
    return groups


def load(root: Path = ROOT) -> Record:
    """The table, checked: unique names, known types and groups, a view for every column."""
    data = _yaml_load((root / TABLE).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("fields"), list) or not data["fields"]:
        raise RecordError(f"{TABLE}: expected a mapping with a non-empty list `fields`")
    groups = optional_groups(root)
    fields = []
    for i, raw in enumerate(data["fields"]):
        where = f"{TABLE}: fields[{i}]"
        if not isinstance(raw, dict):
            raise RecordError(f"{where}: expected a mapping")
        where += f" ({raw.get('attribute', '?')})"
        if unknown := sorted(set(raw) - FIELD_KEYS):
            raise RecordError(f"{where}: unknown keys {unknown} (known: {sorted(FIELD_KEYS)})")
        if missing := [k for k in REQUIRED if raw.get(k) in (None, "")]:
            raise RecordError(f"{where}: missing {missing}")
        field = Field(**{k: (v if k == "grpc_family" or v is None else str(v)) for k, v in raw.items()})
        checks = [
            (re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+", field.attribute), "attribute: dotted lower-case"),
            (re.fullmatch(r"[a-z]{1,4}", field.wire), "wire: 1 to 4 lower-case letters"),
            (re.fullmatch(r"[A-Z][A-Z0-9_]*", field.rust), "rust: an upper-case constant name"),
            (field.type in TYPES, f"type: one of {', '.join(TYPES)}"),
            (field.group is None or field.group in groups,
             f"group: one of {', '.join(groups)} (Fields::GROUPS in {CONFIG_RS})"),
            (isinstance(field.grpc_family, bool), "grpc_family: true or false"),
            (re.fullmatch(r"[a-z][a-z0-9_]*", field.column), "column: a lower-case column name"),
            ("|" not in field.description and "\n" not in field.description,
             "description: one paragraph without '|' (it is a markdown table cell)"),
            (field.view is None or f"attr('{field.attribute}')" in field.view,
             f"view: reads attr('{field.attribute}')"),
        ]
        for ok, rule in checks:
            if not ok:
                raise RecordError(f"{where}: {rule}")
        kind = "string" if "String" in field.column_type else ("Bool" if field.column_type == "Bool" else "number")
        if kind != {"string": "string", "bool": "Bool"}.get(field.type, "number"):
            raise RecordError(f"{where}: a {field.type} field in a {field.column_type} column")
        field.view_expression  # noqa: B018  (raises without one)
        fields.append(field)
    for key in ("attribute", "wire", "rust", "column"):
        seen: dict[str, int] = {}
        for f in fields:
            value = getattr(f, key)
            if value in seen:
                raise RecordError(f"{TABLE}: {key} {value!r} twice (fields[{seen[value]}] and "
                                  f"fields[{fields.index(f)}])")
            seen[value] = fields.index(f)
    between = (data.get("clickhouse") or {}).get("columns_between") or {}
    after, columns = between.get("after"), between.get("columns")
    if after not in [f.attribute for f in fields] or not columns or not all(isinstance(c, str) for c in columns):
        raise RecordError(f"{TABLE}: clickhouse.columns_between: expected `after` (a field's attribute) "
                          "and `columns` (the hand-written columns that follow its column)")
    key, positions, restored = _published(data.get("published"), fields)
    return Record(tuple(fields), after, tuple(columns), key, positions, restored)


def _published(raw, fields: list[Field]) -> tuple[Key, tuple[str, ...], tuple[str, ...]]:
    """`published`: the key, the positions and the restored fields, checked against the fields."""
    where = f"{TABLE}: published"
    if not isinstance(raw, dict) or set(raw) != {"key", "positions", "restored"}:
        raise RecordError(f"{where}: expected a mapping with `key`, `positions` and `restored`")
    k = raw["key"]
    if not isinstance(k, dict) or set(k) != {"wire", "rust", "attribute"} or not all(
            isinstance(v, str) for v in k.values()):
        raise RecordError(f"{where}.key: expected `wire`, `rust` and `attribute`")
    key = Key(k["wire"], k["rust"], k["attribute"])
    wires = {f.wire for f in fields}
    if key.wire in wires or key.rust in {f.rust for f in fields} or key.attribute in {f.attribute for f in fields}:
        raise RecordError(f"{where}.key: its names must differ from every field's")
    positions, restored = raw["positions"], raw["restored"]
    for name, value in (("positions", positions), ("restored", restored)):
        if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
            raise RecordError(f"{where}.{name}: expected a list of short names")
    seen = positions + restored
    for w in seen:
        if w not in wires | {key.wire}:
            raise RecordError(f"{where}: {w!r} is no field's short name (nor the key's)")
        if seen.count(w) > 1:
            raise RecordError(f"{where}: {w!r} twice (each field is published at one position or restored)")
    missing = [f.wire for f in fields if f.wire not in seen]
    if missing or key.wire not in positions:
        raise RecordError(f"{where}: neither published nor restored: {missing or [key.wire]}")
    return key, tuple(positions), tuple(restored)


def decode_published(text: str, root: Path = ROOT) -> dict[str, object]:
    """A published record as the Collector reads it, by short name: format 1 (JSON) or format 2 (values
    by position, `%2C`/`%25` escaped in text, an empty value absent). For tests and tools that read
    records from an access log; the four restored labels stay behind the key (`ok`)."""
    if text.startswith("{"):
        return json.loads(text)
    out: dict[str, object] = {}
    values = text.split(",")
    for i, wire, kind in load(root).published():
        if i >= len(values) or values[i] == "":
            continue
        value = values[i]
        if kind == "string":
            out[wire] = value.replace("%2C", ",").replace("%25", "%")
        else:
            out[wire] = float(value) if kind == "number" else int(value)
    return out


def short_names(root: Path = ROOT) -> dict[str, str]:
    """Attribute name -> the short name the filter publishes it under, in record order."""
    return {f.attribute: f.wire for f in load(root).fields}


# ------------------------------------------------------------------ the generated parts

def names_rs(record: Record) -> str:
    n = len(record.fields)
    out = [
        f"// Generated by {GENERATOR} from {TABLE}; do not edit. A field is added",
        f"// or changed in the table (run `.venv/bin/python {GENERATOR}`).",
        "",
        "//! The record's key names: the attribute names ([`keys`], what the",
        "//! Collector stores and the README defines) and the short names it is",
        "//! published under ([`wire`]), in the fixed order the record writes them.",
        "",
        "/// The keys of the `wirelens.record` JSON object.",
        "pub mod keys {",
        *(f'    pub const {f.rust}: &str = "{f.attribute}";' for f in record.fields),
        "}",
        "",
        "/// The short names the record is published under (`Record::write_json`),",
        "/// one per entry of [`keys`]. Envoy pays for every byte of the record it",
        "/// exports (the access-log line, the span tag): the attribute names were",
        "/// two thirds of it (`docs/performance.md`). The Collector maps them back",
        "/// (collector/config.yaml, `transform/wirelens_record`).",
        "pub mod wire {",
        *(f'    pub const {f.rust}: &str = "{f.wire}";' for f in record.fields),
        "}",
        "",
        "/// Every key the record can hold, in the fixed order they appear in (keys",
        "/// with an unknown value are omitted).",
        f"pub const KEYS: [&str; {n}] = [",
        *(f"    keys::{f.rust}," for f in record.fields),
        "];",
        "",
        "/// [`KEYS`] as published: `WIRE_KEYS[i]` is the short name of `KEYS[i]`.",
        f"pub const WIRE_KEYS: [&str; {n}] = [",
        *(f"    wire::{f.rust}," for f in record.fields),
        "];",
        "",
        "/// The record as the filter publishes it (format 2): the values by",
        "/// position, comma-separated (`Record::write_json`). What is constant per",
        "/// operation and REST rule is not published: the record carries the",
        "/// operation map's key of the call's (operation, rule) instead, and the",
        "/// Collector restores those fields from its copy of the map",
        "/// (collector/opmap.py).",
        "pub mod published {",
        "    use super::{keys, wire};",
        "",
        "    /// The short name of the operation map's key (a position of its own).",
        f'    pub const KEY: &str = "{record.key.wire}";',
        "    /// The attribute the Collector keeps the key under when its map does not know it.",
        f'    pub const KEY_ATTRIBUTE: &str = "{record.key.attribute}";',
        "",
        "    /// The position of each published value.",
        "    pub mod pos {",
        *(f"        pub const {(record.key.rust if w == record.key.wire else record.by_wire(w).rust)}: usize = {i};"
          for i, w, _ in record.published()),
        "    }",
        "",
        "    /// How many positions the record has.",
        f"    pub const LEN: usize = {len(record.positions)};",
        "",
        "    /// Short name and JSON type (`string`, `int`, `bool`, `number`) by position.",
        f"    pub const FIELDS: [(&str, &str); LEN] = [",
        *(f'        ({"KEY" if w == record.key.wire else "wire::" + record.by_wire(w).rust}, "{t}"),'
          for _, w, t in record.published()),
        "    ];",
        "",
        "    /// The attributes not published, restored by the Collector from the operation map.",
        f"    pub const RESTORED: [&str; {len(record.restored)}] = [",
        *(f"        keys::{record.by_wire(w).rust}," for w in record.restored),
        "    ];",
        "}",
        "",
        "/// The attribute name of a published short name (tests and fuzzing: feature test-support).",
        "#[cfg(any(test, feature = \"test-support\"))]",
        "pub fn attribute_name(wire: &str) -> Option<&'static str> {",
        "    WIRE_KEYS.iter().position(|w| *w == wire).map(|i| KEYS[i])",
        "}",
        "",
        "#[cfg(test)]",
        "mod tests {",
        "    use super::*;",
        "",
        "    #[test]",
        "    fn keys_are_unique() {",
        "        for names in [KEYS, WIRE_KEYS] {",
        "            let mut ks = names.to_vec();",
        "            ks.sort_unstable();",
        "            ks.dedup();",
        "            assert_eq!(ks.len(), names.len());",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(out) + "\n"


def _positional(record: Record, ctx: str, target: str) -> list[str]:
    """Format 2 into the cache under the short names (where format 1's ParseJSON puts them), text unescaped."""
    rec = f'{ctx}.{target}["wirelens.record"]'
    values = f'{ctx}.cache["v"]'
    out = [f'- set({values}, Split({rec}, ",")) where {rec} != nil and {rec} != "-" and not HasPrefix({rec}, "{{")']
    for i, wire, _ in record.published():
        out.append(f'- set({ctx}.cache["{wire}"], {values}[{i}]) where {values} != nil and Len({values}) > {i} '
                   f'and {values}[{i}] != ""')
    for _, wire, kind in record.published():
        if kind == "string":
            for code, char in (("%2C", ","), ("%25", "%")):
                out.append(f'- replace_pattern({ctx}.cache["{wire}"], "{code}", "{char}") '
                           f'where {values} != nil and {ctx}.cache["{wire}"] != nil')
    return out


def _cached(record: Record, ctx: str, target: str, value) -> list[str]:
    key = record.key
    return [f'- set({ctx}.{target}["{f.attribute}"], {value(f)}) where {ctx}.cache["{f.wire}"] != nil'
            for f in record.fields] + [
        f'- set({ctx}.{target}["{key.attribute}"], {ctx}.cache["{key.wire}"]) where {ctx}.cache["{key.wire}"] != nil']


def log_statements(record: Record) -> list[str]:
    # The log attributes stay as parsed (ClickHouse casts them): a format-1 number as a double, a
    # format-2 value as its text, which the exporter writes as the same string.
    return _positional(record, "log", "attributes") + _cached(
        record, "log", "attributes", lambda f: f'log.cache["{f.wire}"]')


def span_statements(record: Record) -> list[str]:
    def value(f: Field) -> str:
        cached = f'span.cache["{f.wire}"]'
        return f"Int({cached})" if f.span_int else f"Double({cached})" if f.type == "number" else cached

    return _positional(record, "span", "attributes") + _cached(record, "span", "attributes", value)


def column_lines(fields) -> list[str]:
    return [f"{f.column:<{COLUMN_WIDTH}} {f.column_type}," for f in fields]


def view_lines(fields) -> list[str]:
    return [f"{f.view_expression:<{VIEW_WIDTH}} AS {f.column}," for f in fields]


def docs_table(record: Record) -> list[str]:
    rows = ["| key | type | group | definition | position | short name |", "|---|---|---|---|---|---|"]
    for f in record.fields:
        group = ", ".join([f"`{f.group}`"] * bool(f.group) + ["gRPC family"] * f.grpc_family)
        at = str(record.positions.index(f.wire)) if f.wire in record.positions else "restored"
        rows.append(f"| `{f.attribute}` | {f.docs_type} |{f' {group} ' if group else ' '}| {f.description} "
                    f"| {at} | `{f.wire}` |")
    return rows


# ------------------------------------------------------------------ markers

def _markers(comment: tuple[str, str], part: str) -> tuple[str, str]:
    lead, tail = comment
    return (f"{lead} BEGIN generated: {part} ({GENERATOR} from {TABLE}; do not edit){tail}",
            f"{lead} END generated: {part}{tail}")


def _block(lines: list[str], path: str, comment: tuple[str, str], part: str) -> tuple[int, int, str]:
    """(index of the BEGIN line, index of the END line, the BEGIN line's indentation)."""
    begin, end = _markers(comment, part)
    found = [i for i, line in enumerate(lines) if line.strip() == begin]
    if len(found) != 1:
        raise RecordError(f"{path}: expected one line `{begin}`, found {len(found)} "
                          f"(the generated part {part!r} goes between it and `{end}`)")
    start = found[0]
    stop = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == end), None)
    if stop is None:
        raise RecordError(f"{path}:{start + 1}: no `{end}` after `{begin}`")
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    return start, stop, indent


def replace_parts(text: str, path: str, comment: tuple[str, str], parts: dict[str, list[str]]) -> str:
    lines = text.split("\n")
    for part, generated in parts.items():
        start, stop, indent = _block(lines, path, comment, part)
        lines[start + 1:stop] = [indent + line if line else line for line in generated]
    return "\n".join(lines)


SQL = ("--", "")
YAML = ("#", "")
MARKDOWN = ("<!--", " -->")


def collector_config(text: str, record: Record) -> str:
    return replace_parts(text, COLLECTOR, YAML, {
        "log statements": log_statements(record),
        "span statements": span_statements(record),
    })


def _column_before(lines: list[str], start: int) -> str:
    """The column defined on the nearest line above `start` (comments skipped)."""
    for line in reversed(lines[:start]):
        if line.strip() and not line.strip().startswith("--"):
            m = re.match(r"\s+(\w+)\s+\S", line)
            if m:
                return m[1]
            break
    raise RecordError(f"{SCHEMA}: no column above the record's columns (line {start + 1})")


def schema(text: str, record: Record) -> str:
    runs = record.runs()
    n = len(runs)
    column_parts = [f"record columns ({i + 1} of {n})" for i in range(n)]
    view_parts = [f"the view's record columns ({i + 1} of {n})" for i in range(n)]
    lines = text.split("\n")
    # Envoy's columns between the runs are the table's `columns_between`, in the table and in the view.
    for parts, pattern in ((column_parts, r"^\s+(\w+)\s+\S.*,$"), (view_parts, r"\bAS (\w+),$")):
        _, stop, _ = _block(lines, SCHEMA, SQL, parts[0])
        start, _, _ = _block(lines, SCHEMA, SQL, parts[1])
        between = [m[1] for line in lines[stop + 1:start] if not line.strip().startswith("--")
                   for m in [re.search(pattern, line)] if m]
        if tuple(between) != record.between_columns:
            raise RecordError(
                f"{SCHEMA}:{stop + 2}: between `{parts[0]}` and `{parts[1]}` stand the columns {between}; "
                f"{TABLE} (clickhouse.columns_between) says {list(record.between_columns)}")
    # ADD COLUMN ... AFTER the column before it in CREATE TABLE: an existing table gets a new
    # column where a new table has it.
    adds = []
    for part, run in zip(column_parts, runs):
        previous = _column_before(lines, _block(lines, SCHEMA, SQL, part)[0])
        for f in run:
            adds.append(f"ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS {f.column} {f.column_type} "
                        f"AFTER {previous};")
            previous = f.column
    return replace_parts(text, SCHEMA, SQL, {
        **{part: column_lines(run) for part, run in zip(column_parts, runs)},
        **{part: view_lines(run) for part, run in zip(view_parts, runs)},
        "the record's columns on an existing table": adds,
    })


def docs(text: str, record: Record) -> str:
    return replace_parts(text, DOCS, MARKDOWN, {"the record's keys": docs_table(record)})


def generated(root: Path = ROOT) -> dict[str, str]:
    """Every generated file as it should read: path (relative to root) -> text."""
    record = load(root)
    return {
        NAMES_RS: names_rs(record),
        COLLECTOR: collector_config((root / COLLECTOR).read_text(), record),
        SCHEMA: schema((root / SCHEMA).read_text(), record),
        DOCS: docs((root / DOCS).read_text(), record),
    }


def first_difference(have: str, want: str) -> tuple[int, str, str]:
    """(1-based line, the file's line, the generated line) where the two first differ."""
    a, b = have.split("\n"), want.split("\n")
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<end of file>"
        y = b[i] if i < len(b) else "<end of file>"
        if x != y:
            return i + 1, x, y
    return 0, "", ""


def check(root: Path = ROOT) -> list[str]:
    """One message per out-of-date file, naming it and its first differing line; [] when all are current."""
    problems = []
    for path, want in generated(root).items():
        have = (root / path).read_text() if (root / path).exists() else ""
        if have != want:
            line, x, y = first_difference(have, want)
            problems.append(f"{path}:{line}: differs from what {GENERATOR} generates from {TABLE}\n"
                            f"    file:      {x}\n    generated: {y}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Generate the record's names, Collector statements, "
                                                 f"ClickHouse columns and docs table from {TABLE}.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each out-of-date file and its first differing line")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = check(args.root)
            for p in problems:
                print(p, file=sys.stderr)
            if problems:
                print(f"The record's generated parts are out of date: edit {TABLE}, not them, "
                      f"then run `.venv/bin/python {GENERATOR}`.", file=sys.stderr)
                return 1
            return 0
        for path, text in generated(args.root).items():
            if (args.root / path).read_text() != text:
                (args.root / path).write_text(text)
                print(f"wrote {path}")
    except (RecordError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
