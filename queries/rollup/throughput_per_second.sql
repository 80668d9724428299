-- Question: how many calls per second did each protocol serve, and how many
-- of them failed? The rollup variant of queries/throughput_per_second.sql,
-- for long windows.
--
-- Reads wirelens.requests_by_second (queries/schema/004_rollups.sql): the
-- same columns, exact, over the seconds starting in
-- [toStartOfSecond(since), until). Counts are weighted by 1/sample_rate as in
-- the raw query. FINAL: the newest recomputation of each second (a re-sent
-- record counts once; queries/README.md, "Rollup").
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive, rounded down to the second)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    s.second                                                     AS second,
    protocol,
    toUInt64(round(sum(s.calls)))                                AS calls,
    sum(s.sampled_calls)                                         AS sampled_calls,
    min(s.lowest_rate)                                           AS sample_rate,
    toUInt64(round(sum(s.errors)))                               AS errors
FROM wirelens.requests_by_second AS s FINAL
WHERE s.second >= toStartOfSecond({since:DateTime64(3)})
  AND s.second < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR s.run_id = {run_id:String})
GROUP BY
    second,
    protocol
ORDER BY
    second ASC,
    protocol ASC;
