-- Question: how many calls per second did each protocol serve, and how many
-- of them failed?
--
-- One row per second that saw calls of the protocol (seconds without calls
-- are absent, not zero). A call failed when its HTTP status is 400 or more or
-- its gRPC status is not OK (grpc_status > 0; NULL for REST calls).
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls. calls and errors are estimates weighted by
-- 1/sample_rate (exact when every call was recorded); sampled_calls is the
-- number of calls recorded in the second, sample_rate the lowest rate among
-- them (1: nothing left out).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    second,
    protocol,
    toUInt64(round(sum(recorded / rate)))                        AS calls,
    sum(recorded)                                                AS sampled_calls,
    min(rate)                                                    AS sample_rate,
    toUInt64(round(sum(failed / rate)))                          AS errors
FROM
(
    -- counted per rate first, weighted after: cheaper than weighting every row
    -- (a rate is a grouping key; rows of one rate share their weight)
    SELECT
        toDateTime(timestamp)                                    AS second,
        protocol,
        -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
        if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1) AS rate,
        count()                                                  AS recorded,
        countIf(http_status >= 400 OR ifNull(grpc_status, 0) > 0) AS failed
    FROM wirelens.requests AS r FINAL
    PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
    WHERE timestamp >= {since:DateTime64(3)}
      AND timestamp < {until:DateTime64(3)}
    GROUP BY
        second,
        protocol,
        r.sample_rate
)
GROUP BY
    second,
    protocol
ORDER BY
    second ASC,
    protocol ASC;
