"""Check or rebuild the rollups (wirelens.requests_by_minute, _by_second) from the raw calls.

The rollups are fed at insert time, so a record the pipeline re-sent after a
failure is counted twice there while the raw table's FINAL keeps it once.

    python -m queries.rollup check   [--since 1d]          rollup calls vs raw FINAL, per day
    python -m queries.rollup rebuild --day 2026-11-25      recompute one day from wirelens.requests FINAL

`rebuild` fills a staging table per rollup with its materialized view's own
SELECT (queries/schema/004_rollups.sql, read from that file: one
definition) over the day's raw calls with FINAL, then swaps the day's
partition in with REPLACE PARTITION, so readers never see the day empty.
Calls that arrive for that day while it runs can be missed or counted
twice; rebuild a day once its traffic is in, then `check` again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from pathlib import Path

from wirelens_helpers import clickhouse  # ClickHouse over HTTP

QUERIES = Path(__file__).resolve().parent

ROLLUP_DDL = QUERIES / "schema" / "004_rollups.sql"
# rollup table -> the materialized view that fills it
ROLLUPS = {
    "wirelens.requests_by_minute": "wirelens.requests_by_minute_from_requests",
    "wirelens.requests_by_second": "wirelens.requests_by_second_from_requests",
}

CHECK_SQL = """
SELECT
    day,
    toUInt64(round(minute_calls)) AS by_minute_calls,
    toUInt64(round(second_calls)) AS by_second_calls,
    raw_calls,
    toInt64(round(minute_calls)) - toInt64(raw_calls) AS extra
FROM
(
    SELECT toDate(minute) AS day, sum(calls) AS minute_calls
    FROM wirelens.requests_by_minute
    WHERE minute >= toStartOfDay({since:DateTime64(3)})
    GROUP BY day
) AS by_minute
FULL OUTER JOIN
(
    SELECT toDate(second) AS day, sum(calls) AS second_calls
    FROM wirelens.requests_by_second
    WHERE second >= toStartOfDay({since:DateTime64(3)})
    GROUP BY day
) AS by_second USING (day)
FULL OUTER JOIN
(
    SELECT toDate(timestamp) AS day,
           sum(1 / if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1)) AS raw_weighted,
           toUInt64(round(raw_weighted)) AS raw_calls
    FROM wirelens.requests FINAL
    WHERE timestamp >= toStartOfDay({since:DateTime64(3)})
    GROUP BY day
) AS raw USING (day)
ORDER BY day
"""


def view_select(table: str) -> str:
    """The SELECT of the view that fills `table`, as the schema file defines it, over one {day:Date}."""
    text = "\n".join(line for line in ROLLUP_DDL.read_text().splitlines() if not line.strip().startswith("--"))
    view = ROLLUPS[table]
    match = re.search(rf"CREATE MATERIALIZED VIEW IF NOT EXISTS {re.escape(view)}\s+"
                      rf"TO {re.escape(table)}\s+AS\s+(.*?);", text, re.S)
    if not match:
        raise clickhouse.QueryError(f"{ROLLUP_DDL}: no materialized view {view} TO {table}")
    select = match[1] + "\n"
    source = "FROM wirelens.requests AS r\n"
    if source not in select:
        raise clickhouse.QueryError(f"{ROLLUP_DDL}: the view's SELECT does not read {source.strip()!r}")
    return select.replace(source, "FROM wirelens.requests AS r FINAL\nWHERE toDate(r.timestamp) = {day:Date}\n")


def rebuild(url: str, day: dt.date) -> None:
    partition = day.isoformat()  # a date object's text: safe to write into the statement
    for table in ROLLUPS:
        staging = f"{table}_rebuild"
        clickhouse.post(url, f"DROP TABLE IF EXISTS {staging}")
        clickhouse.post(url, f"CREATE TABLE {staging} AS {table}")
        try:
            clickhouse.post(url, f"INSERT INTO {staging}\n{view_select(table)}", {"day": partition}, timeout=3600)
            clickhouse.post(url, f"ALTER TABLE {table} REPLACE PARTITION '{partition}' FROM {staging}")
        finally:
            clickhouse.post(url, f"DROP TABLE IF EXISTS {staging}")


def check(url: str, since: dt.timedelta) -> str:
    return clickhouse.run(url, CHECK_SQL, clickhouse.window(since), fmt="PrettyCompactMonoBlock")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["check", "rebuild"])
    parser.add_argument("--day", type=dt.date.fromisoformat, help="rebuild: the day (YYYY-MM-DD, UTC)")
    parser.add_argument("--since", default="1d", help="check: days back from now (e.g. 1d, 7d); default 1d")
    parser.add_argument("--clickhouse-url",
                        default=os.environ.get("WIRELENS_CLICKHOUSE_URL",
                                               f"http://127.0.0.1:{os.environ.get('WIRELENS_CLICKHOUSE_HTTP_PORT', '8123')}"),
                        help="ClickHouse HTTP interface (default $WIRELENS_CLICKHOUSE_URL or 127.0.0.1:8123)")
    args = parser.parse_args(argv)
    try:
        if args.command == "rebuild":
            if args.day is None:
                parser.error("rebuild needs --day YYYY-MM-DD")
            rebuild(args.clickhouse_url, args.day)
            print(f"rebuilt {', '.join(ROLLUPS)} for {args.day} from wirelens.requests FINAL")
        print(check(args.clickhouse_url, clickhouse.parse_duration(args.since)), end="")
    except clickhouse.QueryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
