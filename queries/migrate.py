"""Move an existing install's tables to the current schema's form (issue 30), once, from the schema step.

    run(sql, ttl_days)     what the schema step (deploy/local/schema.py) calls before applying
                           queries/schema/*.sql; a no-op on a current install
    python -m queries.migrate [--clickhouse-url URL] [--ttl-days N]
                           the same by hand (the local stack's ClickHouse by default)

What it finds and what it does, decided by what the server says (system.tables:
engine, sorting_key), not by a marker:

1. Rollups of the insert-time form (wirelens.requests_by_minute or _by_second an
   AggregatingMergeTree, or a view *_from_requests): queries.rollup.RECREATE_SQL
   drops those views and tables (before any row moves, so the old views never see
   the copy); queries/schema/004_rollups.sql then creates the refreshed ones, whose
   first refresh computes every minute from wirelens.requests FINAL.

2. wirelens.requests with the older key (timestamp, request_id), e.g. made by the
   schema of commit 46b5a99: the current key is (timestamp, request_key), and a
   MergeTree's key cannot change in place. So:
   a. the current table is created as wirelens.requests_before_migration, with the
      schema's CREATE TABLE and its codec ALTER (queries/schema/001_requests.sql);
   b. EXCHANGE TABLES swaps the two names atomically: from then on every insert
      (the Collector's, through the view requests_from_otel_logs, which writes to
      the name) lands in the new table; the old rows are in
      wirelens.requests_before_migration;
   c. inserts that started before the swap may still be writing into the old
      table: wait until system.processes shows no insert that old (deadline:
      INSERT_WAIT_S, then an error naming them);
   d. one partition (day) at a time: INSERT INTO wirelens.requests (every column
      of the old table) SELECT them FROM the old table, then DROP PARTITION there.
      The rows are copied as they are, duplicates included: the new table collapses
      them by (timestamp, request_key) exactly as the old one did by
      (timestamp, request_id). inserted_at is MATERIALIZED, so every moved row gets
      the time it was moved: the rollups' refresh takes its minutes as touched and
      recomputes them from FINAL (the old insert-fed rollups over-counted);
   e. DROP TABLE wirelens.requests_before_migration when it holds no part.
   Interrupted anywhere, the next run continues from what it finds (the old table
   still there: steps c-e). A day interrupted between its INSERT and its DROP
   PARTITION is copied again: its rows are then in the new table twice, which
   FINAL (and the next merge) collapse, so no call counts twice.

Every column of the old table must exist in the new one (a column the new
schema lacks would be lost): refused with the column names before anything
changes. Columns the old table lacks get their defaults (as ADD COLUMN gives them).

On a cluster (queries/schema/cluster) without replication (shards only): the
same steps on each node's wirelens.requests_local (--table
wirelens.requests_local, node by node; the Distributed wirelens.requests reads
by column name and needs no change), after dropping the old rollups there
(RECREATE_SQL on the _local and the Distributed names) and before applying the
cluster schema. A Replicated table is refused: its copy would need a new Keeper
path per shard, which this module does not make (not done in issue 30).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Callable

from queries.schema import ddl

TABLE = "wirelens.requests"
BEFORE = "_before_migration"  # the old table's name once the new one has taken its place
INSERT_WAIT_S = 600.0
NEW_KEY = "request_key"  # the current key's column: a table whose sorting key lacks it has the older form

Sql = Callable[[str], str]


class MigrationError(RuntimeError):
    """The migration cannot go on; the message says what was found and what to do."""


def _rows(sql: Sql, statement: str) -> list[list[str]]:
    return [line.split("\t") for line in sql(statement + "\nFORMAT TabSeparated").splitlines() if line]


def _split(table: str) -> tuple[str, str]:
    if not re.fullmatch(r"\w+\.\w+", table):
        raise MigrationError(f"table {table!r}: expected database.name")
    db, name = table.split(".")
    return db, name


def table_form(sql: Sql, table: str) -> str:
    """'missing', 'old' (a MergeTree whose sorting key lacks request_key), 'new', or 'other: <engine>'."""
    db, name = _split(table)
    rows = _rows(sql, f"SELECT engine, sorting_key FROM system.tables WHERE database = '{db}' AND name = '{name}'")
    if not rows:
        return "missing"
    engine, key = rows[0] + [""] * (2 - len(rows[0]))
    if not engine.endswith("MergeTree") or engine.startswith("Replicated"):
        return f"other: {engine}"
    return "new" if NEW_KEY in [k.strip() for k in key.split(",")] else "old"


def columns(sql: Sql, table: str) -> list[tuple[str, str]]:
    """(name, type) of the columns an INSERT can write (not MATERIALIZED, ALIAS or EPHEMERAL), in order."""
    db, name = _split(table)
    return [(c, t) for c, t in _rows(sql, f"SELECT name, type FROM system.columns WHERE database = '{db}' "
                                          f"AND table = '{name}' AND default_kind NOT IN "
                                          "('MATERIALIZED', 'ALIAS', 'EPHEMERAL') ORDER BY position")]


def old_rollups(sql: Sql) -> list[str]:
    """The insert-time rollup objects found (empty: none, or already the refreshed form)."""
    return [f"wirelens.{n} ({e})" for n, e in _rows(
        sql, "SELECT name, engine FROM system.tables WHERE database = 'wirelens' AND "
             "((name IN ('requests_by_minute', 'requests_by_second') AND engine LIKE '%AggregatingMergeTree') "
             "OR (name IN ('requests_by_minute_from_requests', 'requests_by_second_from_requests')))")]


def rollup_drops() -> list[str]:
    """queries.rollup.RECREATE_SQL: the old and new rollup views and tables, dropped (004 recreates them)."""
    from queries import rollup  # noqa: PLC0415  (its module reads the rollup SQL files)

    return list(rollup.RECREATE_SQL)


def new_table_statements(ttl_days: str, table: str, into: str) -> list[str]:
    """The schema's CREATE TABLE of `table` and its ALTERs that set codecs, for a table named `into`."""
    out = []
    for statement in ddl.statements(ttl_days):
        if re.match(rf"CREATE TABLE IF NOT EXISTS {re.escape(TABLE)}\s*\(", statement) or \
                re.match(rf"ALTER TABLE {re.escape(TABLE)}\s+MODIFY COLUMN \w+ CODEC\(", statement):
            out.append(statement.replace(TABLE, into, 1))
    if not out or not out[0].startswith("CREATE TABLE"):
        raise MigrationError(f"queries/schema has no CREATE TABLE IF NOT EXISTS {TABLE}")
    return out


def wait_for_old_inserts(sql: Sql, log: Callable[[str], None], timeout_s: float = INSERT_WAIT_S) -> None:
    """Wait until no INSERT that started before now is still running (one may still write into the old
    table: its target was resolved when it started). Polls system.processes; raises at the deadline."""
    swapped = _rows(sql, "SELECT toUnixTimestamp64Milli(now64(3))")[0][0]
    older = (f"SELECT query_id, round(elapsed, 1), left(query, 100) FROM system.processes "
             f"WHERE query_kind = 'Insert' AND elapsed + 0.5 >= "
             f"(toUnixTimestamp64Milli(now64(3)) - {swapped}) / 1000")
    deadline = time.monotonic() + timeout_s
    while True:
        running = _rows(sql, older)
        if not running:
            return
        if time.monotonic() > deadline:
            raise MigrationError(f"after {timeout_s:.0f} s, inserts started before the swap still run "
                                 f"(they may write into the old table): {running}; run the migration again "
                                 "once they are done")
        log(f"waiting for {len(running)} insert(s) that started before the swap")
        time.sleep(0.2)  # polling interval of the wait above, not synchronization by itself


def move_rows(sql: Sql, source: str, target: str, log: Callable[[str], None]) -> int:
    """Copy each partition of source into target, then drop it from source; the rows moved."""
    target_cols = {c for c, _ in columns(sql, target)}
    cols = [c for c, _ in columns(sql, source)]
    lost = [c for c in cols if c not in target_cols]
    if lost:
        raise MigrationError(f"{source} has columns {target} lacks: {', '.join(lost)}; they would be lost. "
                             f"Add them to {target} (ALTER TABLE ... ADD COLUMN) and run the migration again")
    listed = ", ".join(f"`{c}`" for c in cols)
    db, name = _split(source)
    moved = 0
    for (partition,) in _rows(sql, f"SELECT DISTINCT partition_id FROM system.parts WHERE database = '{db}' "
                                   f"AND table = '{name}' AND active ORDER BY partition_id"):
        if not re.fullmatch(r"[\w-]+", partition):
            raise MigrationError(f"{source}: unexpected partition id {partition!r}")
        count = int(_rows(sql, f"SELECT count() FROM {source} WHERE _partition_id = '{partition}'")[0][0])
        sql(f"INSERT INTO {target} ({listed}) SELECT {listed} FROM {source} WHERE _partition_id = '{partition}'")
        sql(f"ALTER TABLE {source} DROP PARTITION ID '{partition}' SETTINGS mutations_sync = 2")
        moved += count
        log(f"moved partition {partition}: {count:,} rows")
    return moved


def run(sql: Sql, ttl_days: str, table: str = TABLE, log: Callable[[str], None] = lambda m: None) -> list[str]:
    """Migrate what has the older form; return what was done (empty: nothing to do). Idempotent."""
    done: list[str] = []
    before = table + BEFORE
    form, before_form = table_form(sql, table), table_form(sql, before)
    if form.startswith("other") or before_form.startswith("other"):
        raise MigrationError(f"{table} is {form}, {before} is {before_form}: expected non-replicated "
                             "MergeTree tables (a cluster's Distributed table: migrate each node's "
                             "wirelens.requests_local with --table; Replicated tables are not migrated "
                             "by this module)")
    if table == TABLE and (found := old_rollups(sql)):
        log(f"dropping the insert-time rollups ({', '.join(found)}); 004_rollups.sql recreates them")
        for statement in rollup_drops():
            sql(statement)
        done.append(f"rollups: dropped {', '.join(found)} (recreated by 004_rollups.sql)")
    if form == "old" and before_form == "old":
        raise MigrationError(f"{table} and {before} both have the older key: move {before}'s rows by hand "
                             "or drop it, then run the migration again")
    if form == "new" and before_form == "new":
        raise MigrationError(f"{table} and {before} both have the current key: {before} is not this "
                             f"migration's; drop or rename it, then run the migration again")
    if form == "old":
        old_cols = [c for c, _ in columns(sql, table)]
        if before_form == "missing":
            for statement in new_table_statements(ttl_days, TABLE, before):
                sql(statement)
        new_cols = {c for c, _ in columns(sql, before)}
        lost = [c for c in old_cols if c not in new_cols]
        if lost:
            raise MigrationError(f"{table} has columns the current schema lacks: {', '.join(lost)}; they "
                                 "would be lost. Nothing was changed but the empty table "
                                 f"{before} (drop it after adding them to queries/schema)")
        sql(f"EXCHANGE TABLES {table} AND {before}")
        log(f"{table} now has the current key; its rows are in {before}")
        done.append(f"{table}: swapped in the current form")
        before_form = "old"
    if before_form == "old":
        wait_for_old_inserts(sql, log)
        moved = move_rows(sql, before, table, log)
        left = int(_rows(sql, f"SELECT count() FROM {before}")[0][0])
        if left:
            raise MigrationError(f"{before} still holds {left} rows after moving its partitions; "
                                 "run the migration again")
        sql(f"DROP TABLE {before} SYNC")
        done.append(f"{table}: moved {moved:,} rows from the older form")
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clickhouse-url", help="ClickHouse HTTP URL (default: the local stack's)")
    ap.add_argument("--ttl-days", default=None, help="the requests' retention (default: the stack's setting)")
    ap.add_argument("--table", default=TABLE,
                    help="the requests table (on a cluster: wirelens.requests_local, on each node)")
    args = ap.parse_args(argv)
    from wirelens_helpers import clickhouse  # noqa: PLC0415

    settings: dict[str, str] = {}
    if args.clickhouse_url is None or args.ttl_days is None:
        from deploy.local.settings import load_settings  # noqa: PLC0415

        settings = load_settings()
    url = (args.clickhouse_url or f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}").rstrip("/")
    ttl = args.ttl_days or settings.get("WIRELENS_REQUESTS_TTL_DAYS", "30")

    def sql(statement: str) -> str:
        return clickhouse.post(url, statement, timeout=3600)

    try:
        done = run(sql, ttl, args.table, log=lambda m: print(m, file=sys.stderr, flush=True))
    except (MigrationError, clickhouse.QueryError, clickhouse.UnreachableError) as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        return 1
    print("\n".join(done) if done else "nothing to migrate: the tables have the current form")
    return 0


if __name__ == "__main__":
    sys.exit(main())
