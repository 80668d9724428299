-- Question: per operation and protocol, the latency percentiles next to the
-- mean header and body bytes each way. The rollup variant of
-- queries/latency_bytes_by_operation.sql, for long windows.
--
-- Reads wirelens.requests_by_minute (queries/schema/004): the same columns;
-- percentiles from merged DDSketches (within 1 % relative error), whole
-- minutes starting in [toStartOfMinute(since), until). See
-- rollup/latency_by_operation.sql.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive, rounded down to the minute)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    quantilesDDMerge(0.01, 0.5, 0.9, 0.95, 0.99, 0.999)(m.duration_sketch) AS d,
    sum(m.calls)                                                AS weighted
SELECT
    operation,
    protocol,
    toUInt64(round(weighted))                                   AS calls,
    sum(m.sampled_calls)                                        AS sampled_calls,
    min(m.lowest_rate)                                          AS sample_rate,
    round(d[1] / 1000, 3)                                       AS p50_ms,
    round(d[3] / 1000, 3)                                       AS p95_ms,
    round(d[4] / 1000, 3)                                       AS p99_ms,
    round(sum(m.request_header_bytes) / weighted, 1)            AS req_header_b,
    round(sum(m.request_body_bytes) / weighted, 1)              AS req_body_b,
    round(sum(m.response_header_bytes) / weighted, 1)           AS resp_header_b,
    round(sum(m.response_body_bytes) / weighted, 1)             AS resp_body_b
FROM wirelens.requests_by_minute AS m FINAL
WHERE m.minute >= toStartOfMinute({since:DateTime64(3)})
  AND m.minute < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR m.run_id = {run_id:String})
GROUP BY
    operation,
    protocol
ORDER BY
    operation ASC,
    protocol ASC;
