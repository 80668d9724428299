"""The schema step: queries/schema/*.sql applied to the stack's ClickHouse (or its cluster form).

    schema_statements   the statements, ${...} filled in; with WIRELENS_CLICKHOUSE_CLUSTER,
                        their cluster form (queries/schema/cluster/cluster_schema.py)
    apply_schema        run them (idempotent: IF NOT EXISTS, CREATE OR REPLACE, MODIFY TTL), after
                        queries/migrate.py has moved an older install's tables to the current form
    apply_schema_when_ready
                        after the Collector is up: wait for its otel_logs, then apply
"""

from __future__ import annotations

from deploy.local.settings import READY_TIMEOUT_S, StackError, log_path, schema_mode
from queries import migrate
from queries.schema import ddl
from queries.schema.cluster import cluster_schema
from wirelens_helpers import clickhouse
from wirelens_helpers.settings import clickhouse_url
from wirelens_helpers.wait import WaitTimeout, wait_for


def clickhouse_query(settings: dict[str, str], sql: str, timeout: float = 30.0) -> str:
    url = clickhouse_url(settings)
    try:
        return clickhouse.post(url, sql, timeout=timeout)
    except clickhouse.UnreachableError as exc:
        raise StackError(str(exc)) from exc
    except clickhouse.QueryError as exc:
        raise StackError(f"{exc}\n--- statement ---\n{sql}") from exc


def apply_schema_when_ready(settings: dict[str, str]) -> None:
    """Our tables and views depend on the exporter's otel_logs, created when the Collector starts."""
    try:
        wait_for("otel.otel_logs", lambda: clickhouse_query(settings, "EXISTS TABLE otel.otel_logs").strip() == "1",
                 timeout_s=READY_TIMEOUT_S, interval_s=0.2)
    except WaitTimeout:
        raise StackError("collector: otel.otel_logs was not created in ClickHouse within "
                         f"{READY_TIMEOUT_S:.0f}s; see {log_path(settings, 'collector')}") from None
    apply_schema(settings)


def apply_schema(settings: dict[str, str]) -> None:
    if not schema_mode(settings)[0]:
        # An older install's tables to the current form first (a no-op on a current one); a
        # move of many rows takes minutes, hence the long timeout. On a cluster: by hand, per node.
        try:
            for done in migrate.run(lambda sql: clickhouse_query(settings, sql, timeout=3600),
                                    settings["WIRELENS_REQUESTS_TTL_DAYS"], log=print):
                print(f"schema: migrated: {done}")
        except migrate.MigrationError as exc:
            raise StackError(f"schema migration (queries/migrate.py): {exc}") from exc
    for statement in schema_statements(settings):
        clickhouse_query(settings, statement)


def schema_statements(settings: dict[str, str]) -> list[str]:
    """queries/schema/*.sql in file order with ${...} filled in; with WIRELENS_CLICKHOUSE_CLUSTER
    set, their cluster form (_local tables, Distributed tables, ON CLUSTER; cluster_schema.py)."""
    statements = ddl.statements(settings["WIRELENS_REQUESTS_TTL_DAYS"])
    cluster, replicated, on_cluster = schema_mode(settings)
    if cluster:
        statements = cluster_schema.cluster_statements(statements, cluster, replicated, on_cluster)
    return statements
