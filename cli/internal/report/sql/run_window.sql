-- Question: when did a load run start and end, as its runner recorded it?
--
-- Built into `wirelens report --run`; times as Unix milliseconds so no time
-- zone is involved. `ended` is NULL while the run is going.
--
-- Parameters:
--   {run_id:String}  the run's id
SELECT
    toUnixTimestamp64Milli(started)            AS started_ms,
    toUnixTimestamp64Milli(ended)              AS ended_ms
FROM wirelens.runs FINAL
WHERE run_id = {run_id:String}
LIMIT 1;
