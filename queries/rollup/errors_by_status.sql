-- Question: which statuses did failing calls end with, per protocol and
-- operation, and what share of the protocol's calls is that? The rollup
-- variant of queries/errors_by_status.sql, for long windows.
--
-- Reads wirelens.requests_by_minute (queries/schema/004): the same columns,
-- exact, over whole minutes starting in [toStartOfMinute(since), until). The
-- rollup keeps "no gRPC status" as -1 (a key cannot be NULL); it is NULL
-- again here. See rollup/latency_by_operation.sql.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive, rounded down to the minute)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    protocol,
    operation,
    http_status,
    if(status < 0, NULL, toUInt8(status))                        AS grpc_status,
    toUInt64(round(weighted_calls))                              AS calls,
    sampled_calls,
    lowest_rate                                                  AS sample_rate,
    round(weighted_calls / protocol_calls, 6)                    AS share
FROM
(
    SELECT
        protocol,
        operation,
        http_status,
        m.grpc_status                                            AS status,
        sum(m.calls)                                             AS weighted_calls,
        sum(m.sampled_calls)                                     AS sampled_calls,
        min(m.lowest_rate)                                       AS lowest_rate,
        sum(weighted_calls) OVER (PARTITION BY protocol)         AS protocol_calls,
        http_status >= 400 OR status > 0                         AS failed
    FROM wirelens.requests_by_minute AS m FINAL
    WHERE m.minute >= toStartOfMinute({since:DateTime64(3)})
      AND m.minute < {until:DateTime64(3)}
      AND ({run_id:String} = '' OR m.run_id = {run_id:String})
    GROUP BY
        protocol,
        operation,
        http_status,
        status
)
WHERE failed
ORDER BY
    protocol ASC,
    calls DESC,
    operation ASC,
    http_status ASC,
    grpc_status ASC;
