"""The ClickHouse cluster schema, generated from the single-node schema (queries/schema/*.sql).

The single-node files stay the one home of every column list, engine and
view. On a cluster each table the saved queries read becomes two:

  <db>.<table>_local   on every node: the single-node table with its engine made
                       Replicated (ZooKeeper/Keeper path per shard, replica from
                       the {shard} and {replica} macros), or kept as it is for a
                       cluster without replication (shards only: no Keeper needed)
  <db>.<table>         a Distributed table over the _local tables, with the
                       single-node name, so saved queries and the report run
                       unchanged; inserts into it are routed by a sharding key

wirelens.requests is sharded by cityHash64(request_id): a record the pipeline
re-sends (same request id) lands on the shard that already holds it and
collapses there, and SELECT ... FINAL over the Distributed table applies FINAL
on each shard, so every call counts once cluster-wide.

Materialized views run on every node: one reading the node's own
otel.otel_logs (the exporter's table, local on each node) writes into the
Distributed wirelens.requests, which routes each call to its shard; one reading
sharded tables (the rollups' refreshable views, from wirelens.requests and
their own rollup's watermark) reads that node's _local tables and appends to
the _local table of its own target, on the same shard. A plain view over
sharded tables (a rollup's parameterized row view) is created on every node
over its _local tables; a refreshable view selecting from it counts as
reading sharded tables. Every node refreshes
its rollups on its own schedule: with replicas, both replicas of a shard
recompute the same minutes from the same calls and append them (with their
own as_of) to the Replicated rollup, whose FINAL keeps one version per row;
the Distributed rollup reads each shard once, so each call is counted once.

Every statement is idempotent (IF NOT EXISTS, re-applies a setting, or
replaces a view with its current definition: OR REPLACE) and
carries ON CLUSTER '<cluster>', unless it is meant to be run on each node
separately (on_cluster=False: for servers without distributed DDL, such as the
embedded chdb engine, or for operators who apply DDL node by node).

    cluster_schema.py --cluster wirelens                   # the DDL, to pipe into clickhouse-client
    cluster_schema.py --cluster wirelens --no-replication  # shards without replicas (no Keeper)
    cluster_schema.py --cluster wirelens --grants          # roles and grants for the Collector, the report, the DDL
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from queries.schema import ddl

ROOT = Path(__file__).resolve().parents[3]

LOCAL_SUFFIX = "_local"

# Every table the single-node schema creates, with the Distributed table's
# sharding key. A schema file that creates a table missing here is refused
# (ClusterSchemaError), so a new table gets a cluster decision, not a default.
SHARDING_KEYS = {
    # one call per request id: re-sends land on the shard holding the call
    "wirelens.requests": "cityHash64(request_id)",
    # ReplacingMergeTree(updated) per run: a run's versions meet on one shard
    "wirelens.runs": "cityHash64(run_id)",
    # rollups, recomputed per shard by their refreshable views (from requests_local); the key only
    # routes direct inserts
    "wirelens.requests_by_minute": "rand()",
    "wirelens.requests_by_second": "rand()",
    # the exporter's Sum metrics (cpu_per_1000_calls): any shard will do
    "otel.otel_metrics_sum": "rand()",
}

# Where a Replicated table keeps its metadata in ZooKeeper/Keeper: one path per
# shard and table; {shard} and {replica} are the server's macros.
REPLICA_PATH = "/clickhouse/tables/{shard}/%s/%s"
REPLICA_NAME = "{replica}"

CLUSTER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
TABLE = r"([A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*)"


class ClusterSchemaError(ValueError):
    """A single-node statement with no cluster rule, or a bad setting; the message names it."""


def local(table: str) -> str:
    return table + LOCAL_SUFFIX


def check_cluster_name(cluster: str) -> str:
    if not CLUSTER_NAME.fullmatch(cluster or ""):
        raise ClusterSchemaError(
            f"cluster name {cluster!r}: expected the name of a cluster in the servers' remote_servers "
            "(letters, digits, '_', '.', '-')")
    return cluster


def cluster_statements(statements: list[str], cluster: str, replicated: bool = True,
                       on_cluster: bool = True) -> list[str]:
    """The cluster form of single-node statements (see the module's docstring)."""
    check_cluster_name(cluster)
    on = f" ON CLUSTER '{cluster}'" if on_cluster else ""
    out: list[str] = []
    shard_views: set[str] = set()  # plain views over sharded tables: each node's reads its own shard
    for statement in statements:
        head = " ".join(statement.split()[:8])
        if m := re.match(r"CREATE DATABASE IF NOT EXISTS (\w+)\s*$", statement):
            out.append(f"CREATE DATABASE IF NOT EXISTS {m[1]}{on}")
        elif m := re.match(rf"CREATE TABLE IF NOT EXISTS {TABLE}\s*\(", statement):
            table = _sharded(m[1], head)
            body = statement[m.end() - 1:]
            out.append(f"CREATE TABLE IF NOT EXISTS {local(table)}{on}\n"
                       + (_replicated_engine(body, table, head) if replicated else body))
            db, name = table.split(".")
            out.append(f"CREATE TABLE IF NOT EXISTS {table}{on} AS {local(table)}\n"
                       f"ENGINE = Distributed('{cluster}', {db}, {name}{LOCAL_SUFFIX}, {SHARDING_KEYS[table]})")
        elif m := re.match(rf"ALTER TABLE {TABLE}\s", statement):
            table = _sharded(m[1], head)
            out.append(f"ALTER TABLE {local(table)}{on}{statement[m.end() - 1:]}")
            if re.match(r"\s*ADD COLUMN\b", statement[m.end():]):
                # The Distributed table reads and routes by column name: it needs the column too.
                out.append(f"ALTER TABLE {table}{on}{statement[m.end() - 1:]}")
        elif m := re.match(r"DROP VIEW IF EXISTS " + TABLE + r"\s*$", statement):
            # a view of an older schema (004 drops the rollups' insert-time views): gone from every node
            out.append(f"DROP VIEW IF EXISTS {m[1]}{on}")
        elif m := re.match(rf"CREATE OR REPLACE VIEW {TABLE}\s+AS\b", statement):
            # A plain (e.g. parameterized) view over sharded tables, such as a rollup's row view: on every
            # node, reading that node's _local tables, so a refreshable view selecting from it stays on
            # its shard.
            view, rest = m[1], statement[m.end():]
            sources = set(re.findall(rf"\b(?:FROM|JOIN)\s+{TABLE}(?![\w.])", statement))
            if not sources or not sources <= SHARDING_KEYS.keys() | shard_views:
                raise ClusterSchemaError(f"{head}: a view must read sharded tables only "
                                         f"(read: {sorted(sources) or 'none'})")
            for source in sources & SHARDING_KEYS.keys():
                rest = re.sub(rf"\b(FROM|JOIN)\s+{re.escape(source)}(?![\w.])", rf"\1 {local(source)}", rest)
            shard_views.add(view)
            out.append(f"CREATE OR REPLACE VIEW {view}{on} AS{rest}")
        elif m := re.match(rf"CREATE (OR REPLACE MATERIALIZED VIEW|MATERIALIZED VIEW IF NOT EXISTS) {TABLE}"
                           rf"\s+(?:(REFRESH\b.*?)\s+)?TO {TABLE}\s", statement, re.S):
            # A refreshable view (REFRESH ... APPEND TO) runs on its schedule on every node, reading that
            # node's shard; an insert-time view fires with each insert.
            create = f"CREATE {m[1]}"
            view, refresh, target = m[2], f"\n{m[3]}" if m[3] else "", _sharded(m[4], head)
            sources = set(re.findall(rf"\b(?:FROM|JOIN)\s+{TABLE}(?![\w.])", statement))
            sharded_sources = sources & (SHARDING_KEYS.keys() | shard_views)
            if sharded_sources and sharded_sources != sources:
                raise ClusterSchemaError(f"{head}: reads sharded and per-node tables at once ({sorted(sources)})")
            rest = statement[m.end() - 1:]
            if sharded_sources:
                # Fires where the shard's rows are written; writes to the same shard.
                for source in sharded_sources - shard_views:
                    rest = re.sub(rf"\b(FROM|JOIN)\s+{re.escape(source)}(?![\w.])", rf"\1 {local(source)}", rest)
                out.append(f"{create} {view}{on}{refresh}\nTO {local(target)}{rest}")
            else:
                # Fires on the node that received the insert; the Distributed target routes each row.
                out.append(f"{create} {view}{on}{refresh}\nTO {target}{rest}")
        elif m := re.match(r"CREATE OR REPLACE FUNCTION (\w+)\s+AS\b", statement):
            # SQL functions live on each node, like the tables' _local halves.
            out.append(f"CREATE OR REPLACE FUNCTION {m[1]}{on} AS{statement[m.end():]}")
        else:
            raise ClusterSchemaError(f"no cluster rule for the statement {head!r} "
                                     "(queries/schema/cluster/cluster_schema.py knows CREATE DATABASE, "
                                     "CREATE TABLE, ALTER TABLE, CREATE [OR REPLACE] MATERIALIZED VIEW ... "
                                     "[REFRESH ...] TO, CREATE OR REPLACE VIEW over sharded tables, "
                                     "DROP VIEW IF EXISTS and CREATE OR REPLACE FUNCTION)")
    return out


def _sharded(table: str, head: str) -> str:
    if table not in SHARDING_KEYS:
        raise ClusterSchemaError(f"{head}: table {table} has no sharding key in "
                                 "queries/schema/cluster/cluster_schema.py SHARDING_KEYS; add one")
    return table


def _replicated_engine(body: str, table: str, head: str) -> str:
    m = re.search(r"\bENGINE\s*=\s*(\w*MergeTree)\b(?:\s*\(([^()]*)\))?", body)
    if not m or m[1].startswith("Replicated"):
        raise ClusterSchemaError(f"{head}: expected a non-replicated *MergeTree engine")
    db, name = table.split(".")
    params = [f"'{REPLICA_PATH % (db, name + LOCAL_SUFFIX)}'", f"'{REPLICA_NAME}'"]
    if m[2] and m[2].strip():
        params.append(m[2].strip())
    return f"{body[:m.start()]}ENGINE = Replicated{m[1]}({', '.join(params)}){body[m.end():]}"


# ------------------------------------------------------------------ users and grants

# The engines the cluster schema creates tables with (ClickHouse 26.9 checks a
# TABLE ENGINE grant for each: table_engines_require_grant).
ENGINES = ("MergeTree", "ReplacingMergeTree", "AggregatingMergeTree", "ReplicatedMergeTree",
           "ReplicatedReplacingMergeTree", "ReplicatedAggregatingMergeTree", "Distributed")

# Roles, what each does, and its privileges (one GRANT each). Shared by the
# docs (docs/clickhouse-cluster.md prints them) and the live test, which loads
# them into users.xml (tests/e2e/test_clickhouse_cluster.py).
ROLES = {
    # The Collector's clickhouseexporter: inserts its rows; with create_schema
    # (the default) it also creates its database and tables at startup. Its
    # inserts fire wirelens's views, which run with the inserting user's
    # rights: the schema's views carry no SQL SECURITY clause, and ClickHouse
    # (ignore_empty_sql_security_in_create_view_query = 1, the default) leaves
    # them without one. So it also inserts, through them, into wirelens's
    # tables: the Distributed one and, on its own node's shard, the _local ones,
    # and reads what the rollup's view reads (a view's source needs SELECT).
    "wirelens_writer": [
        "INSERT ON otel.*",
        "INSERT ON wirelens.*",
        "SELECT ON wirelens.requests_local",
        "SELECT ON wirelens.requests",  # the same on one server, where the rollup reads this
        # create_schema: its tables, and for traces a lookup view it defines
        "CREATE DATABASE, CREATE TABLE, CREATE VIEW, SELECT ON otel.*",
    ] + [f"TABLE ENGINE ON {engine}" for engine in ("MergeTree", "ReplicatedMergeTree")],
    # wirelens report and wirelens query: read the calls, the runs, the
    # rollup and the process metrics (the _local tables too: with a cluster
    # <secret>, shards check the reader's own grants).
    "wirelens_reader": [
        "SELECT ON wirelens.*",
        "SELECT ON otel.otel_metrics_sum",
        "SELECT ON otel.otel_metrics_sum_local",
        # the rollups' refreshes (status, last error): what the report's drift warning names
        "SELECT ON system.view_refreshes",
    ],
    # The schema step (this file's DDL): creates and alters wirelens's tables and
    # views (creating a view checks that its creator may read its source and
    # write its target; CREATE OR REPLACE drops the view it replaces).
    "wirelens_ddl": [
        "CREATE DATABASE, CREATE TABLE, CREATE VIEW, DROP VIEW, ALTER TABLE, ALTER VIEW ON wirelens.*",
        "CREATE DATABASE, CREATE TABLE ON otel.*",
        "CREATE FUNCTION, DROP FUNCTION ON *.*",  # queries/schema/005_functions.sql (OR REPLACE drops)
        "SELECT, INSERT ON wirelens.*",
        "SELECT, INSERT ON otel.*",
    ] + [f"TABLE ENGINE ON {engine}" for engine in ENGINES],
}
# Needed only for DDL ON CLUSTER (access_control_improvements.on_cluster_queries_require_cluster_grant).
ON_CLUSTER_GRANT = "CLUSTER ON *.*"


def grant_statements(cluster: str | None, on_cluster: bool = True) -> list[str]:
    """CREATE ROLE and GRANT statements for the three roles (users are yours to create)."""
    on = f" ON CLUSTER '{check_cluster_name(cluster)}'" if cluster and on_cluster else ""
    out = []
    for role, grants in ROLES.items():
        out.append(f"CREATE ROLE IF NOT EXISTS {role}{on}")
        for grant in grants:
            out.append(f"GRANT{on} {grant} TO {role}")
    if on:
        # the schema step's DDL, and the exporter's own (create_schema with cluster_name)
        out.append(f"GRANT{on} {ON_CLUSTER_GRANT} TO wirelens_ddl, wirelens_writer")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Print the wirelens ClickHouse cluster DDL (generated from queries/schema/*.sql), "
                    "or the roles and grants, as statements ending in ';' for clickhouse-client --multiquery.")
    parser.add_argument("--cluster", required=True, help="the cluster's name in the servers' remote_servers")
    parser.add_argument("--ttl-days", default="30", help="retention of the calls in days (default 30, "
                                                         "as WIRELENS_REQUESTS_TTL_DAYS)")
    parser.add_argument("--no-replication", action="store_true",
                        help="shards without replicas: keep the single-node engines (no ZooKeeper/Keeper needed)")
    parser.add_argument("--per-node", action="store_true",
                        help="leave out ON CLUSTER: run the output on every node yourself")
    parser.add_argument("--grants", action="store_true", help="print the roles and grants instead of the schema")
    args = parser.parse_args(argv)
    try:
        if not args.ttl_days.isdigit():
            raise ClusterSchemaError(f"--ttl-days {args.ttl_days!r}: expected a whole number of days")
        if args.grants:
            statements = grant_statements(args.cluster, on_cluster=not args.per_node)
        else:
            statements = cluster_statements(ddl.statements(args.ttl_days), args.cluster,
                                            replicated=not args.no_replication, on_cluster=not args.per_node)
    except (ClusterSchemaError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(f"{s};\n\n" for s in statements))
    return 0


if __name__ == "__main__":
    sys.exit(main())
