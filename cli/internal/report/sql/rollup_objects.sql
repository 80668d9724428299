-- Question: which rollup tables and views exist, and what engine holds each
-- table?
--
-- The report reads this before it answers from the rollups (--source rollup,
-- or auto above the threshold) to warn about counts it cannot trust: the old
-- insert-fed form (an AggregatingMergeTree fed by a view at insert, which
-- counts every re-sent record again), a rollup nothing refreshes. How each
-- refresh is doing is rollup_refreshes.sql (system.view_refreshes needs its
-- own grant). System tables only: cheap at any size.
--
-- Every materialized view of the database is listed (its name need not
-- start with requests_by_); the report keeps those writing TO a rollup.
--
-- Parameters:
--   {database:String}  the rollups' database (wirelens)
SELECT
    name,
    engine,
    create_table_query                        AS create_query,
    toUnixTimestamp(now())                    AS server_now
FROM system.tables
WHERE database = {database:String}
  AND (name LIKE 'requests\_by\_%' OR engine = 'MaterializedView')
ORDER BY name;
