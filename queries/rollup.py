"""The rollups (wirelens.requests_by_minute, _by_second): their refresh's status, and the repair tools.

Since issue 30 the rollups are exact by construction: refreshable materialized
views recompute every minute that received raw rows from `wirelens.requests
FINAL` (queries/schema/004_rollups.sql), and readers take the newest version
of each row (`FINAL`). A settle pass per rollup (a second refreshable view,
hourly) recomputes every minute of the hour that closed two hours ago, so a
block the 10 s refresh missed (committed more than 60 s after its inserted_at)
is counted within ~3 h. Nothing here is needed in normal operation.

    python -m queries.rollup status  [--since 1d]          the refreshes: last success, error, watermark, rows not seen yet
    python -m queries.rollup check   [--since 1d]          rollup calls vs raw FINAL, per day
    python -m queries.rollup rebuild --day 2026-11-25      recompute one day from wirelens.requests FINAL now

`rebuild` selects every minute of the day from the rollup's row view (004's
parameterized view wirelens.rollup_{minute,second}_rows: the one definition the
refresh and the settle select from too) and appends the result with a new
as_of, which replaces the day's rows for FINAL readers. Needed only when raw rows changed
without being inserted (an ALTER ... UPDATE, a restored backup): the refresh
follows inserts (wirelens.requests.inserted_at), not mutations.

For programs: TRUST_SQL ("has the rollup seen every call of this window?",
what `wirelens report` warns with), status(), wait_refreshed() (refresh now
and wait: tests and benchmarks), RECREATE_SQL (what a migration drops before
re-applying 004).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

from wirelens_helpers import clickhouse  # ClickHouse over HTTP

QUERIES = Path(__file__).resolve().parent

ROLLUP_DDL = QUERIES / "schema" / "004_rollups.sql"
# rollup table -> the refreshable materialized view that fills it (every 10 s)
ROLLUPS = {
    "wirelens.requests_by_minute": "wirelens.requests_by_minute_refresh",
    "wirelens.requests_by_second": "wirelens.requests_by_second_refresh",
}
# rollup table -> its settle pass: a refreshable view that recomputes, once an hour, every minute of the
# hour that closed two hours ago (what the 10 s refresh may have missed: a block committed > 60 s late)
SETTLES = {
    "wirelens.requests_by_minute": "wirelens.requests_by_minute_settle",
    "wirelens.requests_by_second": "wirelens.requests_by_second_settle",
}
# rollup table -> the parameterized view that defines its rows (the one definition: the refresh, the
# settle and rebuild select from it with their own minutes)
ROW_VIEWS = {
    "wirelens.requests_by_minute": "wirelens.rollup_minute_rows",
    "wirelens.requests_by_second": "wirelens.rollup_second_rows",
}
# every refreshable view of the rollups
VIEWS = [*ROLLUPS.values(), *SETTLES.values()]
# The insert-time views of before issue 30 (004 drops them).
OLD_VIEWS = ("wirelens.requests_by_minute_from_requests", "wirelens.requests_by_second_from_requests")

# What an existing install's migration runs before re-applying
# queries/schema/004_rollups.sql: the rollups of before issue 30 were
# AggregatingMergeTree tables without as_of, which CREATE TABLE IF NOT EXISTS
# would keep. Their rows are derived data: the first refresh after 004
# recomputes every minute from wirelens.requests FINAL (watermark 1970).
# The parameterized row views read only wirelens.requests: 004 replaces them.
RECREATE_SQL = [f"DROP VIEW IF EXISTS {view}" for view in OLD_VIEWS] + \
               [f"DROP VIEW IF EXISTS {view}" for view in VIEWS] + \
               [f"DROP TABLE IF EXISTS {table}" for table in ROLLUPS]

# rebuild: every minute of {day:Date}, recomputed from FINAL by the rollup's row view, with a new as_of
DAY_SQL = """SELECT
    *,
    now64(3) AS as_of
FROM {rows}(minutes = (SELECT arrayMap(i -> toDateTime({{day:Date}}) + toIntervalMinute(i), range(1440))))
"""

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
    FROM wirelens.requests_by_minute FINAL
    WHERE minute >= toStartOfDay({since:DateTime64(3)})
    GROUP BY day
) AS by_minute
FULL OUTER JOIN
(
    SELECT toDate(second) AS day, sum(calls) AS second_calls
    FROM wirelens.requests_by_second FINAL
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

# Question: has the rollup seen every call of the window [since, until)?
#
# The watermark is when the newest recomputation held by the rollups started
# (the older of the two rollups'); a raw row inserted after it is not in the
# rollups yet. pending_rows counts those rows in the window (raw rows, a
# re-sent copy included: no FINAL needed, and inserted_at's minmax index and
# the time key make it cheap); overdue_rows the ones inserted more than
# OVERDUE_S ago, which a working refresh (every 10 s) would have taken in.
#   pending_rows = 0                     the rollups answer exactly for the window
#   pending_rows > 0, overdue_rows = 0   the last seconds of traffic are not in yet (the window ends now);
#                                        they will be within one refresh
#   overdue_rows > 0                     the refresh is stopped or failing (see `status`): the rollups
#                                        under-count the window by up to pending_rows calls, and waiting
#                                        will not fix it
# Every column is 0 / 1970 on empty tables. A rollup from before issue 30
# (no as_of column) fails with UNKNOWN_IDENTIFIER: the install needs its
# migration.
OVERDUE_S = 30
TRUST_SQL = f"""
WITH
    least((SELECT max(as_of) FROM wirelens.requests_by_minute),
          (SELECT max(as_of) FROM wirelens.requests_by_second)) AS watermark
SELECT
    watermark,
    count()                                                           AS pending_rows,
    countIf(inserted_at < now64(3) - toIntervalSecond({OVERDUE_S}))   AS overdue_rows,
    min(inserted_at)                                                  AS oldest_pending
FROM wirelens.requests
WHERE inserted_at > watermark
  AND timestamp >= toStartOfMinute({{since:DateTime64(3)}})
  AND timestamp < {{until:DateTime64(3)}}
"""

# The refreshes as the engine reports them (one row per rollup view).
STATUS_SQL = """
SELECT
    database || '.' || view                                       AS view,
    status,
    last_success_time,
    last_success_duration_ms,
    next_refresh_time,
    exception,
    written_rows
FROM system.view_refreshes
WHERE database = 'wirelens'
ORDER BY view
"""


class RollupError(clickhouse.QueryError):
    """The rollups cannot be refreshed or read as expected; the message says what was missing."""


def rebuild(url: str, day: dt.date) -> None:
    """Recompute every minute of `day` from wirelens.requests FINAL and append it with a new as_of."""
    for table, rows in ROW_VIEWS.items():
        try:
            clickhouse.post(url, f"INSERT INTO {table}\n{DAY_SQL.format(rows=rows)}", {"day": day.isoformat()},
                            timeout=3600)
        except clickhouse.UnreachableError:
            raise
        except clickhouse.QueryError as exc:
            if "UNKNOWN_TABLE" in str(exc) or "UNKNOWN_FUNCTION" in str(exc):
                raise RollupError(f"{rows} (the rows of {table}) is not on the server: apply "
                                  f"queries/schema/004_rollups.sql ({exc})") from exc
            raise


def check(url: str, since: dt.timedelta) -> str:
    return clickhouse.run(url, CHECK_SQL, clickhouse.window(since), fmt="PrettyCompactMonoBlock")


def trust(url: str, window: dict[str, str]) -> dict[str, str]:
    """TRUST_SQL's one row for the window ({since, until}) as a dict of strings."""
    header, row = clickhouse.run(url, TRUST_SQL, window).splitlines()
    return dict(zip(header.split("\t"), row.split("\t")))


def status(url: str, since: dt.timedelta) -> str:
    """The refreshes' state and, for the window, the rows the rollups have not seen."""
    refreshes = clickhouse.run(url, STATUS_SQL, {}, fmt="PrettyCompactMonoBlock")
    found = clickhouse.run(url, STATUS_SQL, {}, fmt="TabSeparated")
    missing = [v for v in VIEWS if v not in {line.split("\t")[0] for line in found.splitlines()}]
    window = clickhouse.window(since)
    t = trust(url, window)
    lines = [refreshes.rstrip("\n")]
    if missing:
        lines.append(f"missing refresh views: {', '.join(missing)} (apply queries/schema/004_rollups.sql)")
    lines.append(f"watermark (the newest recomputation both rollups hold started at): {t['watermark']}")
    lines.append(f"raw rows since {window['since']} inserted after it: {t['pending_rows']} "
                 f"({t['overdue_rows']} of them more than {OVERDUE_S} s ago"
                 + (f", the oldest at {t['oldest_pending']}" if t["pending_rows"] != "0" else "") + ")")
    if t["overdue_rows"] != "0":
        lines.append("the rollups are behind: the refresh is stopped or failing (exception above)")
    return "\n".join(lines) + "\n"


def _now(url: str) -> str:
    return clickhouse.post(url, "SELECT now()").strip()


def wait_refreshed(url: str, timeout_s: float = 120.0, settled: bool = False, settle: bool = False) -> None:
    """Refresh both rollups now and return once a refresh of each started after this call did so
    successfully: every raw row inserted before the call is in the rollups then. For tests and
    benchmarks that must not wait for the interval. RollupError names what was missing at the deadline.

    settled: then also wait (without forcing more refreshes) until each view's latest refresh wrote
    nothing: the scheduled refreshes recompute the minutes of recent inserts for 60 s after them
    (004's overlap), work a benchmark timing queries should not run beside.

    settle: also run the hourly settle views (SETTLES) now and wait for their success: every minute
    of the hour that closed two hours ago recomputed from FINAL."""
    deadline = time.monotonic() + timeout_s
    start = _now(url)  # last_success_time has whole seconds: a refresh counts when it started later
    views = list(ROLLUPS.values()) + (list(SETTLES.values()) if settle else [])
    while True:
        rows = {}
        for line in clickhouse.run(url, STATUS_SQL, {}, fmt="TabSeparated").splitlines():
            view, state, last_success, _, _, exception, written = line.split("\t")
            rows[view] = (state, last_success, exception, written)
        pending = [v for v in views if v not in rows or rows[v][1] in ("", "\\N") or rows[v][1] <= start]
        busy = [v for v in views if v in rows and (rows[v][0] != "Scheduled" or rows[v][3] != "0")] \
            if settled and not pending else []
        if not pending and not busy:
            return
        if time.monotonic() > deadline:
            if pending:
                raise RollupError(f"no successful refresh of {', '.join(pending)} started after {start} within "
                                  f"{timeout_s:g} s: " + "; ".join(
                                      f"{v}: " + (f"status {rows[v][0]}, last success {rows[v][1]}, "
                                                  f"exception {rows[v][2] or 'none'}" if v in rows
                                                  else "no such refreshable view") for v in pending))
            raise RollupError(f"the refreshes of {', '.join(busy)} still recompute rows after {timeout_s:g} s: "
                              + "; ".join(f"{v}: status {rows[v][0]}, last refresh wrote {rows[v][3]} rows"
                                          for v in busy))
        for view in pending:
            if view in rows:
                clickhouse.post(url, f"SYSTEM REFRESH VIEW {view}")
        for view in pending:
            if view in rows:
                try:
                    clickhouse.post(url, f"SYSTEM WAIT VIEW {view}", timeout=max(1.0, deadline - time.monotonic()))
                except clickhouse.UnreachableError:
                    raise
                except clickhouse.QueryError:
                    pass  # a failed refresh: its exception is in system.view_refreshes, reported at the deadline
        time.sleep(0.2 if pending else 1.0)  # poll interval; the deadline above bounds the loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["status", "check", "rebuild"])
    parser.add_argument("--day", type=dt.date.fromisoformat, help="rebuild: the day (YYYY-MM-DD, UTC)")
    parser.add_argument("--since", default="1d", help="check, status: how far back from now (e.g. 1d, 7d); default 1d")
    parser.add_argument("--clickhouse-url",
                        default=os.environ.get("WIRELENS_CLICKHOUSE_URL",
                                               f"http://127.0.0.1:{os.environ.get('WIRELENS_CLICKHOUSE_HTTP_PORT', '8123')}"),
                        help="ClickHouse HTTP interface (default $WIRELENS_CLICKHOUSE_URL or 127.0.0.1:8123)")
    args = parser.parse_args(argv)
    try:
        since = clickhouse.parse_duration(args.since)
        if args.command == "status":
            print(status(args.clickhouse_url, since), end="")
            return 0
        if args.command == "rebuild":
            if args.day is None:
                parser.error("rebuild needs --day YYYY-MM-DD")
            rebuild(args.clickhouse_url, args.day)
            print(f"rebuilt {', '.join(ROLLUPS)} for {args.day} from wirelens.requests FINAL")
        print(check(args.clickhouse_url, since), end="")
    except clickhouse.QueryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
