"""Statements over ClickHouse's HTTP interface, saved query texts, report windows.

Parameters travel as ClickHouse query parameters ({name:Type} in the SQL),
never spliced into the text. Running a saved query for a person is
`bin/wirelens query` (cli/internal/report); this module is for programs
that read answers themselves.
"""

from __future__ import annotations

import datetime as dt
import re
import urllib.error
import urllib.parse
import urllib.request

from . import ROOT

QUERIES = ROOT / "queries"


class QueryError(RuntimeError):
    """ClickHouse refused or failed a statement; the message is its own text."""


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
    """A SELECT's answer in ClickHouse output format fmt."""
    return post(http_url, f"{sql}\nFORMAT {fmt}", params, timeout, user, password)


def saved_query(name: str) -> str:
    """The text of queries/<name>.sql, without its trailing semicolon."""
    path = QUERIES / f"{name}.sql"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in QUERIES.glob("*.sql")))
        raise QueryError(f"no saved query {name!r} in {QUERIES} (known: {known})")
    return path.read_text().strip().rstrip(";")


def parameters(sql: str) -> list[str]:
    """Names of the query parameters ({name:Type}) a statement uses, in order of first use."""
    return list(dict.fromkeys(re.findall(r"\{(\w+):[^}]+\}", sql)))


def parse_duration(text: str) -> dt.timedelta:
    """A window length: a number and a unit, 30s, 15m, 2h, 1d."""
    match = re.fullmatch(r"(\d+)(s|m|h|d)", text)
    if not match:
        raise QueryError(f"--since {text!r}: expected a number and a unit, e.g. 30s, 15m, 2h, 1d")
    value, unit = int(match[1]), match[2]
    unit_name = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]
    return dt.timedelta(**{unit_name: value})


def window(since: dt.timedelta, until: dt.datetime | None = None) -> dict[str, str]:
    """The since and until parameters of the saved queries: `since` long, ending at until (default now + 1 s)."""
    end = until or dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    start = end - since
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    return {"since": start.strftime(fmt)[:-3], "until": end.strftime(fmt)[:-3]}
