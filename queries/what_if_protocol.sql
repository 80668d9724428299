-- Question: for each operation and the protocol its calls used, how many body
-- bytes per call would the same messages take in each other encoding (REST
-- with JSON, REST with protobuf, gRPC, gRPC-Web, gRPC-Web-text), and how
-- many times the measured protocol's own?
--
-- Body bytes only: headers, trailers, URLs and time are not estimated.
--
-- The filter decodes the payloads of a share of the calls (its
-- counterfactual_rate) against the operation's message types and records
-- what the other encoding of the same messages would take
-- (docs/what-if.md): REST calls with a JSON body get the protobuf message
-- size, gRPC-family calls (and REST-with-protobuf) the JSON body size. The
-- other side comes from what was measured. Per call and direction:
--   proto  the protobuf message bytes, without gRPC's 5-byte prefix:
--          counterfactual_*_proto_bytes (a rest-proto request has it too:
--          its body with the path and query bound), else the measured
--          message bytes of a gRPC-family call, or the body of a rest-proto
--          protobuf direction (records of filters before that: unknown for a
--          rest-proto request without a body, its fields in the URL)
--   json   the JSON body (proto3 JSON as protojson prints it):
--          counterfactual_*_json_bytes, else the measured body of a REST call
--          (0 for a request whose rule binds no body)
--   msgs   gRPC messages (a REST call is one each way)
-- and each encoding's bytes per call, both directions together:
--   rest_b           json
--   rest_proto_b     proto, with no request body where JSON has none
--                    (unary operations only: NULL for streams)
--   grpc_b           proto + 5 * msgs (the length prefixes); NULL where
--                    the request message is unknown (older rest-proto GETs)
--   grpc_web_b       the same: the trailer frame is status, not payload
--   grpc_web_text_b  base64 of the gRPC-Web frames, 4 * ceil(n / 3) bytes
--                    for the n bytes of each direction
-- measured_b is the body bytes the calls actually carried (for grpc-web and
-- grpc-web-text the response includes the trailer frame; grpc-web-text is
-- base64 as sent, frame by frame), so it can differ from the measured
-- protocol's own column above, which counts messages and framing only.
-- <encoding>_ratio is that encoding's bytes over the measured protocol's own
-- (rest for rest-transcoded), so the own one is 1; below 1 the other
-- encoding is smaller. _low and _high bound its 95 % bootstrap interval.
--
-- Only calls with counterfactual_reason 'ok' (completed OK, bodies decoded)
-- have an estimate: estimated_calls. The others sampled for it are counted
-- by reason in no_estimate ('too_large: 3, not_ok: 1'; '' when none):
-- too_large (a body over counterfactual_max_bytes), compressed, mismatch
-- (the payload does not decode as the operation's message), not_ok (the call
-- failed), no_schema (the operation's message types are not configured),
-- incomplete (marked ok without every size: a record from another filter
-- version). calls, sampled_calls and sample_rate count every recorded call
-- of the group, as in the other saved queries.
--
-- Sampling (queries/README.md, "Sampling"): an estimate stands for
-- 1 / (sample_rate * counterfactual_rate) calls; byte means and ratios are
-- weighted by it. counterfactual_rate is the lowest among the calls sampled
-- for the counterfactual (NULL: none was).
--
-- The bootstrap is deterministic. Each group's estimated calls are spread
-- over 256 buckets by cityHash64(request_id), and only the buckets' weighted
-- sums are kept; resample r = 1 .. {resamples} gives bucket b the
-- multiplicity Poisson(1) drawn from cityHash64(operation, protocol, b, r)
-- (the Poisson bootstrap). With fewer calls than buckets nearly every call
-- has a bucket of its own, so this is the bootstrap over calls; with more,
-- the buckets are a random partition of the calls, and resampling their
-- sums spreads a ratio of sums as resampling the calls would (the
-- random-groups variance estimate), at a cost that does not grow with the
-- calls. The interval is the 2.5 % and 97.5 % quantiles of the resampled
-- ratios; NULL with 0 resamples or no estimate. The same calls give the
-- same interval every time.
--
-- It reads the calls twice (issue 30): every call once for the counts, rates
-- and reasons (five narrow columns), and the calls with reason 'ok' once for
-- the estimates (PREWHERE on the reason before FINAL: exact, as the run id's,
-- since a re-send repeats the call byte for byte), per bucket; each group's
-- estimate means are the sums of its buckets. Computing every call's
-- counterfactual sizes, most of them without an estimate, cost more than the
-- rest of the query.
--
-- Parameters:
--   {since:DateTime64(3)}  window start (inclusive)
--   {until:DateTime64(3)}  window end (exclusive)
--   {run_id:String}        a load run's id, or '' for every call in the window
--   {resamples:UInt16}     bootstrap resamples (200 is plenty for a 95 % interval)
WITH
    calls AS
    (
        -- every call: counts, rates and reasons
        WITH
            -- the Float32 rates back to the decimals they were configured as; 0 (unknown) counts as 1
            if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1)                 AS rate,
            if(counterfactual_rate > 0, round(toFloat64(counterfactual_rate), 7), 1) AS cf_rate,
            counterfactual_reason                                                    AS reason
        SELECT
            operation,
            protocol,
            sum(1 / rate)                                                            AS weighted_calls,
            count()                                                                  AS sampled_calls,
            min(rate)                                                                AS lowest_rate,
            minIfOrNull(cf_rate, reason != '')                                       AS lowest_cf_rate,
            countIf(reason = 'ok')                                                   AS ok_calls,
            [('too_large', countIf(reason = 'too_large')), ('compressed', countIf(reason = 'compressed')),
             ('mismatch', countIf(reason = 'mismatch')), ('not_ok', countIf(reason = 'not_ok')),
             ('no_schema', countIf(reason = 'no_schema')),
             ('other', countIf(reason NOT IN ('', 'ok', 'too_large', 'compressed', 'mismatch', 'not_ok',
                                             'no_schema')))]                        AS other_reasons
        FROM wirelens.requests FINAL
        PREWHERE {run_id:String} = '' OR run_id = {run_id:String}  -- before FINAL: exact, faster (README)
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
        GROUP BY
            operation,
            protocol
    ),
    per_call AS
    (
        -- per call with reason 'ok': its weight, whether it has an estimate, each encoding's bytes
        WITH
            -- the Float32 rates back to the decimals they were configured as; 0 (unknown) counts as 1
            if(sample_rate > 0, round(toFloat64(sample_rate), 7), 1)                 AS rate,
            if(counterfactual_rate > 0, round(toFloat64(counterfactual_rate), 7), 1) AS cf_rate,
            counterfactual_reason                                                    AS reason,
            protocol IN ('grpc', 'grpc-web', 'grpc-web-text')                        AS framed,
            -- a REST request without a body (the rule binds none: a GET) has its fields in the
            -- URL: the filter sizes that message (counterfactual_request_proto_bytes); rows of
            -- filters that did not are NULL here (no gRPC size)
            coalesce(counterfactual_request_proto_bytes,
                     multiIf(framed, request_message_bytes,
                             protocol = 'rest-proto' AND NOT (request_body_bytes = 0
                                 AND counterfactual_request_json_bytes = 0), request_body_bytes,
                             NULL))                                                  AS req_proto,
            coalesce(counterfactual_response_proto_bytes,
                     multiIf(framed, response_message_bytes,
                             protocol = 'rest-proto', response_body_bytes, NULL))    AS resp_proto,
            coalesce(counterfactual_request_json_bytes,
                     if(protocol IN ('rest', 'rest-transcoded', 'rest-proto'),
                        request_body_bytes, NULL))                                   AS req_json,
            coalesce(counterfactual_response_json_bytes,
                     if(protocol IN ('rest', 'rest-transcoded', 'rest-proto'),
                        response_body_bytes, NULL))                                  AS resp_json,
            if(framed, request_messages, 1)                                          AS req_msgs,
            if(framed, response_messages, 1)                                         AS resp_msgs,
            req_proto + 5 * req_msgs                                                 AS req_grpc,
            resp_proto + 5 * resp_msgs                                               AS resp_grpc,
            -- each encoding's body bytes of the call, both directions
            req_json + resp_json                                                     AS rest,
            -- no request body in JSON (the rule binds none), none in protobuf either
            if(streaming = 'unary' AND req_msgs = 1 AND resp_msgs = 1,
               if(req_json = 0, 0, req_proto) + resp_proto, NULL)                    AS rest_proto,
            req_grpc + resp_grpc                                                     AS grpc,
            4 * intDiv(req_grpc + 2, 3) + 4 * intDiv(resp_grpc + 2, 3)               AS grpc_web_text,
            multiIf(protocol IN ('rest', 'rest-transcoded'), rest,
                    protocol = 'rest-proto', rest_proto,
                    protocol IN ('grpc', 'grpc-web'), grpc,
                    protocol = 'grpc-web-text', grpc_web_text, NULL)                 AS own,
            reason = 'ok' AND (req_proto IS NOT NULL OR req_json = 0) AND resp_proto IS NOT NULL
                AND req_json IS NOT NULL AND resp_json IS NOT NULL                   AS estimated,
            1 / (rate * cf_rate)                                                     AS cf_weight
        SELECT
            operation,
            protocol,
            request_id,
            estimated,
            cf_weight,
            request_body_bytes + response_body_bytes                                 AS measured,
            rest,
            rest_proto,
            grpc,
            grpc_web_text,
            own
        FROM wirelens.requests FINAL
        PREWHERE counterfactual_reason = 'ok'  -- before FINAL: exact, as the run id (README)
             AND ({run_id:String} = '' OR run_id = {run_id:String})
        WHERE timestamp >= {since:DateTime64(3)}
          AND timestamp < {until:DateTime64(3)}
    ),
    buckets AS
    (
        -- each group's estimated calls in 256 random buckets: their counts and weighted sums
        SELECT
            operation,
            protocol,
            toUInt16(cityHash64(request_id) % 256)                                   AS bucket,
            count()                                                                  AS estimated_n,
            countIf(rest_proto IS NULL)                                              AS no_rest_proto,
            countIf(grpc IS NULL)                                                    AS no_grpc,
            countIf(own IS NULL)                                                     AS no_own,
            sum(cf_weight)                                                           AS w_s,
            sum(measured * cf_weight)                                                AS measured_s,
            sum(assumeNotNull(own) * cf_weight)                                      AS own_s,
            sum(assumeNotNull(rest) * cf_weight)                                     AS rest_s,
            sum(assumeNotNull(rest_proto) * cf_weight)                               AS rest_proto_s,
            sum(assumeNotNull(grpc) * cf_weight)                                     AS grpc_s,
            sum(assumeNotNull(grpc_web_text) * cf_weight)                            AS grpc_web_text_s
        FROM per_call
        WHERE estimated
        GROUP BY
            operation,
            protocol,
            bucket
    ),
    estimates AS
    (
        -- each group's estimates: the sums of its buckets
        SELECT
            operation,
            protocol,
            sum(estimated_n)                                                         AS estimated_calls,
            -- rest-proto carries one message each way: NULL as soon as one estimated call is a stream
            sum(no_rest_proto) = 0                                                   AS unary,
            -- the gRPC family needs the request message: NULL when one estimated call lacks it
            sum(no_grpc) = 0                                                         AS framable,
            sum(no_own) = 0                                                          AS owned,
            sum(w_s)                                                                 AS w,
            sum(measured_s) / w                                                      AS measured_mean,
            sum(rest_s) / w                                                          AS rest_mean,
            sum(rest_proto_s) / w                                                    AS rest_proto_mean,
            sum(grpc_s) / w                                                          AS grpc_mean,
            sum(grpc_web_text_s) / w                                                 AS grpc_web_text_mean,
            sum(own_s) / w                                                           AS own_mean
        FROM buckets
        GROUP BY
            operation,
            protocol
    ),
    intervals AS
    (
        -- resample r = 1 .. {resamples}: bucket b weighs Poisson(1), drawn from a hash
        SELECT
            operation,
            protocol,
            quantilesExactIf(0.025, 0.975)(rest_r / own_r, own_r > 0)                AS rest_ci,
            quantilesExactIf(0.025, 0.975)(rest_proto_r / own_r, own_r > 0)          AS rest_proto_ci,
            quantilesExactIf(0.025, 0.975)(grpc_r / own_r, own_r > 0)                AS grpc_ci,
            quantilesExactIf(0.025, 0.975)(grpc_web_text_r / own_r, own_r > 0)       AS grpc_web_text_ci
        FROM
        (
            WITH
                toFloat64(cityHash64(operation, protocol, bucket, r)) / 18446744073709551616 AS u,
                -- Poisson(1) by its inverse CDF (P(X > 7) = 1e-5 is drawn as 7)
                multiIf(u < 0.36787944, 0, u < 0.73575888, 1, u < 0.91969860, 2, u < 0.98101184, 3,
                        u < 0.99634015, 4, u < 0.99940582, 5, u < 0.99991676, 6, 7)  AS m
            SELECT
                operation,
                protocol,
                r,
                sum(m * own_s)                                                       AS own_r,
                sum(m * rest_s)                                                      AS rest_r,
                sum(m * rest_proto_s)                                                AS rest_proto_r,
                sum(m * grpc_s)                                                      AS grpc_r,
                sum(m * grpc_web_text_s)                                             AS grpc_web_text_r
            FROM buckets
            ARRAY JOIN range(1, {resamples:UInt16} + 1) AS r
            GROUP BY
                operation,
                protocol,
                r
        )
        GROUP BY
            operation,
            protocol
    ),
    -- a ratio needs an estimate and a measured protocol whose own encoding is known
    estimated_calls > 0 AND owned AND own_mean > 0                                   AS has_ratio,
    notEmpty(rest_ci)                                                                AS has_ci,
    (ci) -> if(has_ratio AND has_ci, round(ci, 3), NULL)                             AS bound,
    -- by reason; incomplete: marked ok without every size
    arrayPushBack(other_reasons, ('incomplete', toUInt64(ok_calls - estimated_calls))) AS reasons
SELECT
    operation,
    protocol,
    toUInt64(round(weighted_calls))                                                  AS calls,
    sampled_calls,
    lowest_rate                                                                      AS sample_rate,
    lowest_cf_rate                                                                   AS counterfactual_rate,
    estimated_calls,
    if(estimated_calls = 0, NULL, round(measured_mean, 1))                           AS measured_b,
    if(estimated_calls = 0, NULL, round(rest_mean, 1))                               AS rest_b,
    if(estimated_calls = 0 OR NOT unary, NULL, round(rest_proto_mean, 1))            AS rest_proto_b,
    if(estimated_calls = 0 OR NOT framable, NULL, round(grpc_mean, 1))               AS grpc_b,
    grpc_b                                                                           AS grpc_web_b,
    if(estimated_calls = 0 OR NOT framable, NULL, round(grpc_web_text_mean, 1))      AS grpc_web_text_b,
    if(has_ratio, round(rest_mean / own_mean, 3), NULL)                              AS rest_ratio,
    bound(rest_ci[1])                                                                AS rest_ratio_low,
    bound(rest_ci[2])                                                                AS rest_ratio_high,
    if(has_ratio AND unary, round(rest_proto_mean / own_mean, 3), NULL)              AS rest_proto_ratio,
    if(unary, bound(rest_proto_ci[1]), NULL)                                         AS rest_proto_ratio_low,
    if(unary, bound(rest_proto_ci[2]), NULL)                                         AS rest_proto_ratio_high,
    if(has_ratio AND framable, round(grpc_mean / own_mean, 3), NULL)                 AS grpc_ratio,
    if(framable, bound(grpc_ci[1]), NULL)                                            AS grpc_ratio_low,
    if(framable, bound(grpc_ci[2]), NULL)                                            AS grpc_ratio_high,
    grpc_ratio                                                                       AS grpc_web_ratio,
    grpc_ratio_low                                                                   AS grpc_web_ratio_low,
    grpc_ratio_high                                                                  AS grpc_web_ratio_high,
    if(has_ratio AND framable, round(grpc_web_text_mean / own_mean, 3), NULL)        AS grpc_web_text_ratio,
    if(framable, bound(grpc_web_text_ci[1]), NULL)                                   AS grpc_web_text_ratio_low,
    if(framable, bound(grpc_web_text_ci[2]), NULL)                                   AS grpc_web_text_ratio_high,
    -- 'too_large: 3, not_ok: 1': the most frequent first
    arrayStringConcat(arrayMap(x -> concat(x.1, ': ', toString(x.2)),
        arraySort(x -> (-x.2, x.1), arrayFilter(x -> x.2 > 0, reasons))), ', ')      AS no_estimate
FROM calls
LEFT JOIN estimates USING (operation, protocol)
LEFT JOIN intervals USING (operation, protocol)
ORDER BY
    operation ASC,
    protocol ASC;
