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
-- Ratios compare with the protocol that needs the fewest bytes for the same
-- operation (1.0 for that one; NULL when the smallest is 0 and this one is not):
--   header_ratio  request + response headers + response trailers
--                 (gRPC sends its status in trailers)
--   body_ratio    request + response bodies
--   wire_ratio    total_b
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    operation,
    protocol,
    calls,
    round(req_header, 1)                                             AS req_header_b,
    round(resp_header, 1)                                            AS resp_header_b,
    round(req_body, 1)                                               AS req_body_b,
    round(resp_body, 1)                                              AS resp_body_b,
    round(req_framing, 1)                                            AS req_framing_b,
    round(resp_framing, 1)                                           AS resp_framing_b,
    round(req_wire, 1)                                               AS req_wire_b,
    round(resp_wire, 1)                                              AS resp_wire_b,
    round(req_wire + resp_wire, 1)                                   AS total_b,
    round(if(headers = min_headers, 1, headers / nullIf(min_headers, 0)), 3) AS header_ratio,
    round(if(bodies = min_bodies, 1, bodies / nullIf(min_bodies, 0)), 3)     AS body_ratio,
    round(if(wire = min_wire, 1, wire / nullIf(min_wire, 0)), 3)             AS wire_ratio
FROM
(
    SELECT
        operation,
        protocol,
        count()                                                      AS calls,
        avg(request_header_bytes)                                    AS req_header,
        avg(response_header_bytes)                                   AS resp_header,
        avg(request_body_bytes)                                      AS req_body,
        avg(response_body_bytes)                                     AS resp_body,
        avg(request_framing_bytes)                                   AS req_framing,
        avg(response_framing_bytes)                                  AS resp_framing,
        avg(downstream_wire_bytes_received)                          AS req_wire,
        avg(downstream_wire_bytes_sent)                              AS resp_wire,
        req_header + resp_header + avg(response_trailer_bytes)       AS headers,
        req_body + resp_body                                         AS bodies,
        req_wire + resp_wire                                         AS wire,
        min(headers) OVER (PARTITION BY operation)                   AS min_headers,
        min(bodies) OVER (PARTITION BY operation)                    AS min_bodies,
        min(wire) OVER (PARTITION BY operation)                      AS min_wire
    FROM wirelens.requests FINAL
    PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
    WHERE timestamp >= {since:DateTime64(3)}
      AND timestamp < {until:DateTime64(3)}
    GROUP BY
        operation,
        protocol
)
ORDER BY
    operation ASC,
    protocol ASC;
