-- Question: per operation, is gRPC faster or slower than REST on each stack
-- (the pair of services behind Envoy: go, python, ...), and does the answer
-- follow the protocol (same direction on every stack) or the framework?
--
-- One row per (operation, stack) with calls over both rest and grpc.
-- median_ratio is gRPC's median duration at the proxy / REST's (below 1: gRPC
-- is faster), with its 95 % bootstrap interval, computed as in
-- compare_protocols (each resample's median drawn from its exact order
-- statistic distribution, {resamples} resamples per side; the SQL functions of
-- queries/schema/005_functions.sql). The upstream
-- columns are the medians of upstream_duration_us (µs, Envoy's clock: first
-- byte sent upstream to the last byte received from it, the service, its
-- framework and the loopback wire); proxy_*_us the medians of the call's time
-- at Envoy (envoy_duration_us) minus it (µs: time in Envoy; the SQL function
-- wirelens_in_envoy_us, queries/schema/005_functions.sql, which the E1–E5
-- per-run summary uses too), so a ratio can be read as the service's or the
-- proxy's. Microseconds, not the whole
-- milliseconds of x-envoy-upstream-service-time, which read 0 / 0 for most
-- operations (issue 34). Calls without an upstream (NULL) are left out of
-- both. resp_body_* are the mean response body bytes.
--
-- Sampling: quantiles over the recorded calls (queries/README.md, "Sampling");
-- n_rest and n_grpc count recorded calls. Warm-up calls (loadgen sends them
-- under the run id <run>-warmup) are left out: the JVM's first calls run
-- before the JIT has compiled the handlers, and the question is steady state.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
--   {resamples:UInt16}     bootstrap resamples (200 is plenty for a 95 % interval)
WITH
    samples AS
    (
        SELECT
            operation,
            stack,
            arraySort(groupArrayIf(duration_us, protocol = 'rest'))                  AS a,
            arraySort(groupArrayIf(duration_us, protocol = 'grpc'))                  AS b,
            medianExactIf(upstream_duration_us, protocol = 'rest')                   AS upstream_rest,
            medianExactIf(upstream_duration_us, protocol = 'grpc')                   AS upstream_grpc,
            medianExactIf(wirelens_in_envoy_us(envoy_duration_us, upstream_duration_us), protocol = 'rest') AS proxy_rest,
            medianExactIf(wirelens_in_envoy_us(envoy_duration_us, upstream_duration_us), protocol = 'grpc') AS proxy_grpc,
            avgIf(response_body_bytes, protocol = 'rest')                            AS body_rest,
            avgIf(response_body_bytes, protocol = 'grpc')                            AS body_grpc
        FROM wirelens.requests FINAL
        PREWHERE protocol IN ('rest', 'grpc')
             AND ({run_id:String} = '' OR run_id = {run_id:String})  -- before FINAL: exact, faster (README)
             AND NOT endsWith(run_id, '-warmup')
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
          AND stack != ''
        GROUP BY
            operation,
            stack
        HAVING length(a) > 0 AND length(b) > 0
    ),
    boot AS
    (
        SELECT
            *,
            if({resamples:UInt16} > 0,
               wirelens_ratio_ci(wirelens_bootstrap(a, 0.5, 0, {resamples:UInt16}),
                                 wirelens_bootstrap(b, 0.5, 2, {resamples:UInt16})), [])              AS ci
        FROM samples
    )
SELECT
    operation,
    stack,
    length(a)                                                                        AS n_rest,
    length(b)                                                                        AS n_grpc,
    round(a[wirelens_rank(length(a), 0.5)] / 1000, 3)                                AS median_rest_ms,
    round(b[wirelens_rank(length(b), 0.5)] / 1000, 3)                                AS median_grpc_ms,
    round(b[wirelens_rank(length(b), 0.5)] / a[wirelens_rank(length(a), 0.5)], 3)    AS median_ratio,
    if(empty(ci), NULL, round(ci[1], 3))                                             AS median_ci_low,
    if(empty(ci), NULL, round(ci[2], 3))                                             AS median_ci_high,
    upstream_rest                                                                    AS upstream_rest_us,
    upstream_grpc                                                                    AS upstream_grpc_us,
    proxy_rest                                                                       AS proxy_rest_us,
    proxy_grpc                                                                       AS proxy_grpc_us,
    round(body_rest, 1)                                                              AS resp_body_rest_b,
    round(body_grpc, 1)                                                              AS resp_body_grpc_b
FROM boot
ORDER BY
    operation ASC,
    stack ASC;
