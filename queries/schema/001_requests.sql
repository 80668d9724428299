-- wirelens.requests: one row per call, one typed column per field of the
-- wirelens record, fed from Envoy's OpenTelemetry access-log records in
-- otel.otel_logs (created by the Collector's ClickHouse exporter).
-- Idempotent: every statement is IF NOT EXISTS, re-applies a setting, or
-- replaces the view with its current definition.
-- ${WIRELENS_REQUESTS_TTL_DAYS} is filled in by the stack (default 30 days).

CREATE DATABASE IF NOT EXISTS wirelens;

-- ReplacingMergeTree keyed on the call (time, request key): a batch the
-- Collector re-sends after a failed export collapses to one row. Read with
-- FINAL (or GROUP BY request_id) when counts must be exact.
-- request_key is request_id as a UUID: FINAL compares 16 fixed bytes instead
-- of a ZSTD string (issue 30: count() FINAL over 10M calls 0.30 -> 0.12 s).
-- x-request-id is whatever the client or Envoy sent, so request_id keeps the
-- text as it came (every reader and the cluster's sharding key use it), and
-- request_key is that text parsed when it is a UUID in its canonical form
-- (lowercase, with dashes: what Envoy generates), otherwise the 128-bit
-- sipHash128 of the text: a non-UUID id still dedups deterministically (the
-- same text, the same key) and is never lost (the text stays in request_id).
-- Two different texts share a key only on a 128-bit hash collision (and then
-- only collapse when their timestamps are equal to the nanosecond); an id and
-- the same UUID in capitals stay two keys, as they were two strings before.
-- Integer columns use CODEC(T64, LZ4) (set below, after the generated
-- columns), the timestamp Delta + LZ4: LZ4 alone cost 0.10 CPU-s to read a
-- UInt64 column of 10M calls, T64 + LZ4 0.02 s at the same size, and ZSTD's
-- decompression is slower still (bench/query_speed.py, issue 30).
-- An existing table with the older key (timestamp, request_id) is moved to
-- this one by queries/migrate.py, which the schema step runs first.
-- Time leads the key because calls arrive in time order: the Collector's
-- inserts then make parts whose key ranges barely overlap, and FINAL only has
-- to merge the overlaps (10M calls: FINAL costs ~nothing, where a key led by
-- operation and protocol made every part overlap every other and FINAL merge
-- all 10M rows, >1 s; bench/query_speed.py).
CREATE TABLE IF NOT EXISTS wirelens.requests
(
    timestamp              DateTime64(9) CODEC(Delta, LZ4),
    request_id             String CODEC(ZSTD),
    -- the key's request id: see above (MATERIALIZED: computed at insert, not
    -- in SELECT *, so INSERT ... SELECT * recomputes it from request_id)
    request_key            UUID MATERIALIZED if(toString(toUUIDOrZero(request_id)) = request_id,
                                                toUUIDOrZero(request_id),
                                                reinterpretAsUUID(sipHash128(request_id))),
    trace_id               String CODEC(ZSTD),
    span_id                String CODEC(ZSTD),
    run_id                 LowCardinality(String),
    -- BEGIN generated: record columns (1 of 2) (filters/recordgen.py from filters/record.yaml; do not edit)
    protocol               LowCardinality(String),
    operation              LowCardinality(String),
    rpc_service            LowCardinality(String),
    rpc_method             LowCardinality(String),
    streaming              LowCardinality(String),
    http_route             LowCardinality(String),
    url_path               String CODEC(ZSTD),
    -- END generated: record columns (1 of 2)
    http_method            LowCardinality(String),
    http_version           LowCardinality(String),
    http_status            UInt16,
    -- BEGIN generated: record columns (2 of 2) (filters/recordgen.py from filters/record.yaml; do not edit)
    grpc_status            Nullable(UInt8),
    grpc_message           String CODEC(ZSTD),
    request_header_bytes   UInt32,
    response_header_bytes  UInt32,
    response_trailer_bytes UInt32,
    request_body_bytes     UInt64,
    response_body_bytes    UInt64,
    request_messages       UInt32,
    response_messages      UInt32,
    request_message_bytes  UInt64,
    request_message_min    UInt32,
    request_message_max    UInt32,
    response_message_bytes UInt64,
    response_message_min   UInt32,
    response_message_max   UInt32,
    request_framing_bytes  UInt64,
    response_framing_bytes UInt64,
    request_compressed_messages UInt32,
    response_compressed_messages UInt32,
    ttfb_us                UInt64,
    duration_us            UInt64,
    request_duration_us    Nullable(UInt64),
    malformed              Bool,
    sample_rate            Float32,
    counterfactual_reason  LowCardinality(String),
    counterfactual_request_proto_bytes Nullable(UInt64),
    counterfactual_response_proto_bytes Nullable(UInt64),
    counterfactual_request_json_bytes Nullable(UInt64),
    counterfactual_response_json_bytes Nullable(UInt64),
    counterfactual_rate    Float32 DEFAULT 1,
    -- END generated: record columns (2 of 2)
    envoy_duration_ms      UInt32,
    envoy_bytes_received   UInt64,
    envoy_bytes_sent       UInt64,
    upstream_service_ms    Nullable(UInt32),
    response_flags         LowCardinality(String),
    upstream_host          LowCardinality(String),
    upstream_protocol      LowCardinality(String),
    request_duration_ms    Nullable(UInt32),
    response_duration_ms   Nullable(UInt32),
    response_tx_duration_ms Nullable(UInt32),
    request_headers_bytes  UInt32,
    response_headers_bytes UInt32,
    downstream_header_bytes_received UInt32,
    downstream_header_bytes_sent     UInt32,
    downstream_wire_bytes_received   UInt64,
    downstream_wire_bytes_sent       UInt64,
    connection_id          UInt64,
    stack                  LowCardinality(String),
    -- When the row reached this table (not the call's time): the rollups'
    -- refresh recomputes the minutes that rows inserted since its last run
    -- fall in (004_rollups.sql). MATERIALIZED: no insert can set it, and
    -- SELECT * leaves it out, so a copied row is a new insert. Stamped per
    -- block (nowInBlock64), not per query (now64): a long INSERT ... SELECT
    -- (a backfill, queries/migrate.py's copy) commits its parts over minutes,
    -- and a part stamped with the query's start could land behind the
    -- refresh's watermark and never be recomputed.
    inserted_at            DateTime64(3) MATERIALIZED nowInBlock64(3) CODEC(Delta, ZSTD),
    INDEX inserted_at_minmax inserted_at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(timestamp)
ORDER BY (timestamp, request_key)
TTL toDateTime(timestamp) + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

-- The retention above applies when the table is created; this keeps an
-- existing table in line with the configured one.
ALTER TABLE wirelens.requests MODIFY TTL toDateTime(timestamp) + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

-- A table created before one of the record's columns existed gets it (empty,
-- zero or NULL in older rows), where a new table has it; a no-op for the
-- columns it has. Types and order of existing columns never change.
-- BEGIN generated: the record's columns on an existing table (filters/recordgen.py from filters/record.yaml; do not edit)
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS protocol LowCardinality(String) AFTER run_id;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS operation LowCardinality(String) AFTER protocol;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS rpc_service LowCardinality(String) AFTER operation;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS rpc_method LowCardinality(String) AFTER rpc_service;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS streaming LowCardinality(String) AFTER rpc_method;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS http_route LowCardinality(String) AFTER streaming;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS url_path String CODEC(ZSTD) AFTER http_route;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS grpc_status Nullable(UInt8) AFTER http_status;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS grpc_message String CODEC(ZSTD) AFTER grpc_status;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_header_bytes UInt32 AFTER grpc_message;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_header_bytes UInt32 AFTER request_header_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_trailer_bytes UInt32 AFTER response_header_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_body_bytes UInt64 AFTER response_trailer_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_body_bytes UInt64 AFTER request_body_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_messages UInt32 AFTER response_body_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_messages UInt32 AFTER request_messages;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_message_bytes UInt64 AFTER response_messages;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_message_min UInt32 AFTER request_message_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_message_max UInt32 AFTER request_message_min;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_message_bytes UInt64 AFTER request_message_max;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_message_min UInt32 AFTER response_message_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_message_max UInt32 AFTER response_message_min;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_framing_bytes UInt64 AFTER response_message_max;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_framing_bytes UInt64 AFTER request_framing_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_compressed_messages UInt32 AFTER response_framing_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS response_compressed_messages UInt32 AFTER request_compressed_messages;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS ttfb_us UInt64 AFTER response_compressed_messages;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS duration_us UInt64 AFTER ttfb_us;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS request_duration_us Nullable(UInt64) AFTER duration_us;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS malformed Bool AFTER request_duration_us;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS sample_rate Float32 AFTER malformed;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS counterfactual_reason LowCardinality(String) AFTER sample_rate;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS counterfactual_request_proto_bytes Nullable(UInt64) AFTER counterfactual_reason;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS counterfactual_response_proto_bytes Nullable(UInt64) AFTER counterfactual_request_proto_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS counterfactual_request_json_bytes Nullable(UInt64) AFTER counterfactual_response_proto_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS counterfactual_response_json_bytes Nullable(UInt64) AFTER counterfactual_request_json_bytes;
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS counterfactual_rate Float32 DEFAULT 1 AFTER counterfactual_response_json_bytes;
-- END generated: the record's columns on an existing table

-- The stack that served the call (go, python): Envoy's upstream cluster
-- metadata (envoy/envoy.yaml.tmpl), empty for a call no upstream served.
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS stack LowCardinality(String);

-- Issue 34. The time split in microseconds, from Envoy's own clock
-- (%COMMON_DURATION%; envoy/wiring.py): envoy_duration_us the call at Envoy
-- (first byte from the client to the last byte to it), upstream_duration_us
-- the upstream exchange (first byte sent upstream to the last byte received
-- from it: the service, its framework, the loopback wire). Envoy's time is
-- their difference. NULL when no upstream served the call (a local reply),
-- and in rows written before the columns existed. Their codec is the integer
-- columns' (below), set here: queries/migrate.py builds a moved table from the
-- CREATE TABLE and the codec ALTER only, and these come after it.
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS envoy_duration_us Nullable(UInt64) CODEC(T64, LZ4);
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS upstream_duration_us Nullable(UInt64) CODEC(T64, LZ4);
-- Whether Envoy's tracer sampled the call, i.e. sent its span (to Jaeger and
-- otel.otel_traces; best effort, see README "Guarantees"). 0: no span exists
-- for trace_id: the client's traceparent said not sampled (flags 00), or
-- Envoy's tracing random_sampling left the call out. The row itself is
-- complete either way: the filter records every call (its own sample_rate
-- aside). From the traceparent Envoy injected upstream (its flags are the
-- tracer's final decision; %TRACE_ID% is printed for sampled-out calls too).
-- Rows written before the column existed read 0.
ALTER TABLE wirelens.requests ADD COLUMN IF NOT EXISTS span_sampled Bool;

-- A table made while inserted_at was stamped per query (now64) stamps it per
-- block from now on (metadata only; rows already there keep their value).
ALTER TABLE wirelens.requests MODIFY COLUMN inserted_at DateTime64(3) MATERIALIZED nowInBlock64(3) CODEC(Delta, ZSTD);

-- Integer columns: T64 + LZ4 (see the table's comment; the generated column
-- lines above carry no codec). Only the codec changes, never the type: a
-- metadata change, no mutation; parts written before keep their codec until a
-- merge rewrites them. tests/unit/test_migration.py checks that every integer
-- column has it, so a new one gets it here.
ALTER TABLE wirelens.requests
    MODIFY COLUMN http_status CODEC(T64, LZ4),
    MODIFY COLUMN grpc_status CODEC(T64, LZ4),
    MODIFY COLUMN request_header_bytes CODEC(T64, LZ4),
    MODIFY COLUMN response_header_bytes CODEC(T64, LZ4),
    MODIFY COLUMN response_trailer_bytes CODEC(T64, LZ4),
    MODIFY COLUMN request_body_bytes CODEC(T64, LZ4),
    MODIFY COLUMN response_body_bytes CODEC(T64, LZ4),
    MODIFY COLUMN request_messages CODEC(T64, LZ4),
    MODIFY COLUMN response_messages CODEC(T64, LZ4),
    MODIFY COLUMN request_message_bytes CODEC(T64, LZ4),
    MODIFY COLUMN request_message_min CODEC(T64, LZ4),
    MODIFY COLUMN request_message_max CODEC(T64, LZ4),
    MODIFY COLUMN response_message_bytes CODEC(T64, LZ4),
    MODIFY COLUMN response_message_min CODEC(T64, LZ4),
    MODIFY COLUMN response_message_max CODEC(T64, LZ4),
    MODIFY COLUMN request_framing_bytes CODEC(T64, LZ4),
    MODIFY COLUMN response_framing_bytes CODEC(T64, LZ4),
    MODIFY COLUMN request_compressed_messages CODEC(T64, LZ4),
    MODIFY COLUMN response_compressed_messages CODEC(T64, LZ4),
    MODIFY COLUMN ttfb_us CODEC(T64, LZ4),
    MODIFY COLUMN duration_us CODEC(T64, LZ4),
    MODIFY COLUMN request_duration_us CODEC(T64, LZ4),
    MODIFY COLUMN counterfactual_request_proto_bytes CODEC(T64, LZ4),
    MODIFY COLUMN counterfactual_response_proto_bytes CODEC(T64, LZ4),
    MODIFY COLUMN counterfactual_request_json_bytes CODEC(T64, LZ4),
    MODIFY COLUMN counterfactual_response_json_bytes CODEC(T64, LZ4),
    MODIFY COLUMN envoy_duration_ms CODEC(T64, LZ4),
    MODIFY COLUMN envoy_bytes_received CODEC(T64, LZ4),
    MODIFY COLUMN envoy_bytes_sent CODEC(T64, LZ4),
    MODIFY COLUMN upstream_service_ms CODEC(T64, LZ4),
    MODIFY COLUMN request_duration_ms CODEC(T64, LZ4),
    MODIFY COLUMN response_duration_ms CODEC(T64, LZ4),
    MODIFY COLUMN response_tx_duration_ms CODEC(T64, LZ4),
    MODIFY COLUMN request_headers_bytes CODEC(T64, LZ4),
    MODIFY COLUMN response_headers_bytes CODEC(T64, LZ4),
    MODIFY COLUMN downstream_header_bytes_received CODEC(T64, LZ4),
    MODIFY COLUMN downstream_header_bytes_sent CODEC(T64, LZ4),
    MODIFY COLUMN downstream_wire_bytes_received CODEC(T64, LZ4),
    MODIFY COLUMN downstream_wire_bytes_sent CODEC(T64, LZ4),
    MODIFY COLUMN connection_id CODEC(T64, LZ4);

-- The filter's record arrives expanded into attributes by the Collector
-- (transform/wirelens_record). Envoy writes "-" for a field it has no value
-- for (e.g. the filter failed open and published nothing); those become empty
-- strings, zeros and NULLs, and the protocol 'unknown'.
--
-- Bounded dimensions: no LowCardinality column takes a value a client can
-- invent. operation, rpc_*, streaming and http_route come from the filter's
-- operation map ('unknown' for every other path, whose first 128 bytes go to
-- url_path, a plain column); http_method is a standard method or '_OTHER'
-- (OpenTelemetry's http.request.method); run_id (the client's x-wirelens-run
-- header) is cut to its first 128 characters (loadgen refuses longer ones).
--
-- OR REPLACE, not IF NOT EXISTS: an existing view must pick up this
-- definition (IF NOT EXISTS would keep an old one, which leaves url_path
-- empty and the method and run id unbounded). ClickHouse swaps the new view
-- in atomically, so re-applying the schema on a live stack loses no insert.
CREATE OR REPLACE MATERIALIZED VIEW wirelens.requests_from_otel_logs
TO wirelens.requests
AS
WITH
    (key) -> if(LogAttributes[key] = '-', '', LogAttributes[key]) AS attr
SELECT
    Timestamp                                                  AS timestamp,
    attr('wirelens.request_id')                                AS request_id,
    TraceId                                                    AS trace_id,
    SpanId                                                     AS span_id,
    leftUTF8(attr('wirelens.run_id'), 128)                      AS run_id,
    -- BEGIN generated: the view's record columns (1 of 2) (filters/recordgen.py from filters/record.yaml; do not edit)
    if(attr('wirelens.protocol') = '', 'unknown', attr('wirelens.protocol')) AS protocol,
    attr('wirelens.operation')                                 AS operation,
    attr('rpc.service')                                        AS rpc_service,
    attr('rpc.method')                                         AS rpc_method,
    attr('wirelens.streaming')                                 AS streaming,
    attr('http.route')                                         AS http_route,
    attr('url.path')                                           AS url_path,
    -- END generated: the view's record columns (1 of 2)
    multiIf(attr('http.request.method') = '', '',
            attr('http.request.method') IN ('CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS',
                                            'PATCH', 'POST', 'PUT', 'TRACE'), attr('http.request.method'),
            '_OTHER')                                          AS http_method,
    attr('network.protocol.version')                           AS http_version,
    toUInt16OrZero(attr('http.response.status_code'))          AS http_status,
    -- BEGIN generated: the view's record columns (2 of 2) (filters/recordgen.py from filters/record.yaml; do not edit)
    toUInt8OrNull(attr('rpc.grpc.status_code'))                AS grpc_status,
    attr('wirelens.grpc.message')                              AS grpc_message,
    toUInt32OrZero(attr('wirelens.request.header.size'))       AS request_header_bytes,
    toUInt32OrZero(attr('wirelens.response.header.size'))      AS response_header_bytes,
    toUInt32OrZero(attr('wirelens.response.trailer.size'))     AS response_trailer_bytes,
    toUInt64OrZero(attr('http.request.body.size'))             AS request_body_bytes,
    toUInt64OrZero(attr('http.response.body.size'))            AS response_body_bytes,
    toUInt32OrZero(attr('wirelens.request.messages'))          AS request_messages,
    toUInt32OrZero(attr('wirelens.response.messages'))         AS response_messages,
    toUInt64OrZero(attr('wirelens.request.message.bytes'))     AS request_message_bytes,
    toUInt32OrZero(attr('wirelens.request.message.min'))       AS request_message_min,
    toUInt32OrZero(attr('wirelens.request.message.max'))       AS request_message_max,
    toUInt64OrZero(attr('wirelens.response.message.bytes'))    AS response_message_bytes,
    toUInt32OrZero(attr('wirelens.response.message.min'))      AS response_message_min,
    toUInt32OrZero(attr('wirelens.response.message.max'))      AS response_message_max,
    toUInt64OrZero(attr('wirelens.request.framing.bytes'))     AS request_framing_bytes,
    toUInt64OrZero(attr('wirelens.response.framing.bytes'))    AS response_framing_bytes,
    toUInt32OrZero(attr('wirelens.request.compressed_messages')) AS request_compressed_messages,
    toUInt32OrZero(attr('wirelens.response.compressed_messages')) AS response_compressed_messages,
    toUInt64OrZero(attr('wirelens.time_to_first_byte_us'))     AS ttfb_us,
    toUInt64OrZero(attr('wirelens.duration_us'))               AS duration_us,
    toUInt64OrNull(attr('wirelens.request.duration_us'))       AS request_duration_us,
    attr('wirelens.malformed') = '1'                           AS malformed,
    if(attr('wirelens.sample_rate') = '', 1, toFloat32OrZero(attr('wirelens.sample_rate'))) AS sample_rate,
    attr('wirelens.counterfactual.reason')                     AS counterfactual_reason,
    toUInt64OrNull(attr('wirelens.counterfactual.request.proto.size')) AS counterfactual_request_proto_bytes,
    toUInt64OrNull(attr('wirelens.counterfactual.response.proto.size')) AS counterfactual_response_proto_bytes,
    toUInt64OrNull(attr('wirelens.counterfactual.request.json.size')) AS counterfactual_request_json_bytes,
    toUInt64OrNull(attr('wirelens.counterfactual.response.json.size')) AS counterfactual_response_json_bytes,
    if(attr('wirelens.counterfactual.rate') = '', 1, toFloat32OrZero(attr('wirelens.counterfactual.rate'))) AS counterfactual_rate,
    -- END generated: the view's record columns (2 of 2)
    toUInt32OrZero(attr('envoy.duration_ms'))                  AS envoy_duration_ms,
    toUInt64OrZero(attr('envoy.bytes_received'))               AS envoy_bytes_received,
    toUInt64OrZero(attr('envoy.bytes_sent'))                   AS envoy_bytes_sent,
    toUInt32OrNull(attr('envoy.upstream_service_time_ms'))     AS upstream_service_ms,
    attr('envoy.response_flags')                               AS response_flags,
    attr('envoy.upstream_host')                                AS upstream_host,
    attr('envoy.upstream_protocol')                            AS upstream_protocol,
    toUInt32OrNull(attr('envoy.request_duration_ms'))          AS request_duration_ms,
    toUInt32OrNull(attr('envoy.response_duration_ms'))         AS response_duration_ms,
    toUInt32OrNull(attr('envoy.response_tx_duration_ms'))      AS response_tx_duration_ms,
    toUInt32OrZero(attr('envoy.request_headers_bytes'))        AS request_headers_bytes,
    toUInt32OrZero(attr('envoy.response_headers_bytes'))       AS response_headers_bytes,
    toUInt32OrZero(attr('envoy.downstream_header_bytes_received')) AS downstream_header_bytes_received,
    toUInt32OrZero(attr('envoy.downstream_header_bytes_sent')) AS downstream_header_bytes_sent,
    toUInt64OrZero(attr('envoy.downstream_wire_bytes_received')) AS downstream_wire_bytes_received,
    toUInt64OrZero(attr('envoy.downstream_wire_bytes_sent'))   AS downstream_wire_bytes_sent,
    toUInt64OrZero(attr('envoy.connection_id'))                AS connection_id,
    -- a bounded value: Envoy's cluster metadata, never the client's header
    leftUTF8(attr('wirelens.stack'), 32)                       AS stack,
    toUInt64OrNull(attr('envoy.duration_us'))                  AS envoy_duration_us,
    toUInt64OrNull(attr('envoy.upstream_duration_us'))         AS upstream_duration_us,
    -- bit 0 (sampled) of the flags of Envoy's own traceparent
    -- (version-traceid-spanid-flags: the last hex digit odd), only when it
    -- names this record's trace (an Envoy without a tracer passes the client's
    -- header through and logs no TraceId)
    TraceId != '' AND length(attr('envoy.traceparent')) = 55
        AND substring(attr('envoy.traceparent'), 4, 32) = lower(TraceId)
        AND match(attr('envoy.traceparent'), '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f][13579bdf]')
                                                               AS span_sampled
FROM otel.otel_logs
WHERE mapContains(LogAttributes, 'wirelens.protocol');
