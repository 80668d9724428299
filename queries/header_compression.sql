-- Question: how much do request headers shrink on the wire as a client
-- connection is reused (HTTP/2's HPACK table warming up; HTTP/1.1 sends them
-- in full every time)?
--
-- request_index: the call's position on its downstream connection
-- (connection_id; 1 = the connection's first call, by start time), in buckets
-- 1, 2, 3, 4-10, 11-100, >100. Positions count the connection's calls inside
-- the window (and run); calls without a connection id (0) are left out.
-- (Positions come from sorting each connection's calls as arrays: the same as
-- row_number() OVER (PARTITION BY connection_id ORDER BY timestamp, request_key),
-- at about half the cost of the window function's global sort. One sort of the
-- calls' indexes by one UInt128 per call (start in nanoseconds, then the
-- request key), then each column read in that order: two sorts keyed by
-- tuples took 2.3 CPU-s on 10M calls, this 1.7, and 1.0 with the protocol
-- carried as a number; issue 30.)
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
    1 / call_rate                                                         AS weight,
    -- the window's protocols: a call's protocol goes through the arrays as its index in
    -- this list, a number (transform() maps the LowCardinality column's dictionary, not
    -- every call): copying the names into the arrays cost half the query's time
    (
        SELECT groupUniqArray(protocol)
        FROM wirelens.requests
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
    )                                                                     AS protocol_names
SELECT
    protocol_names[protocol_index]                                        AS protocol,
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
        groupArray(toUInt16(transform(protocol, protocol_names,
                                      range(1, length(protocol_names) + 1), 0))) AS protocols,
        groupArray(request_headers_bytes)                                 AS uncompressed_b,
        groupArray(downstream_header_bytes_received)                      AS wire_b,
        groupArray(rate)                                                  AS rates,
        min(rate) = 1                                                     AS every_call_recorded,
        -- the calls' indexes in start order: sorted by the start in nanoseconds, then (two
        -- calls starting in the same nanosecond) the request key, so every node of a
        -- cluster numbers them alike; both in one UInt128, one numeric sort
        arraySort((i, k) -> k, arrayEnumerate(protocols),
                  groupArray(bitShiftLeft(toUInt128(toUnixTimestamp64Nano(timestamp)), 64)
                             + reinterpretAsUInt64(request_key)))         AS by_start
    FROM wirelens.requests FINAL
    PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
    WHERE timestamp >= {since:DateTime64(3)}
      AND timestamp < {until:DateTime64(3)}
      AND connection_id != 0
    GROUP BY connection_id
)
-- each connection's calls in start order: the n-th is at position n
ARRAY JOIN
    arrayMap(i -> protocols[i], by_start) AS protocol_index,
    arrayMap(i -> uncompressed_b[i], by_start) AS uncompressed,
    arrayMap(i -> wire_b[i], by_start) AS wire,
    arrayEnumerate(by_start) AS position,
    arrayMap(i -> rates[i], by_start) AS call_rate
GROUP BY
    protocol_index,
    if(every_call_recorded,
       multiIf(position <= 3, position, position <= 10, 4, position <= 100, 5, 6),
       7)                                                                 AS bucket
ORDER BY
    protocol ASC,
    bucket ASC;
