-- Question: how is each refreshable view of the rollups' database doing:
-- its state, when its latest successful refresh started, its last error?
--
-- last_success is Unix seconds (NULL: no success since the server started);
-- exception is the last failed attempt's text, retry how many failed in a
-- row. A user without SELECT ON system.view_refreshes gets ACCESS_DENIED:
-- the report then goes without (the rows the rollups lack still show drift).
--
-- Parameters:
--   {database:String}  the rollups' database (wirelens)
SELECT
    view,
    status,
    toUnixTimestamp(last_success_time)        AS last_success,
    exception,
    retry
FROM system.view_refreshes
WHERE database = {database:String}
ORDER BY view;
