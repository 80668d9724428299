-- Question: how much do request headers shrink on the wire as a client
-- connection is reused (HTTP/2's HPACK table warming up; HTTP/1.1 sends them
-- in full every time)?
--
-- request_index: the call's position on its downstream connection
-- (connection_id; 1 = the connection's first call, by start time), in buckets
-- 1, 2, 3, 4-10, 11-100, >100. Positions count the connection's calls inside
-- the window (and run); calls without a connection id (0) are left out.
-- (Positions come from sorting each connection's calls as arrays: the same as
-- row_number() OVER (PARTITION BY connection_id ORDER BY timestamp), at
-- about half the cost of the window function's global sort.)
--   uncompressed_header_b  mean request header bytes as Envoy decoded them
--                          (REQUEST_HEADERS_BYTES)
--   wire_header_b          mean request header bytes as they arrived
--                          (DOWNSTREAM_HEADER_BYTES_RECEIVED: HPACK-compressed
--                          for HTTP/2)
--   ratio                  wire_header_b / uncompressed_header_b
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    protocol,
    ['1', '2', '3', '4-10', '11-100', '>100'][bucket]                       AS request_index,
    count()                                                               AS calls,
    round(avg(uncompressed), 1)                                           AS uncompressed_header_b,
    round(avg(wire), 1)                                                   AS wire_header_b,
    round(avg(wire) / nullIf(avg(uncompressed), 0), 3)                    AS ratio
FROM
(
    SELECT
        groupArray(timestamp)                                             AS started,
        groupArray(protocol)                                              AS protocols,
        groupArray(request_headers_bytes)                                 AS uncompressed_b,
        groupArray(downstream_header_bytes_received)                      AS wire_b,
        -- the calls' indexes in start order, then each call's position in it
        arraySort((i, t) -> t, arrayEnumerate(started), started)          AS by_start,
        arraySort((p, i) -> i, arrayEnumerate(by_start), by_start)        AS positions
    FROM wirelens.requests FINAL
    PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
    WHERE timestamp >= {since:DateTime64(3)}
      AND timestamp < {until:DateTime64(3)}
      AND connection_id != 0
    GROUP BY connection_id
)
ARRAY JOIN
    protocols AS protocol,
    uncompressed_b AS uncompressed,
    wire_b AS wire,
    positions AS position
GROUP BY
    protocol,
    multiIf(position <= 3, position, position <= 10, 4, position <= 100, 5, 6) AS bucket
ORDER BY
    protocol ASC,
    bucket ASC;
