-- Question: how many calls per second did each protocol serve, and how many
-- of them failed?
--
-- One row per second that saw calls of the protocol (seconds without calls
-- are absent, not zero). A call failed when its HTTP status is 400 or more or
-- its gRPC status is not OK (grpc_status > 0; NULL for REST calls).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    toDateTime(timestamp)                                        AS second,
    protocol,
    count()                                                      AS calls,
    countIf(http_status >= 400 OR ifNull(grpc_status, 0) > 0)    AS errors
FROM wirelens.requests FINAL
PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
WHERE timestamp >= {since:DateTime64(3)}
  AND timestamp < {until:DateTime64(3)}
GROUP BY
    second,
    protocol
ORDER BY
    second ASC,
    protocol ASC;
