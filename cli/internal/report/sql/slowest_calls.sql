-- Question: which calls were the slowest (measured at the proxy), and which
-- trace shows each of them?
--
-- Built into `wirelens report`: each trace id whose span exists
-- (span_sampled) gets a Jaeger link and the `wirelens trace <id>` command;
-- the others say why they have none: Envoy did not sample the call (the
-- client's traceparent said not sampled, or Envoy's random_sampling left it
-- out), so no span was sent. Their rows are complete all the same.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
SELECT
    timestamp,
    operation,
    protocol,
    duration_us,
    trace_id,
    span_sampled
FROM wirelens.requests FINAL
WHERE timestamp >= {since:DateTime64(3)}
  AND timestamp < {until:DateTime64(3)}
  AND ({run_id:String} = '' OR run_id = {run_id:String})
ORDER BY
    duration_us DESC,
    timestamp ASC
LIMIT 20;
