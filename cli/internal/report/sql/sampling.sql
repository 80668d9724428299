-- Question: were the calls of the window sampled? How many were recorded, how
-- many calls do they stand for, and at which sample rates?
--
-- Built into `wirelens report` for its sampling line. A call recorded at
-- sample_rate r stands for 1/r calls (queries/README.md, "Sampling"); 0 (no
-- rate known: a row written without it) counts as 1. No calls: NULL rates.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    -- the Float32 rate back to the decimal it was configured as
    if(r.sample_rate > 0, round(toFloat64(r.sample_rate), 7), 1) AS rate
SELECT
    count()                                    AS sampled_calls,
    toUInt64(round(sum(1 / rate)))             AS calls,
    minOrNull(rate)                            AS min_sample_rate,
    maxOrNull(rate)                            AS max_sample_rate
FROM wirelens.requests AS r FINAL
PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (queries/README.md)
WHERE timestamp >= {since:DateTime64(3)}
  AND timestamp < {until:DateTime64(3)};
