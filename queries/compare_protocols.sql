-- Question: for one operation, is protocol B faster or slower than protocol A
-- (median and p99 latency at the proxy), and is the difference real or noise?
--
-- median_ratio and p99_ratio are B / A (below 1: B is faster). Their 95 %
-- confidence intervals come from a bootstrap: each protocol's durations are
-- resampled with replacement {resamples} times, the ratio of the resamples'
-- quantiles computed each time, and the interval is the 2.5 % and 97.5 %
-- quantiles of those ratios.
--
-- A resample is not materialized: only its median and p99 are needed, and
-- the k-th smallest of n draws with replacement from the sorted durations s
-- is s[ceil(n * U)] with U ~ Beta(k, n + 1 - k) (the k-th smallest of n
-- uniforms). So each resample's quantile is drawn directly from that exact
-- distribution: O(1) per resample instead of O(n) (materialized resamples
-- took 3 s of CPU for 40,000 calls a side, 16 s for 170,000). Beta comes from
-- two Gamma draws, G1 / (G1 + G2); Gamma(m) is a sum of m exponentials for
-- m <= 32 and the Wilson-Hilferty transform of a normal above (error far
-- below the bootstrap's own noise). Those steps are SQL functions shared with
-- protocol_vs_stack.sql: wirelens_rank, wirelens_bootstrap, wirelens_ratio_ci
-- (queries/schema/005_functions.sql). verdict says it in words, only for an interval
-- that excludes 1 (e.g. 'grpc median is 1.82x faster than rest (95% CI
-- 1.61-2.03)'), otherwise ''. Quantiles are exact (quantileExact), as in
-- latency_by_operation. One row; NULLs when a protocol has no calls.
--
-- Sampling (queries/README.md, "Sampling"): n_a and n_b are the calls
-- recorded, the sample size of every quantile and interval here (the filter
-- samples independently of latency, so quantiles over the recorded calls
-- estimate those of all calls, and the bootstrap's intervals include the
-- sampling noise). sample_rate: the lowest sample rate among them (1: every
-- call recorded; NULL: no calls).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
--   {operation:String}     the operation, e.g. 'catalog.GetProduct'
--   {protocol_a:String}    the baseline protocol, e.g. 'rest'
--   {protocol_b:String}    the protocol compared with it, e.g. 'grpc'
--   {resamples:UInt16}     bootstrap resamples (200 is plenty for a 95 % interval)
WITH
    samples AS
    (
        SELECT
            arraySort(groupArrayIf(duration_us, protocol = {protocol_a:String})) AS a,
            arraySort(groupArrayIf(duration_us, protocol = {protocol_b:String})) AS b,
            -- 0 (unknown) counts as 1; the Float32 rate back to its configured decimal
            minOrNull(if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1))  AS lowest_rate
        FROM wirelens.requests FINAL
        PREWHERE operation = {operation:String}
             AND protocol IN ({protocol_a:String}, {protocol_b:String})
             AND ({run_id:String} = '' OR run_id = {run_id:String})  -- before FINAL: exact, faster (README)
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
    ),
    boot AS
    (
        SELECT
            length(a)                                                            AS n_a,
            length(b)                                                            AS n_b,
            n_a > 0 AND n_b > 0                                                  AS both,
            lowest_rate,
            a[wirelens_rank(n_a, 0.5)]                                           AS median_a,
            b[wirelens_rank(n_b, 0.5)]                                           AS median_b,
            a[wirelens_rank(n_a, 0.99)]                                          AS p99_a,
            b[wirelens_rank(n_b, 0.99)]                                          AS p99_b,
            if(both AND {resamples:UInt16} > 0,
               wirelens_ratio_ci(wirelens_bootstrap(a, 0.5, 0, {resamples:UInt16}),
                                 wirelens_bootstrap(b, 0.5, 2, {resamples:UInt16})), [])  AS median_ci,
            if(both AND {resamples:UInt16} > 0,
               wirelens_ratio_ci(wirelens_bootstrap(a, 0.99, 4, {resamples:UInt16}),
                                 wirelens_bootstrap(b, 0.99, 6, {resamples:UInt16})), []) AS p99_ci
        FROM samples
    ),
    -- 'B median is 1.82x faster than A (95% CI 1.61-2.03)' when the interval excludes 1
    (what, ratio, lo, hi) -> multiIf(
        hi < 1, concat({protocol_b:String}, ' ', what, ' is ', toDecimalString(1 / ratio, 2),
                       'x faster than ', {protocol_a:String},
                       ' (95% CI ', toDecimalString(1 / hi, 2), '-', toDecimalString(1 / lo, 2), ')'),
        lo > 1, concat({protocol_b:String}, ' ', what, ' is ', toDecimalString(ratio, 2),
                       'x slower than ', {protocol_a:String},
                       ' (95% CI ', toDecimalString(lo, 2), '-', toDecimalString(hi, 2), ')'),
        '')                                                                      AS say
SELECT
    n_a,
    n_b,
    lowest_rate                                                                  AS sample_rate,
    if(n_a = 0, NULL, round(median_a / 1000, 3))                                 AS median_a_ms,
    if(n_b = 0, NULL, round(median_b / 1000, 3))                                 AS median_b_ms,
    if(both, round(median_b / median_a, 3), NULL)                                AS median_ratio,
    if(empty(median_ci), NULL, round(median_ci[1], 3))                           AS median_ci_low,
    if(empty(median_ci), NULL, round(median_ci[2], 3))                           AS median_ci_high,
    if(n_a = 0, NULL, round(p99_a / 1000, 3))                                    AS p99_a_ms,
    if(n_b = 0, NULL, round(p99_b / 1000, 3))                                    AS p99_b_ms,
    if(both, round(p99_b / p99_a, 3), NULL)                                      AS p99_ratio,
    if(empty(p99_ci), NULL, round(p99_ci[1], 3))                                 AS p99_ci_low,
    if(empty(p99_ci), NULL, round(p99_ci[2], 3))                                 AS p99_ci_high,
    if(empty(median_ci), '',
       arrayStringConcat(arrayFilter(x -> x != '',
           [say('median', median_b / median_a, median_ci[1], median_ci[2]),
            say('p99', p99_b / p99_a, p99_ci[1], p99_ci[2])]), '; '))            AS verdict
FROM boot;
