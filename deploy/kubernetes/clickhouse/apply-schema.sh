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
for file in "$schema_dir"/*.sql; do
  echo "schema: applying $(basename "$file")"
  sed "s/\${WIRELENS_REQUESTS_TTL_DAYS}/$ttl/g" "$file" | client --multiquery
done
echo "schema: applied"
sleep infinity & wait $!
