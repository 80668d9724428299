-- The bootstrap of the saved queries that compare two samples of durations
-- (compare_protocols.sql, protocol_vs_stack.sql), and the split of a call's
-- time at Envoy that protocol_vs_stack.sql and experiments/scenarios/per_run.sql
-- both report: one definition each, as SQL functions. How and why the
-- resamples are drawn this way: compare_protocols.sql.
-- Idempotent: OR REPLACE installs the current definition.

-- Envoy's own part of a call, µs: its time at Envoy (envoy_duration_us, first
-- byte from the client to the last byte to it) minus the upstream exchange
-- (upstream_duration_us, first byte sent upstream to the last byte back), so
-- what Envoy spends before the first byte goes upstream and after the last
-- byte comes back. NULL when either is (no upstream served the call): left
-- out of any aggregate. The upstream part is the column itself.
CREATE OR REPLACE FUNCTION wirelens_in_envoy_us AS (envoy_us, upstream_us) ->
    toInt64(envoy_us) - toInt64(upstream_us);

-- rank (1-based) of quantileExact(level) among n values
CREATE OR REPLACE FUNCTION wirelens_rank AS (n, level) -> toUInt64(floor(level * n)) + 1;

-- one Gamma(m) variate; `salt` keeps independent draws apart
CREATE OR REPLACE FUNCTION wirelens_gamma AS (m, salt) -> if(m <= 32,
    -arraySum(arrayMap(i -> log(1 - randCanonical(i + salt)), range(toUInt64(least(m, 32))))),
    m * pow(greatest(1 - 1 / (9 * m) + randNormal(0, 1, salt) / (3 * sqrt(m)), 0), 3));

-- the k-th smallest value of one resample (with replacement) of sorted s
CREATE OR REPLACE FUNCTION wirelens_resampled AS (s, k, salt) -> s[least(length(s), greatest(1, toUInt64(ceil(
    length(s) * wirelens_gamma(k, salt)
    / (wirelens_gamma(k, salt) + wirelens_gamma(length(s) + 1 - k, salt + 1))))))];

-- that quantile of `resamples` resamples of sorted s
CREATE OR REPLACE FUNCTION wirelens_bootstrap AS (s, level, salt, resamples) ->
    arrayMap(r -> wirelens_resampled(s, wirelens_rank(length(s), level), 8 * r + salt), range(resamples));

-- the 95 % interval of the ratios y / x of two bootstraps
CREATE OR REPLACE FUNCTION wirelens_ratio_ci AS (x, y) ->
    arrayReduce('quantilesExactInclusive(0.025, 0.975)', arrayMap((u, v) -> v / u, x, y));
