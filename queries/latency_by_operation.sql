-- Question: for each operation, how fast is each protocol: total latency
-- (mean, p50/p90/p95/p99/p99.9, min, max) and time to first byte, both
-- measured at the proxy?
--
-- duration_us: from the request's first byte at Envoy to the response's last;
-- ttfb_us: to the response's first byte. Quantiles are exact (quantileExact:
-- the element at position floor(q * n) of the sorted values, 0-based).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    quantilesExact(0.5, 0.9, 0.95, 0.99, 0.999)(duration_us) AS d,
    quantilesExact(0.5, 0.9, 0.95, 0.99, 0.999)(ttfb_us)     AS t
SELECT
    operation,
    protocol,
    count()                                                     AS calls,
    round(avg(duration_us) / 1000, 3)                           AS mean_ms,
    round(d[1] / 1000, 3)                                       AS p50_ms,
    round(d[2] / 1000, 3)                                       AS p90_ms,
    round(d[3] / 1000, 3)                                       AS p95_ms,
    round(d[4] / 1000, 3)                                       AS p99_ms,
    round(d[5] / 1000, 3)                                       AS p999_ms,
    round(min(duration_us) / 1000, 3)                           AS min_ms,
    round(max(duration_us) / 1000, 3)                           AS max_ms,
    round(avg(ttfb_us) / 1000, 3)                               AS ttfb_mean_ms,
    round(t[1] / 1000, 3)                                       AS ttfb_p50_ms,
    round(t[2] / 1000, 3)                                       AS ttfb_p90_ms,
    round(t[3] / 1000, 3)                                       AS ttfb_p95_ms,
    round(t[4] / 1000, 3)                                       AS ttfb_p99_ms,
    round(t[5] / 1000, 3)                                       AS ttfb_p999_ms,
    round(min(ttfb_us) / 1000, 3)                               AS ttfb_min_ms,
    round(max(ttfb_us) / 1000, 3)                               AS ttfb_max_ms
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
