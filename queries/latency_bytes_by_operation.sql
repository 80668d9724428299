-- Question: for each operation, how does each protocol compare on latency
-- (p50/p95/p99, measured at the proxy) and on bytes per call (headers and
-- bodies, each way)?
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls. calls is an estimate weighted by 1/sample_rate (exact
-- when every call was recorded) and the byte means are weighted means; the
-- percentiles are over the sampled_calls recorded; sample_rate is the lowest
-- rate among them (1: nothing left out).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    -- one quantilesExact for the three levels: one array of the group's durations, not three
    quantilesExact(0.50, 0.95, 0.99)(duration_us)              AS d,
    -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
    if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1) AS rate,
    1 / rate                                                   AS weight
SELECT
    operation,
    protocol,
    toUInt64(round(sum(weight)))                               AS calls,
    count()                                                    AS sampled_calls,
    min(rate)                                                  AS sample_rate,
    round(d[1] / 1000, 3)                                    AS p50_ms,
    round(d[2] / 1000, 3)                                    AS p95_ms,
    round(d[3] / 1000, 3)                                    AS p99_ms,
    round(avgWeighted(request_header_bytes, weight), 1)        AS req_header_b,
    round(avgWeighted(request_body_bytes, weight), 1)          AS req_body_b,
    round(avgWeighted(response_header_bytes, weight), 1)       AS resp_header_b,
    round(avgWeighted(response_body_bytes, weight), 1)         AS resp_body_b
FROM wirelens.requests AS r FINAL
PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
WHERE timestamp >= {since:DateTime64(3)}
  AND timestamp < {until:DateTime64(3)}
GROUP BY
    operation,
    protocol
ORDER BY
    operation ASC,
    protocol ASC;
