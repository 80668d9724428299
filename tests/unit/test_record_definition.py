"""The record's one definition (filters/record.yaml) and what filters/recordgen.py generates from it:
the tree is current, a hand edit of any generated part is caught and named, and a field added to the
table reaches the filter's names, the Collector, ClickHouse and the docs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from filters import recordgen
from envoy import wiring

ROOT = Path(__file__).resolve().parents[2]

# What the generator reads (the table, Fields::GROUPS) and writes.
FILES = [recordgen.TABLE, recordgen.CONFIG_RS, recordgen.NAMES_RS, recordgen.COLLECTOR, recordgen.SCHEMA,
         recordgen.DOCS]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / recordgen.GENERATOR), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the generator's inputs and outputs, to edit."""
    for path in FILES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, tmp_path / path)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_the_checkout_is_generated_from_the_table():
    result = run("--check")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("path, old, new", [
    # a short name in the filter's names
    (recordgen.NAMES_RS, 'pub const REQ_MESSAGE_BYTES: &str = "qmb";', 'pub const REQ_MESSAGE_BYTES: &str = "qmB";'),
    # a column's type
    (recordgen.SCHEMA, "    request_message_bytes  UInt64,", "    request_message_bytes  UInt32,"),
    # a view line
    (recordgen.SCHEMA, "toUInt32OrZero(attr('wirelens.request.messages'))  ",
     "toUInt64OrZero(attr('wirelens.request.messages'))  "),
    # the Collector's expansion: a span tag no longer Int
    (recordgen.COLLECTOR, ', Int(span.cache["qmb"]))', ', span.cache["qmb"])'),
    # the Collector's format-2 reading: a value read from the wrong position
    (recordgen.COLLECTOR, 'set(log.cache["qh"], log.cache["v"][3])', 'set(log.cache["qh"], log.cache["v"][4])'),
    # a line removed from the docs table
    (recordgen.DOCS, "| `wirelens.request.message.min` |", "| `wirelens.request.message.minimum` |"),
])
def test_a_hand_edit_of_a_generated_part_fails_the_check_naming_the_file_and_line(tree, path, old, new):
    edit(tree / path, old, new)
    line = next(i for i, text in enumerate((tree / path).read_text().split("\n"), 1) if new in text)
    result = run("--check", "--root", str(tree))
    assert result.returncode == 1, result.stderr
    assert f"{path}:{line}: differs from what {recordgen.GENERATOR} generates from {recordgen.TABLE}" \
        in result.stderr, result.stderr
    assert new.strip() in result.stderr  # the file's line, and the generated one
    assert old.strip().split("  ")[0] in result.stderr
    # only that file
    assert [p for p in recordgen.generated(tree) if p in result.stderr] == [path]
    # running the generator puts it back
    assert run("--root", str(tree)).returncode == 0
    assert (tree / path).read_text() == (ROOT / path).read_text()
    assert run("--check", "--root", str(tree)).returncode == 0


def test_a_missing_marker_is_named():
    text = (ROOT / recordgen.COLLECTOR).read_text().replace("# END generated: span statements", "# the end")
    with pytest.raises(recordgen.RecordError, match="collector/config.yaml:.*no `# END generated: span statements`"):
        recordgen.collector_config(text, recordgen.load())


def test_a_field_added_to_the_table_reaches_every_copy(tree):
    table = tree / recordgen.TABLE
    table.write_text(table.read_text() + """\
  - attribute: wirelens.test.size
    wire: zz
    rust: TEST_SIZE
    type: int
    group: framing
    column: test_size
    column_type: Nullable(UInt32)
    description: >-
      a field of this test.
""")
    # published at a new last position (positions are append-only)
    edit(table, "cqj, csj, crt]", "cqj, csj, crt, zz]")
    assert run("--check", "--root", str(tree)).returncode == 1
    assert run("--root", str(tree)).returncode == 0
    names = (tree / recordgen.NAMES_RS).read_text()
    assert 'pub const TEST_SIZE: &str = "wirelens.test.size";' in names
    assert 'pub const TEST_SIZE: &str = "zz";' in names
    n = len(recordgen.load(tree).fields)
    assert f"pub const KEYS: [&str; {n}] = [" in names and f"pub const WIRE_KEYS: [&str; {n}] = [" in names
    config = (tree / recordgen.COLLECTOR).read_text()
    assert 'set(log.attributes["wirelens.test.size"], log.cache["zz"]) where log.cache["zz"] != nil' in config
    assert 'set(span.attributes["wirelens.test.size"], Int(span.cache["zz"])) where span.cache["zz"] != nil' in config
    at = len(recordgen.load(tree).positions) - 1
    assert (f'set(span.cache["zz"], span.cache["v"][{at}]) where span.cache["v"] != nil and Len(span.cache["v"]) > {at}'
            in config)
    assert f"pub const TEST_SIZE: usize = {at};" in names
    sql = (tree / recordgen.SCHEMA).read_text()
    last = recordgen.load(tree).fields[-2].column
    assert "    test_size              Nullable(UInt32),\n" in sql
    assert f"ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS test_size Nullable(UInt32) AFTER {last};" in sql
    assert "toUInt32OrNull(attr('wirelens.test.size'))" in sql
    assert f"| `wirelens.test.size` | number | `framing` | a field of this test. | {at} | `zz` |" \
        in (tree / recordgen.DOCS).read_text()
    assert run("--check", "--root", str(tree)).returncode == 0


@pytest.mark.parametrize("old, new, error", [
    ("wire: qmb\n", "wire: qm\n", "wire 'qm' twice"),
    ("group: request_duration\n", "group: request_durations\n", "group: one of message_sizes, framing"),
    ("column_type: UInt64\n    description: >-\n      Σ of the payload lengths",
     "column_type: String\n    description: >-\n      Σ of the payload lengths", "a int field in a String column"),
    ("type: bool\n", "type: boolean\n", "type: one of string, int, bool, number"),
    # every field is published at one position or restored from the operation map
    ("cqj, csj, crt]", "cqj, csj]", "neither published nor restored: ['crt']"),
    ("restored: [sv, md, sg, rt]", "restored: [sv, md, sg, rt, qh]", "'qh' twice"),
    ("positions: [pr, op, ok,", "positions: [pr, op, ok, xx,", "'xx' is no field's short name"),
])
def test_the_table_is_checked(tree, old, new, error):
    edit(tree / recordgen.TABLE, old, new)
    with pytest.raises(recordgen.RecordError, match=re.escape(error)):
        recordgen.load(tree)
    result = run("--check", "--root", str(tree))
    assert result.returncode == 2 and error in result.stderr, result.stderr


def test_envoy_columns_between_the_generated_runs_are_the_tables(tree):
    edit(tree / recordgen.SCHEMA, "    http_version           LowCardinality(String),\n", "")
    with pytest.raises(recordgen.RecordError, match=r"between `record columns \(1 of 2\)` and `record columns "
                                                    r"\(2 of 2\)` stand the columns \['http_method', 'http_status'\]"):
        recordgen.generated(tree)


def test_the_short_names_come_from_the_table_and_match_the_filters_source():
    short = wiring.record_short_names()
    names = (ROOT / recordgen.NAMES_RS).read_text()
    keys = re.findall(r'pub const (\w+): &str = "([^"]+)";', names.split("pub mod wire")[0])
    wire = dict(re.findall(r'pub const (\w+): &str = "([^"]+)";', names.split("pub mod wire")[1]))
    assert list(short.items()) == [(attribute, wire[const]) for const, attribute in keys]
