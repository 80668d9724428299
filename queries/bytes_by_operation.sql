-- Question: for each operation, how many bytes does each protocol spend per
-- call (headers, bodies, gRPC framing, and what crossed the client's
-- connection), and how many times more than the leanest protocol?
--
-- All byte columns are means per call:
--   req/resp_header_b   headers as the filter counted them (uncompressed)
--   req/resp_body_b     bodies as the client sent / received them
--   req/resp_framing_b  gRPC length-prefix and grpc-web trailer-frame bytes (0 for REST)
--   req/resp_wire_b     bytes on the downstream connection (Envoy's
--                       DOWNSTREAM_WIRE_BYTES_RECEIVED / _SENT: compressed
--                       headers, HTTP/2 framing, TLS if any)
--   total_b             req_wire_b + resp_wire_b
--   sum_wire_b          bytes on the downstream connection both ways, summed
--                       over every call of the window (estimated, below)
-- Ratios compare with the protocol that needs the fewest bytes for the same
-- operation (1.0 for that one; NULL when the smallest is 0 and this one is not):
--   header_ratio  request + response headers + response trailers
--                 (gRPC sends its status in trailers)
--   body_ratio    request + response bodies
--   wire_ratio    total_b
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls. calls and sum_wire_b are estimates weighted by
-- 1/sample_rate (exact when every call was recorded); the means are weighted
-- means; sampled_calls is the number of calls recorded, sample_rate the lowest
-- rate among them (1: nothing left out).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
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
        -- weighted means: sum(x / rate) / sum(1 / rate) over the calls, from the per-rate sums
        sum(n / rate)                                                AS weighted_calls,
        sum(n)                                                       AS sampled_calls,
        min(rate)                                                    AS lowest_rate,
        sum(s_req_header / rate) / weighted_calls                    AS req_header,
        sum(s_resp_header / rate) / weighted_calls                   AS resp_header,
        sum(s_req_body / rate) / weighted_calls                      AS req_body,
        sum(s_resp_body / rate) / weighted_calls                     AS resp_body,
        sum(s_req_framing / rate) / weighted_calls                   AS req_framing,
        sum(s_resp_framing / rate) / weighted_calls                  AS resp_framing,
        sum(s_req_wire / rate) / weighted_calls                      AS req_wire,
        sum(s_resp_wire / rate) / weighted_calls                     AS resp_wire,
        sum((s_req_wire + s_resp_wire) / rate)                       AS weighted_wire_bytes,
        req_header + resp_header + sum(s_trailer / rate) / weighted_calls AS headers,
        req_body + resp_body                                         AS bodies,
        req_wire + resp_wire                                         AS wire,
        min(headers) OVER (PARTITION BY operation)                   AS min_headers,
        min(bodies) OVER (PARTITION BY operation)                    AS min_bodies,
        min(wire) OVER (PARTITION BY operation)                      AS min_wire
    FROM
    (
        -- summed per rate first, weighted after: integer sums instead of a float weight on
        -- every call (a rate is a grouping key; calls of one rate share their weight)
        SELECT
            operation,
            protocol,
            -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
            if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1) AS rate,
            count()                                                  AS n,
            sum(request_header_bytes)                                AS s_req_header,
            sum(response_header_bytes)                               AS s_resp_header,
            sum(response_trailer_bytes)                              AS s_trailer,
            sum(request_body_bytes)                                  AS s_req_body,
            sum(response_body_bytes)                                 AS s_resp_body,
            sum(request_framing_bytes)                               AS s_req_framing,
            sum(response_framing_bytes)                              AS s_resp_framing,
            sum(downstream_wire_bytes_received)                      AS s_req_wire,
            sum(downstream_wire_bytes_sent)                          AS s_resp_wire
        FROM wirelens.requests FINAL
        PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
        GROUP BY
            operation,
            protocol,
            sample_rate
    )
    GROUP BY
        operation,
        protocol
)
ORDER BY
    operation ASC,
    protocol ASC;
