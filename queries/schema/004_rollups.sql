-- Rollups of wirelens.requests for dashboards over long windows: per minute
-- (wirelens.requests_by_minute) and, for throughput, per second
-- (wirelens.requests_by_second). Idempotent.
--
-- One row per (minute, run, operation, protocol, streaming shape, statuses)
-- once merged: counts and byte sums weighted by 1/sample_rate (as the saved
-- queries weight them, queries/README.md "Sampling"), the sampled calls, and
-- latency sketches (quantilesDD, relative error 1 %) that merge across
-- minutes. A 100M-call table rolls up to a few hundred thousand rows, so the
-- rollup variants of the saved queries (queries/rollup/) read ~1000x less.
--
-- Fed at insert by the materialized view below, so a record the pipeline
-- re-sends after a failure is counted again here, where the raw table's FINAL
-- drops it. Exact answers come from the raw saved queries (queries/*.sql);
-- after an outage with re-sends, rebuild the days it touched from the raw
-- table (queries/README.md, "Rollup": one DELETE and one INSERT ... FINAL).

CREATE TABLE IF NOT EXISTS wirelens.requests_by_minute
(
    minute                 DateTime CODEC(Delta, ZSTD),
    run_id                 LowCardinality(String),
    operation              LowCardinality(String),
    protocol               LowCardinality(String),
    streaming              LowCardinality(String),
    http_status            UInt16,
    grpc_status            Int16,       -- -1: no gRPC status (REST); keys cannot be NULL
    sampled_calls          SimpleAggregateFunction(sum, UInt64),
    calls                  SimpleAggregateFunction(sum, Float64),  -- weighted by 1/sample_rate
    lowest_rate            SimpleAggregateFunction(min, Float64),
    first_call             SimpleAggregateFunction(min, DateTime64(9)),  -- a protocol's turn in a run
    last_call              SimpleAggregateFunction(max, DateTime64(9)),
    errors                 SimpleAggregateFunction(sum, Float64),  -- weighted
    -- weighted sums (x / sample_rate)
    request_header_bytes   SimpleAggregateFunction(sum, Float64),
    response_header_bytes  SimpleAggregateFunction(sum, Float64),
    response_trailer_bytes SimpleAggregateFunction(sum, Float64),
    request_body_bytes     SimpleAggregateFunction(sum, Float64),
    response_body_bytes    SimpleAggregateFunction(sum, Float64),
    request_framing_bytes  SimpleAggregateFunction(sum, Float64),
    response_framing_bytes SimpleAggregateFunction(sum, Float64),
    request_wire_bytes     SimpleAggregateFunction(sum, Float64),
    response_wire_bytes    SimpleAggregateFunction(sum, Float64),
    -- streaming_efficiency's units: a REST call is one message each way
    request_messages       SimpleAggregateFunction(sum, Float64),
    response_messages      SimpleAggregateFunction(sum, Float64),
    request_payload_bytes  SimpleAggregateFunction(sum, Float64),
    response_payload_bytes SimpleAggregateFunction(sum, Float64),
    message_units          SimpleAggregateFunction(sum, Float64),
    duration_us            SimpleAggregateFunction(sum, Float64),
    ttfb_us                SimpleAggregateFunction(sum, Float64),
    -- over the sampled calls
    duration_min_us        SimpleAggregateFunction(min, UInt64),
    duration_max_us        SimpleAggregateFunction(max, UInt64),
    ttfb_min_us            SimpleAggregateFunction(min, UInt64),
    ttfb_max_us            SimpleAggregateFunction(max, UInt64),
    duration_sketch        AggregateFunction(quantilesDD(0.01, 0.5, 0.9, 0.95, 0.99, 0.999), UInt64),
    ttfb_sketch            AggregateFunction(quantilesDD(0.01, 0.5, 0.9, 0.95, 0.99, 0.999), UInt64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(minute)
ORDER BY (minute, run_id, operation, protocol, streaming, http_status, grpc_status)
TTL minute + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

ALTER TABLE wirelens.requests_by_minute MODIFY TTL minute + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

CREATE MATERIALIZED VIEW IF NOT EXISTS wirelens.requests_by_minute_from_requests
TO wirelens.requests_by_minute
AS
WITH
    -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
    if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1)       AS rate,
    1 / rate                                                           AS weight,
    r.protocol IN ('grpc', 'grpc-web', 'grpc-web-text')                AS framed,
    if(framed, r.request_messages, 1)                                  AS req_msgs,
    if(framed, r.response_messages, 1)                                 AS resp_msgs
SELECT
    toStartOfMinute(r.timestamp)                                       AS minute,
    run_id,
    operation,
    protocol,
    streaming,
    http_status,
    ifNull(toInt16(r.grpc_status), -1)                                 AS grpc_status,
    count()                                                            AS sampled_calls,
    sum(weight)                                                        AS calls,
    min(rate)                                                          AS lowest_rate,
    min(r.timestamp)                                                   AS first_call,
    max(r.timestamp)                                                   AS last_call,
    sumIf(weight, r.http_status >= 400 OR ifNull(r.grpc_status, 0) > 0) AS errors,
    sum(r.request_header_bytes * weight)                               AS request_header_bytes,
    sum(r.response_header_bytes * weight)                              AS response_header_bytes,
    sum(r.response_trailer_bytes * weight)                             AS response_trailer_bytes,
    sum(r.request_body_bytes * weight)                                 AS request_body_bytes,
    sum(r.response_body_bytes * weight)                                AS response_body_bytes,
    sum(r.request_framing_bytes * weight)                              AS request_framing_bytes,
    sum(r.response_framing_bytes * weight)                             AS response_framing_bytes,
    sum(r.downstream_wire_bytes_received * weight)                     AS request_wire_bytes,
    sum(r.downstream_wire_bytes_sent * weight)                         AS response_wire_bytes,
    sum(req_msgs * weight)                                             AS request_messages,
    sum(resp_msgs * weight)                                            AS response_messages,
    sum(if(framed, r.request_message_bytes, r.request_body_bytes) * weight) AS request_payload_bytes,
    sum(if(framed, r.response_message_bytes, r.response_body_bytes) * weight) AS response_payload_bytes,
    sum(greatest(req_msgs, resp_msgs) * weight)                        AS message_units,
    sum(r.duration_us * weight)                                        AS duration_us,
    sum(r.ttfb_us * weight)                                            AS ttfb_us,
    min(r.duration_us)                                                 AS duration_min_us,
    max(r.duration_us)                                                 AS duration_max_us,
    min(r.ttfb_us)                                                     AS ttfb_min_us,
    max(r.ttfb_us)                                                     AS ttfb_max_us,
    quantilesDDState(0.01, 0.5, 0.9, 0.95, 0.99, 0.999)(r.duration_us) AS duration_sketch,
    quantilesDDState(0.01, 0.5, 0.9, 0.95, 0.99, 0.999)(r.ttfb_us)     AS ttfb_sketch
FROM wirelens.requests AS r
GROUP BY
    minute,
    run_id,
    operation,
    protocol,
    streaming,
    http_status,
    grpc_status;

-- wirelens.requests_by_second: calls and errors per second and protocol, for
-- throughput_per_second over long windows (the minute rollup is too coarse).
-- Same feeding, weighting and re-send caveat as wirelens.requests_by_minute.
CREATE TABLE IF NOT EXISTS wirelens.requests_by_second
(
    second                 DateTime CODEC(Delta, ZSTD),
    run_id                 LowCardinality(String),
    protocol               LowCardinality(String),
    sampled_calls          SimpleAggregateFunction(sum, UInt64),
    calls                  SimpleAggregateFunction(sum, Float64),
    errors                 SimpleAggregateFunction(sum, Float64),
    lowest_rate            SimpleAggregateFunction(min, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(second)
ORDER BY (second, run_id, protocol)
TTL second + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

ALTER TABLE wirelens.requests_by_second MODIFY TTL second + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

CREATE MATERIALIZED VIEW IF NOT EXISTS wirelens.requests_by_second_from_requests
TO wirelens.requests_by_second
AS
WITH
    -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
    if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1)       AS rate,
    1 / rate                                                           AS weight
SELECT
    toDateTime(r.timestamp)                                            AS second,
    run_id,
    protocol,
    count()                                                            AS sampled_calls,
    sum(weight)                                                        AS calls,
    sumIf(weight, r.http_status >= 400 OR ifNull(r.grpc_status, 0) > 0) AS errors,
    min(rate)                                                          AS lowest_rate
FROM wirelens.requests AS r
GROUP BY
    second,
    run_id,
    protocol;
