"""wirelens on a ClickHouse cluster: two shards of engine processes on loopback, against one node.

Two chdb-core engine processes (deploy/clickhouse_cluster/cluster.py) form the
cluster 'wirelens' (one remote_servers, macros); a third process is a single
node with the standard schema. The cluster gets the cluster schema the way
the stack applies it (stack.apply_schema with WIRELENS_CLICKHOUSE_CLUSTER),
first as the DDL user of docs/clickhouse-cluster.md, then again as default
(idempotent). Calls go in as the Collector writes them: rows of otel.otel_logs
on either node (as the Collector's writer user), with whole batches and part
of one re-sent through the other node; the materialized view as shipped turns
them into wirelens.requests. The single node gets the same inserts.

Checked: exact counts with FINAL through the Distributed table, both shards
hold calls and no call is on two shards, every saved query (queries/*.sql and
the rollup variants in queries/rollup/) gives the same rows on the cluster as
on the single node (compare_protocols with 0 resamples in full; with 200, its
deterministic columns), the report runs on the cluster with the reader's
grants, a shard killed with SIGKILL mid-load loses no call, two replicas per
shard kept by the Distributed table (no Keeper here) survive the loss of one
and catch up, and what this engine cannot do as a cluster node (Keeper
replication, ON CLUSTER) is pinned.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from queries import rollup
from queries.schema.cluster import cluster_schema
from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from deploy.local import stack
from bench.query_speed import OTEL_LOGS_STANDIN  # what the exporter creates: the columns the view reads
from deploy.clickhouse_cluster.cluster import ClusterError, LocalCluster, query
from wirelens_helpers import supervise
from wirelens_helpers.wait import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parents[2]

CLUSTER = "wirelens"
CALLS = 20_000
BATCH = 2_000
# Every call starts at T0 + its number x 60 ms (+ up to 1 s of jitter): 20 minutes.
T0 = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).replace(second=0, microsecond=0, tzinfo=None)
WINDOW = {"since": (T0 - dt.timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S.000"),
          "until": (T0 + dt.timedelta(minutes=30)).strftime("%Y-%m-%d %H:%M:%S.000")}
PASSWORDS = {"wirelens_writer": "writer-pw", "wirelens_reader": "reader-pw", "wirelens_ddl": "ddl-pw"}

# Calls {first}..{first}+{count} as the Collector writes Envoy's access-log
# records (attribute names of the transform in collector/config.yaml), all
# derived from the call's number so every node and run inserts the same rows.
# Calls 0..14999 are three load runs (5000 calls each) in which rest, grpc and
# grpc-web take turns; 15000.. is live traffic (no run id) sampled at 0.5.
CALLS_SQL = """
INSERT INTO otel.otel_logs (Timestamp, TraceId, SpanId, LogAttributes)
WITH
    ['catalog.GetProduct', 'echo.ServerStream', 'people.RegisterBatch', 'hello.SayHello'] AS operations,
    ['unary', 'server', 'client', 'unary'] AS shapes,
    [900, 20000, 60000, 500] AS median_us,
    ['rest', 'grpc', 'grpc-web'] AS protocols,
    [1.6, 1.0, 1.1] AS factor,
    intDiv(number, 5000) AS segment,
    number % 5000 AS k,
    if(segment < 3, intDiv(k * 3, 5000), cityHash64(number, 'p') % 3) AS p,
    number % 4 AS o,
    protocols[p + 1] AS proto,
    proto != 'rest' AS framed,
    if(framed AND shapes[o + 1] = 'client', 1 + cityHash64(number, 'm') % 50, 1) AS req_msgs,
    if(framed AND shapes[o + 1] = 'server', 1 + cityHash64(number, 'n') % 20, 1) AS resp_msgs,
    toUInt64(median_us[o + 1] * factor[p + 1] * (0.5 + (cityHash64(number, 'd') % 1000) / 500)) AS dur,
    cityHash64(number, 's') % 100 AS fate,
    if(segment < 3, k, intDiv(k, 3)) % 40 AS position
SELECT
    -- (+ number ns: no two calls start at the same instant, so "first on its connection" is one call)
    toDateTime64('{t0}', 9) + toIntervalMillisecond(number * 60 + cityHash64(number, 'j') % 1000)
        + toIntervalNanosecond(number % 1000000) AS Timestamp,
    lower(hex(sipHash128(number, 't'))) AS TraceId,
    lower(hex(sipHash64(number, 'sp'))) AS SpanId,
    map(
        'wirelens.request_id', toString(reinterpretAsUUID(sipHash128(number, 'r'))),
        'wirelens.run_id', if(segment < 3, concat('run-', toString(segment + 1)), '-'),
        'wirelens.protocol', proto,
        'wirelens.stack', ['go', 'python'][cityHash64(number, 'st') % 2 + 1],  -- protocol_vs_stack's pairs
        'wirelens.operation', operations[o + 1],
        'wirelens.streaming', shapes[o + 1],
        'wirelens.sample_rate', if(segment < 3, '1', '0.5'),
        'rpc.service', concat('wirelens.v1.', splitByChar('.', operations[o + 1])[1]),
        'rpc.method', splitByChar('.', operations[o + 1])[2],
        'http.request.method', 'POST',
        'network.protocol.version', if(framed, '2', '1.1'),
        'http.response.status_code', if(NOT framed AND fate < 3, '503', '200'),
        'rpc.grpc.status_code', if(framed, if(fate < 3, '14', '0'), '-'),
        'wirelens.request.header.size', toString(if(framed, 140, 180) + cityHash64(number, 'h') % 40),
        'wirelens.response.header.size', toString(if(framed, 90, 130)),
        'wirelens.response.trailer.size', if(proto = 'grpc', '30', '0'),
        'http.request.body.size', toString(20 * req_msgs + if(framed, 5 * req_msgs, 0)),
        'http.response.body.size', toString(300 * resp_msgs + if(framed, 5 * resp_msgs, 0)),
        'wirelens.request.messages', toString(if(framed, req_msgs, 0)),
        'wirelens.response.messages', toString(if(framed, resp_msgs, 0)),
        'wirelens.request.message.bytes', toString(if(framed, 20 * req_msgs, 0)),
        'wirelens.response.message.bytes', toString(if(framed, 300 * resp_msgs, 0)),
        'wirelens.request.framing.bytes', toString(if(framed, 5 * req_msgs, 0)),
        'wirelens.response.framing.bytes', toString(if(framed, 5 * resp_msgs, 0)),
        'wirelens.time_to_first_byte_us', toString(toUInt64(dur * 0.7)),
        'wirelens.duration_us', toString(dur),
        'envoy.request_headers_bytes', toString(200 + cityHash64(number, 'h') % 40),
        'envoy.downstream_header_bytes_received', toString(if(framed AND position > 0, 30, 200)),
        'envoy.downstream_wire_bytes_received', toString(400 + 25 * req_msgs),
        'envoy.downstream_wire_bytes_sent', toString(500 + 305 * resp_msgs),
        'envoy.connection_id', toString(cityHash64(segment, p, intDiv(if(segment < 3, k, intDiv(k, 3)), 40)) % 1000000)
    ) AS LogAttributes
FROM numbers({first}, {count})
"""

# process.cpu.time of Envoy (cumulative, 0.5 CPU-s/s) over the 20 minutes, one point a
# second, as the exporter writes it: cpu_per_1000_calls divides it among the runs' calls.
METRICS_SQL = """
INSERT INTO otel.otel_metrics_sum
    (ResourceAttributes, ServiceName, MetricName, MetricUnit, Attributes, StartTimeUnix, TimeUnix,
     Value, AggregationTemporality, IsMonotonic)
SELECT map('service.name', 'envoy', 'process.pid', '11'), 'envoy', 'process.cpu.time', 's',
       map('state', 'user'), toDateTime('{t0}') - 100, toDateTime('{t0}') + number, 0.5 * number, 2, true
FROM numbers(1260)
"""

RUNS_SQL = """
INSERT INTO wirelens.runs (run_id, scenario, parameters, started, ended, client_summary)
SELECT concat('run-', toString(number + 1)), 'cluster-test', '{{}}',
       toDateTime64('{t0}', 3) + toIntervalSecond(300 * number), toDateTime64('{t0}', 3) + toIntervalSecond(300 * number + 300), '{{}}'
FROM numbers(3)
"""


def calls_sql(first: int, count: int) -> str:
    return CALLS_SQL.format(t0=T0.strftime("%Y-%m-%d %H:%M:%S"), first=first, count=count)


def users_xml(path: Path) -> Path:
    """default (passwordless, loopback) and one user per role of cluster_schema.ROLES, holding its grants."""
    users = []
    for role, grants in cluster_schema.ROLES.items():
        queries = "".join(f"<query>GRANT {grant}</query>" for grant in grants)
        users.append(f"<{role}><password>{PASSWORDS[role]}</password><networks><ip>127.0.0.1</ip></networks>"
                     f"<profile>default</profile><quota>default</quota><grants>{queries}</grants></{role}>")
    path.write_text(
        "<clickhouse><profiles><default/></profiles><quotas><default/></quotas><users>"
        "<default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile>"
        "<quota>default</quota><access_management>1</access_management></default>"
        + "".join(users) + "</users></clickhouse>\n")
    return path


def node_settings(node, cluster: bool) -> dict[str, str]:
    return {"WIRELENS_CLICKHOUSE_HTTP_PORT": str(node.http_port), "WIRELENS_REQUESTS_TTL_DAYS": "30",
            "WIRELENS_CLICKHOUSE_CLUSTER": CLUSTER if cluster else "",
            # this engine: no Keeper replication, no distributed DDL (see test_engine_limits_are_as_documented)
            "WIRELENS_CLICKHOUSE_REPLICATED": "0", "WIRELENS_CLICKHOUSE_ON_CLUSTER": "0"}


def insert_calls(node, first: int, count: int) -> None:
    query(node.url, calls_sql(first, count), user="wirelens_writer", password=PASSWORDS["wirelens_writer"])


def flush(nodes) -> None:
    """Distributed inserts wait on disk until sent; push them out before counting."""
    for node in nodes:
        query(node.url, "SYSTEM FLUSH DISTRIBUTED wirelens.requests")


def flushed(nodes) -> None:
    """flush, retried while a node is still coming back (its engine restarting)."""
    wait_for("the Distributed queues to flush", lambda: flush(nodes), lambda _: True, timeout_s=60, interval_s=0.2,
             retry_on=(ClusterError,))


def going(sent: list, thread: threading.Thread) -> None:
    """Until the loader has sent 5 batches (or stopped; the caller asserts what it needs)."""
    try:
        wait_for("the loader to get going", lambda: len(sent) >= 5 or not thread.is_alive(), timeout_s=30,
                 interval_s=0.02)
    except WaitTimeout:
        pass


def one(url: str, sql: str) -> str:
    return query(url, sql).strip()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    base = tmp_path_factory.mktemp("clickhouse-cluster")
    users = users_xml(base / "users.xml")
    # testkeeper: an in-process ZooKeeper, enough to show how far Replicated tables get here
    sharded = LocalCluster(base / "cluster", shards=2, replicas=1, name=CLUSTER, users_xml=users,
                           extra_xml="<zookeeper><implementation>testkeeper</implementation></zookeeper>")
    single = LocalCluster(base / "single", shards=1, replicas=1, name="single", users_xml=users)
    timings = {}
    t0 = time.monotonic()
    try:
        for c in (sharded, single):
            for node in c.nodes:
                c.start(node)
        for c in (sharded, single):
            for node in c.nodes:
                c.wait_ready(node)
        timings["start"] = time.monotonic() - t0
        yield sharded, single, timings
    finally:
        for c in (sharded, single):
            c.down()
        artifacts = ROOT / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        for c in (sharded, single):
            for node in c.nodes:
                if node.log.exists():
                    (artifacts / f"clickhouse-cluster-{c.name}-{node.name}.log").write_bytes(node.log.read_bytes())
        print(f"\ncluster test timings: {', '.join(f'{k} {v:.1f}s' for k, v in timings.items())}", file=sys.stderr)


@pytest.fixture(scope="module")
def loaded(clusters):
    sharded, single, timings = clusters
    t0 = time.monotonic()
    for c, cluster in ((sharded, True), (single, False)):
        for node in c.nodes:
            query(node.url, "CREATE DATABASE IF NOT EXISTS otel")
            query(node.url, OTEL_LOGS_STANDIN)
    # The schema step as the DDL user (so the views run as it), then again as default: idempotent.
    for node in sharded.nodes:
        for statement in stack.schema_statements(node_settings(node, cluster=True)):
            query(node.url, statement, user="wirelens_ddl", password=PASSWORDS["wirelens_ddl"])
        stack.apply_schema(node_settings(node, cluster=True))
    stack.apply_schema(node_settings(single.nodes[0], cluster=False))
    stack.apply_schema(node_settings(single.nodes[0], cluster=False))
    timings["schema"] = time.monotonic() - t0

    t0 = time.monotonic()
    one_node, (node1, node2) = single.nodes[0], sharded.nodes
    batches = [(first, BATCH) for first in range(0, CALLS, BATCH)]
    # Re-sends, as a Collector retrying after a failed export would, through the other node:
    # a whole batch, and the first 700 calls of another.
    resends = [(3 * BATCH, BATCH), (6 * BATCH, 700)]
    for i, (first, count) in enumerate(batches):
        insert_calls(sharded.nodes[i % 2], first, count)
        insert_calls(one_node, first, count)
    for i, (first, count) in enumerate(resends):
        insert_calls(sharded.nodes[(first // BATCH + 1) % 2], first, count)
        insert_calls(one_node, first, count)
    t_metrics = T0.strftime("%Y-%m-%d %H:%M:%S")
    for node in (node1, one_node):
        query(node.url, METRICS_SQL.format(t0=t_metrics))
        query(node.url, RUNS_SQL.format(t0=t_metrics))
    flush(sharded.nodes)
    for node in sharded.nodes:
        query(node.url, "SYSTEM FLUSH DISTRIBUTED otel.otel_metrics_sum")
        query(node.url, "SYSTEM FLUSH DISTRIBUTED wirelens.runs")
    # The rollups are recomputed by each node's refreshable views (every 10 s): refresh them now.
    for node in [*sharded.nodes, one_node]:
        rollup.wait_refreshed(node.url, timeout_s=120)
    timings["load"] = time.monotonic() - t0
    return sharded, single


# ------------------------------------------------------------------ the tests


def test_schema_is_the_cluster_form_on_every_node(loaded):
    sharded, single = loaded
    tables = "SELECT concat(database, '.', name), engine FROM system.tables " \
             "WHERE database IN ('wirelens', 'otel') AND name != 'otel_logs' FORMAT TSV"
    expected = {}
    for line in query(single.nodes[0].url, tables).splitlines():
        table, engine = line.split("\t")
        if engine in ("MaterializedView", "View"):  # views (the rollups' row views too): by their own name
            expected[table] = engine
        else:  # each table: its _local twin with the same engine, and a Distributed one by its name
            expected |= {table: "Distributed", f"{table}_local": engine}
    assert {"wirelens.requests", "wirelens.requests_local", "wirelens.requests_from_otel_logs"} <= expected.keys()
    for node in sharded.nodes:
        assert dict(line.split("\t") for line in query(node.url, tables).splitlines()) == expected, node.name
        # the columns come from queries/schema/001_requests.sql: same names and types as the single node
        columns = "SELECT name, type FROM system.columns WHERE database = 'wirelens' " \
                  "AND table = 'requests' ORDER BY position"
        assert query(node.url, columns) == query(single.nodes[0].url, columns)


def test_on_cluster_replicated_ddl_parses_on_this_clickhouse(clusters):
    """The DDL for a real cluster (Replicated engines, ON CLUSTER) is valid ClickHouse 26.9 syntax."""
    sharded, _, _ = clusters
    statements = stack.schema_statements({**node_settings(sharded.nodes[0], True),
                                          "WIRELENS_CLICKHOUSE_REPLICATED": "1", "WIRELENS_CLICKHOUSE_ON_CLUSTER": "1"})
    assert sum("ON CLUSTER 'wirelens'" in s for s in statements) == len(statements)
    for statement in statements + cluster_schema.grant_statements(CLUSTER):
        # a query parameter's value is read as TSV: escape what TSV escapes
        escaped = statement.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
        formatted = query(sharded.nodes[0].url, "SELECT formatQuerySingleLine({q:String})", params={"q": escaped})
        assert "ON CLUSTER" in formatted, statement


def test_every_call_counts_once_and_lands_on_one_shard(loaded):
    sharded, single = loaded
    node1, node2 = sharded.nodes
    rows = int(one(node1.url, "SELECT count() FROM wirelens.requests"))
    exact = int(one(node1.url, "SELECT count() FROM wirelens.requests FINAL"))
    assert exact == CALLS, f"FINAL through the Distributed table counts {exact} calls, sent {CALLS}"
    # the re-sent calls went in twice; background merges may already have collapsed some
    sent = sum(int(one(node.url, "SELECT count() FROM otel.otel_logs")) for node in sharded.nodes)
    assert sent == CALLS + BATCH + 700 and CALLS <= rows <= sent, (sent, rows)
    assert int(one(node2.url, "SELECT count() FROM wirelens.requests FINAL")) == CALLS  # from either node
    assert int(one(single.nodes[0].url, "SELECT count() FROM wirelens.requests FINAL")) == CALLS
    per_shard = [int(one(node.url, "SELECT count() FROM wirelens.requests_local FINAL")) for node in sharded.nodes]
    assert sum(per_shard) == CALLS and min(per_shard) > CALLS * 0.45, f"calls per shard: {per_shard}"
    # each call on the shard its request id hashes to (shard = cityHash64 % 2 + 1), none on two
    assert one(node1.url, "SELECT count() FROM (SELECT request_id FROM wirelens.requests "
                          "GROUP BY request_id HAVING uniqExact(_shard_num) > 1)") == "0"
    assert one(node1.url, "SELECT countIf(_shard_num != cityHash64(request_id) % 2 + 1) "
                          "FROM wirelens.requests") == "0"


def saved_queries() -> list[tuple[str, Path]]:
    raw = sorted((ROOT / "queries").glob("*.sql"))
    rollup = sorted((ROOT / "queries" / "rollup").glob("*.sql"))
    return [(p.stem, p) for p in raw] + [(f"rollup/{p.stem}", p) for p in rollup]


def run_saved(url: str, path: Path, run_id: str, **extra: str) -> tuple[str, list[str]]:
    sql = path.read_text().strip().rstrip(";")
    params = {**WINDOW, "run_id": run_id}
    defaults = {"operation": "catalog.GetProduct", "protocol_a": "rest", "protocol_b": "grpc", "resamples": "0"}
    for name in clickhouse.parameters(sql):
        params.setdefault(name, extra.get(name, defaults.get(name)))
    params.update(extra)
    header, *rows = clickhouse.run(url, sql, params, "TSVWithNames").splitlines()
    return header, rows


@pytest.mark.parametrize("run_id", ["", "run-2"])
@pytest.mark.parametrize("name,path", saved_queries(), ids=[n for n, _ in saved_queries()])
def test_saved_query_answers_as_on_one_node(loaded, name, path, run_id):
    """Same rows on the cluster as on one node, as sets (row order only differs where ORDER BY ties)."""
    sharded, single = loaded
    header, on_cluster = run_saved(sharded.nodes[0].url, path, run_id)
    header_one, on_one = run_saved(single.nodes[0].url, path, run_id)
    assert header == header_one
    assert on_one, f"{name}: no rows on the single node: the dataset does not exercise it"
    assert sorted(on_cluster) == sorted(on_one), name


def test_compare_protocols_with_resamples_agrees_on_its_deterministic_columns(loaded):
    sharded, single = loaded
    path = ROOT / "queries" / "compare_protocols.sql"
    header, (row,) = run_saved(sharded.nodes[0].url, path, "", resamples="200")
    _, (row_one,) = run_saved(single.nodes[0].url, path, "", resamples="200")
    got, want = dict(zip(header.split("\t"), row.split("\t"))), dict(zip(header.split("\t"), row_one.split("\t")))
    random = {"median_ci_low", "median_ci_high", "p99_ci_low", "p99_ci_high", "verdict"}  # the bootstrap's draws
    assert {k: v for k, v in got.items() if k not in random} == {k: v for k, v in want.items() if k not in random}
    assert got["median_ci_low"] != "\\N" and float(got["median_ci_low"]) <= float(got["median_ratio"]) \
        <= float(got["median_ci_high"])


def test_reader_runs_the_report_on_the_cluster_and_cannot_write(loaded, tmp_path):
    sharded, _ = loaded
    node = sharded.nodes[1]
    reader = ("wirelens_reader", PASSWORDS["wirelens_reader"])
    url = f"http://{reader[0]}:{reader[1]}@127.0.0.1:{node.http_port}"
    done = subprocess.run([str(ROOT / "bin" / "wirelens"), "report", "--run", "run-2", "--format", "tsv",
                           "--clickhouse-url", url, "--html", str(tmp_path / "report.html")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    assert "ERROR" not in done.stdout
    # the rollups' refreshes, which the report's drift warning names when one fails
    assert query(node.url, "SELECT count() FROM system.view_refreshes WHERE database = 'wirelens'",
                 user=reader[0], password=reader[1]).strip() == "4"  # each rollup's 10 s refresh and hourly settle
    with pytest.raises(ClusterError, match="ACCESS_DENIED|Not enough privileges"):
        query(node.url, "INSERT INTO wirelens.runs (run_id) VALUES ('x')", user=reader[0], password=reader[1])
    with pytest.raises(ClusterError, match="ACCESS_DENIED|Not enough privileges"):
        query(node.url, "SELECT count() FROM wirelens.runs", user="wirelens_writer",
              password=PASSWORDS["wirelens_writer"])


def test_a_shard_killed_mid_load_loses_no_call(loaded):
    """SIGKILL shard 2's engine while a loader writes through both nodes, retrying a failed batch
    through the other node as the Collector's failover would: after the restart every call is
    one row with FINAL, on the shard its id hashes to."""
    sharded, _ = loaded
    node1, node2 = sharded.nodes
    first_call, batches, size = 1_000_000, 30, 500  # numbers past the dataset's: a new set of calls
    sent, failovers, errors = [], [], []

    def loader():
        try:
            for b in range(batches):
                first = first_call + b * size
                for attempt in range(400):  # bounded: 400 tries of ~0.1 s
                    node = sharded.nodes[(b + attempt) % 2]
                    try:
                        insert_calls(node, first, size)
                        break
                    except ClusterError as exc:
                        failovers.append(f"batch {b} via {node.name}: {str(exc)[:80]}")
                        time.sleep(0.1)  # back-off before the retry, as the Collector's
                else:
                    raise AssertionError(f"batch {b} never went in")
                sent.append(first)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=loader)
    t0 = time.monotonic()
    thread.start()
    going(sent, thread)
    assert len(sent) >= 5, f"loader did not get going: {errors or failovers}"
    killed = sharded.kill_engine(node2)
    queued = 0  # calls node 1 holds on disk for shard 2 while it is down (system.distribution_queue)

    def loader_done() -> bool:  # sampling node 1's queue while the loader runs
        nonlocal queued
        try:
            queued = max(queued, int(one(node1.url, "SELECT sum(data_files) FROM system.distribution_queue "
                                                    "WHERE database = 'wirelens' AND table = 'requests'") or 0))
        except ClusterError:
            pass
        return not thread.is_alive()
    try:
        wait_for("the loader to finish", loader_done, timeout_s=120, interval_s=0.05)
    except WaitTimeout:
        pass  # asserted below
    thread.join(timeout=1)
    assert not thread.is_alive(), f"loader still running 120 s after the kill: {len(sent)} of {batches} batches in"
    assert not errors, errors
    sharded.wait_ready(node2)
    flushed(sharded.nodes)  # node 1's queue for shard 2 drains once shard 2 answers again
    elapsed = time.monotonic() - t0
    # call n starts at T0 + n x 60 ms: these calls are 16 hours past the dataset's
    where = f"timestamp >= toDateTime64('{T0}', 9) + toIntervalSecond({first_call * 60 // 1000})"
    expected = batches * size
    exact = int(one(node1.url, f"SELECT count() FROM wirelens.requests FINAL WHERE {where}"))
    print(f"\nkill -9 of shard 2's engine (pid {killed}) mid-load: {expected} calls, {len(failovers)} failed "
          f"inserts retried, up to {queued} insert files queued on node 1 for shard 2, all in after {elapsed:.1f}s",
          file=sys.stderr)
    assert exact == expected, f"{exact} of {expected} calls after the shard came back; failovers: {failovers[:5]}"
    on_two = int(one(node2.url, f"SELECT count() FROM wirelens.requests_local FINAL WHERE {where}"))
    assert on_two == int(one(node1.url, f"SELECT countIf(cityHash64(request_id) % 2 = 1) "
                                        f"FROM wirelens.requests FINAL WHERE {where}")) > 0


def test_engine_limits_are_as_documented(clusters):
    """docs/clickhouse-cluster.md: this engine reaches ZooKeeper but cannot replicate or run DDL
    ON CLUSTER. If a new chdb-core can, this fails: then test replicas here."""
    sharded, _, _ = clusters
    url = sharded.nodes[0].url
    assert int(one(url, "SELECT zookeeperSessionUptime()")) >= 0  # a ZooKeeper session exists
    query(url, "CREATE DATABASE IF NOT EXISTS replication_probe")
    query(url, "CREATE TABLE IF NOT EXISTS replication_probe.t (x UInt8) ENGINE = "
               "ReplicatedMergeTree('/clickhouse/tables/{shard}/replication_probe/t', '{replica}') ORDER BY x")
    with pytest.raises(ClusterError, match="TABLE_IS_READ_ONLY"):
        query(url, "INSERT INTO replication_probe.t SETTINGS insert_keeper_max_retries = 0 VALUES (1)")
    why = one(url, "SELECT last_error_message FROM system.errors WHERE name = 'NO_ELEMENTS_IN_CONFIG'")
    assert "interserver_http(s)_port" in why and "required for replication is not specified" in why
    with pytest.raises(ClusterError, match="Replicated DDL queries are disabled"):
        query(url, f"CREATE DATABASE IF NOT EXISTS on_cluster_probe ON CLUSTER '{CLUSTER}'")
    with pytest.raises(ClusterError, match="supports only TCP and HTTP listeners"):
        query(url, "SYSTEM START LISTEN INTERSERVER HTTP")


def test_replicas_kept_by_distributed_survive_the_loss_of_one(tmp_path):
    """Without Keeper, a shard's replicas can still be kept by the Distributed table itself
    (internal_replication false: it writes every row to each replica). 2 shards x 2 replicas;
    SIGKILL one replica mid-load: no call lost, reads fail over to its twin while it is down,
    and it catches up from the other nodes' queues after its restart."""
    replicated = LocalCluster(tmp_path / "replicas", shards=2, replicas=2, name=CLUSTER,
                              users_xml=users_xml(tmp_path / "users.xml"))
    try:
        replicated.up()
        for node in replicated.nodes:
            query(node.url, "CREATE DATABASE IF NOT EXISTS otel")
            query(node.url, OTEL_LOGS_STANDIN)
            stack.apply_schema(node_settings(node, cluster=True))
        s1r1, s1r2, s2r1, s2r2 = replicated.nodes
        first_call, batches, size = 2_000_000, 30, 500
        sent, errors = [], []

        def loader():
            try:
                for b in range(batches):
                    for attempt in range(400):  # rotate over the nodes, as a Collector with several hosts
                        try:
                            insert_calls(replicated.nodes[(b + attempt) % 4], first_call + b * size, size)
                            break
                        except ClusterError:
                            time.sleep(0.1)  # back-off before the retry
                    else:
                        raise AssertionError(f"batch {b} never went in")
                    sent.append(b)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=loader)
        thread.start()
        going(sent, thread)
        replicated.kill_engine(s1r2)
        # reads while s1r2 is down: shard 1 answers from s1r1
        assert int(one(s2r1.url, "SELECT count() FROM wirelens.requests FINAL")) > 0
        thread.join(timeout=120)
        assert not thread.is_alive() and not errors, errors
        replicated.wait_ready(s1r2)
        flushed(replicated.nodes)
        expected = batches * size
        for node in replicated.nodes:
            assert int(one(node.url, "SELECT count() FROM wirelens.requests FINAL")) == expected, node.name
        local = {n.name: int(one(n.url, "SELECT count() FROM wirelens.requests_local FINAL"))
                 for n in replicated.nodes}
        assert local["s1r1"] == local["s1r2"] and local["s2r1"] == local["s2r2"], local
        assert local["s1r1"] + local["s2r1"] == expected, local
        # and the killed replica has the same calls, not just as many
        ids = "SELECT groupArraySorted(100000)(request_id) FROM wirelens.requests_local FINAL"
        assert one(s1r1.url, ids) == one(s1r2.url, ids)
        # the loss of a replica again, now read right away: the Distributed table fails over
        replicated.kill_engine(s1r2)
        assert int(one(s2r2.url, "SELECT count() FROM wirelens.requests FINAL")) == expected
    finally:
        replicated.down()


COLLECTOR_CONFIG = """
extensions:
  health_check:
    endpoint: 127.0.0.1:{health_port}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  clickhouse:
    # the cluster's nodes in one endpoint (docs/clickhouse-cluster.md)
    endpoint: tcp://{hosts}?dial_timeout=2s&connection_open_strategy=round_robin
    username: wirelens_writer
    password: {password}
    database: otel
    create_schema: true
    logs_table_name: otel_logs
    timeout: 5s
    # no queue: the receiver answers once the rows are in ClickHouse, so the test
    # knows what went in; retries (through the next host) within the request
    sending_queue:
      enabled: false
    retry_on_failure:
      enabled: true
      initial_interval: 200ms
      max_interval: 1s
      max_elapsed_time: 60s
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [clickhouse]
"""


def otlp_logs(first: int, count: int) -> bytes:
    """OTLP/JSON access-log records for calls first..first+count, attributes as the Collector's transform leaves them."""
    import json

    records = []
    for n in range(first, first + count):
        attrs = {"wirelens.request_id": f"collector-{n}", "wirelens.run_id": "collector-run",
                 "wirelens.protocol": ("rest", "grpc")[n % 2], "wirelens.operation": "catalog.GetProduct",
                 "wirelens.duration_us": str(1000 + n), "http.response.status_code": "200"}
        records.append({"timeUnixNano": str(int((T0.timestamp() + 7200 + n / 10) * 1e9)),
                        "body": {"stringValue": ""},
                        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]})
    return json.dumps({"resourceLogs": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "envoy"}}]},
        "scopeLogs": [{"scope": {}, "logRecords": records}]}]}).encode()


def test_the_collector_writes_to_the_cluster_through_either_node(tmp_path):
    """The real Collector (bin/otelcol-wirelens) with both nodes in its endpoint, as the writer user:
    its create_schema runs with the writer's grants, its inserts fire the view on whichever node
    took them, and when one node is killed it carries on through the other."""
    import urllib.request

    two = LocalCluster(tmp_path / "cluster", shards=2, replicas=1, name=CLUSTER,
                       users_xml=users_xml(tmp_path / "users.xml"))
    health_port, otlp_port = stack.free_ports(2)
    config = tmp_path / "collector.yaml"
    collector = None
    try:
        two.up()
        config.write_text(COLLECTOR_CONFIG.format(
            health_port=health_port, otlp_port=otlp_port, password=PASSWORDS["wirelens_writer"],
            hosts=",".join(f"127.0.0.1:{n.tcp_port}" for n in two.nodes)))
        collector = supervise.Supervised("the Collector", [str(ROOT / "bin" / "otelcol-wirelens"), "--config",
                                                          str(config)], tmp_path / "collector.log")
        collector.start()
        # the exporter creates otel.otel_logs (its own DDL) on the node it reached first

        def collector_log() -> str:
            return (tmp_path / "collector.log").read_text()[-3000:]
        wait_for("otel.otel_logs on a node", lambda: any(one(n.url, "EXISTS TABLE otel.otel_logs") == "1"
                                                         for n in two.nodes),
                 timeout_s=60, interval_s=0.2, processes=[collector.process], state=collector_log)
        created = next(n for n in two.nodes if one(n.url, "EXISTS TABLE otel.otel_logs") == "1")
        ddl = query(created.url, "SHOW CREATE TABLE otel.otel_logs FORMAT TSVRaw")
        for node in two.nodes:  # on a real cluster: cluster_name makes it ON CLUSTER
            query(node.url, "CREATE DATABASE IF NOT EXISTS otel")
            query(node.url, ddl.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
            stack.apply_schema(node_settings(node, cluster=True))

        def send(first: int, count: int) -> None:
            request = urllib.request.Request(f"http://127.0.0.1:{otlp_port}/v1/logs", data=otlp_logs(first, count),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=90) as response:
                assert response.status == 200

        # the receiver answers once the health check does
        wait_for("the Collector's OTLP receiver", lambda: send(0, 50), lambda _: True, timeout_s=60, interval_s=0.2,
                 retry_on=(OSError,), processes=[collector.process], state=collector_log)
        for first in range(50, 400, 50):
            send(first, 50)
        # the Collector keeps its connection: kill the node it writes to
        before = [int(one(n.url, "SELECT count() FROM otel.otel_logs")) for n in two.nodes]
        busy = two.nodes[before.index(max(before))]
        two.kill_engine(busy)
        for first in range(400, 600, 50):  # through the other node, while this one is down or restarting
            send(first, 50)
        send(100, 50)  # re-sent batches: one row each all the same
        send(450, 50)
        two.wait_ready(busy)
        flushed(two.nodes)
        per_node = [int(one(n.url, "SELECT count() FROM otel.otel_logs")) for n in two.nodes]
        exact = int(one(two.nodes[1].url, "SELECT count() FROM wirelens.requests FINAL WHERE run_id = 'collector-run'"))
        print(f"\nCollector -> cluster: otel_logs rows per node {before} before killing {busy.name}, "
              f"{per_node} after; {exact} calls with FINAL", file=sys.stderr)
        assert exact == 600
        assert sum(per_node) >= 700 and all(per_node), per_node  # both nodes took inserts; re-sends stored twice
    finally:
        if collector:
            collector.stop(grace_s=20)
        two.down()
