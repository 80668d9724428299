-- Question: per operation, protocol and streaming shape, how many messages
-- does a call carry, how big are they, and how much call time does a message
-- cost? The rollup variant of queries/streaming_efficiency.sql, for long
-- windows.
--
-- Reads wirelens.requests_by_minute (queries/schema/004): the same columns,
-- exact (the rollup keeps the weighted sums this query divides), over whole
-- minutes starting in [toStartOfMinute(since), until). See
-- rollup/latency_by_operation.sql.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive, rounded down to the minute)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    sum(m.calls)                                                          AS weighted,
    sum(m.message_units)                                                  AS units,
    sum(m.duration_us)                                                    AS total_us
SELECT
    operation,
    protocol,
    streaming,
    toUInt64(round(weighted))                                             AS calls,
    sum(m.sampled_calls)                                                  AS sampled_calls,
    min(m.lowest_rate)                                                    AS sample_rate,
    round(sum(m.request_messages) / weighted, 3)                          AS req_msgs_per_call,
    round(sum(m.response_messages) / weighted, 3)                         AS resp_msgs_per_call,
    round(sum(m.request_payload_bytes) / nullIf(sum(m.request_messages), 0), 1)   AS req_bytes_per_message,
    round(sum(m.response_payload_bytes) / nullIf(sum(m.response_messages), 0), 1) AS resp_bytes_per_message,
    round(units / nullIf(total_us / 1e6, 0), 1)                           AS messages_per_second,
    round(total_us / nullIf(units, 0), 3)                                 AS work_ms_per_1000_messages
FROM wirelens.requests_by_minute AS m FINAL
WHERE m.minute >= toStartOfMinute({since:DateTime64(3)})
  AND m.minute < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR m.run_id = {run_id:String})
GROUP BY
    operation,
    protocol,
    streaming
ORDER BY
    operation ASC,
    protocol ASC,
    streaming ASC;
