"""The rollups (queries/schema/004_rollups.sql, queries/rollup/*.sql) agree with the raw saved queries,
also after re-sends, with no manual step.

A scratch ClickHouse gets the schema and 60,000 synthetic calls from the
query-speed benchmark's generator (bench/query_speed.py: ten operations, six
protocols, three load runs and live traffic, ~1 % errors), some of them
sampled. The refreshable views fill the rollups (queries.rollup.wait_refreshed:
SYSTEM REFRESH VIEW + WAIT, polled with a deadline). Then duplicates and late
calls arrive as the pipeline's faults make them:
  * a replay of 500 calls, re-batched (200 + 300 rows: no block is byte-identical
    to the first insert, so insert dedup cannot catch it),
  * a re-send of the calls of the window's first minute, closed for an hour,
  * late first arrivals: 40 new calls (new request ids, status 503: groups the
    minute did not have) in a closed minute,
and the refresh runs again. Each rollup variant must then return the same rows
as its raw saved query (which reads FINAL) over a minute-aligned window:
counts, sums and means equal (up to the last rounded digit), min/max equal,
percentiles within DDSketch's 1 %. `queries/rollup.py rebuild` and `check`
keep working (the sample rates are changed by a mutation, which the refresh
does not follow: rebuild takes it in).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
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
LATE = 40


def one(url: str, sql: str, params: dict[str, str] | None = None) -> str:
    return clickhouse.post(url, sql, params).strip()


def drift(url: str, since: str) -> tuple[int, int]:
    """Calls in each rollup beyond the raw table's FINAL (rollup.CHECK_SQL, summed over the days)."""
    header, *lines = clickhouse.run(url, rollup.CHECK_SQL, {"since": since}).splitlines()
    days = [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]
    return (sum(int(d["by_minute_calls"]) - int(d["raw_calls"]) for d in days),
            sum(int(d["by_second_calls"]) - int(d["raw_calls"]) for d in days))


@pytest.fixture(scope="module")
def ch():
    server = clickhouse_server.Scratch("wirelens-rollup-test-")
    server.start()
    try:
        query_speed.create_schema(server.url)
        # Merges would collapse a minute's versions sooner or later; readers must not depend on when (FINAL).
        for table in rollup.ROLLUPS:
            clickhouse.post(server.url, f"SYSTEM STOP MERGES {table}")
        end = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0) - dt.timedelta(minutes=1)
        start = end - dt.timedelta(seconds=query_speed.WINDOW_S)
        clickhouse.post(server.url, query_speed.LOAD_SQL.format(
            rows=CALLS, first=0, count=CALLS, start_ns=int(start.timestamp()) * 1_000_000_000,
            window_ns=(query_speed.WINDOW_S - 2) * 1_000_000_000))
        server.window = {"since": start.strftime("%Y-%m-%d %H:%M:%S"), "until": end.strftime("%Y-%m-%d %H:%M:%S")}
        server.end = end
        server.log = {}
        url = server.url

        rollup.wait_refreshed(url, timeout_s=60)
        server.log["filled"] = drift(url, server.window["since"])

        # Every tenth call of the last quarter was recorded at 0.1, every fifth at 0.5. A mutation: the
        # refresh follows inserts, not mutations, so `rebuild` takes it in (the repair tool's case). The
        # refreshes are stopped meanwhile: within 60 s of the load they would recompute its minutes anyway.
        for view in rollup.ROLLUPS.values():
            clickhouse.post(url, f"SYSTEM STOP VIEW {view}")
        clickhouse.post(url, "ALTER TABLE wirelens.requests UPDATE sample_rate = "
                             "multiIf(cityHash64(request_id) % 10 = 0, 0.1, cityHash64(request_id) % 5 = 0, 0.5, 1) "
                             "WHERE run_id = '' SETTINGS mutations_sync = 2")
        server.log["after_mutation"] = drift(url, server.window["since"])
        for day in sorted({start.date(), end.date()}):
            rollup.rebuild(url, day)
        server.log["rebuilt"] = drift(url, server.window["since"])
        for view in rollup.ROLLUPS.values():
            clickhouse.post(url, f"SYSTEM START VIEW {view}")

        # The faults' duplicates and late calls (see the module's docstring).
        # rows inserted from here on: counted by inserted_at, which a merge dropping a duplicate keeps
        # (the newest copy survives)
        before, raw_calls = one(url, "SELECT now64(3)"), int(one(url, "SELECT count() FROM wirelens.requests FINAL"))
        replay = "SELECT * FROM wirelens.requests FINAL WHERE run_id = 'bench-run-2' ORDER BY timestamp, request_id"
        clickhouse.post(url, f"INSERT INTO wirelens.requests {replay} LIMIT 200")
        clickhouse.post(url, f"INSERT INTO wirelens.requests {replay} LIMIT 300 OFFSET 200")
        first_minute = {"m": server.window["since"]}
        clickhouse.post(url, "INSERT INTO wirelens.requests SELECT * FROM wirelens.requests "
                             "WHERE toStartOfMinute(timestamp) = {m:DateTime}", first_minute)
        server.log["resent_minute"] = int(one(url, "SELECT count() FROM wirelens.requests FINAL "
                                                   "WHERE toStartOfMinute(timestamp) = {m:DateTime}", first_minute))
        late_minute = {"m": (start + dt.timedelta(minutes=20)).strftime("%Y-%m-%d %H:%M:%S")}
        clickhouse.post(url, "INSERT INTO wirelens.requests SELECT * REPLACE (concat(request_id, '-late') AS request_id, "
                             "503 AS http_status) FROM wirelens.requests FINAL "
                             "WHERE toStartOfMinute(timestamp) = {m:DateTime} "
                             f"ORDER BY request_id LIMIT {LATE}", late_minute)
        server.log["rows_added"] = int(one(url, "SELECT count() FROM wirelens.requests "
                                                "WHERE inserted_at > {t:DateTime64(3)}", {"t": before}))
        server.log["calls_added"] = int(one(url, "SELECT count() FROM wirelens.requests FINAL")) - raw_calls

        rollup.wait_refreshed(url, timeout_s=60)
        server.log["after_faults"] = drift(url, server.window["since"])
        yield server
    finally:
        server.stop()


def answer(ch, name: str, run_id: str, window: dict[str, str] | None = None) -> list[dict]:
    text = clickhouse.run(ch.url, clickhouse.saved_query(name), {**(window or ch.window), "run_id": run_id})
    header, *lines = text.splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]


LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def sorted_latencies(ch, run_id: str, window: dict[str, str] | None = None) -> dict[tuple[str, str], dict[str, list[int]]]:
    """Each (operation, protocol)'s sampled durations and TTFBs in µs, sorted, from the raw table."""
    text = clickhouse.run(ch.url, """
        SELECT operation, protocol, arraySort(groupArray(duration_us)), arraySort(groupArray(ttfb_us))
        FROM wirelens.requests FINAL
        WHERE timestamp >= {since:DateTime64(3)} AND timestamp < {until:DateTime64(3)}
          AND ({run_id:String} = '' OR run_id = {run_id:String})
        GROUP BY operation, protocol""", {**(window or ch.window), "run_id": run_id}, fmt="JSONCompactEachRow")
    return {(op, proto): {"": d, "ttfb_": t} for op, proto, d, t in map(json.loads, text.splitlines())}


def percentile_ok(values: list[int], column: str, rolled: str) -> bool:
    """Within DDSketch's 1 % of an order statistic at the level's rank (exact rank conventions differ:
    quantileExact takes element floor(level·n), the sketch rank level·(n−1))."""
    level = LEVELS[column.removeprefix("ttfb_").removesuffix("_ms")]
    n = len(values)
    lo = values[max(0, int(level * (n - 1)) - 1)]
    hi = values[min(n - 1, int(level * n) + 1)]
    return lo * 0.99 - 1 <= float(rolled) * 1000 <= hi * 1.01 + 1


def same_number(raw: str, rolled: str) -> bool:
    """Equal as printed; sums taken in another order may differ in the last printed digit."""
    if raw == rolled:
        return True
    try:
        a, b = float(raw), float(rolled)
    except ValueError:
        return False
    digits = len(raw.split(".")[1]) if "." in raw else 0
    return abs(a - b) <= 10 ** -digits + 1e-9 * abs(a)


def test_the_faults_made_duplicates_and_late_calls(ch):
    """The injections did what the variant tests rely on: rows FINAL drops, and new calls."""
    assert ch.log["calls_added"] == LATE
    assert ch.log["rows_added"] == 500 + ch.log["resent_minute"] + LATE and ch.log["resent_minute"] > 0


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("run_id", ["", "bench-run-2"])
def test_rollup_variant_answers_as_the_raw_query_after_resends(ch, name, run_id):
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
                      if column in PERCENTILE else same_number(r[column], o[column]))]
    assert not misses, f"{name}: {len(misses)} values differ, e.g. {misses[:5]}"


def test_late_calls_reach_the_rollup_in_their_closed_minute(ch):
    """The 503s exist only among the late arrivals: the rollup has them, once."""
    rolled = sum(int(r["calls"]) for r in answer(ch, "rollup/errors_by_status", "") if r["http_status"] == "503")
    raw = sum(int(r["calls"]) for r in answer(ch, "errors_by_status", "") if r["http_status"] == "503")
    assert raw >= LATE and rolled == raw


def test_sampled_rows_are_weighted_in_the_rollup(ch):
    rows = answer(ch, "rollup/latency_by_operation", "")
    assert any(float(r["sample_rate"]) == 0.1 for r in rows)
    assert sum(int(r["calls"]) for r in rows) > sum(int(r["sampled_calls"]) for r in rows)


def test_check_and_rebuild_still_repair_what_the_refresh_does_not_follow(ch):
    assert ch.log["filled"] == (0, 0)  # the refresh alone, from empty rollups
    # A mutation changes no inserted_at: the weights of the last quarter changed under the rollup...
    assert ch.log["after_mutation"] != (0, 0)
    # ... until rebuild appended the recomputed days.
    assert ch.log["rebuilt"] == (0, 0)
    # The re-sends and late calls needed no manual step.
    assert ch.log["after_faults"] == (0, 0)
    assert rollup.main(["check", "--since", "1d", "--clickhouse-url", ch.url]) == 0


def test_status_and_trust_say_the_rollup_has_every_row(ch, capsys):
    t = rollup.trust(ch.url, ch.window)
    assert (t["pending_rows"], t["overdue_rows"]) == ("0", "0"), t
    assert rollup.main(["status", "--since", "1d", "--clickhouse-url", ch.url]) == 0
    out = capsys.readouterr().out
    assert all(view in out for view in rollup.VIEWS) and "missing refresh views" not in out
    assert "inserted after it: 0 (0 of them" in out
    # A row the rollups have not seen yet: pending, not overdue.
    clickhouse.post(ch.url, "INSERT INTO wirelens.requests SELECT * REPLACE (concat(request_id, '-new') AS request_id) "
                            "FROM wirelens.requests WHERE run_id = 'bench-run-3' ORDER BY timestamp LIMIT 1")
    t = rollup.trust(ch.url, ch.window)
    assert (t["pending_rows"], t["overdue_rows"]) == ("1", "0"), t
    rollup.wait_refreshed(ch.url, timeout_s=60)
    assert rollup.trust(ch.url, ch.window)["pending_rows"] == "0"


def test_wait_refreshed_names_a_refresh_that_does_not_run(ch):
    view = rollup.ROLLUPS["wirelens.requests_by_second"]
    clickhouse.post(ch.url, f"SYSTEM STOP VIEW {view}")
    try:
        with pytest.raises(rollup.RollupError, match=rf"no successful refresh of {view} started after .* within 2 s: "
                                                     rf"{view}: status Disabled, last success .*, exception "):
            rollup.wait_refreshed(ch.url, timeout_s=2)
    finally:
        clickhouse.post(ch.url, f"SYSTEM START VIEW {view}")
    rollup.wait_refreshed(ch.url, timeout_s=60)


def test_a_long_insert_stamps_each_block_when_it_is_formed(ch):
    """inserted_at must be per block (nowInBlock64), not per INSERT (now64: one value for the whole query). A long
    INSERT ... SELECT commits its blocks over minutes: stamped with the query's start, the blocks committing more than
    the refresh's 60 s overlap later would never be rolled up (measured: -17M of 100M calls in bench-queries).
    Three one-row blocks 0.4 s apart must carry stamps as far apart."""
    clickhouse.post(ch.url, """
        INSERT INTO wirelens.requests (timestamp, request_id, run_id, protocol, operation, streaming)
        SELECT {t:DateTime64(3)}, concat('block-', toString(number), toString(sleepEachRow(0.4))),
               'bench-run-3', 'grpc', 'echo.Unary', 'unary'
        FROM numbers(3)
        SETTINGS max_block_size = 1, max_insert_block_size = 1, min_insert_block_size_rows = 1,
                 min_insert_block_size_bytes = 0, max_threads = 1, max_insert_threads = 1""",
                    {"t": (dt.datetime.fromisoformat(ch.window["since"]) + dt.timedelta(minutes=50)).isoformat(" ")})
    stamps = one(ch.url, "SELECT groupArray(inserted_at) FROM (SELECT inserted_at FROM wirelens.requests "
                         "WHERE request_id LIKE 'block-%' ORDER BY inserted_at)")
    first, *_, last = (dt.datetime.fromisoformat(s) for s in json.loads(stamps.replace("'", '"')))
    assert (last - first).total_seconds() >= 0.7, stamps
    rollup.wait_refreshed(ch.url, timeout_s=60)  # the three calls are in the rollups too
    assert rollup.trust(ch.url, ch.window)["pending_rows"] == "0"


def test_rebuild_names_a_row_view_the_server_lacks(ch, monkeypatch):
    monkeypatch.setitem(rollup.ROW_VIEWS, "wirelens.requests_by_minute", "wirelens.no_such_rows")
    with pytest.raises(rollup.RollupError, match=r"wirelens.no_such_rows \(the rows of wirelens.requests_by_minute\) "
                                                 r"is not on the server: apply queries/schema/004_rollups.sql"):
        rollup.rebuild(ch.url, dt.date(2026, 1, 1))


def report(ch, *args: str) -> str:
    done = subprocess.run([str(ROOT / "bin" / "wirelens"), "report", "--since", "3h", "--clickhouse-url", ch.url,
                           "--queries", str(ROOT / "queries"), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_report_reads_the_rollups_when_asked_and_says_so(ch):
    rolled = report(ch, "--source", "rollup")
    assert "Read from the rollups" in rolled and "--source rollup:" in rolled
    for name in VARIANTS:
        assert name in rolled.split("Read from the rollups", 1)[1].split("\n\n", 1)[0].replace("\n", " ")
    # 60,000 calls are far below the automatic threshold: every query reads the raw calls.
    assert "Read from the rollups" not in report(ch)
    assert "Read from the rollups" not in report(ch, "--source", "raw")


def test_the_settle_pass_counts_a_block_that_committed_too_late_for_the_refresh(ch):
    """A block committed more than the refresh's 60 s overlap after its inserted_at (a stalled engine, a lagging
    replica) is never touched by the 10 s refresh. Made for real: 3,000 calls stamped in a staging table with
    inserted_at = their timestamp + 1 s, in the hour the settle covers ([start of this hour - 3 h, - 2 h)), then
    attached to wirelens.requests (ATTACH PARTITION ... FROM keeps the stored stamps): the part appears now with
    stamps ~2-3 h old. The refresh misses it; the settle (SYSTEM REFRESH VIEW ..._settle) counts it, every
    variant then answers as its raw query over that hour, and the watermark (max(as_of)) has not moved."""
    url = ch.url
    # The settle's window follows the server's hour: not within a minute of its end (polled on the server clock).
    deadline = dt.datetime.now() + dt.timedelta(seconds=90)
    while int(one(url, "SELECT toUnixTimestamp(toStartOfHour(now()) + toIntervalHour(1)) - toUnixTimestamp(now())")) < 60:
        assert dt.datetime.now() < deadline, "the server's clock did not pass the hour within 90 s"
        time.sleep(1)  # poll interval; the deadline above bounds the loop
    hour = dt.datetime.fromisoformat(one(url, "SELECT toStartOfHour(now())"))
    start = hour - dt.timedelta(hours=3)
    window = {"since": start.isoformat(" "), "until": (start + dt.timedelta(hours=1)).isoformat(" ")}
    ddl = one(url, "SHOW CREATE TABLE wirelens.requests FORMAT TabSeparatedRaw")
    staged = ddl.replace("CREATE TABLE wirelens.requests", "CREATE TABLE wirelens.late_commit", 1).replace(
        "MATERIALIZED nowInBlock64(3)", "DEFAULT toDateTime64(timestamp, 3) + toIntervalSecond(1)")
    assert staged.count("wirelens.late_commit") == 1 and "toIntervalSecond(1)" in staged, ddl
    load = query_speed.LOAD_SQL.format(rows=3000, first=0, count=3000,
                                       start_ns=int(start.replace(tzinfo=dt.timezone.utc).timestamp()) * 10**9,
                                       window_ns=3000 * 10**9)
    assert "sipHash128(number, 'r')" in load  # new request ids: calls the rollups have never seen
    load = load.replace("sipHash128(number, 'r')", "sipHash128(number, 'late-commit')").replace(
        "INSERT INTO wirelens.requests", "INSERT INTO wirelens.late_commit", 1)
    clickhouse.post(url, "DROP TABLE IF EXISTS wirelens.late_commit")
    clickhouse.post(url, staged)
    try:
        clickhouse.post(url, load)
        for day in one(url, "SELECT DISTINCT toDate(timestamp) FROM wirelens.late_commit").split():
            clickhouse.post(url, f"ALTER TABLE wirelens.requests ATTACH PARTITION '{day}' FROM wirelens.late_commit")
    finally:
        clickhouse.post(url, "DROP TABLE IF EXISTS wirelens.late_commit")
    stamps = one(url, "SELECT count(), max(inserted_at) < now64(3) - toIntervalMinute(90) FROM wirelens.requests "
                      "WHERE timestamp >= {since:DateTime} AND timestamp < {until:DateTime}", window)
    assert stamps.split("\t") == ["3000", "1"], stamps
    totals = ("SELECT (SELECT sum(calls) FROM wirelens.requests_by_minute FINAL WHERE minute >= {since:DateTime} "
              "AND minute < {until:DateTime}), (SELECT sum(calls) FROM wirelens.requests_by_second FINAL "
              "WHERE second >= {since:DateTime} AND second < {until:DateTime})")

    rollup.wait_refreshed(url, timeout_s=60)  # the 10 s refresh, forced: it does not see the part
    assert one(url, totals, window) == "0\t0"
    assert rollup.trust(url, window)["pending_rows"] == "0"  # nor does TRUST_SQL: hence the settle

    # The 10 s refreshes stopped meanwhile, so that only the settle can move the watermark.
    watermark_sql = ("SELECT (SELECT max(as_of) FROM wirelens.requests_by_minute), "
                     "(SELECT max(as_of) FROM wirelens.requests_by_second)")
    for view in rollup.ROLLUPS.values():
        clickhouse.post(url, f"SYSTEM STOP VIEW {view}")
    try:
        watermark = one(url, watermark_sql)
        for view in rollup.SETTLES.values():
            clickhouse.post(url, f"SYSTEM REFRESH VIEW {view}")
        for view in rollup.SETTLES.values():
            clickhouse.post(url, f"SYSTEM WAIT VIEW {view}", timeout=60)
        # The settle replaced the hour's rows without moving the watermark the refresh and the report go by.
        assert one(url, watermark_sql) == watermark
    finally:
        for view in rollup.ROLLUPS.values():
            clickhouse.post(url, f"SYSTEM START VIEW {view}")
    assert one(url, totals, window) == "3000\t3000"
    for name in VARIANTS:
        raw, rolled = answer(ch, name, "", window), answer(ch, f"rollup/{name}", "", window)
        assert raw and len(raw) == len(rolled), name
        latencies = sorted_latencies(ch, "", window)
        misses = [(column, r[column], o[column]) for r, o in zip(raw, rolled) for column in r
                  if not (percentile_ok(latencies[(r["operation"], r["protocol"])][column[:5] if
                                                                                   column.startswith("ttfb_") else ""],
                                        column, o[column]) if column in PERCENTILE
                          else same_number(r[column], o[column]))]
        assert not misses, f"{name}: {len(misses)} values differ, e.g. {misses[:5]}"


def test_a_minute_recomputed_alone_keeps_the_calls_of_its_last_second(ch):
    """The row views bound wirelens.requests.timestamp (DateTime64(9)) by their minutes. With a DateTime bound,
    26.9's key analysis read `timestamp < M + 1 min` as `timestamp <= M + 59 s` (as for an integer key) and skipped
    every granule starting in the minute's last second: a minute recomputed alone (a re-send into a closed minute)
    lost those calls (bench-queries: -234 of 100M, -659 of 30M). 80,000 calls 25 µs apart from M + 59 s, one part
    of ~0.2 s granules: with the DateTime bound each row view returned 8,192 of M's 40,000."""
    minute = (dt.datetime.fromisoformat(ch.window["since"]) - dt.timedelta(days=2)).strftime("%Y-%m-%d %H:%M:%S")
    clickhouse.post(ch.url, """
        INSERT INTO wirelens.requests (timestamp, request_id, run_id, protocol, operation, streaming)
        SELECT toDateTime64({m:DateTime}, 9) + toIntervalMicrosecond(59000000 + number * 25),
               concat('last-second-', toString(number)), '', 'grpc', 'echo.Unary', 'unary'
        FROM numbers(80000)""", {"m": minute})
    assert one(ch.url, "SELECT count() FROM wirelens.requests FINAL WHERE toStartOfMinute(timestamp) = {m:DateTime}",
               {"m": minute}) == "40000"
    for table, view in rollup.ROW_VIEWS.items():
        got = one(ch.url, f"SELECT sum(sampled_calls) FROM {view}(minutes = [toDateTime('{minute}')])")
        assert got == "40000", f"{view} (the rows of {table}) for {minute} alone: {got} calls of 40000"
    rollup.wait_refreshed(ch.url, timeout_s=60)  # and the refresh's own recomputation agrees
    assert one(ch.url, "SELECT sum(sampled_calls) FROM wirelens.requests_by_minute FINAL WHERE minute = {m:DateTime}",
               {"m": minute}) == "40000"
