-- Question: which calls failed, with which HTTP and gRPC status, and what
-- share of each protocol's calls is that?
--
-- A call failed when its HTTP status is 400 or more or its gRPC status is
-- not OK (grpc_status > 0; grpc_status is NULL for REST calls). One row per
-- protocol, operation and status pair; share = those calls / all of the
-- protocol's calls in the window (successful ones included). No failures, no
-- rows.
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
    calls,
    round(calls / protocol_calls, 6)                             AS share
FROM
(
    SELECT
        protocol,
        operation,
        http_status,
        grpc_status,
        count()                                                  AS calls,
        sum(calls) OVER (PARTITION BY protocol)                  AS protocol_calls,
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
