"""The rollups answer as the raw calls after re-sends (issue 30, item 4): exact by construction.

One stack of its own (Go services; its Collector reaches ClickHouse through
a proxy of the test's, and the test adds test-only views to its ClickHouse
and stops merges for a moment, which the shared stack must not see). A run
of N calls, REST and gRPC alternating at a steady rate, meets:

    Collector killed between the      the proxy delays ClickHouse's answers by
    ClickHouse insert and its         2.5 s; as soon as a new row of the run is
    acknowledgement                   committed (a test-only view copies each
                                      one), the Collector is SIGKILLed: the
                                      answer never reached it, and its
                                      persistent queue re-sends the batch.
    ClickHouse killed and restarted   the refresh views must resume after the
                                      engine restarts.
    logship's position rewound        every line of the run already shipped is
                                      sent again (test_zero_loss's replay).

Re-sends must really reach wirelens.requests, else the comparison proves
nothing: a test-only view on wirelens.requests copies every row inserted for
the run into a plain MergeTree (merges cannot hide them there), which must
hold more rows than the run has calls after the Collector kill, and again
more after the replay; during the replay merges of wirelens.requests are
stopped, so that count() without FINAL > count() with FINAL too.

Then, once the refreshable views have refreshed after the run's last row
(polled, with a deadline), `wirelens report --run ID --source rollup` and
`--source raw` (TSV) must agree for every rollup variant (queries/rollup/):
the same groups, counts and sums equal (to the printed digit), percentiles
within DDSketch's 1 % of the raw order statistics; and the calls equal to the
calls sent, per operation x protocol. A failure prints rollup vs raw per group.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from deploy.local import clickhouse_users
from tests.e2e.conftest import ROOT, free_ports, rows, stack, stack_on_free_ports
from tests.e2e.test_zero_loss import (DRAIN_DEADLINE_S, SteadyTraffic, expect_exactly, pipeline_state,
                                      raw_log_rows, replay_run_from_checkpoint)
from tests.unit.test_rollup import LEVELS, percentile_ok, same_number  # the unit test's comparisons
from wirelens_helpers.wait import wait_for

WIRELENS = ROOT / "bin" / "wirelens"
VARIANTS = sorted(p.stem for p in (ROOT / "queries" / "rollup").glob("*.sql"))
# Columns that name a group in the saved queries' answers; every other column is a value.
KEYS = {"second", "operation", "protocol", "streaming", "http_status", "grpc_status", "status", "request_index"}
OPERATION = "hello.SayHello"  # SteadyTraffic's calls: POST /v1/hello (rest) and /wirelens.v1.Hello/SayHello (grpc)
TEST_DB = "e2e_rollup_faults"
HOLD_S = 2.5  # how long the proxy holds back each answer of ClickHouse (an insert takes two: under the 10 s timeout)
CATCH_UP_DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def faults_stack(tmp_path_factory):
    """The stack (settings) and the DelayingProxy its Collector reaches ClickHouse through."""
    proxy_port, clickhouse_port = free_ports(2)
    proxy = DelayingProxy(proxy_port, clickhouse_port)
    try:
        with stack_on_free_ports(tmp_path_factory.mktemp("rollup-faults"), "e2e-rollup-faults",
                                 WIRELENS_CLICKHOUSE_TCP_PORT=str(clickhouse_port),
                                 WIRELENS_CLICKHOUSE_ENDPOINT=f"tcp://127.0.0.1:{proxy_port}?dial_timeout=5s") as settings:
            yield settings, proxy
    finally:
        proxy.close()


def sql(settings, statement: str) -> str:
    return stack.clickhouse_query(settings, statement)


def scalar(settings, statement: str) -> int:
    (value,), = rows(settings, statement)
    return int(value)


# -- the Collector killed between the insert and its acknowledgement ------------------------------


class DelayingProxy:
    """A loopback TCP proxy for the Collector's connection to ClickHouse (its native protocol). While
    delay_s > 0 every chunk the server sends reaches the Collector delay_s after the proxy read it: an
    insert is committed in ClickHouse while its answer is still on the way, and a Collector killed then
    never learns that it succeeded. (A slow view in ClickHouse does not make that window: measured, the
    engine commits an insert's parts after its views ran, just before it answers.)"""

    def __init__(self, port: int, upstream_port: int):
        self.upstream_port, self.delay_s = upstream_port, 0.0
        self.listener = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
        except OSError:
            client.close()  # ClickHouse down: the Collector sees a refused connection
            return
        upstream.settimeout(None)
        answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(client, upstream.sendall), daemon=True).start()
        threading.Thread(target=self._deliver, args=(answers, client, upstream), daemon=True).start()
        self._pump(upstream, lambda data: answers.put((time.monotonic() + self.delay_s, data)))
        answers.put((0.0, b""))

    @staticmethod
    def _pump(source: socket.socket, forward) -> None:
        try:
            while data := source.recv(65536):
                forward(data)
        except OSError:
            pass

    @staticmethod
    def _deliver(answers: queue.Queue, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while True:
                due, data = answers.get()
                if not data:
                    break
                time.sleep(max(0.0, due - time.monotonic()))  # the fault itself: the answer held back
                client.sendall(data)
        except OSError:
            pass
        finally:
            for end in (client, upstream):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()


def install_inserted_copy(settings, run_id: str) -> None:
    """Every row inserted into wirelens.requests for the run, also into a plain MergeTree (no merge dedups it)."""
    sql(settings, f"CREATE DATABASE IF NOT EXISTS {TEST_DB}")
    sql(settings, f"CREATE TABLE IF NOT EXISTS {TEST_DB}.inserted (run_id String, request_id String) "
                  "ENGINE = MergeTree ORDER BY run_id")
    sql(settings, f"CREATE MATERIALIZED VIEW IF NOT EXISTS {TEST_DB}.inserted_from_requests TO {TEST_DB}.inserted AS "
                  f"SELECT run_id, toString(request_id) AS request_id FROM wirelens.requests WHERE run_id = '{run_id}'")


def inserted(settings, run_id: str) -> tuple[int, int]:
    """Rows ever inserted into wirelens.requests for the run, and their distinct request ids."""
    (total, distinct), = rows(settings, f"SELECT count(), uniqExact(request_id) FROM {TEST_DB}.inserted "
                                        f"WHERE run_id = '{run_id}'")
    return int(total), int(distinct)


def kill_collector_while_an_answer_is_held(settings, proxy: DelayingProxy, run_id: str) -> float:
    """SIGKILL the Collector right after an insert of the run's rows committed, while the proxy holds its
    answer. Returns how long after the commit was seen the Collector was dead (must be well under HOLD_S)."""
    proxy.delay_s = HOLD_S
    try:
        # Counted after the delay began: an insert committed after this count answers through the delay.
        before, _ = inserted(settings, run_id)
        wait_for("an insert of the run's rows committed while its answer is held", lambda: inserted(settings, run_id)[0],
                 lambda seen: seen > before, timeout_s=60, interval_s=0.05,
                 state=lambda: pipeline_state(settings, run_id))
        seen_at = time.monotonic()
        stack.kill("collector", settings)
        after_s = time.monotonic() - seen_at
    finally:
        proxy.delay_s = 0.0
    assert after_s < HOLD_S - 1.0, f"the Collector took {after_s:.2f} s to die: its held answer may have arrived"
    return after_s


def sockets_on(ports: set[int]) -> list[str]:
    """The TCP sockets using any of ports, from /proc/net/tcp: local, remote, state (hex, 01 = ESTABLISHED)."""
    out = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if int(local.rsplit(":", 1)[1], 16) in ports or int(remote.rsplit(":", 1)[1], 16) in ports:
            out.append(f"{int(local.rsplit(':', 1)[1], 16)}->{int(remote.rsplit(':', 1)[1], 16)} state {state}")
    return out


def restart(name: str, settings) -> str:
    """start_one, retried while one of the component's ports is still taken by the killed process's
    connections (a port of its is never free before its old sockets are gone)."""
    ports = {int(settings[v]) for v in stack.BY_NAME[name].ports}
    return wait_for(f"{name} started again", lambda: stack.start_one(name, settings), timeout_s=90, interval_s=0.5,
                    retry_on=(stack.StackError,), done=lambda seen: isinstance(seen, str),
                    state=lambda: f"sockets on its ports {sorted(ports)}: {sockets_on(ports)}")


# -- the rollups caught up -------------------------------------------------------------------------


def refresh_views(settings) -> list[str]:
    # Not the hourly settle passes (REFRESH EVERY 1 HOUR, queries/schema/004_rollups.sql): they recompute the
    # hour that closed two hours ago, not this run's minutes, and run next at the top of the hour.
    return [name for name, in rows(settings, "SELECT name FROM system.tables WHERE database = 'wirelens' "
                                             "AND engine = 'MaterializedView' AND create_table_query LIKE '%REFRESH%' "
                                             "AND create_table_query NOT LIKE '%REFRESH EVERY 1 HOUR%' "
                                             "AND create_table_query LIKE '%TO wirelens.requests_by_%'")]


def wait_rollups_caught_up(settings, run_id: str) -> str:
    """Until every refresh view has a successful refresh that started after the run's last row was inserted
    (plus 2 s: last_success_time has whole seconds). Returns what was waited for, for the messages."""
    views = refresh_views(settings)
    if not views:
        return ("no refreshable view fills the rollups (wirelens.requests_by_* fed at insert: the old form); "
                "compared as they are")
    last_inserted = scalar(settings, "SELECT toUnixTimestamp(max(inserted_at)) + 2 FROM wirelens.requests "
                                     f"WHERE run_id = '{run_id}'")
    names = ", ".join(f"'{v}'" for v in views)

    def state() -> str:
        return sql(settings, "SELECT view, status, last_success_time, last_refresh_time, next_refresh_time, retry, "
                             f"substring(exception, 1, 300) FROM system.view_refreshes WHERE database = 'wirelens' "
                             f"AND view IN ({names}) FORMAT TSVWithNames")

    wait_for(f"a successful refresh of {views} after the run's last insert ({last_inserted - 2}, Unix s)",
             lambda: scalar(settings, f"SELECT count() FROM system.view_refreshes WHERE database = 'wirelens' "
                                      f"AND view IN ({names}) AND exception = '' "
                                      f"AND last_success_time >= toDateTime({last_inserted})"),
             lambda n: n == len(views), timeout_s=CATCH_UP_DEADLINE_S, interval_s=0.5,
             retry_on=(stack.StackError,), state=state)
    return f"refreshed by {views} after the run's last insert"


# -- the report, rollup vs raw ---------------------------------------------------------------------


def report_tsv(settings, run_id: str, source: str) -> tuple[dict[str, list[dict[str, str]]], list[str]]:
    """wirelens report --run ID --source SOURCE --format tsv: each section's rows by name, and its warnings
    (a check that could not run is a warning too: "Could not check the rollups for drift")."""
    if not WIRELENS.exists():
        pytest.fail(f"{WIRELENS} is missing: run `make services`")
    # As the stack's read-only reporter, as users run it: the drift check reads system tables too.
    login = clickhouse_users.read_credentials(clickhouse_users.credentials_path(Path(settings["WIRELENS_STATE_DIR"])))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIRELENS_", "CLICKHOUSE_"))}
    env.update(CLICKHOUSE_USER=login[clickhouse_users.READER_USER],
               CLICKHOUSE_PASSWORD=login[clickhouse_users.READER_PASSWORD])
    done = subprocess.run([str(WIRELENS), "report", "--run", run_id, "--source", source, "--format", "tsv",
                           "--resamples", "20", "--clickhouse-url",
                           f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}",
                           "--jaeger-url", f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}",
                           "--queries", str(ROOT / "queries")],
                          capture_output=True, text=True, timeout=300, env=env)
    # Exit status 1 is a failing query: one this test compares must not fail; others are other tests' business.
    assert done.returncode in (0, 1), f"wirelens report --source {source} failed:\n{done.stderr}\n{done.stdout[-3000:]}"
    sections: dict[str, list[dict[str, str]]] = {}
    warnings, name, header, failed = [], None, None, {}
    for line in done.stdout.splitlines():
        if line.startswith("# warning: "):
            warnings.append(line.removeprefix("# warning: "))
        elif line.startswith("# ERROR: ") and name is not None:
            failed[name] = line.removeprefix("# ERROR: ")[:500]
        elif line.startswith("# ") and "\t" in line:
            name, header = line[2:].split("\t", 1)[0], None
            sections[name] = []
        elif not line or line.startswith("#"):
            continue
        elif name is not None and header is None:
            header = line.split("\t")
        elif name is not None:
            sections[name].append(dict(zip(header, line.split("\t"))))
    compared = {name: error for name, error in failed.items() if name in VARIANTS}
    assert not compared, f"wirelens report --source {source}: compared queries failed: {compared}"
    assert done.returncode == 0 or failed, f"wirelens report --source {source} exited 1:\n{done.stderr}"
    return sections, warnings


def sorted_durations(settings, run_id: str) -> dict[tuple[str, str], dict[str, list[int]]]:
    """Each (operation, protocol)'s durations and TTFBs (µs), sorted: what a percentile may be."""
    text = sql(settings, "SELECT operation, protocol, arraySort(groupArray(duration_us)), arraySort(groupArray(ttfb_us)) "
                         f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY operation, protocol "
                         "FORMAT JSONCompactEachRow")
    return {(op, proto): {"": d, "ttfb_": t} for op, proto, d, t in map(json.loads, text.splitlines())}



def differences(raw: dict[str, list[dict[str, str]]], rolled: dict[str, list[dict[str, str]]],
                durations: dict[tuple[str, str], dict[str, list[int]]]) -> list[str]:
    """Every (variant, group, column) where the rollup's answer is not the raw one's, as readable lines."""
    out = []
    for name in VARIANTS:
        if name not in raw or name not in rolled:
            out.append(f"{name}: section missing (raw: {name in raw}, rollup: {name in rolled})")
            continue
        key = lambda row: tuple((k, row[k]) for k in row if k in KEYS)  # noqa: E731
        raw_rows, rolled_rows = {key(r): r for r in raw[name]}, {key(r): r for r in rolled[name]}
        for group in sorted(set(raw_rows) | set(rolled_rows)):
            a, b = raw_rows.get(group), rolled_rows.get(group)
            label = ", ".join(f"{k}={v}" for k, v in group)
            if a is None or b is None:
                out.append(f"{name} [{label}]: only in {'rollup' if a is None else 'raw'}: {a or b}")
                continue
            for column, value in a.items():
                if column in KEYS:
                    continue
                if column.endswith("_ms") and column.removeprefix("ttfb_").removesuffix("_ms") in LEVELS:
                    values = durations.get((a.get("operation", ""), a.get("protocol", "")), {})
                    ok = percentile_ok(values.get("ttfb_" if column.startswith("ttfb_") else "", [0]), column,
                                       b.get(column, "nan"))
                else:
                    ok = same_number(value, b.get(column, "<none>"))
                if not ok:
                    out.append(f"{name} [{label}] {column}: rollup {b.get(column)} vs raw {value}")
    return out


def calls_by_protocol(section: list[dict[str, str]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in section:
        out[row["protocol"]] = out.get(row["protocol"], 0) + int(float(row["calls"]))
    return out


# -- the test ----------------------------------------------------------------------------------------


def test_rollups_equal_raw_after_resends(faults_stack):
    (settings, proxy), run_id = faults_stack, f"e2e-rollup-faults-{uuid.uuid4().hex[:8]}"
    assert settings["WIRELENS_ACCESS_LOG_SINK"] == "file"
    n, rate = 2000, 40.0
    install_inserted_copy(settings, run_id)
    ping = stack.http_ok(f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}/ping", "Ok.")
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        # 1. The Collector killed between ClickHouse's insert and its acknowledgement.
        traffic.wait_until_sent(n // 5)
        try:
            kill_after_s = kill_collector_while_an_answer_is_held(settings, proxy, run_id)
            collector_killed_at = traffic.sent
        finally:
            restart("collector", settings)
        # 2. ClickHouse killed; started again once 200 more calls were made without it.
        traffic.wait_until_sent(n // 2)
        try:
            stack.kill("clickhouse", settings)
            clickhouse_killed_at = traffic.sent
            assert not ping(), "ClickHouse still answers after SIGKILL"
            traffic.wait_until_sent(traffic.sent + 200)
        finally:
            restart("clickhouse", settings)
        clickhouse_back_at = traffic.sent
    finally:
        traffic.join()
    # Both faults fell mid-run, with calls before and after.
    assert 0 < collector_killed_at < clickhouse_killed_at < clickhouse_back_at < n, (
        collector_killed_at, clickhouse_killed_at, clickhouse_back_at)
    assert traffic.ok == {"rest": n // 2, "grpc": n // 2}, traffic.ok
    expect_exactly(settings, run_id, traffic.ok)
    # The persistent queue re-sent the held batch: rows inserted twice into wirelens.requests.
    copies, distinct = wait_for("every row of the run copied by the test's view", lambda: inserted(settings, run_id),
                                lambda seen: seen[1] == n, timeout_s=DRAIN_DEADLINE_S,
                                state=lambda: pipeline_state(settings, run_id))
    assert copies > n, (
        f"the Collector killed {kill_after_s:.2f} s after an insert committed, its answer held, re-sent nothing: "
        f"{copies} rows inserted into wirelens.requests for {n} calls\n  {pipeline_state(settings, run_id)}")
    collector_resent = copies - n

    # 3. logship's checkpoint rewound: every line of the run shipped again; merges stopped meanwhile.
    raw_before, _ = raw_log_rows(settings, run_id)
    sql(settings, "SYSTEM STOP MERGES wirelens.requests")
    try:
        replayed = replay_run_from_checkpoint(settings, run_id)
        wait_for(f"the {replayed} replayed lines of run {run_id} in wirelens.requests",
                 lambda: inserted(settings, run_id)[0], lambda seen: seen >= copies + replayed,
                 timeout_s=DRAIN_DEADLINE_S, interval_s=0.5, state=lambda: pipeline_state(settings, run_id))
        (without_final,), = rows(settings, f"SELECT count() FROM wirelens.requests WHERE run_id = '{run_id}'")
        (with_final,), = rows(settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'")
    finally:
        sql(settings, "SYSTEM START MERGES wirelens.requests")
    assert int(with_final) == n, (with_final, n)
    assert int(without_final) > int(with_final), (
        f"no duplicate in wirelens.requests after the replay: {without_final} rows without FINAL, {with_final} with")
    raw_after, _ = raw_log_rows(settings, run_id)
    assert raw_after >= raw_before + replayed, (raw_before, replayed, raw_after)
    expect_exactly(settings, run_id, traffic.ok)
    total_copies, _ = inserted(settings, run_id)
    print(f"run {run_id}: {n} calls; {collector_resent} re-sent by the Collector kill (dead {kill_after_s:.2f} s "
          f"after a commit whose answer was held), {replayed} by the replay; {total_copies} rows inserted into "
          f"wirelens.requests, {without_final} without FINAL during the replay, {with_final} with FINAL")

    # 4. The rollups caught up, then rollup vs raw per group, and both vs the calls sent.
    how = wait_rollups_caught_up(settings, run_id)
    raw, raw_warnings = report_tsv(settings, run_id, "raw")
    rolled, rolled_warnings = report_tsv(settings, run_id, "rollup")
    assert raw_warnings == [], raw_warnings
    diff = differences(raw, rolled, sorted_durations(settings, run_id))
    assert not diff, (f"rollup vs raw after re-sends ({how}; {total_copies} rows inserted for {n} calls): "
                      f"{len(diff)} differences\n  " + "\n  ".join(diff[:60]))
    sent = {(OPERATION, p): c for p, c in traffic.ok.items()}
    for source, sections in (("raw", raw), ("rollup", rolled)):
        for name in ("latency_by_operation", "bytes_by_operation", "streaming_efficiency"):
            got = {(r["operation"], r["protocol"]): int(float(r["calls"])) for r in sections[name]}
            assert got == sent, f"{source} {name}: calls {got}, sent {sent}"
        assert calls_by_protocol(sections["throughput_per_second"]) == traffic.ok, (
            source, calls_by_protocol(sections["throughput_per_second"]), traffic.ok)
    assert rolled_warnings == [], f"the report warns after the rollups caught up: {rolled_warnings}"
