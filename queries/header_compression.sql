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
-- Sampling (queries/README.md, "Sampling"): a position needs every call of
-- the connection. On a connection with any call recorded at sample_rate < 1
-- the calls between the recorded ones are unknown, so its calls go to
-- request_index 'sampled' (all positions together) instead of a position.
-- calls is an estimate weighted by 1/sample_rate (exact when every call was
-- recorded), the byte means are weighted means; sampled_calls is the number
-- of calls recorded, sample_rate the lowest rate among them (1: nothing left
-- out).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    1 / call_rate                                                         AS weight
SELECT
    protocol,
    ['1', '2', '3', '4-10', '11-100', '>100', 'sampled'][bucket]            AS request_index,
    toUInt64(round(sum(weight)))                                          AS calls,
    count()                                                               AS sampled_calls,
    min(call_rate)                                                        AS sample_rate,
    round(avgWeighted(uncompressed, weight), 1)                           AS uncompressed_header_b,
    round(avgWeighted(wire, weight), 1)                                   AS wire_header_b,
    round(avgWeighted(wire, weight) / nullIf(avgWeighted(uncompressed, weight), 0), 3) AS ratio
FROM
(
    WITH
        -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
        if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1)          AS rate
    SELECT
        groupArray(timestamp)                                             AS started,
        groupArray(cityHash64(request_id))                                AS request_ids,
        groupArray(protocol)                                              AS protocols,
        groupArray(request_headers_bytes)                                 AS uncompressed_b,
        groupArray(downstream_header_bytes_received)                      AS wire_b,
        groupArray(rate)                                                  AS rates,
        min(rate) = 1                                                     AS every_call_recorded,
        -- the calls' indexes in start order, then each call's position in it
        -- (two calls starting in the same nanosecond: their request ids' hash
        -- decides, so every node of a cluster numbers them alike; a hash costs
        -- a third of the string's time at 10M calls)
        arraySort((i, t, id) -> (t, id), arrayEnumerate(started), started, request_ids) AS by_start,
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
    positions AS position,
    rates AS call_rate
GROUP BY
    protocol,
    if(every_call_recorded,
       multiIf(position <= 3, position, position <= 10, 4, position <= 100, 5, 6),
       7)                                                                 AS bucket
ORDER BY
    protocol ASC,
    bucket ASC;
