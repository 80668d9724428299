-- Question: per operation, how many bytes does each protocol put on the wire
-- (headers, bodies, framing), and how does it compare with the leanest
-- protocol for the same operation? The rollup variant of
-- queries/bytes_by_operation.sql, for long windows.
--
-- Reads wirelens.requests_by_minute (queries/schema/004): the same columns,
-- exact (sums and weighted means need no sketch), over whole minutes starting
-- in [toStartOfMinute(since), until). See rollup/latency_by_operation.sql.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive, rounded down to the minute)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    operation,
    protocol,
    toUInt64(round(weighted_calls))                                  AS calls,
    sampled_calls,
    lowest_rate                                                      AS sample_rate,
    round(req_header, 1)                                             AS req_header_b,
    round(resp_header, 1)                                            AS resp_header_b,
    round(req_body, 1)                                               AS req_body_b,
    round(resp_body, 1)                                              AS resp_body_b,
    round(req_framing, 1)                                            AS req_framing_b,
    round(resp_framing, 1)                                           AS resp_framing_b,
    round(req_wire, 1)                                               AS req_wire_b,
    round(resp_wire, 1)                                              AS resp_wire_b,
    round(req_wire + resp_wire, 1)                                   AS total_b,
    toUInt64(round(weighted_wire_bytes))                             AS sum_wire_b,
    round(if(headers = min_headers, 1, headers / nullIf(min_headers, 0)), 3) AS header_ratio,
    round(if(bodies = min_bodies, 1, bodies / nullIf(min_bodies, 0)), 3)     AS body_ratio,
    round(if(wire = min_wire, 1, wire / nullIf(min_wire, 0)), 3)             AS wire_ratio
FROM
(
    SELECT
        operation,
        protocol,
        sum(m.calls)                                                 AS weighted_calls,
        sum(m.sampled_calls)                                         AS sampled_calls,
        min(m.lowest_rate)                                           AS lowest_rate,
        sum(m.request_header_bytes) / weighted_calls                 AS req_header,
        sum(m.response_header_bytes) / weighted_calls                AS resp_header,
        sum(m.request_body_bytes) / weighted_calls                   AS req_body,
        sum(m.response_body_bytes) / weighted_calls                  AS resp_body,
        sum(m.request_framing_bytes) / weighted_calls                AS req_framing,
        sum(m.response_framing_bytes) / weighted_calls               AS resp_framing,
        sum(m.request_wire_bytes) / weighted_calls                   AS req_wire,
        sum(m.response_wire_bytes) / weighted_calls                  AS resp_wire,
        sum(m.request_wire_bytes) + sum(m.response_wire_bytes)       AS weighted_wire_bytes,
        req_header + resp_header + sum(m.response_trailer_bytes) / weighted_calls AS headers,
        req_body + resp_body                                         AS bodies,
        req_wire + resp_wire                                         AS wire,
        min(headers) OVER (PARTITION BY operation)                   AS min_headers,
        min(bodies) OVER (PARTITION BY operation)                    AS min_bodies,
        min(wire) OVER (PARTITION BY operation)                      AS min_wire
    FROM wirelens.requests_by_minute AS m FINAL
    WHERE m.minute >= toStartOfMinute({since:DateTime64(3)})
      AND m.minute < {until:DateTime64(3)}
      AND ({run_id:String} = '' OR m.run_id = {run_id:String})
    GROUP BY
        operation,
        protocol
)
ORDER BY
    operation ASC,
    protocol ASC;
