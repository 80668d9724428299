"""deploy/kubernetes/clickhouse/apply-schema.sh (the ClickHouse pod's `schema` container) on an install made
before issue 30, on a real ClickHouse (the chdb-core engine; a clickhouse-client stand-in over its HTTP port).

- wirelens.requests with the old key (timestamp, request_id): the script refuses before changing anything
  and names queries.migrate, which moves the rows (tests/unit/test_migration.py).
- rollups of the old insert-fed form beside a current wirelens.requests: dropped and recreated as the
  refreshed ones, whose first refresh recomputes them from wirelens.requests FINAL.
"""

from __future__ import annotations

import os
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queries.schema import ddl
from tests.unit.test_migration import OLD_SCHEMA, Scratch, old_schema

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "kubernetes" / "clickhouse" / "apply-schema.sh"

CLIENT_STANDIN = """#!{python}
# clickhouse-client stand-in: --query, or --multiquery with statements on stdin, over HTTP.
import argparse, sys
from queries.schema.ddl import split_sql
from wirelens_helpers.clickhouse import QueryError, post
p = argparse.ArgumentParser()
p.add_argument("--host"); p.add_argument("--port"); p.add_argument("--query"); p.add_argument("--multiquery", action="store_true")
a = p.parse_args()
for statement in [a.query] if a.query else split_sql(sys.stdin.read()):
    try:
        sys.stdout.write(post({url!r}, statement))
    except QueryError as e:
        sys.stderr.write(str(e)); sys.exit(1)
"""


@pytest.fixture
def server():
    ch = Scratch()
    ch.start()
    try:
        yield ch
    finally:
        ch.stop()


def run_script(server: Scratch, tmp_path: Path, until: str, deadline_s: float = 120) -> tuple[int | None, str]:
    """Runs the script until it exits or its output holds `until`; its exit status (None: still running)."""
    standin = tmp_path / "bin" / "clickhouse-client"
    standin.parent.mkdir(exist_ok=True)
    standin.write_text(CLIENT_STANDIN.format(python=sys.executable, url=server.url))
    standin.chmod(0o755)
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir(exist_ok=True)
    for path in sorted((ROOT / "queries" / "schema").glob("*.sql")):
        (schema_dir / path.name).write_text(path.read_text())
    log = tmp_path / "schema.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    proc = subprocess.Popen(["bash", str(SCRIPT)], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True,
                            env={**env, "PATH": f"{standin.parent}:{env['PATH']}", "PYTHONPATH": str(ROOT),
                                 "WIRELENS_SCHEMA_DIR": str(schema_dir), "WIRELENS_REQUESTS_TTL_DAYS": "30"})
    try:
        end = time.monotonic() + deadline_s
        while proc.poll() is None and until not in log.read_text():
            if time.monotonic() > end:
                raise AssertionError(f"apply-schema.sh neither exited nor printed {until!r} in {deadline_s:.0f} s:\n"
                                     + log.read_text())
            time.sleep(0.2)  # polling the script's log, with the deadline above
        return proc.poll(), log.read_text()
    finally:
        if proc.poll() is None:  # it stays after applying (the pod stays Running): ours, by pid
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)


def engines(server: Scratch) -> dict[str, str]:
    return dict(server.rows("SELECT name, engine FROM system.tables WHERE database = 'wirelens' AND "
                            "name LIKE 'requests_by_%' ORDER BY name"))


def test_an_old_key_is_refused_before_anything_changes(server, tmp_path):
    old_schema(server)
    before = engines(server)
    status, out = run_script(server, tmp_path, "schema: applied")
    assert status == 1, out
    assert "python -m queries.migrate" in out and "(timestamp, request_id)" in out, out
    assert engines(server) == before  # the old rollups are still there: nothing was dropped


def test_old_rollups_beside_a_current_table_are_recreated_as_refreshed_ones(server, tmp_path):
    server.sql("CREATE DATABASE IF NOT EXISTS otel")
    from bench.query_speed import OTEL_LOGS_STANDIN  # noqa: PLC0415
    server.sql(OTEL_LOGS_STANDIN)
    for statement in ddl.statements("30"):
        server.sql(statement)
    for statement in ["DROP VIEW wirelens.requests_by_minute_refresh", "DROP VIEW wirelens.requests_by_second_refresh",
                      "DROP VIEW wirelens.requests_by_minute_settle", "DROP VIEW wirelens.requests_by_second_settle",
                      "DROP TABLE wirelens.requests_by_minute", "DROP TABLE wirelens.requests_by_second"]:
        server.sql(statement)
    old_rollups = string.Template((OLD_SCHEMA / "004_rollups.sql").read_text()).substitute(
        WIRELENS_REQUESTS_TTL_DAYS="30")
    for statement in ddl.split_sql(old_rollups):
        server.sql(statement)
    assert set(engines(server).values()) == {"AggregatingMergeTree", "MaterializedView"}

    status, out = run_script(server, tmp_path, "schema: applied")
    assert status is None and "dropping the rollups fed at insert" in out, out
    assert engines(server) == {
        "requests_by_minute": "ReplacingMergeTree", "requests_by_minute_refresh": "MaterializedView",
        "requests_by_minute_settle": "MaterializedView",
        "requests_by_second": "ReplacingMergeTree", "requests_by_second_refresh": "MaterializedView",
        "requests_by_second_settle": "MaterializedView"}

    # A current install: applied again, nothing is dropped.
    status, out = run_script(server, tmp_path, "schema: applied")
    assert status is None and "dropping" not in out, out


def test_the_script_drops_what_the_migration_drops():
    from queries import rollup  # noqa: PLC0415
    text = SCRIPT.read_text()
    assert [s for s in rollup.RECREATE_SQL if f"{s};" not in text] == []
