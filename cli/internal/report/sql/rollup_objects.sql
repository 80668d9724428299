-- Question: which rollup tables and views exist, what engine holds each
-- table, and how is each refreshable view doing?
--
-- The report reads this before it answers from the rollups (--source rollup,
-- or auto above the threshold) to warn about counts it cannot trust: the old
-- insert-fed form (an AggregatingMergeTree fed by a view at insert, which
-- counts every re-sent record again), a rollup nothing refreshes, a refresh
-- that fails or lags. System tables only: cheap at any size.
--
-- Every materialized view of the database is listed (its name need not
-- start with requests_by_); the report keeps those writing TO a rollup.
-- last_success is when the latest successful refresh started (Unix seconds;
-- NULL: none since the server started); exception is the last failure's text.
--
-- Parameters:
--   {database:String}  the rollups' database (wirelens)
SELECT
    t.name                                    AS name,
    t.engine                                  AS engine,
    t.create_table_query                      AS create_query,
    r.status                                  AS refresh_status,     -- '' when not refreshable
    toUnixTimestamp(r.last_success_time)      AS last_success,
    r.exception                               AS refresh_exception,
    r.retry                                   AS refresh_retry,
    toUnixTimestamp(now())                    AS server_now
FROM system.tables AS t
LEFT JOIN system.view_refreshes AS r
    ON r.database = t.database AND r.view = t.name
WHERE t.database = {database:String}
  AND (t.name LIKE 'requests\_by\_%' OR t.engine = 'MaterializedView')
ORDER BY name;
