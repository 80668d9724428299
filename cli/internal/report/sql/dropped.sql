-- Question: did the pipeline drop calls in the window? How many access-log
-- records (one per call) did logship drop past its disk cap, unshipped, while
-- the Collector or ClickHouse stayed down longer than the caps could hold?
--
-- Built into `wirelens report` for its drops line. logship sends its drop
-- count as a cumulative counter (wirelens.logship.dropped_records, one series
-- per checkpoint: StartTimeUnix) every few seconds; the drops of the window
-- are each series' rise across it. A drop is dated when logship reported it,
-- which is up to one report interval after the calls it lost. No run filter:
-- dropped calls carry no run id.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
SELECT
    toUInt64(sum(rise))  AS dropped_records,
    toUInt64(sum(total)) AS dropped_total
FROM
(
    SELECT
        maxIf(Value, TimeUnix < {until:DateTime64(3)})
          - maxIf(Value, TimeUnix < {since:DateTime64(3)}) AS rise,
        maxIf(Value, TimeUnix < {until:DateTime64(3)})      AS total
    FROM otel.otel_metrics_sum
    WHERE MetricName = 'wirelens.logship.dropped_records'
      AND TimeUnix < {until:DateTime64(3)}
    GROUP BY ServiceName, ResourceAttributes['wirelens.access_log.path'], StartTimeUnix
);
