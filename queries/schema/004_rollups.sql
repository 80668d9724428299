-- Rollups of wirelens.requests for dashboards over long windows: per minute
-- (wirelens.requests_by_minute) and, for throughput, per second
-- (wirelens.requests_by_second). Idempotent.
--
-- One row per (minute, run, operation, protocol, streaming shape, statuses):
-- counts and byte sums weighted by 1/sample_rate (as the saved queries weight
-- them, queries/README.md "Sampling"), the sampled calls, and latency
-- sketches (quantilesDD, relative error 1 %) that merge across minutes. A
-- 100M-call table rolls up to a few hundred thousand rows, so the rollup
-- variants of the saved queries (queries/rollup/) read ~1000x less.
--
-- Exact by construction (issue 30): the rollups are recomputed from the raw
-- table's FINAL, never fed by the inserts themselves, so a record the
-- pipeline re-sends is counted once here as it is there.
--   * Each rollup is a ReplacingMergeTree(as_of): a minute recomputed later
--     replaces the earlier version of each of its rows. Read it with FINAL
--     (queries/rollup/*.sql do).
--   * A refreshable materialized view recomputes it every 10 seconds (fixed:
--     change the REFRESH clause below to change it). Each refresh takes the
--     watermark W = max(as_of) of its rollup (when the newest recomputation
--     it holds started; 1970 when empty, so a new or emptied rollup is
--     recomputed whole), finds the minutes of the raw rows inserted after
--     W - 60 s (wirelens.requests.inserted_at, pruned by its minmax index),
--     keeps those whose rows arrived after that minute's own last
--     recomputation - 60 s, recomputes exactly those minutes from
--     wirelens.requests FINAL and appends them with as_of = now64(3).
--   * Why that is exact: raw rows are only ever added (FINAL drops a re-sent
--     copy, never a distinct call), so a minute recomputed later has every
--     group of the earlier version and the newest version per key equals
--     the raw FINAL aggregate. A re-sent record, also one for a minute that
--     closed long ago, makes its minute recomputed: unchanged. A late first
--     arrival: recomputed, counted. The 60 s overlap covers a block whose
--     inserted_at (nowInBlock64: when the block was formed, 001) is older
--     than its part's commit: a refresh that read the table just before the
--     commit started after inserted_at. Measured: a block commits up to 14 s
--     after its stamp (an 8M-row INSERT ... SELECT on a saturated 2-core
--     machine); a block waiting longer than 60 s is missed by the refresh
--     and counted by the hourly settle pass (below) within ~3 h. The
--     per-minute test stops an idle table from being recomputed forever (W
--     only moves on an append).
--   * Status, watermark and the rows a refresh has not seen yet:
--     `python -m queries.rollup status` (system.view_refreshes); the repair
--     tools `check` and `rebuild --day` stay (queries/README.md, "Rollup").
--
-- The insert-time views of before issue 30 are dropped here. An existing
-- install's rollup tables (AggregatingMergeTree, no as_of) are not changed by
-- CREATE TABLE IF NOT EXISTS: the migration drops and recreates them
-- (queries/rollup.py RECREATE_SQL), and the first refresh fills them from
-- FINAL. Until then creating the refresh views fails (no as_of column).

DROP VIEW IF EXISTS wirelens.requests_by_minute_from_requests;

DROP VIEW IF EXISTS wirelens.requests_by_second_from_requests;

CREATE TABLE IF NOT EXISTS wirelens.requests_by_minute
(
    minute                 DateTime CODEC(Delta, ZSTD),
    run_id                 LowCardinality(String),
    operation              LowCardinality(String),
    protocol               LowCardinality(String),
    streaming              LowCardinality(String),
    http_status            UInt16,
    grpc_status            Int16,       -- -1: no gRPC status (REST); keys cannot be NULL
    sampled_calls          UInt64,
    calls                  Float64,     -- weighted by 1/sample_rate
    lowest_rate            Float64,
    first_call             DateTime64(9),  -- a protocol's turn in a run
    last_call              DateTime64(9),
    errors                 Float64,     -- weighted
    -- weighted sums (x / sample_rate)
    request_header_bytes   Float64,
    response_header_bytes  Float64,
    response_trailer_bytes Float64,
    request_body_bytes     Float64,
    response_body_bytes    Float64,
    request_framing_bytes  Float64,
    response_framing_bytes Float64,
    request_wire_bytes     Float64,
    response_wire_bytes    Float64,
    -- streaming_efficiency's units: a REST call is one message each way
    request_messages       Float64,
    response_messages      Float64,
    request_payload_bytes  Float64,
    response_payload_bytes Float64,
    message_units          Float64,
    duration_us            Float64,
    ttfb_us                Float64,
    -- over the sampled calls
    duration_min_us        UInt64,
    duration_max_us        UInt64,
    ttfb_min_us            UInt64,
    ttfb_max_us            UInt64,
    duration_sketch        AggregateFunction(quantilesDD(0.01, 0.5, 0.9, 0.95, 0.99, 0.999), UInt64),
    ttfb_sketch            AggregateFunction(quantilesDD(0.01, 0.5, 0.9, 0.95, 0.99, 0.999), UInt64),
    -- when the refresh that computed this row started: the newest wins
    as_of                  DateTime64(3) CODEC(Delta, ZSTD)
)
ENGINE = ReplacingMergeTree(as_of)
PARTITION BY toDate(minute)
ORDER BY (minute, run_id, operation, protocol, streaming, http_status, grpc_status)
TTL minute + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

ALTER TABLE wirelens.requests_by_minute MODIFY TTL minute + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

-- The one definition of a rollup row: every group of the given minutes
-- ({minutes:Array(DateTime)}, whole minutes), computed from wirelens.requests
-- FINAL. A parameterized view: the 10 s refresh, the hourly settle and
-- `rollup.py rebuild` all select from it, each with its own minutes and as_of.
CREATE OR REPLACE VIEW wirelens.rollup_minute_rows
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
FROM wirelens.requests AS r FINAL
-- The range lets the primary key prune; has() keeps only the given minutes.
-- Its bounds are DateTime64, not DateTime: 26.9's key analysis turns
-- `timestamp < <DateTime>` into `timestamp <= <DateTime> - 1 s` as for an
-- integer key, so a granule starting in the last second before the bound was
-- skipped with its calls (measured: -659 calls in a minute recomputed alone
-- at 30M calls, -234 at 100M; COMMON.md H6 has the reproducer).
WHERE r.timestamp >= toDateTime64(arrayMin({minutes:Array(DateTime)}), 0)
  AND r.timestamp < toDateTime64(arrayMax({minutes:Array(DateTime)}) + toIntervalMinute(1), 0)
  AND has({minutes:Array(DateTime)}, toStartOfMinute(r.timestamp))
GROUP BY
    minute,
    run_id,
    operation,
    protocol,
    streaming,
    http_status,
    grpc_status;

-- OR REPLACE: re-applying the schema swaps in this definition.
CREATE OR REPLACE MATERIALIZED VIEW wirelens.requests_by_minute_refresh
REFRESH EVERY 10 SECOND APPEND
TO wirelens.requests_by_minute
AS
WITH
    -- minutes with raw rows inserted since shortly before the rollup's watermark
    touched AS
    (
        SELECT
            toStartOfMinute(timestamp)                                 AS minute,
            max(inserted_at)                                           AS last_insert
        FROM wirelens.requests
        WHERE inserted_at > (SELECT max(as_of) FROM wirelens.requests_by_minute) - toIntervalSecond(60)
        GROUP BY minute
    ),
    -- of those, the minutes whose rows arrived after their own last
    -- recomputation - 60 s: the minutes to recompute (a scalar subquery, so
    -- computed once per refresh)
    (
        SELECT groupArray(t.minute)
        FROM touched AS t
        LEFT JOIN
        (
            SELECT minute, max(as_of) AS last_as_of
            FROM wirelens.requests_by_minute
            WHERE minute IN (SELECT minute FROM touched)
            GROUP BY minute
        ) AS done ON done.minute = t.minute
        WHERE t.last_insert > done.last_as_of - toIntervalSecond(60)
    ) AS stale
SELECT
    *,
    now64(3)                                                           AS as_of
FROM wirelens.rollup_minute_rows(minutes = stale);

-- The settle pass: once an hour, every minute of the hour that closed two
-- hours ago ([start of this hour - 3 h, - 2 h)) recomputed from FINAL, so a
-- block the 10 s refresh missed (one that committed more than 60 s after its
-- inserted_at: a stalled engine, a lagging replica) is counted within ~3 h,
-- with no manual step. Its as_of is just above the minute's newest version
-- (or the minute's end when the rollup has none), not now: the settle
-- replaces the minute's rows for FINAL readers without moving the watermark
-- (max(as_of)) that the 10 s refresh and `wirelens report` go by.
CREATE OR REPLACE MATERIALIZED VIEW wirelens.requests_by_minute_settle
REFRESH EVERY 1 HOUR APPEND
TO wirelens.requests_by_minute
AS
WITH
    (SELECT arrayMap(i -> toStartOfHour(now()) - toIntervalHour(3) + toIntervalMinute(i), range(60))) AS settling
SELECT
    m.*,
    greatest(done.last_as_of + toIntervalMillisecond(1),
             toDateTime64(m.minute + toIntervalMinute(1), 3))          AS as_of
FROM wirelens.rollup_minute_rows(minutes = settling) AS m
LEFT JOIN
(
    SELECT minute, max(as_of) AS last_as_of
    FROM wirelens.requests_by_minute
    WHERE has(settling, minute)
    GROUP BY minute
) AS done ON done.minute = m.minute;

-- wirelens.requests_by_second: calls and errors per second and protocol, for
-- throughput_per_second over long windows (the minute rollup is too coarse).
-- Same weighting and the same refresh, by whole minutes: every second of a
-- stale minute is recomputed.
CREATE TABLE IF NOT EXISTS wirelens.requests_by_second
(
    second                 DateTime CODEC(Delta, ZSTD),
    run_id                 LowCardinality(String),
    protocol               LowCardinality(String),
    sampled_calls          UInt64,
    calls                  Float64,
    errors                 Float64,
    lowest_rate            Float64,
    as_of                  DateTime64(3) CODEC(Delta, ZSTD)
)
ENGINE = ReplacingMergeTree(as_of)
PARTITION BY toDate(second)
ORDER BY (second, run_id, protocol)
TTL second + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

ALTER TABLE wirelens.requests_by_second MODIFY TTL second + toIntervalDay(${WIRELENS_REQUESTS_TTL_DAYS});

-- The one definition of its rows: every second of the given whole minutes.
CREATE OR REPLACE VIEW wirelens.rollup_second_rows
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
FROM wirelens.requests AS r FINAL
-- DateTime64 bounds, as in rollup_minute_rows (a DateTime bound loses calls)
WHERE r.timestamp >= toDateTime64(arrayMin({minutes:Array(DateTime)}), 0)
  AND r.timestamp < toDateTime64(arrayMax({minutes:Array(DateTime)}) + toIntervalMinute(1), 0)
  AND has({minutes:Array(DateTime)}, toStartOfMinute(r.timestamp))
GROUP BY
    second,
    run_id,
    protocol;

CREATE OR REPLACE MATERIALIZED VIEW wirelens.requests_by_second_refresh
REFRESH EVERY 10 SECOND APPEND
TO wirelens.requests_by_second
AS
WITH
    -- minutes with raw rows inserted since shortly before the rollup's watermark
    touched AS
    (
        SELECT
            toStartOfMinute(timestamp)                                 AS minute,
            max(inserted_at)                                           AS last_insert
        FROM wirelens.requests
        WHERE inserted_at > (SELECT max(as_of) FROM wirelens.requests_by_second) - toIntervalSecond(60)
        GROUP BY minute
    ),
    -- of those, the minutes whose rows arrived after their own last
    -- recomputation - 60 s: the minutes to recompute (a scalar subquery, so
    -- computed once per refresh)
    (
        SELECT groupArray(t.minute)
        FROM touched AS t
        LEFT JOIN
        (
            SELECT toStartOfMinute(second) AS minute, max(as_of) AS last_as_of
            FROM wirelens.requests_by_second
            WHERE toStartOfMinute(second) IN (SELECT minute FROM touched)
            GROUP BY minute
        ) AS done ON done.minute = t.minute
        WHERE t.last_insert > done.last_as_of - toIntervalSecond(60)
    ) AS stale
SELECT
    *,
    now64(3)                                                           AS as_of
FROM wirelens.rollup_second_rows(minutes = stale);

-- The settle pass of the per-second rollup: as requests_by_minute_settle.
CREATE OR REPLACE MATERIALIZED VIEW wirelens.requests_by_second_settle
REFRESH EVERY 1 HOUR APPEND
TO wirelens.requests_by_second
AS
WITH
    (SELECT arrayMap(i -> toStartOfHour(now()) - toIntervalHour(3) + toIntervalMinute(i), range(60))) AS settling
SELECT
    s.*,
    greatest(done.last_as_of + toIntervalMillisecond(1),
             toDateTime64(toStartOfMinute(s.second) + toIntervalMinute(1), 3)) AS as_of
FROM wirelens.rollup_second_rows(minutes = settling) AS s
LEFT JOIN
(
    SELECT toStartOfMinute(second) AS minute, max(as_of) AS last_as_of
    FROM wirelens.requests_by_second
    WHERE has(settling, toStartOfMinute(second))
    GROUP BY minute
) AS done ON done.minute = toStartOfMinute(s.second);
