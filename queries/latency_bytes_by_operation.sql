-- Question: for each operation, how does each protocol compare on latency
-- (p50/p95/p99, measured at the proxy) and on bytes per call (headers and
-- bodies, each way)?
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    operation,
    protocol,
    count()                                              AS calls,
    round(quantileExact(0.50)(duration_us) / 1000, 3)    AS p50_ms,
    round(quantileExact(0.95)(duration_us) / 1000, 3)    AS p95_ms,
    round(quantileExact(0.99)(duration_us) / 1000, 3)    AS p99_ms,
    round(avg(request_header_bytes), 1)                  AS req_header_b,
    round(avg(request_body_bytes), 1)                    AS req_body_b,
    round(avg(response_header_bytes), 1)                 AS resp_header_b,
    round(avg(response_body_bytes), 1)                   AS resp_body_b
FROM wirelens.requests FINAL
PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
WHERE timestamp >= {since:DateTime64(3)}
  AND timestamp < {until:DateTime64(3)}
GROUP BY
    operation,
    protocol
ORDER BY
    operation ASC,
    protocol ASC;
