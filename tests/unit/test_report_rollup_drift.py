"""`wirelens report --source rollup` warns when the rollups it reads have drift it cannot correct.

A scratch ClickHouse (the real engine) gets the schema (queries/schema, as
bench/query_speed applies it) and a few synthetic calls; then each situation
is made for real and the report must say so (cli/internal/report/rollupdrift.go):

    refreshed and caught up        no warning
    refreshes stopped, rollups     "is stopped", and exactly how many rows of
    emptied, calls 5 min old       the window the rollups lack (overdue: a
                                   warning); calls of the last seconds only:
                                   a note; nothing once refreshes resume
    a refresh that fails           "fails", with ClickHouse's error
    the old insert-fed form        "old insert-fed form" (AggregatingMergeTree,
                                   a view filling it at insert)

Needs bin/wirelens (make services).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from bench import query_speed  # the benchmark's schema step and generator
from deploy.local import clickhouse_server
from wirelens_helpers import clickhouse
from wirelens_helpers.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
WIRELENS = ROOT / "bin" / "wirelens"
REFRESH_VIEWS = ("requests_by_minute_refresh", "requests_by_second_refresh")
# the hourly settle passes (queries/schema/004_rollups.sql): refreshable too, not what these tests stop or break
SETTLE_VIEWS = ("requests_by_minute_settle", "requests_by_second_settle")


def query(ch, statement: str) -> str:
    return clickhouse.post(ch.url, statement)


def report(ch, *args: str) -> subprocess.CompletedProcess:
    if not WIRELENS.exists():
        pytest.fail(f"{WIRELENS} is missing: run `make services`")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIRELENS_", "CLICKHOUSE_"))}
    return subprocess.run([str(WIRELENS), "report", "--clickhouse-url", ch.url, "--queries", str(ROOT / "queries"),
                           "--format", "tsv", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line.removeprefix("# warning: ") for line in result.stdout.splitlines() if line.startswith("# warning: ")]


def insert_calls(ch, n: int, run_id: str, inserted_ago_s: int = 0) -> None:
    """n calls of run_id in the last five minutes (the benchmark's generator, every call in run_id); with
    inserted_ago_s, their inserted_at that long ago (as if they had waited there since)."""
    generator_run = "if(segment < 3, concat('bench-run-', toString(segment + 1)), '') AS run_id"
    assert generator_run in query_speed.LOAD_SQL, "bench/query_speed.LOAD_SQL changed: update this test"
    load = query_speed.LOAD_SQL.replace(generator_run, f"'{run_id}' AS run_id").format(
        rows=n, first=0, count=n, start_ns=int((time.time() - 300) * 1e9), window_ns=240 * 1_000_000_000)
    if not inserted_ago_s:
        query(ch, load)
        return
    # inserted_at is MATERIALIZED (now64 at insert): through a staging table, with the column given.
    query(ch, "CREATE TABLE wirelens.drift_staging ENGINE = Memory AS SELECT * FROM wirelens.requests LIMIT 0")
    try:
        query(ch, load.replace("INSERT INTO wirelens.requests", "INSERT INTO wirelens.drift_staging", 1))
        columns = query(ch, "SELECT arrayStringConcat(groupArray(name), ', ') FROM (SELECT name FROM system.columns "
                           "WHERE database = 'wirelens' AND table = 'drift_staging' ORDER BY position)").strip()
        query(ch, f"INSERT INTO wirelens.requests ({columns}, inserted_at) SELECT *, now64(3) - {inserted_ago_s} "
                 "FROM wirelens.drift_staging SETTINGS insert_allow_materialized_columns = 1")
    finally:
        query(ch, "DROP TABLE IF EXISTS wirelens.drift_staging")


def refreshed_after(ch, since_s: float) -> bool:
    """Both refresh views have a successful refresh that started after since_s (Unix seconds)."""
    out = query(ch, "SELECT count() FROM system.view_refreshes WHERE database = 'wirelens' AND view IN "
                   f"{REFRESH_VIEWS} AND last_success_time > toDateTime({int(since_s)}) AND exception = ''")
    return out.strip() == str(len(REFRESH_VIEWS))


@pytest.fixture(scope="module")
def ch():
    server = clickhouse_server.Scratch("wirelens-report-drift-test-")
    server.start()
    try:
        query_speed.create_schema(server.url)
        names = query(server, "SELECT name FROM system.tables WHERE database = 'wirelens' AND create_table_query "
                             "LIKE '%REFRESH EVERY%'").split()
        if sorted(names) != sorted(REFRESH_VIEWS + SETTLE_VIEWS):
            pytest.fail(f"the schema's refreshable views are {names}, this test expects {REFRESH_VIEWS + SETTLE_VIEWS}")
        yield server
    finally:
        server.stop()


def test_caught_up_rollups_give_no_warning(ch):
    insert_calls(ch, 500, "drift-ok")
    inserted = time.time()
    wait_for("a refresh of both rollups after the insert", lambda: refreshed_after(ch, inserted + 1), timeout_s=60,
             state=lambda: query(ch, "SELECT view, status, last_success_time, exception FROM system.view_refreshes"))
    result = report(ch, "--run", "drift-ok", "--source", "rollup")
    assert result.returncode == 0, result.stderr
    assert warnings(result) == [], result.stdout[:3000]
    assert "# note: Read from the rollups" in result.stdout


def test_stopped_refresh_and_rows_after_the_watermark_are_counted(ch):
    for view in REFRESH_VIEWS:
        query(ch, f"SYSTEM STOP VIEW wirelens.{view}")
    try:
        wait_for("both refreshes stopped", lambda: query(
            ch, f"SELECT countIf(status = 'Disabled') FROM system.view_refreshes WHERE view IN {REFRESH_VIEWS}")
            .strip() == "2", timeout_s=30)
        # Emptied rollups (watermark 1970) and calls that have waited 5 minutes: overdue, a warning.
        for table in ("requests_by_minute", "requests_by_second"):
            query(ch, f"TRUNCATE TABLE wirelens.{table}")
        insert_calls(ch, 321, "drift-late", inserted_ago_s=300)
        result = report(ch, "--run", "drift-late", "--source", "rollup")
        found = warnings(result)
        assert any("321 rows of this window reached wirelens.requests after the rollups' last refresh "
                   "(watermark: none yet), 321 of them more than 30 s ago" in w
                   and "under-count this window by up to 321 rows; --source raw includes them" in w
                   for w in found), found
        for view in REFRESH_VIEWS:
            assert any(f"SYSTEM START VIEW wirelens.{view} resumes it" in w for w in found), found
        # Stopping cancelled any refresh under way: that is not reported as a failing refresh.
        assert not any(" fails (" in w for w in found), found
        # Calls of the last seconds only: a note, not a warning.
        insert_calls(ch, 50, "drift-fresh")
        result = report(ch, "--run", "drift-fresh", "--source", "rollup")
        assert not any("rows of this window" in w for w in warnings(result)), warnings(result)
        assert "50 rows of this window arrived in the last seconds, after the rollups' last refresh" in result.stdout
        # raw reads no rollup: no drift check, no warning.
        assert warnings(report(ch, "--run", "drift-late", "--source", "raw")) == []
    finally:
        for view in REFRESH_VIEWS:
            query(ch, f"SYSTEM START VIEW wirelens.{view}")
    restarted = time.time()
    wait_for("the rollups caught up once refreshes resumed", lambda: refreshed_after(ch, restarted + 1), timeout_s=60)
    for run in ("drift-late", "drift-fresh", "drift-ok"):
        result = report(ch, "--run", run, "--source", "rollup")
        assert warnings(result) == [] and "rows of this window" not in result.stdout, (run, result.stdout[:2000])


def test_failing_refresh_is_named_with_its_error(ch):
    view = "requests_by_second_refresh"
    definition = query(ch, f"SELECT create_table_query FROM system.tables WHERE database = 'wirelens' AND name = '{view}'")
    query(ch, f"CREATE OR REPLACE MATERIALIZED VIEW wirelens.{view} REFRESH EVERY 1 SECOND APPEND "
             "TO wirelens.requests_by_second AS SELECT toDateTime(throwIf(count() >= 0, 'drift test: refresh broken')) "
             "AS second FROM wirelens.requests")
    try:
        wait_for("the broken refresh to fail", lambda: query(
            ch, f"SELECT exception != '' FROM system.view_refreshes WHERE view = '{view}'").strip() == "1", timeout_s=30)
        found = warnings(report(ch, "--run", "drift-ok", "--source", "rollup"))
        assert any(f"The refresh of wirelens.requests_by_second fails (wirelens.{view}, " in w
                   and "drift test: refresh broken" in w for w in found), found
    finally:
        query(ch, "DROP VIEW IF EXISTS wirelens." + view)
        query(ch, definition.strip().replace("\\'", "'"))


def test_old_insert_fed_rollups_are_named(ch):
    query(ch, "CREATE DATABASE IF NOT EXISTS drift_old")
    # The form before issue 30, in short: an AggregatingMergeTree fed at insert by a view.
    query(ch, "RENAME TABLE wirelens.requests_by_minute TO drift_old.requests_by_minute")
    try:
        query(ch, "CREATE TABLE wirelens.requests_by_minute (minute DateTime, run_id LowCardinality(String), "
                 "calls SimpleAggregateFunction(sum, Float64)) ENGINE = AggregatingMergeTree ORDER BY (minute, run_id)")
        query(ch, "CREATE MATERIALIZED VIEW wirelens.requests_by_minute_from_requests TO wirelens.requests_by_minute AS "
                 "SELECT toStartOfMinute(timestamp) AS minute, run_id, count() AS calls FROM wirelens.requests "
                 "GROUP BY minute, run_id")
        result = report(ch, "--run", "drift-ok", "--source", "rollup")
        found = warnings(result)
        assert any("The rollups are the old insert-fed form: wirelens.requests_by_minute (AggregatingMergeTree, "
                   "fed at insert by wirelens.requests_by_minute_from_requests)" in w for w in found), found
        assert not any("rows of this window" in w for w in found), found  # no late count on the old form
    finally:
        query(ch, "DROP VIEW IF EXISTS wirelens.requests_by_minute_from_requests")
        query(ch, "DROP TABLE IF EXISTS wirelens.requests_by_minute SYNC")
        query(ch, "RENAME TABLE drift_old.requests_by_minute TO wirelens.requests_by_minute")
