-- Question: how many calls were recorded in the window, counted from the
-- per-second rollup (cheap at any size)?
--
-- The report reads this to choose between the raw saved queries and their
-- rollup variants (queries/rollup/) when --source is auto. Fails when the
-- rollup does not exist (a schema from before it): the report then reads raw.
-- FINAL: a refreshed rollup (ReplacingMergeTree(as_of)) holds older versions
-- of a second until they merge; on the old AggregatingMergeTree it merges.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT sum(sampled_calls) AS sampled_calls
FROM wirelens.requests_by_second FINAL
WHERE second >= toStartOfSecond({since:DateTime64(3)})
  AND second < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR run_id = {run_id:String});
