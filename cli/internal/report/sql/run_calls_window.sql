-- Question: when did a load run's first and last calls happen? The window of
-- a run that has no row in wirelens.runs.
--
-- Built into `wirelens report --run`; times as Unix nanoseconds so no time
-- zone is involved.
--
-- Parameters:
--   {run_id:String}  the run's id
SELECT
    count()                                    AS calls,
    toUnixTimestamp64Nano(min(timestamp))      AS first_ns,
    toUnixTimestamp64Nano(max(timestamp))      AS last_ns
FROM wirelens.requests FINAL
WHERE run_id = {run_id:String};
