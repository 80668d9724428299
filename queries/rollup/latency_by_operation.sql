-- Question: per operation and protocol, how long did calls take (and how long
-- until the first response byte)? The rollup variant of
-- queries/latency_by_operation.sql, for long windows.
--
-- Reads wirelens.requests_by_minute (queries/schema/004) instead of every
-- call: the same columns, with two differences.
--   * Percentiles come from merged DDSketches: within 1 % of the exact value
--     (relative error); mean, min, max and counts are exact.
--   * The window is whole minutes: minutes starting in
--     [toStartOfMinute(since), until).
-- Counts are weighted by 1/sample_rate as in the raw query. FINAL: the
-- newest recomputation of each minute (the rollup is recomputed from the raw
-- table's FINAL, so a re-sent record counts once; queries/README.md, "Rollup").
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive, rounded down to the minute)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    quantilesDDMerge(0.01, 0.5, 0.9, 0.95, 0.99, 0.999)(m.duration_sketch) AS d,
    quantilesDDMerge(0.01, 0.5, 0.9, 0.95, 0.99, 0.999)(m.ttfb_sketch)     AS t
SELECT
    operation,
    protocol,
    toUInt64(round(sum(m.calls)))                               AS calls,
    sum(m.sampled_calls)                                        AS sampled_calls,
    min(m.lowest_rate)                                          AS sample_rate,
    round(sum(m.duration_us) / sum(m.calls) / 1000, 3)          AS mean_ms,
    round(d[1] / 1000, 3)                                       AS p50_ms,
    round(d[2] / 1000, 3)                                       AS p90_ms,
    round(d[3] / 1000, 3)                                       AS p95_ms,
    round(d[4] / 1000, 3)                                       AS p99_ms,
    round(d[5] / 1000, 3)                                       AS p999_ms,
    round(min(m.duration_min_us) / 1000, 3)                     AS min_ms,
    round(max(m.duration_max_us) / 1000, 3)                     AS max_ms,
    round(sum(m.ttfb_us) / sum(m.calls) / 1000, 3)              AS ttfb_mean_ms,
    round(t[1] / 1000, 3)                                       AS ttfb_p50_ms,
    round(t[2] / 1000, 3)                                       AS ttfb_p90_ms,
    round(t[3] / 1000, 3)                                       AS ttfb_p95_ms,
    round(t[4] / 1000, 3)                                       AS ttfb_p99_ms,
    round(t[5] / 1000, 3)                                       AS ttfb_p999_ms,
    round(min(m.ttfb_min_us) / 1000, 3)                         AS ttfb_min_ms,
    round(max(m.ttfb_max_us) / 1000, 3)                         AS ttfb_max_ms
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
