-- Question: for each operation, how are the latencies of each protocol
-- distributed (measured at the proxy)? The points of a CDF: the 1st to 99th
-- percentile and the 99.9th.
--
-- Built into `wirelens report` for its latency chart; the median also picks
-- the fastest protocol of each operation for compare_protocols.sql.
-- Sampling (queries/README.md, "Sampling"): calls is an estimate (each
-- recorded call weighted by 1/sample_rate), the quantiles are over the
-- sampled_calls recorded; sample_rate is the lowest rate among them.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
    if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1) AS rate
SELECT
    operation,
    protocol,
    toUInt64(round(sum(1 / rate)))            AS calls,
    count()                                   AS sampled_calls,
    min(rate)                                 AS sample_rate,
    quantileExact(0.50)(duration_us)          AS median_us,
    quantiles(
        0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10,
        0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.20,
        0.21, 0.22, 0.23, 0.24, 0.25, 0.26, 0.27, 0.28, 0.29, 0.30,
        0.31, 0.32, 0.33, 0.34, 0.35, 0.36, 0.37, 0.38, 0.39, 0.40,
        0.41, 0.42, 0.43, 0.44, 0.45, 0.46, 0.47, 0.48, 0.49, 0.50,
        0.51, 0.52, 0.53, 0.54, 0.55, 0.56, 0.57, 0.58, 0.59, 0.60,
        0.61, 0.62, 0.63, 0.64, 0.65, 0.66, 0.67, 0.68, 0.69, 0.70,
        0.71, 0.72, 0.73, 0.74, 0.75, 0.76, 0.77, 0.78, 0.79, 0.80,
        0.81, 0.82, 0.83, 0.84, 0.85, 0.86, 0.87, 0.88, 0.89, 0.90,
        0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 0.999
    )(duration_us)                            AS quantiles_us
FROM wirelens.requests AS r FINAL
WHERE timestamp >= {since:DateTime64(3)}
  AND timestamp < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR run_id = {run_id:String})
GROUP BY
    operation,
    protocol
ORDER BY
    operation ASC,
    protocol ASC;
