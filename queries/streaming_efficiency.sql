-- Question: how much work does each call shape (REST, unary, client, server
-- and bidirectional streaming) get done per unit of time: messages per call,
-- bytes per message, messages per second, and proxy time per 1000 messages?
--
-- Messages: the gRPC messages the filter counted each way
-- (request_messages, response_messages). A REST call (any protocol outside
-- the gRPC family) is one message each way, its body the payload.
-- Payload bytes: gRPC message bytes without the 5-byte length prefixes
-- (request_message_bytes, response_message_bytes); REST: the bodies.
--
--   req_msgs_per_call, resp_msgs_per_call   mean messages per call, each way
--   req_bytes_per_message, resp_bytes_per_message
--                                           payload bytes / messages, each way
--   messages_per_second                     units of work / total call time,
--                                           where one call's units = the larger
--                                           of its message counts (a client
--                                           stream of 1000 = 1000 units, a bidi
--                                           echo of 1000 each way = 1000, a REST
--                                           or unary call = 1)
--   work_ms_per_1000_messages               total call time (ms) per 1000 units
--
-- So people.Register over REST, people.Register over gRPC unary and
-- people.RegisterBatch over a client stream, or echo.Unary against
-- echo.BiStream, compare on the same scale: time per 1000 units of work.
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls. calls is an estimate weighted by 1/sample_rate (exact
-- when every call was recorded); every mean and ratio weights each call's
-- messages, bytes and time by 1/sample_rate; sampled_calls is the number of
-- calls recorded, sample_rate the lowest rate among them (1: nothing left out).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    operation,
    protocol,
    streaming,
    toUInt64(round(sum(n / rate)))                                        AS calls,
    sum(n)                                                                AS sampled_calls,
    min(rate)                                                             AS sample_rate,
    round(sum(req_msgs / rate) / sum(n / rate), 3)                        AS req_msgs_per_call,
    round(sum(resp_msgs / rate) / sum(n / rate), 3)                       AS resp_msgs_per_call,
    round(sum(req_payload / rate) / nullIf(sum(req_msgs / rate), 0), 1)   AS req_bytes_per_message,
    round(sum(resp_payload / rate) / nullIf(sum(resp_msgs / rate), 0), 1) AS resp_bytes_per_message,
    round(sum(units / rate) / nullIf(sum(total_us / rate) / 1e6, 0), 1)   AS messages_per_second,
    round(sum(total_us / rate) / nullIf(sum(units / rate), 0), 3)         AS work_ms_per_1000_messages
FROM
(
    -- summed per rate first, weighted after: integer sums instead of a float weight on
    -- every call (a rate is a grouping key; calls of one rate share their weight)
    WITH
        protocol IN ('grpc', 'grpc-web', 'grpc-web-text')                 AS framed
    SELECT
        operation,
        protocol,
        streaming,
        -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
        if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1)      AS rate,
        count()                                                           AS n,
        -- a REST call is one message each way, its body the payload
        sum(if(framed, request_messages, 1))                              AS req_msgs,
        sum(if(framed, response_messages, 1))                             AS resp_msgs,
        sum(if(framed, request_message_bytes, request_body_bytes))        AS req_payload,
        sum(if(framed, response_message_bytes, response_body_bytes))      AS resp_payload,
        -- messages in the busier direction: what a call's time is spent on
        sum(greatest(if(framed, request_messages, 1), if(framed, response_messages, 1))) AS units,
        sum(duration_us)                                                  AS total_us
    FROM wirelens.requests AS r FINAL
    PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
    WHERE timestamp >= {since:DateTime64(3)}
      AND timestamp < {until:DateTime64(3)}
    GROUP BY
        operation,
        protocol,
        streaming,
        r.sample_rate
)
GROUP BY
    operation,
    protocol,
    streaming
ORDER BY
    operation ASC,
    protocol ASC,
    streaming ASC;
