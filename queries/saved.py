#!/usr/bin/env python3
"""Run a saved query from queries/*.sql against ClickHouse's HTTP interface.

    queries/saved.py latency_bytes_by_operation --since 1h [--run-id ID] [--format PrettyCompact]
    queries/saved.py compare_protocols --param operation=catalog.GetProduct \
        --param protocol_a=rest --param protocol_b=grpc [--param resamples=200]

Parameters are passed as ClickHouse query parameters ({since:DateTime64(3)}
and friends in the SQL), never spliced into the text. The user comes from
--user or CLICKHOUSE_USER, its password from CLICKHOUSE_PASSWORD (the local
stack's read-only reporter and its password are in .run/local/credentials.env).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

QUERIES = Path(__file__).resolve().parent


class QueryError(RuntimeError):
    pass


def parse_duration(text: str) -> dt.timedelta:
    match = re.fullmatch(r"(\d+)(s|m|h|d)", text)
    if not match:
        raise QueryError(f"--since {text!r}: expected a number and a unit, e.g. 30s, 15m, 2h, 1d")
    value, unit = int(match[1]), match[2]
    unit_name = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]
    return dt.timedelta(**{unit_name: value})


def saved_query(name: str) -> str:
    path = QUERIES / f"{name}.sql"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in QUERIES.glob("*.sql")))
        raise QueryError(f"no saved query {name!r} in {QUERIES} (known: {known})")
    return path.read_text().strip().rstrip(";")


# Defaults for the parameters some saved queries add to since/until/run_id.
PARAM_DEFAULTS = {"resamples": "200"}


def parameters(sql: str) -> list[str]:
    """Names of the query parameters ({name:Type}) a saved query uses, in order of first use."""
    return list(dict.fromkeys(re.findall(r"\{(\w+):[^}]+\}", sql)))


class UnreachableError(QueryError):
    """Nothing answered at the ClickHouse URL."""


def post(http_url: str, sql: str, params: dict[str, str] | None = None, timeout: float = 60.0,
         user: str = "", password: str = "") -> str:
    """Run one statement over ClickHouse's HTTP interface with query parameters; its answer as text.

    Without a user, ClickHouse's default user (the local stack's admin path, loopback only)."""
    query = {f"param_{k}": v for k, v in (params or {}).items()}
    url = f"{http_url.rstrip('/')}/?{urllib.parse.urlencode(query)}"
    headers = {"X-ClickHouse-User": user, "X-ClickHouse-Key": password} if user else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=sql.encode(), headers=headers),
                                    timeout=timeout) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        raise QueryError(f"ClickHouse at {http_url} rejected the query: "
                         f"{exc.read().decode(errors='replace').strip()}") from exc
    except (OSError, urllib.error.URLError) as exc:
        raise UnreachableError(f"ClickHouse is not reachable at {http_url}: {exc}") from exc


def run(http_url: str, sql: str, params: dict[str, str], fmt: str = "TabSeparatedWithNames",
        timeout: float = 60.0, user: str = "", password: str = "") -> str:
    return post(http_url, f"{sql}\nFORMAT {fmt}", params, timeout, user, password)


def window(since: dt.timedelta, until: dt.datetime | None = None) -> dict[str, str]:
    end = until or dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    start = end - since
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    return {"since": start.strftime(fmt)[:-3], "until": end.strftime(fmt)[:-3]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="saved query, the file name in queries/ without .sql")
    parser.add_argument("--since", default="1h", help="window length ending now (30s, 15m, 2h, 1d); default 1h")
    parser.add_argument("--run-id", default="", help="only calls of this load run")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="another query parameter, e.g. operation=catalog.GetProduct (repeatable)")
    parser.add_argument("--format", default="PrettyCompactMonoBlock", help="ClickHouse output format")
    parser.add_argument("--clickhouse-url", default=os.environ.get(
        "WIRELENS_CLICKHOUSE_URL", f"http://127.0.0.1:{os.environ.get('WIRELENS_CLICKHOUSE_HTTP_PORT', '8123')}"),
        help="ClickHouse HTTP interface (env WIRELENS_CLICKHOUSE_URL)")
    parser.add_argument("--user", default=os.environ.get("CLICKHOUSE_USER", ""),
                        help="ClickHouse user (env CLICKHOUSE_USER; its password from CLICKHOUSE_PASSWORD); "
                             "default: ClickHouse's default user")
    args = parser.parse_args(argv)
    try:
        params = {**window(parse_duration(args.since)), "run_id": args.run_id}
        for item in args.param:
            name, sep, value = item.partition("=")
            if not sep:
                raise QueryError(f"--param {item!r}: expected NAME=VALUE")
            params[name] = value
        sql = saved_query(args.name)
        for name in parameters(sql):
            if name not in params and name in PARAM_DEFAULTS:
                params[name] = PARAM_DEFAULTS[name]
        missing = [name for name in parameters(sql) if name not in params]
        if missing:
            raise QueryError(f"{args.name} needs " + ", ".join(f"--param {n}=..." for n in missing))
        sys.stdout.write(run(args.clickhouse_url, sql, params, args.format,
                             user=args.user, password=os.environ.get("CLICKHOUSE_PASSWORD", "")))
    except QueryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
