"""The cluster schema (queries/schema/cluster/cluster_schema.py), the schema step's cluster switch,
and the cluster node configs (clickhouse_server.py --extra-config, deploy/clickhouse_cluster)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from deploy.local import clickhouse_server
from deploy.clickhouse_cluster import cluster
from queries.schema.cluster import cluster_schema
from deploy.local import stack

ROOT = Path(__file__).resolve().parents[2]

SINGLE = {"WIRELENS_REQUESTS_TTL_DAYS": "7"}
CLUSTER = {**SINGLE, "WIRELENS_CLICKHOUSE_CLUSTER": "prod"}


def statements(**settings) -> list[str]:
    return stack.schema_statements({**CLUSTER, **settings})


def named(stmts: list[str], prefix: str) -> str:
    found = [s for s in stmts if s.startswith(prefix)]
    assert len(found) == 1, (prefix, [s[:80] for s in stmts])
    return found[0]


def test_single_node_schema_is_unchanged_without_a_cluster():
    stmts = stack.schema_statements(SINGLE)
    assert "CREATE TABLE IF NOT EXISTS wirelens.requests\n(" in "\n".join(stmts)
    assert not any("ON CLUSTER" in s or "_local" in s or "Distributed" in s for s in stmts)


@pytest.mark.parametrize("replicated", ["1", "0"])
@pytest.mark.parametrize("on_cluster", ["1", "0"])
def test_every_single_node_statement_has_a_cluster_form(replicated, on_cluster):
    single = stack.schema_statements(SINGLE)
    stmts = statements(WIRELENS_CLICKHOUSE_REPLICATED=replicated, WIRELENS_CLICKHOUSE_ON_CLUSTER=on_cluster)
    tables = [s for s in single if s.startswith("CREATE TABLE")]
    added_columns = [s for s in single if s.startswith("ALTER TABLE") and " ADD COLUMN " in s]
    # one Distributed table more per table; a column is added to both tables
    assert len(stmts) == len(single) + len(tables) + len(added_columns)
    for s in stmts:
        assert s.startswith(("CREATE DATABASE IF NOT EXISTS", "CREATE TABLE IF NOT EXISTS",
                             "CREATE MATERIALIZED VIEW IF NOT EXISTS", "CREATE OR REPLACE MATERIALIZED VIEW",
                             "CREATE OR REPLACE VIEW", "ALTER TABLE", "CREATE OR REPLACE FUNCTION", "DROP VIEW IF EXISTS")), s[:80]
        assert ("ON CLUSTER 'prod'" in s.split("\n")[0]) == (on_cluster == "1"), s[:80]
        assert "${" not in s


def test_requests_local_keeps_the_single_node_columns_and_key_with_a_replicated_engine():
    single = named(stack.schema_statements(SINGLE), "CREATE TABLE IF NOT EXISTS wirelens.requests\n")
    local = named(statements(), "CREATE TABLE IF NOT EXISTS wirelens.requests_local ")
    columns = lambda s: s[s.index("("):s.index("ENGINE")]  # noqa: E731
    assert columns(local) == columns(single)  # one home for the column list: 001_requests.sql
    # the engine made Replicated; partition, key and TTL as on a single node (the key is 001's)
    assert single[single.index("ENGINE"):].startswith("ENGINE = ReplacingMergeTree\nPARTITION BY toDate(timestamp)\n"
                                                      "ORDER BY (timestamp, ")
    assert local[local.index("ENGINE"):] == single[single.index("ENGINE"):].replace(
        "ENGINE = ReplacingMergeTree\n", "ENGINE = ReplicatedReplacingMergeTree("
        "'/clickhouse/tables/{shard}/wirelens/requests_local', '{replica}')\n", 1)
    assert local.endswith("TTL toDateTime(timestamp) + toIntervalDay(7)")


def test_distributed_tables_keep_the_single_node_names_and_shard_requests_by_request_id():
    stmts = statements()
    requests = named(stmts, "CREATE TABLE IF NOT EXISTS wirelens.requests ")
    assert requests == ("CREATE TABLE IF NOT EXISTS wirelens.requests ON CLUSTER 'prod' AS wirelens.requests_local\n"
                        "ENGINE = Distributed('prod', wirelens, requests_local, cityHash64(request_id))")
    # every Distributed table right after its _local table
    for i, s in enumerate(stmts):
        if "ENGINE = Distributed" in s:
            table = s.split()[5]
            assert stmts[i - 1].startswith(f"CREATE TABLE IF NOT EXISTS {table}_local ")


def test_engine_parameters_follow_the_replica_path():
    runs = named(statements(), "CREATE TABLE IF NOT EXISTS wirelens.runs_local ")
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wirelens/runs_local', " \
           "'{replica}', updated)" in runs
    metrics = named(statements(), "CREATE TABLE IF NOT EXISTS otel.otel_metrics_sum_local ")
    assert "ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/otel/otel_metrics_sum_local', '{replica}')" \
        in metrics
    unreplicated = named(statements(WIRELENS_CLICKHOUSE_REPLICATED="0"),
                         "CREATE TABLE IF NOT EXISTS wirelens.runs_local ")
    assert "ENGINE = ReplacingMergeTree(updated)" in unreplicated and "Replicated" not in unreplicated


def test_views_read_the_node_local_source_and_write_where_the_row_belongs():
    stmts = statements()
    ingest = named(stmts, "CREATE OR REPLACE MATERIALIZED VIEW wirelens.requests_from_otel_logs ")
    # per node from its own otel_logs, into the Distributed table: routed by request id
    assert ingest.split("\n")[1] == "TO wirelens.requests" and "FROM otel.otel_logs\n" in ingest
    for rollup_table in ("requests_by_minute", "requests_by_second"):
        rollup = named(stmts, f"CREATE OR REPLACE MATERIALIZED VIEW wirelens.{rollup_table}_refresh ")
        # refreshed on every node from its shard's calls, appended to its own rollup
        assert rollup.split("\n")[:3] == [
            f"CREATE OR REPLACE MATERIALIZED VIEW wirelens.{rollup_table}_refresh ON CLUSTER 'prod'",
            "REFRESH EVERY 10 SECOND APPEND", f"TO wirelens.{rollup_table}_local"]
        # the rows of the stale minutes: from the row view, which reads the node's shard
        assert "FROM wirelens.rollup_" in rollup and "_rows(minutes = stale)" in rollup
        assert "FROM wirelens.requests_local\n" in rollup  # the minutes touched since the watermark
        # the watermark and each minute's last recomputation: from the node's own rollup
        assert f"(SELECT max(as_of) FROM wirelens.{rollup_table}_local)" in rollup
        assert f"FROM wirelens.{rollup_table}_local\n" in rollup
        assert not re.search(r"wirelens\.requests(_by_minute|_by_second)?\b(?!_)", rollup), rollup
        # the row view (one definition of the rollup's rows) on every node, over the node's shard
        rows_view = "minute" if rollup_table.endswith("minute") else "second"
        rows = named(stmts, f"CREATE OR REPLACE VIEW wirelens.rollup_{rows_view}_rows ")
        assert rows.startswith(f"CREATE OR REPLACE VIEW wirelens.rollup_{rows_view}_rows ON CLUSTER 'prod' AS\n")
        assert "FROM wirelens.requests_local AS r FINAL" in rows and "{minutes:Array(DateTime)}" in rows
        assert not re.search(r"wirelens\.requests\b(?!_)", rows), rows
        # the hourly settle: also on every node, into its own rollup, from the row view and its own rollup
        settle = named(stmts, f"CREATE OR REPLACE MATERIALIZED VIEW wirelens.{rollup_table}_settle ")
        assert settle.split("\n")[:3] == [
            f"CREATE OR REPLACE MATERIALIZED VIEW wirelens.{rollup_table}_settle ON CLUSTER 'prod'",
            "REFRESH EVERY 1 HOUR APPEND", f"TO wirelens.{rollup_table}_local"]
        assert f"FROM wirelens.rollup_{rows_view}_rows(minutes = settling)" in settle
        assert f"FROM wirelens.{rollup_table}_local\n" in settle
        assert not re.search(r"wirelens\.requests(_by_minute|_by_second)?\b(?!_)", settle), settle
        # the insert-time view of before issue 30 is dropped on every node
        assert named(stmts, f"DROP VIEW IF EXISTS wirelens.{rollup_table}_from_requests") == \
            f"DROP VIEW IF EXISTS wirelens.{rollup_table}_from_requests ON CLUSTER 'prod'"
    minute_local = named(stmts, "CREATE TABLE IF NOT EXISTS wirelens.requests_by_minute_local ")
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wirelens/requests_by_minute_local', " \
           "'{replica}', as_of)" in minute_local
    assert "ENGINE = ReplacingMergeTree(as_of)" in named(statements(WIRELENS_CLICKHOUSE_REPLICATED="0"),
                                                         "CREATE TABLE IF NOT EXISTS wirelens.requests_by_second_local ")
    assert named(statements(WIRELENS_CLICKHOUSE_ON_CLUSTER="0"),
                 "DROP VIEW IF EXISTS wirelens.requests_by_minute_from_requests") == \
        "DROP VIEW IF EXISTS wirelens.requests_by_minute_from_requests"
    alter = named(stmts, "ALTER TABLE wirelens.requests_local ON CLUSTER 'prod' MODIFY TTL ")
    assert alter == "ALTER TABLE wirelens.requests_local ON CLUSTER 'prod' MODIFY TTL toDateTime(timestamp) " \
                    "+ toIntervalDay(7)"
    # a column added to an existing table: on both, or the Distributed table cannot carry it
    for add in ("ADD COLUMN IF NOT EXISTS url_path String CODEC(ZSTD) AFTER http_route",
                "ADD COLUMN IF NOT EXISTS stack LowCardinality(String)"):
        column = add.split()[5]
        assert named(stmts, f"ALTER TABLE wirelens.requests_local ON CLUSTER 'prod' ADD COLUMN IF NOT EXISTS {column} ") \
            == f"ALTER TABLE wirelens.requests_local ON CLUSTER 'prod' {add}"
        assert named(stmts, f"ALTER TABLE wirelens.requests ON CLUSTER 'prod' ADD COLUMN IF NOT EXISTS {column} ") \
            == f"ALTER TABLE wirelens.requests ON CLUSTER 'prod' {add}"


def test_a_table_without_a_sharding_key_or_an_unknown_statement_is_refused():
    with pytest.raises(cluster_schema.ClusterSchemaError, match="wirelens.new_table has no sharding key"):
        cluster_schema.cluster_statements(
            ["CREATE TABLE IF NOT EXISTS wirelens.new_table (x UInt8) ENGINE = MergeTree ORDER BY x"], "prod")
    with pytest.raises(cluster_schema.ClusterSchemaError, match="no cluster rule for the statement 'DROP TABLE"):
        cluster_schema.cluster_statements(["DROP TABLE wirelens.requests"], "prod")
    with pytest.raises(cluster_schema.ClusterSchemaError, match="a view must read sharded tables only"):
        cluster_schema.cluster_statements(["CREATE OR REPLACE VIEW wirelens.v AS SELECT * FROM otel.otel_logs"], "prod")
    with pytest.raises(cluster_schema.ClusterSchemaError, match="reads sharded and per-node tables"):
        cluster_schema.cluster_statements(
            ["CREATE MATERIALIZED VIEW IF NOT EXISTS wirelens.v TO wirelens.runs AS SELECT * "
             "FROM wirelens.requests JOIN otel.otel_logs USING (x)"], "prod")


def test_bad_cluster_settings_are_named():
    with pytest.raises(stack.StackError, match="WIRELENS_CLICKHOUSE_REPLICATED='yes': expected 1 or 0"):
        stack.load_settings({"WIRELENS_CLICKHOUSE_REPLICATED": "yes"})
    with pytest.raises(stack.StackError, match="cluster name 'my cluster'"):
        stack.load_settings({"WIRELENS_CLICKHOUSE_CLUSTER": "my cluster"})
    assert stack.load_settings({})["WIRELENS_CLICKHOUSE_CLUSTER"] == ""


def test_cli_prints_statements_for_clickhouse_client(capsys):
    assert cluster_schema.main(["--cluster", "prod", "--ttl-days", "7"]) == 0
    out = capsys.readouterr().out
    assert out.count(";\n\n") == len(statements())
    assert cluster_schema.main(["--cluster", "prod", "--grants"]) == 0
    grants = capsys.readouterr().out
    assert "CREATE ROLE IF NOT EXISTS wirelens_writer ON CLUSTER 'prod';" in grants
    assert "GRANT ON CLUSTER 'prod' TABLE ENGINE ON Distributed TO wirelens_ddl;" in grants
    assert cluster_schema.main(["--cluster", "x y"]) == 2
    assert "cluster name 'x y'" in capsys.readouterr().err


def test_extra_config_adds_elements_to_config_xml(tmp_path):
    extra = tmp_path / "extra.xml"
    extra.write_text("<clickhouse><macros><shard>2</shard></macros><remote_servers><c/></remote_servers>"
                     "</clickhouse>")
    clickhouse_server.write_config(tmp_path / "run", "127.0.0.1", 9000, 8123, extra)
    root = ET.parse(tmp_path / "run" / "config.xml").getroot()
    assert root.find("tcp_port").text == "9000" and root.find("macros/shard").text == "2"
    assert root.find("remote_servers/c") is not None
    clickhouse_server.write_config(tmp_path / "plain", "127.0.0.1", 9000, 8123)
    assert ET.parse(tmp_path / "plain" / "config.xml").getroot().find("macros") is None
    extra.write_text("<yandex/>")
    with pytest.raises(SystemExit, match="root element is <yandex>, expected <clickhouse>"):
        clickhouse_server.extra_settings(extra)
    extra.write_text("<clickhouse><tcp_port>1</tcp_port></clickhouse>")
    with pytest.raises(SystemExit, match="sets tcp_port, which the command line sets"):
        clickhouse_server.extra_settings(extra)


def test_local_cluster_config_lists_every_node_under_its_shard(tmp_path):
    c = cluster.LocalCluster(tmp_path, shards=2, replicas=2, name="prod")
    root = ET.fromstring(c.node_config(c.nodes[3]))
    shards = root.findall("remote_servers/prod/shard")
    assert [[int(r.find("port").text) for r in s.findall("replica")] for s in shards] == \
        [[n.tcp_port for n in c.nodes if n.shard == k] for k in (1, 2)]
    assert all(s.find("internal_replication").text == "false" for s in shards)
    assert (root.find("macros/shard").text, root.find("macros/replica").text) == ("2", "s2r2")
    with pytest.raises(cluster.ClusterError, match="each must be at least 1"):
        cluster.LocalCluster(tmp_path, shards=0)
