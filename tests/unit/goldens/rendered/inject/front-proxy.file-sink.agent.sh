#!/bin/sh
# The wirelens access-log agent (logship), written by `wirelens inject` (envoy/INJECT.md,
# "The durable path"). Run it beside Envoy, on the same host, as a user that can read, rename
# and delete the access-log file and write its directory. $LOGSHIP overrides the binary.
set -e
exec "${LOGSHIP:-@ROOT@/bin/logship}" \
    -file @TMP@/access.jsonl \
    -checkpoint @TMP@/access.jsonl.checkpoint \
    -endpoint 10.0.0.1:4318 \
    -resource service.name=wirelens-envoy,log_name=wirelens,node_name=front-proxy-0,cluster_name=front-proxy \
    -listen 127.0.0.1:14135 \
    -rotate-bytes 1000000 \
    -max-disk-bytes 3000000 \
    -reopen-url http://127.0.0.1:9901/reopen_logs
