"""The rollups (queries/schema/004_rollups.sql, queries/rollup/*.sql) agree with the raw saved queries.

A scratch ClickHouse gets the schema and 60,000 synthetic calls from the
query-speed benchmark's generator (bench/query_speed.py: ten operations, six
protocols, three load runs and live traffic, ~1 % errors), some of them
sampled. Each rollup variant must return the same rows as its raw saved
query over a minute-aligned window: counts, sums and means equal (up to the
last rounded digit), min/max equal, percentiles within DDSketch's 1 %.
Then a re-sent batch makes the rollup count calls twice, and
`queries/rollup.py rebuild` makes it exact again.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest

from bench import query_speed  # the benchmark's schema step and generator
from deploy.local import clickhouse_server  # a scratch server on free ports
from queries import rollup
from wirelens_helpers import clickhouse  # ClickHouse over HTTP

ROOT = Path(__file__).resolve().parents[2]

CALLS = 60_000
PERCENTILE = {"p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms",
              "ttfb_p50_ms", "ttfb_p90_ms", "ttfb_p95_ms", "ttfb_p99_ms", "ttfb_p999_ms"}
KEYS = {"second", "operation", "protocol", "streaming", "http_status", "grpc_status"}
VARIANTS = sorted(p.stem for p in (ROOT / "queries" / "rollup").glob("*.sql"))


@pytest.fixture(scope="module")
def ch():
    server = clickhouse_server.Scratch("wirelens-rollup-test-")
    server.start()
    try:
        query_speed.create_schema(server.url)
        end = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0) - dt.timedelta(minutes=1)
        start_ns = int((end - dt.timedelta(seconds=query_speed.WINDOW_S)).timestamp()) * 1_000_000_000
        clickhouse.post(server.url, query_speed.LOAD_SQL.format(
            rows=CALLS, first=0, count=CALLS, start_ns=start_ns,
            window_ns=(query_speed.WINDOW_S - 2) * 1_000_000_000))
        # Every tenth call of the last quarter was recorded at 0.1, every fifth at 0.5.
        clickhouse.post(server.url, "ALTER TABLE wirelens.requests UPDATE sample_rate = "
                               "multiIf(cityHash64(request_id) % 10 = 0, 0.1, cityHash64(request_id) % 5 = 0, 0.5, 1) "
                               "WHERE run_id = '' SETTINGS mutations_sync = 2")
        # The mutation rewrote the raw rows only: rebuild the rollup from them (also exercises rebuild).
        rollup.rebuild(server.url, (end - dt.timedelta(seconds=query_speed.WINDOW_S)).date())
        if (end - dt.timedelta(seconds=query_speed.WINDOW_S)).date() != end.date():
            rollup.rebuild(server.url, end.date())
        server.window = {"since": (end - dt.timedelta(seconds=query_speed.WINDOW_S)).strftime("%Y-%m-%d %H:%M:%S"),
                         "until": end.strftime("%Y-%m-%d %H:%M:%S")}
        server.end = end
        yield server
    finally:
        server.stop()


def answer(ch, name: str, run_id: str) -> list[dict]:
    text = clickhouse.run(ch.url, clickhouse.saved_query(name), {**ch.window, "run_id": run_id})
    header, *lines = text.splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]


LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def sorted_latencies(ch, run_id: str) -> dict[tuple[str, str], dict[str, list[int]]]:
    """Each (operation, protocol)'s sampled durations and TTFBs in µs, sorted, from the raw table."""
    text = clickhouse.run(ch.url, """
        SELECT operation, protocol, arraySort(groupArray(duration_us)), arraySort(groupArray(ttfb_us))
        FROM wirelens.requests FINAL
        WHERE timestamp >= {since:DateTime64(3)} AND timestamp < {until:DateTime64(3)}
          AND ({run_id:String} = '' OR run_id = {run_id:String})
        GROUP BY operation, protocol""", {**ch.window, "run_id": run_id}, fmt="JSONCompactEachRow")
    return {(op, proto): {"": d, "ttfb_": t} for op, proto, d, t in map(json.loads, text.splitlines())}


def percentile_ok(values: list[int], column: str, rolled: str) -> bool:
    """Within DDSketch's 1 % of an order statistic at the level's rank (exact rank conventions differ:
    quantileExact takes element floor(level·n), the sketch rank level·(n−1))."""
    level = LEVELS[column.removeprefix("ttfb_").removesuffix("_ms")]
    n = len(values)
    lo = values[max(0, int(level * (n - 1)) - 1)]
    hi = values[min(n - 1, int(level * n) + 1)]
    return lo * 0.99 - 1 <= float(rolled) * 1000 <= hi * 1.01 + 1


def close(column: str, raw: str, rolled: str) -> bool:
    if raw == rolled:
        return True
    try:
        a, b = float(raw), float(rolled)
    except ValueError:
        return False
    # Sums in another order: the last rounded digit may differ.
    digits = len(raw.split(".")[1]) if "." in raw else 0
    return abs(a - b) <= 10 ** -digits + 1e-9 * abs(a)


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("run_id", ["", "bench-run-2"])
def test_rollup_variant_answers_as_the_raw_query(ch, name, run_id):
    raw, rolled = answer(ch, name, run_id), answer(ch, f"rollup/{name}", run_id)
    assert raw, f"{name}: the raw query returned nothing; the dataset is wrong"
    assert list(raw[0]) == list(rolled[0]), f"{name}: columns differ"
    key = lambda row: tuple(row[k] for k in row if k in KEYS)  # noqa: E731
    assert [key(r) for r in raw] == [key(r) for r in rolled], f"{name}: different groups"
    latencies = sorted_latencies(ch, run_id)
    misses = [(key(r), column, r[column], o[column])
              for r, o in zip(raw, rolled) for column in r
              if not (percentile_ok(latencies[(r["operation"], r["protocol"])][column[:5] if column.startswith("ttfb_")
                                                                               else ""], column, o[column])
                      if column in PERCENTILE else close(column, r[column], o[column]))]
    assert not misses, f"{name}: {len(misses)} values differ, e.g. {misses[:5]}"


def test_sampled_rows_are_weighted_in_the_rollup(ch):
    rows = answer(ch, "rollup/latency_by_operation", "")
    assert any(float(r["sample_rate"]) == 0.1 for r in rows)
    assert sum(int(r["calls"]) for r in rows) > sum(int(r["sampled_calls"]) for r in rows)


def test_a_resent_batch_counts_twice_until_the_day_is_rebuilt(ch):
    def drift() -> tuple[int, int]:
        """Calls in each rollup beyond the raw table's FINAL."""
        text = clickhouse.run(ch.url, rollup.CHECK_SQL, {"since": ch.window["since"]})
        header, *lines = text.splitlines()
        days = [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]
        return (sum(int(d["by_minute_calls"]) - int(d["raw_calls"]) for d in days),
                sum(int(d["by_second_calls"]) - int(d["raw_calls"]) for d in days))

    assert drift() == (0, 0)
    clickhouse.post(ch.url, "INSERT INTO wirelens.requests SELECT * FROM wirelens.requests "
                       "WHERE run_id = 'bench-run-1' ORDER BY timestamp LIMIT 500")
    assert drift() == (500, 500)
    for day in sorted({dt.date.fromisoformat(ch.window["since"][:10]), ch.end.date()}):
        rollup.rebuild(ch.url, day)
    assert drift() == (0, 0)


def report(ch, *args: str) -> str:
    done = subprocess.run([str(ROOT / "bin" / "wirelens"), "report", "--since", "3h", "--clickhouse-url", ch.url,
                           "--queries", str(ROOT / "queries"), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not (ROOT / "bin" / "wirelens").exists(), reason="bin/wirelens is built by `make services`")
def test_the_report_reads_the_rollups_when_asked_and_says_so(ch):
    rolled = report(ch, "--source", "rollup")
    assert "Read from the rollups" in rolled and "--source rollup:" in rolled
    for name in VARIANTS:
        assert name in rolled.split("Read from the rollups", 1)[1].split("\n\n", 1)[0].replace("\n", " ")
    # 60,000 calls are far below the automatic threshold: every query reads the raw calls.
    assert "Read from the rollups" not in report(ch)
    assert "Read from the rollups" not in report(ch, "--source", "raw")
