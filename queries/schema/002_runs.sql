-- wirelens.runs: one row per load run (loadgen, experiments), so reports can
-- select a run's calls and its time window. Idempotent.

CREATE DATABASE IF NOT EXISTS wirelens;

-- A run is written when it starts and again when it ends; the newest version
-- (by `updated`) wins. Read with FINAL.
CREATE TABLE IF NOT EXISTS wirelens.runs
(
    run_id         String,
    scenario       LowCardinality(String),
    parameters     String CODEC(ZSTD),   -- JSON: the run's settings
    started        DateTime64(3),
    ended          Nullable(DateTime64(3)),
    client_summary String CODEC(ZSTD),   -- JSON: what the client measured
    updated        DateTime64(3) DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(updated)
ORDER BY run_id;
