-- Question: how many rows of the window reached wirelens.requests after the
-- rollups' watermark, i.e. are not counted by the rollups yet, and how many
-- of those have waited longer than a few refreshes should take?
--
-- A rollup's watermark is its newest as_of: each refresh (every 10 s)
-- recomputes, from wirelens.requests FINAL, every minute touched by rows
-- inserted after the previous watermark (queries/schema/004_rollups.sql), so
-- a row inserted after the watermark may be missing from the rollup until
-- the next refresh. The lower of the two rollups' watermarks is taken (the
-- one that lags). An empty rollup has the watermark 1970: every row of the
-- window is pending. The same rule as queries/rollup.py TRUST_SQL:
--   pending_rows  inserted after the watermark (a window ending now always
--                 has some: the last seconds, in by the next refresh);
--   overdue_rows  of those, inserted more than 30 s ago: the refreshes are
--                 stopped or failing, and the rollups under-count by up to
--                 pending_rows.
--
-- Rows, not calls: no FINAL, so a re-sent record counts once per copy; the
-- window is on the sorting key's timestamp and inserted_at has a minmax
-- index, so this reads little even over a long window. The window starts at
-- the minute, as the rollup variants' windows do.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
WITH
    (SELECT max(as_of) FROM wirelens.requests_by_minute) AS minute_as_of,
    (SELECT max(as_of) FROM wirelens.requests_by_second) AS second_as_of,
    toDateTime64(least(minute_as_of, second_as_of), 3)  AS watermark
SELECT
    toUnixTimestamp64Milli(watermark)                              AS watermark_ms,
    count()                                                        AS pending_rows,
    countIf(inserted_at < now64(3) - toIntervalSecond(30))         AS overdue_rows
FROM wirelens.requests
WHERE timestamp >= toStartOfMinute({since:DateTime64(3)})
  AND timestamp < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR run_id = {run_id:String})
  AND inserted_at > watermark;
