-- Question: how much CPU does serving each protocol cost per 1000 calls?
--
-- CPU comes from the process metrics in otel.otel_metrics_sum (the OTel
-- exporter's table; procmetrics fills it for the local stack): metric
-- process.cpu.time, cumulative seconds, one series per process (resource
-- service.name, process.pid) and state (user, system). Counted: every process
-- that serves the calls, i.e. every reporting process except wirelens's own
-- pipeline (service.name clickhouse, collector, jaeger, logship, procmetrics),
-- whose cost per call does not depend on the protocol. CPU is a per-process
-- number, not a per-call one, so it can only be charged to a protocol while
-- that protocol runs alone: in a load run the protocols take turns, and each
-- protocol's window is the first to the last of its calls in that run. Calls
-- without a run id (live traffic, protocols interleaved) are left out.
--
-- Per series and window: the CPU rate between the first and the last point
-- inside the window (cumulative counters: value difference / time difference;
-- delta points: their sum / the time they cover), times the window's length.
-- A window needs two points of a series (e.g. runs of a few seconds with
-- points every second). No metrics, no rows.
--
--   calls                  calls of the protocol in the windows that have CPU data
--                          (estimated, see Sampling)
--   sampled_calls          of those, the calls recorded
--   sample_rate            the lowest sample rate among them (1: nothing left out)
--   cpu_seconds            CPU seconds of the counted processes in those windows
--   cpu_ms_per_1000_calls  cpu_seconds * 1000 / calls * 1000
--
-- Sampling (queries/README.md, "Sampling"): each recorded call stands for
-- 1/sample_rate calls, so calls (and the CPU per 1000 of them) are estimates
-- weighted by 1/sample_rate, exact when every call was recorded. CPU is
-- measured per process, never sampled; a window is the first to the last
-- recorded call (at a low rate it may start and end a little inside the
-- protocol's turn).
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every run in the window
WITH
    windows AS
    (
        WITH
            -- the Float32 rate back to the decimal it was configured as; 0 (unknown) counts as 1
            if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1)     AS call_rate
        SELECT
            run_id,
            protocol,
            min(timestamp)                                               AS first_call,
            max(timestamp)                                               AS last_call,
            sum(1 / call_rate)                                           AS calls,
            count()                                                      AS recorded_calls,
            min(call_rate)                                               AS lowest_rate
        FROM wirelens.requests FINAL
        PREWHERE run_id != ''
             AND ({run_id:String} = '' OR run_id = {run_id:String})  -- before FINAL: exact, faster (README)
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
        GROUP BY
            run_id,
            protocol
    ),
    points AS
    (
        SELECT
            ServiceName,
            cityHash64(ResourceAttributes, Attributes)                   AS series,
            if(AggregationTemporality = 1, toDateTime(0), StartTimeUnix) AS series_start,
            AggregationTemporality = 1                                   AS is_delta,
            StartTimeUnix,
            TimeUnix,
            Value
        FROM otel.otel_metrics_sum
        WHERE MetricName = 'process.cpu.time'
          AND ServiceName NOT IN ('clickhouse', 'collector', 'jaeger', 'logship', 'procmetrics')
          AND TimeUnix >= toStartOfSecond({since:DateTime64(3)})
          AND TimeUnix <= {until:DateTime64(3)}
    ),
    series_cpu AS
    (
        SELECT
            w.run_id                                                     AS run_id,
            w.protocol                                                   AS protocol,
            any(w.calls)                                                 AS calls,
            any(w.recorded_calls)                                        AS recorded_calls,
            any(w.lowest_rate)                                           AS lowest_rate,
            any(dateDiff('microsecond', w.first_call, w.last_call)) / 1e6 AS window_s,
            any(p.is_delta)                                              AS delta,
            if(delta,
               sum(p.Value) / (max(p.TimeUnix) - min(p.StartTimeUnix)),
               (argMax(p.Value, p.TimeUnix) - argMin(p.Value, p.TimeUnix))
                   / (max(p.TimeUnix) - min(p.TimeUnix)))                AS rate
        FROM windows AS w
        CROSS JOIN points AS p
        WHERE p.TimeUnix >= w.first_call
          AND p.TimeUnix <= w.last_call
        GROUP BY
            w.run_id,
            w.protocol,
            p.ServiceName,
            p.series,
            p.series_start
        HAVING if(delta, max(p.TimeUnix) > min(p.StartTimeUnix), max(p.TimeUnix) > min(p.TimeUnix))
    ),
    window_cpu AS
    (
        SELECT
            run_id,
            protocol,
            any(calls)                                                   AS window_calls,
            any(recorded_calls)                                          AS window_recorded_calls,
            any(lowest_rate)                                             AS window_lowest_rate,
            sum(rate) * any(window_s)                                    AS cpu_s
        FROM series_cpu
        GROUP BY
            run_id,
            protocol
    )
SELECT
    protocol,
    toUInt64(round(sum(window_calls)))                                   AS calls,
    sum(window_recorded_calls)                                           AS sampled_calls,
    min(window_lowest_rate)                                              AS sample_rate,
    round(sum(cpu_s), 3)                                                 AS cpu_seconds,
    round(sum(cpu_s) * 1e6 / sum(window_calls), 3)                       AS cpu_ms_per_1000_calls
FROM window_cpu
GROUP BY protocol
ORDER BY protocol ASC;
