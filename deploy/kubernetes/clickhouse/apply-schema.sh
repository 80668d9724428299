#!/bin/bash
# The `schema` container of the ClickHouse pod: applies queries/schema/*.sql
# (ConfigMap wirelens-schema) once the Collector's ClickHouse exporter has
# created otel.otel_logs (the view wirelens.requests reads from it), then
# stays, so the pod stays Running. Every statement is idempotent (IF NOT
# EXISTS, or re-applies a setting), and it runs again whenever the pod starts.
set -euo pipefail
ttl=${WIRELENS_REQUESTS_TTL_DAYS:-30}
schema_dir=${WIRELENS_SCHEMA_DIR:-/etc/wirelens/schema}
port=${WIRELENS_CLICKHOUSE_TCP_PORT:-9000}
[[ $ttl =~ ^[0-9]+$ ]] || { echo "WIRELENS_REQUESTS_TTL_DAYS=$ttl is not a whole number of days" >&2; exit 1; }
client() { clickhouse-client --host 127.0.0.1 --port "$port" "$@"; }

trap 'exit 0' TERM INT
echo "schema: waiting for otel.otel_logs (created when the Collector starts)"
until [[ $(client --query 'EXISTS TABLE otel.otel_logs' 2>/dev/null) == 1 ]]; do
  sleep 2 & wait $!
done
# An install made before issue 30 (queries/migrate.py says what changed):
# - wirelens.requests keyed (timestamp, request_id): its rows must move to the
#   current key, which queries/migrate.py does and this script cannot. Refused
#   before anything changes, saying how to run it.
# - rollups fed at insert (AggregatingMergeTree, views *_from_requests) that
#   counted re-sent records twice: derived data, dropped here (the statements
#   of queries/rollup.py RECREATE_SQL); 004 recreates them, and their first
#   refresh recomputes every minute from wirelens.requests FINAL.
key=$(client --query "SELECT sorting_key FROM system.tables WHERE database = 'wirelens' AND name = 'requests'")
if [[ -n $key && $key != *request_key* ]]; then
  echo "schema: wirelens.requests has the key ($key) of an install from before issue 30;" \
       "move its rows once with: python -m queries.migrate --clickhouse-url http://USER:PASSWORD@HOST:8123" \
       "(from a wirelens checkout, e.g. through kubectl port-forward), then restart this pod" >&2
  exit 1
fi
old_rollups=$(client --query "SELECT count() FROM system.tables WHERE database = 'wirelens' AND
  (name IN ('requests_by_minute_from_requests', 'requests_by_second_from_requests')
   OR (name IN ('requests_by_minute', 'requests_by_second') AND engine = 'AggregatingMergeTree'))")
if [[ $old_rollups != 0 ]]; then
  echo "schema: dropping the rollups fed at insert (they counted re-sent records twice); 004 recreates them"
  client --multiquery <<'SQL'
DROP VIEW IF EXISTS wirelens.requests_by_minute_from_requests;
DROP VIEW IF EXISTS wirelens.requests_by_second_from_requests;
DROP VIEW IF EXISTS wirelens.requests_by_minute_refresh;
DROP VIEW IF EXISTS wirelens.requests_by_second_refresh;
DROP VIEW IF EXISTS wirelens.requests_by_minute_settle;
DROP VIEW IF EXISTS wirelens.requests_by_second_settle;
DROP TABLE IF EXISTS wirelens.requests_by_minute;
DROP TABLE IF EXISTS wirelens.requests_by_second;
SQL
fi
for file in "$schema_dir"/*.sql; do
  echo "schema: applying $(basename "$file")"
  sed "s/\${WIRELENS_REQUESTS_TTL_DAYS}/$ttl/g" "$file" | client --multiquery
done
echo "schema: applied"
sleep infinity & wait $!
