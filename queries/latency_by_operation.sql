-- Question: for each operation, how fast is each protocol: total latency
-- (mean, p50/p90/p95/p99/p99.9, min, max) and time to first byte, both
-- measured at the proxy?
--
-- duration_us: from the request's first byte at Envoy to the response's last;
-- ttfb_us: to the response's first byte. Quantiles are exact (quantileExact:
-- the element at position floor(q * n) of the sorted values, 0-based).
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls.
--   calls          estimated calls: the recorded calls weighted by 1/sample_rate
--                  (exact when every call was recorded)
--   sampled_calls  the calls recorded: the sample size of every percentile,
--                  minimum and maximum here
--   sample_rate    the lowest sample rate among them (1: nothing left out)
-- Means are weighted by 1/sample_rate; percentiles, min and max are over the
-- sampled calls (the filter samples independently of latency).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    quantilesExact(0.5, 0.9, 0.95, 0.99, 0.999)(duration_us) AS d,
    quantilesExact(0.5, 0.9, 0.95, 0.99, 0.999)(ttfb_us)     AS t,
    -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
    if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1) AS rate,
    1 / rate                                                    AS weight
SELECT
    operation,
    protocol,
    toUInt64(round(sum(weight)))                                AS calls,
    count()                                                     AS sampled_calls,
    min(rate)                                                   AS sample_rate,
    round(avgWeighted(duration_us, weight) / 1000, 3)           AS mean_ms,
    round(d[1] / 1000, 3)                                       AS p50_ms,
    round(d[2] / 1000, 3)                                       AS p90_ms,
    round(d[3] / 1000, 3)                                       AS p95_ms,
    round(d[4] / 1000, 3)                                       AS p99_ms,
    round(d[5] / 1000, 3)                                       AS p999_ms,
    round(min(duration_us) / 1000, 3)                           AS min_ms,
    round(max(duration_us) / 1000, 3)                           AS max_ms,
    round(avgWeighted(ttfb_us, weight) / 1000, 3)               AS ttfb_mean_ms,
    round(t[1] / 1000, 3)                                       AS ttfb_p50_ms,
    round(t[2] / 1000, 3)                                       AS ttfb_p90_ms,
    round(t[3] / 1000, 3)                                       AS ttfb_p95_ms,
    round(t[4] / 1000, 3)                                       AS ttfb_p99_ms,
    round(t[5] / 1000, 3)                                       AS ttfb_p999_ms,
    round(min(ttfb_us) / 1000, 3)                               AS ttfb_min_ms,
    round(max(ttfb_us) / 1000, 3)                               AS ttfb_max_ms
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
