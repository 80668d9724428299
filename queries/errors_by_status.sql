-- Question: which calls failed, with which HTTP and gRPC status, and what
-- share of each protocol's calls is that?
--
-- A call failed when its HTTP status is 400 or more or its gRPC status is
-- not OK (grpc_status > 0; grpc_status is NULL for REST calls). One row per
-- protocol, operation and status pair; share = those calls / all of the
-- protocol's calls in the window (successful ones included). No failures, no
-- rows.
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls. calls and share are estimates weighted by
-- 1/sample_rate (exact when every call was recorded); sampled_calls is the
-- number of failed calls recorded, sample_rate the lowest rate among them
-- (1: nothing left out).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    protocol,
    operation,
    http_status,
    grpc_status,
    toUInt64(round(weighted_calls))                              AS calls,
    sampled_calls,
    lowest_rate                                                  AS sample_rate,
    round(weighted_calls / protocol_calls, 6)                    AS share
FROM
(
    WITH
        -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
        if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1) AS rate,
        1 / rate                                                 AS weight
    SELECT
        protocol,
        operation,
        http_status,
        grpc_status,
        sum(weight)                                              AS weighted_calls,
        count()                                                  AS sampled_calls,
        min(rate)                                                AS lowest_rate,
        sum(weighted_calls) OVER (PARTITION BY protocol)         AS protocol_calls,
        http_status >= 400 OR ifNull(grpc_status, 0) > 0         AS failed
    FROM wirelens.requests FINAL
    PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
    WHERE timestamp >= {since:DateTime64(3)}
      AND timestamp < {until:DateTime64(3)}
    GROUP BY
        protocol,
        operation,
        http_status,
        grpc_status
)
WHERE failed
ORDER BY
    protocol ASC,
    calls DESC,
    operation ASC,
    http_status ASC,
    grpc_status ASC;
