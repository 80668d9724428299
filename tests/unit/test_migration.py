"""queries/migrate.py on a real ClickHouse: an install made by the schema of commit 46b5a99 (saved in
tests/unit/fixtures/schema_46b5a99/, not read from git) becomes the current one through the schema step.

A scratch ClickHouse (deploy/local/clickhouse_server.py, the chdb-core engine) gets the old schema and
known rows: every insertable column set to a value of its own, UUID and non-UUID request ids, re-sent
duplicates, sampled calls, two days. Then deploy/local/stack.apply_schema (what `make up` runs) must
move them: the same calls under FINAL with every column's value, nothing lost, nothing doubled,
inserted_at stored and recent, the current key and codecs; a second run does nothing; the rollups are
the refreshed ones and agree with the raw calls (the old insert-fed ones over-counted the re-sends).
"""

from __future__ import annotations

import datetime as dt
import string
import time
from pathlib import Path

import pytest

from bench.query_speed import OTEL_LOGS_STANDIN  # the Collector's otel.otel_logs, the columns the view reads
from deploy.local import clickhouse_server, stack
from queries import migrate, rollup
from queries.schema.ddl import split_sql

OLD_SCHEMA = Path(__file__).resolve().parent / "fixtures" / "schema_46b5a99"
DAY2 = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)).replace(minute=0, second=0, microsecond=0,
                                                                          tzinfo=None)
DAY1 = DAY2 - dt.timedelta(days=1)  # another partition
UUIDS = ["0b6f3f7e-4c53-4d0a-9a86-2f1c5e0e7a11", "5d41402a-bc4b-4a76-b971-9d911017c592"]


class Scratch(clickhouse_server.Scratch):
    def __init__(self) -> None:
        super().__init__("wirelens-test-migration-")
        self.settings["WIRELENS_REQUESTS_TTL_DAYS"] = "30"

    def sql(self, statement: str) -> str:
        return stack.clickhouse_query(self.settings, statement, timeout=120)

    def rows(self, statement: str) -> list[list[str]]:
        return [line.split("\t") for line in self.sql(statement + "\nFORMAT TabSeparated").splitlines()]


def old_schema(server: Scratch) -> None:
    server.sql("CREATE DATABASE IF NOT EXISTS otel")
    server.sql(OTEL_LOGS_STANDIN)
    for path in sorted(OLD_SCHEMA.glob("*.sql")):
        for statement in split_sql(string.Template(path.read_text()).substitute(WIRELENS_REQUESTS_TTL_DAYS="30")):
            server.sql(statement)


def value(column: str, type_: str, i: int) -> str:
    """A value of the column's type that differs per row and per column (NULL for every 5th nullable)."""
    base = type_.removeprefix("LowCardinality(").removeprefix("Nullable(").rstrip(")")
    if type_.startswith("Nullable(") and i % 5 == 4:
        return "NULL"
    h = sum(ord(c) for c in column)
    if base.startswith("UInt") or base.startswith("Int"):
        return str((h * 7 + i * 13) % 250)
    if base.startswith("Float"):
        return ["1", "0.1", "0.5"][i % 3] if column.endswith("rate") else str(i / 4)
    if base == "Bool":
        return "true" if i % 2 else "false"
    if base == "String":
        return f"'{column}-{i}'"
    raise AssertionError(f"no test value for {column} {type_}")


def calls() -> list[dict[str, str]]:
    """(timestamp, request_id) and the batch of each call; the other columns come from value()."""
    out = []
    for day in (DAY1, DAY2):
        for i in range(40):
            rid = UUIDS[i % 2] if i < 2 else f"{'REQ' if i % 3 == 0 else 'req'}-{day:%d}-{i}"  # mostly non-UUID
            out.append({"timestamp": f"{day + dt.timedelta(seconds=i * 7, microseconds=123):%Y-%m-%d %H:%M:%S.%f}",
                        "request_id": rid, "batch": i // 10, "i": i + (100 if day == DAY2 else 0)})
    # two calls whose ids differ only in case, in the same nanosecond: two calls, as before
    out.append({"timestamp": f"{DAY2:%Y-%m-%d %H:%M:%S}.5", "request_id": UUIDS[0].upper(), "batch": 9, "i": 300})
    out.append({"timestamp": f"{DAY2:%Y-%m-%d %H:%M:%S}.5", "request_id": UUIDS[0], "batch": 9, "i": 301})
    return out


def insert(server: Scratch, rows: list[dict], cols: list[tuple[str, str]]) -> None:
    names = [c for c, _ in cols]
    values = []
    for row in rows:
        vals = []
        for c, t in cols:
            if c == "timestamp":
                vals.append(f"'{row['timestamp']}'")
            elif c == "request_id":
                vals.append(f"'{row['request_id']}'")
            elif c == "run_id":
                vals.append(f"'run-{row['batch'] % 2}'")
            else:
                vals.append(value(c, t, row["i"]))
        values.append("(" + ", ".join(vals) + ")")
    server.sql(f"INSERT INTO wirelens.requests ({', '.join(names)}) VALUES " + ", ".join(values))


@pytest.fixture(scope="module")
def migrated():
    server = Scratch()
    try:
        server.start()
        old_schema(server)
        assert migrate.table_form(server.sql, "wirelens.requests") == "old"
        cols = migrate.columns(server.sql, "wirelens.requests")
        assert "inserted_at" not in [c for c, _ in cols]
        rows = calls()
        # the re-sends stay rows of their own until moved (a merge would collapse them before)
        server.sql("SYSTEM STOP MERGES wirelens.requests")
        for batch in sorted({r["batch"] for r in rows}):
            insert(server, [r for r in rows if r["batch"] == batch], cols)
        # re-sends: batch 1 of both days again, and one call a third time (FINAL counts each once)
        insert(server, [r for r in rows if r["batch"] == 1], cols)
        insert(server, [r for r in rows if r["i"] == 12], cols)
        listed = ", ".join(c for c, _ in cols)
        before = {
            "final": server.rows(f"SELECT {listed} FROM wirelens.requests FINAL ORDER BY {listed}"),
            "raw": int(server.sql("SELECT count() FROM wirelens.requests").strip()),
            # the insert-time rollup counted every re-send
            "old_rollup": float(server.sql("SELECT sum(calls) FROM wirelens.requests_by_minute").strip()),
            "cols": cols, "listed": listed,
            "weighted": float(server.sql("SELECT sum(1 / if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1)) "
                                         "FROM wirelens.requests FINAL").strip()),
        }
        started = server.rows("SELECT toUnixTimestamp64Milli(now64(3))")[0][0]
        stack.apply_schema(server.settings)  # `make up`'s schema step: migrate, then queries/schema/*.sql
        yield server, before, int(started)
    finally:
        server.stop()


def test_the_old_fixture_makes_what_the_migration_must_move(migrated):
    _, before, _ = migrated
    assert len(before["final"]) == 82  # 2 days x 40 calls + the two case-different ids
    assert before["raw"] == 82 + 20 + 1  # + the re-sent batch of both days + one call re-sent again
    assert before["old_rollup"] > before["weighted"]  # the old rollup over-counted the re-sends


def test_every_call_and_every_column_is_carried_once(migrated):
    server, before, _ = migrated
    after = server.rows(f"SELECT {before['listed']} FROM wirelens.requests FINAL ORDER BY {before['listed']}")
    assert after == before["final"]  # same calls, same values, no call lost or counted twice
    raw = int(server.sql("SELECT count() FROM wirelens.requests").strip())
    assert len(after) <= raw <= before["raw"]  # re-sends moved as they were (or already merged), no copy extra
    # every column of the old table is in the new one with the same type
    assert set(before["cols"]) <= set(migrate.columns(server.sql, "wirelens.requests"))


def test_the_table_has_the_current_key_codecs_and_no_leftover(migrated):
    server, _, _ = migrated
    assert server.rows("SELECT sorting_key FROM system.tables WHERE database = 'wirelens' AND name = 'requests'") \
        == [["timestamp, request_key"]]
    assert server.rows("SELECT name FROM system.tables WHERE database = 'wirelens' AND name LIKE '%migration%'") == []
    # every integer column reads through T64 (queries/schema/001_requests.sql), the timestamp through Delta + LZ4
    codecs = dict(map(tuple, server.rows(
        "SELECT name, compression_codec FROM system.columns WHERE database = 'wirelens' AND table = 'requests' "
        "AND (match(type, '^(Nullable\\\\()?U?Int\\\\d+') OR name = 'timestamp')")))
    assert codecs.pop("timestamp") == "CODEC(Delta(8), LZ4)"
    assert codecs and {c for c in codecs.values()} == {"CODEC(T64, LZ4)"}, codecs


def test_request_key_dedups_uuid_and_other_ids_as_the_text_did(migrated):
    server, _, _ = migrated
    # a canonical UUID is its own key; any other text (capitals included) its sipHash128
    keyed = dict(map(tuple, server.rows(
        f"SELECT request_id, toString(request_key) FROM wirelens.requests FINAL "
        f"WHERE request_id IN ('{UUIDS[0]}', '{UUIDS[0].upper()}', 'req-{DAY1:%d}-4') GROUP BY ALL")))
    assert keyed[UUIDS[0]] == UUIDS[0]
    assert keyed[UUIDS[0].upper()] != UUIDS[0]
    assert keyed[f"req-{DAY1:%d}-4"] == server.sql(
        f"SELECT toString(reinterpretAsUUID(sipHash128('req-{DAY1:%d}-4')))").strip()
    # both case variants of the same-nanosecond call are kept (re-sent non-UUID ids are one row each:
    # test_every_call_and_every_column_is_carried_once)
    assert server.sql(f"SELECT count() FROM wirelens.requests FINAL WHERE lower(request_id) = '{UUIDS[0]}' "
                      f"AND toUnixTimestamp64Nano(timestamp) % 1000000000 = 500000000").strip() == "2"


def test_moved_rows_carry_a_stored_recent_inserted_at(migrated):
    server, _, started = migrated
    first = server.rows("SELECT min(toUnixTimestamp64Milli(inserted_at)), max(toUnixTimestamp64Milli(inserted_at)) "
                        "FROM wirelens.requests")[0]
    assert int(first[0]) >= started  # set when moved: the rollups' refresh takes them as new
    time.sleep(0.01)  # a value computed at read time (now64) would differ on the next read
    assert server.rows("SELECT min(toUnixTimestamp64Milli(inserted_at)), max(toUnixTimestamp64Milli(inserted_at)) "
                       "FROM wirelens.requests")[0] == first


def test_a_second_run_is_a_no_op(migrated):
    server, before, _ = migrated
    parts = server.rows("SELECT name FROM system.parts WHERE database = 'wirelens' AND table = 'requests' "
                        "AND active ORDER BY name")
    assert migrate.run(server.sql, "30") == []
    stack.apply_schema(server.settings)
    assert server.rows("SELECT name FROM system.parts WHERE database = 'wirelens' AND table = 'requests' "
                       "AND active ORDER BY name") == parts
    assert int(server.sql("SELECT count() FROM wirelens.requests FINAL").strip()) == len(before["final"])


def test_the_rollups_are_the_refreshed_ones_and_exact(migrated):
    server, before, _ = migrated
    assert migrate.old_rollups(server.sql) == []
    assert server.rows("SELECT name, engine FROM system.tables WHERE database = 'wirelens' "
                       "AND name IN ('requests_by_minute', 'requests_by_second') ORDER BY name") == \
        [["requests_by_minute", "ReplacingMergeTree"], ["requests_by_second", "ReplacingMergeTree"]]
    rollup.wait_refreshed(server.url, timeout_s=120)
    calls = float(server.sql("SELECT sum(calls) FROM wirelens.requests_by_minute FINAL").strip())
    assert calls == pytest.approx(before["weighted"], rel=1e-9)  # the re-sends no longer count twice
    assert calls < before["old_rollup"]


def test_inserts_during_the_migration_land_and_an_interrupted_one_resumes():
    """The state right after the swap (the new table in place, the old rows not moved yet), with calls
    arriving through the Collector's view meanwhile, and a day already copied but not yet dropped
    (interrupted between its INSERT and its DROP PARTITION): the next run moves the rest, FINAL counts
    every call once."""
    server = Scratch()
    try:
        server.start()
        old_schema(server)
        cols = migrate.columns(server.sql, "wirelens.requests")
        rows = calls()
        insert(server, rows, cols)
        expected = int(server.sql("SELECT count() FROM wirelens.requests FINAL").strip())
        # the first steps of run(), by hand: the current table under the temporary name, swapped in
        for statement in migrate.new_table_statements("30", migrate.TABLE, "wirelens.requests_before_migration"):
            server.sql(statement)
        server.sql("EXCHANGE TABLES wirelens.requests AND wirelens.requests_before_migration")
        # a call arriving now goes through the (old) view into the new table
        server.sql(f"INSERT INTO otel.otel_logs (Timestamp, LogAttributes) VALUES ('{DAY2:%Y-%m-%d %H}:30:00', "
                   "map('wirelens.protocol', 'grpc', 'wirelens.request_id', 'arrived-during', "
                   "'wirelens.run_id', 'live'))")
        assert server.sql("SELECT count() FROM wirelens.requests WHERE request_id = 'arrived-during'").strip() == "1"
        # the first day copied, not yet dropped from the old table
        listed = ", ".join(c for c, _ in cols)
        day1 = f"{DAY1:%Y%m%d}"
        server.sql(f"INSERT INTO wirelens.requests ({listed}) SELECT {listed} "
                   f"FROM wirelens.requests_before_migration WHERE _partition_id = '{day1}'")
        done = migrate.run(server.sql, "30")
        assert done[-1] == "wirelens.requests: moved 82 rows from the older form", done
        assert int(server.sql("SELECT count() FROM wirelens.requests FINAL").strip()) == expected + 1
        assert server.rows("SELECT name FROM system.tables WHERE database = 'wirelens' "
                           "AND name = 'requests_before_migration'") == []
        assert migrate.run(server.sql, "30") == []
    finally:
        server.stop()


def test_a_column_the_current_schema_lacks_is_refused_before_anything_moves():
    server = Scratch()
    try:
        server.start()
        old_schema(server)
        server.sql("ALTER TABLE wirelens.requests ADD COLUMN my_own String")
        server.sql("INSERT INTO wirelens.requests (timestamp, request_id, my_own) VALUES (now64(9), 'x', 'keep me')")
        with pytest.raises(migrate.MigrationError, match="my_own"):
            migrate.run(server.sql, "30")
        assert migrate.table_form(server.sql, "wirelens.requests") == "old"  # untouched
        assert server.sql("SELECT my_own FROM wirelens.requests").strip() == "keep me"
    finally:
        server.stop()
