-- Question: for each load run (one step of an experiment), what did the proxy
-- record? Calls, latency (duration_us: the wirelens filter, request headers
-- in to response end out), the run's window at the proxy, bytes per call
-- (headers as the filter counts them and as they crossed the wire, bodies,
-- whole-connection wire bytes), gRPC messages per call, time to first byte,
-- and where a call's time at Envoy went: the upstream exchange versus Envoy
-- itself. The *_rank medians are nearest-rank (the lower median), as ghz,
-- h2load and loadgen compute theirs, so the cross-check compares like with
-- like.
--
-- The split is Envoy's, in µs, defined as in queries/protocol_vs_stack.sql:
-- upstream_* from upstream_duration_us (first byte sent upstream to the last
-- byte received from it: the service, its framework, the loopback wire),
-- in_envoy_* from wirelens_in_envoy_us (queries/schema/005_functions.sql: the
-- call's time at Envoy, envoy_duration_us, minus the upstream exchange). A
-- stream is one call: its upstream exchange spans all its messages, and its
-- time in Envoy is what Envoy spends before the first byte goes upstream and
-- after the last comes back. Calls no upstream served (NULL) are left out of
-- the split; split_calls counts the calls it is over. Not the whole
-- milliseconds of x-envoy-upstream-service-time (upstream_service_ms), which
-- read 0 for most calls (issue 34).
--
-- Parameters:
--   {runs:Array(String)}  the run ids (warm-up calls carry <run>-warmup and are not included)
SELECT
    run_id,
    any(protocol)                                            AS protocol,
    any(operation)                                           AS operation,
    any(http_version)                                        AS http_version,
    count()                                                  AS calls,
    countIf(http_status >= 400 OR ifNull(grpc_status, 0) != 0) AS errors,
    quantileExact(0.50)(duration_us)                         AS p50_us,
    quantileExactLow(0.50)(duration_us)                      AS p50_rank_us,
    quantileExact(0.90)(duration_us)                         AS p90_us,
    quantileExact(0.95)(duration_us)                         AS p95_us,
    quantileExact(0.99)(duration_us)                         AS p99_us,
    avg(duration_us)                                         AS avg_us,
    min(duration_us)                                         AS min_us,
    max(duration_us)                                         AS max_us,
    sum(duration_us)                                         AS sum_us,
    max(toUnixTimestamp64Micro(timestamp) + duration_us)
      - min(toUnixTimestamp64Micro(timestamp))               AS window_us,
    avg(request_header_bytes)                                AS req_header_b,
    avg(downstream_header_bytes_received)                    AS req_header_wire_b,
    avg(request_body_bytes)                                  AS req_body_b,
    avg(request_message_bytes)                               AS req_message_b,
    avg(response_header_bytes + response_trailer_bytes)      AS resp_header_b,
    avg(downstream_header_bytes_sent)                        AS resp_header_wire_b,
    avg(response_body_bytes)                                 AS resp_body_b,
    avg(response_message_bytes)                              AS resp_message_b,
    avg(downstream_wire_bytes_received)                      AS wire_in_b,
    avg(downstream_wire_bytes_sent)                          AS wire_out_b,
    avg(request_messages)                                    AS req_messages,
    avg(response_messages)                                   AS resp_messages,
    quantileExact(0.50)(ttfb_us)                             AS ttfb_p50_us,
    avg(ttfb_us)                                             AS ttfb_avg_us,
    count(upstream_duration_us)                              AS split_calls,
    quantileExact(0.50)(upstream_duration_us)                AS upstream_p50_us,
    quantileExactLow(0.50)(upstream_duration_us)             AS upstream_p50_rank_us,
    avg(upstream_duration_us)                                AS upstream_avg_us,
    quantileExact(0.50)(wirelens_in_envoy_us(envoy_duration_us, upstream_duration_us)) AS in_envoy_p50_us,
    avg(wirelens_in_envoy_us(envoy_duration_us, upstream_duration_us))                 AS in_envoy_avg_us,
    uniqExact(connection_id)                                 AS connections
FROM wirelens.requests FINAL
WHERE run_id IN {runs:Array(String)}
GROUP BY run_id
ORDER BY run_id
SETTINGS output_format_json_quote_64bit_integers = 0
