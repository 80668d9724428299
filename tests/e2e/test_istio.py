"""End to end: wirelens in an Istio gateway that istiod's own translation configures, next to the local stack.

bin/istiod-harness (tools/istiod-harness, `make istiod-harness`) runs istiod's
config generation (pilot/test/xds) over the resources deploy/istio/local.py
renders from deploy/istio/render.py (the WasmPlugin with a file:// module, the
Telemetry, the mesh config's two providers) plus the Gateways, routes,
ServiceEntries and the transcoder's EnvoyFilter for this machine, and serves
ADS on loopback. The project's Envoy 1.40 runs as an Istio ingress gateway
(router mode, the bootstrap the harness writes) and gets all of its listeners,
routes, clusters, the access logger, the tracer and the wirelens filter (ECDS)
from istiod; nothing else edits its config.

Known calls of every protocol (REST, REST with protobuf bodies, gRPC, gRPC-Web,
gRPC-Web text, REST transcoded to gRPC) go through it: each is exactly one row
in ClickHouse with its operation, protocol, body and message sizes, and one
span in Jaeger. Then the WasmPlugin changes on disk (sample_rate 0, then 1):
istiod pushes it, Envoy applies it through ECDS, with numbered calls running
through each change (tests/e2e/numbered_calls.py): every call answered and
logged, the unsampled ones no row, the sampled ones one row each, the calls in
a change's window in order (those that met the old rate first), and istiod and
Envoy still the processes that started. The generated listeners are kept in test-artifacts/istio/<source>/.

Every test runs once per module source (deploy/istio/local.py, MODULE_SOURCES):
`file` (the WasmPlugin names build/wirelens_filter.wasm by path) and `oci`
(the image `make wasm-image` built, by digest, from `bin/wasm-image registry`
on loopback; istiod sends the url with a placeholder cluster and istio-agent's
own pull code, run by the harness, fetches it, checks the digest and hands
Envoy the cached file: the bytes of our build).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from deploy.istio import local
from tests.e2e.conftest import ARTIFACTS, free_ports, jaeger_trace, rows
from tests.e2e.numbered_calls import NumberedCalls, logged_records
from tests.e2e.test_inject import call, check_rows_and_spans
from tests.e2e.test_local_stack import HELLO_REPLY, HELLO_REQUEST, REST_REPLY, counts_by_protocol, traceparent
from wirelens_helpers.wait import WaitTimeout, wait_for

PROTOCOLS = ("rest", "rest-proto", "grpc", "grpc-web", "grpc-web-text", "rest-transcoded")
CALLS_PER_PROTOCOL = 3



def artifacts(settings) -> Path:
    """test-artifacts/istio/<module source>/: what the docs show of each run."""
    directory = ARTIFACTS / "istio" / settings["WIRELENS_ISTIO_MODULE_SOURCE"]
    directory.mkdir(parents=True, exist_ok=True)
    return directory
# The filters that must come after wirelens on each listener (it sees each call as the client sent it).
AFTER_WIRELENS = {
    "WIRELENS_ISTIO_PORT": ["envoy.filters.http.grpc_web", "envoy.filters.http.router"],
    "WIRELENS_ISTIO_TRANSCODE_PORT": ["envoy.filters.http.grpc_json_transcoder", "envoy.filters.http.router"],
}
# istiod's name for the upstream cluster of a ServiceEntry port.
REST_CLUSTER = "outbound|{WIRELENS_REST_PORT}||" + local.REST_HOST
GRPC_CLUSTER = "outbound|{WIRELENS_GRPC_PORT}||" + local.GRPC_HOST


@pytest.fixture(scope="module", params=local.MODULE_SOURCES)
def istio(request, local_stack, tmp_path_factory):
    """The gateway, once per module source: file:// (istiod hands Envoy the path) and oci:// (the module as
    `make wasm-image` built it, pulled by digest from a registry on loopback by istio-agent's code)."""
    if not local.HARNESS.exists():
        pytest.fail(f"{local.HARNESS} is missing: {local.HARNESS_HINT}")
    names = list(local.PORTS)
    environ = {**local_stack, **dict(zip(names, map(str, free_ports(len(names)))))}
    environ["WIRELENS_ISTIO_STATE_DIR"] = str(tmp_path_factory.mktemp(f"istio-{request.param}"))
    environ["WIRELENS_ISTIO_MODULE_SOURCE"] = request.param
    environ["WIRELENS_ISTIO_CONCURRENCY"] = "1"
    environ["WIRELENS_ISTIO_LOG_LEVEL"] = "info"
    environ["WIRELENS_SAMPLE_RATE"] = "1"   # the live change starts from recording every call
    settings = local.load_settings(environ)
    lines: list[str] = []
    try:
        t0 = time.monotonic()
        local.up(settings, log=lines.append)
        lines.append(f"  up in {time.monotonic() - t0:.1f}s")
        yield settings
    finally:
        envoy = local.pids(settings).get("envoy")
        local.down(settings, log=lines.append)
        for log in (Path(settings["WIRELENS_STATE_DIR"]) / "logs").glob("*.log"):
            (artifacts(settings) / f"e2e-{log.name}").write_bytes(log.read_bytes())
        for path in (local.paths(settings)["bootstrap"], local.paths(settings)["mesh_config"],
                     *local.paths(settings)["config_dir"].glob("*.yaml")):
            if path.exists():
                (artifacts(settings) / f"input-{path.name}").write_bytes(path.read_bytes())
        print("\n".join(lines), file=sys.stderr)
        assert envoy is None or not Path(f"/proc/{envoy}").exists() or \
            Path(f"/proc/{envoy}/stat").read_text().rsplit(") ", 1)[1].startswith("Z"), \
            f"the gateway's Envoy (pid {envoy}) outlived `local.py down`"


def port_of(settings, variable: str) -> int:
    return int(settings[variable])


def tracer_service(settings) -> str:
    """The spans' service name: istiod names it after the proxy's node cluster (its bootstrap)."""
    return yaml.safe_load(local.paths(settings)["bootstrap"].read_text())["node"]["cluster"]   # JSON or YAML


def cluster_requests(settings) -> dict[str, int]:
    """Requests each upstream cluster sent, from Envoy's /clusters (istiod gives the clusters an alt_stat_name,
    so their stats are not named after them): `NAME::HOST:PORT::rq_total::N` per endpoint."""
    names = [REST_CLUSTER.format(**settings), GRPC_CLUSTER.format(**settings)]
    _, text = local.stack.http_get(f"{local.admin_url(settings)}/clusters", timeout=30)
    totals = dict.fromkeys(names, 0)
    for line in text.splitlines():
        parts = line.split("::")
        if len(parts) == 4 and parts[0] in totals and parts[2] == "rq_total":
            totals[parts[0]] += int(parts[3])
    return totals


def excerpt(listener: dict, ecds: dict) -> dict:
    """The generated listener as the docs show it: address, the HCM's HTTP filters, its access log and
    tracing, and the wirelens filter's ECDS resource (its operation map cut short)."""
    hcm = local.http_connection_manager(listener)
    config = json.loads(json.dumps(ecds))
    wasm = config.get("typed_config", {}).get("config", {})
    value = wasm.get("configuration", {}).get("value", "")
    if len(value) > 160:
        wasm["configuration"]["value"] = value[:160] + f"... ({len(value)} characters)"
    return {"listener": {"name": listener["name"], "address": listener["address"],
                         "http_filters": hcm["http_filters"],
                         "access_log": hcm.get("access_log"), "tracing": hcm.get("tracing")},
            "ecds": config}


def test_istiod_builds_the_listeners_with_wirelens_first(istio):
    settings = istio
    (artifacts(settings) / "config_dump.json").write_text(json.dumps(local.config_dump(settings, ""), indent=1))
    ecds = local.ecds_filters(settings)
    expected_config = {"WIRELENS_ISTIO_PORT": local.plugin_config(settings),
                       "WIRELENS_ISTIO_TRANSCODE_PORT": local.plugin_config(settings, transcoded=True)}
    for variable, after in AFTER_WIRELENS.items():
        port = port_of(settings, variable)
        assert local.listening_addresses(port) == {"127.0.0.1"}, f"{variable}={port}"
        names = [f["name"] for f in local.http_filters(settings, port)]
        name = local.wirelens_ecds_name(settings, port)
        # wirelens is the first HTTP filter: istiod puts AUTHN-phase plugins first, and metadata
        # exchange (the only filter allowed before it) is off for upstream Envoy.
        assert name is not None and names[0] == name, (variable, names)
        assert [n for n in names if n in after] == after, (variable, names)
        assert names[-1] == "envoy.filters.http.router", (variable, names)
        wasm = ecds[name]["typed_config"]
        assert wasm["@type"] == local.wiring.WASM_TYPE
        assert wasm["config"]["root_id"] == "wirelens"
        assert wasm["config"]["failure_policy"] == "FAIL_OPEN"
        loaded = Path(wasm["config"]["vm_config"]["code"]["local"]["filename"])
        if local.from_registry(settings):
            # istio-agent's code pulled the image by digest into its cache: the same bytes as our build.
            image = local.served_image(settings)
            assert loaded.parent.parent == local.paths(settings)["wasm_cache"], loaded
            assert loaded.name == f"{local.wasm_image.digest_hex(image)}.wasm", (loaded, image)
            assert loaded.read_bytes() == local.WASM.read_bytes(), f"{loaded} is not {local.WASM}"
        else:
            assert loaded == local.WASM, loaded
        # The pluginConfig arrives as the JSON text the filter parses, equal to what we rendered.
        assert json.loads(wasm["config"]["configuration"]["value"]) == expected_config[variable], variable
        listener = local.listener_on(settings, port)
        (artifacts(settings) / f"listener-{variable.lower()}.json").write_text(json.dumps(listener, indent=1))
        (artifacts(settings) / f"listener-{variable.lower()}-excerpt.yaml").write_text(
            f"# The listener istiod generated for the gateway's {variable} server and the wirelens filter's\n"
            f"# ECDS resource, from Envoy's /config_dump (tests/e2e/test_istio.py).\n"
            + yaml.safe_dump(excerpt(listener, ecds[name]), sort_keys=False, width=4096))
        # Istio's access logger and tracer from the Telemetry and the mesh config's providers.
        hcm = local.http_connection_manager(listener)
        loggers = [log["typed_config"] for log in hcm.get("access_log", [])
                   if log["typed_config"]["@type"].endswith("OpenTelemetryAccessLogConfig")]
        assert len(loggers) == 1, hcm.get("access_log")
        attributes = {a["key"]: a["value"]["string_value"] for a in loggers[0]["attributes"]["values"]}
        assert attributes == local.wiring.access_log_attributes()
        tags = {t["tag"]: t for t in hcm["tracing"].get("custom_tags", [])}
        assert set(local.wiring.span_tag_formats()) <= set(tags), tags
    if local.from_registry(settings):
        # The pull, as the registry saw it: the manifest by the WasmPlugin's digest, then the module's layer.
        image = local.served_image(settings)
        pulls = [line.split("GET ", 1)[1] for line in local.stack.log_path(settings, "registry").read_text().splitlines()
                 if "GET /v2/wirelens/wirelens-filter/" in line]
        assert f"/v2/wirelens/wirelens-filter/manifests/sha256:{local.wasm_image.digest_hex(image)}" in pulls, pulls
        (artifacts(settings) / "pull.txt").write_text(
            f"WasmPlugin url: oci://{image}\nregistry requests:\n" + "".join(f"  GET {p}\n" for p in pulls)
            + f"cached module: sha256 {local.sha256_file(local.WASM)} = {local.WASM.name}\n")


def wirelens_spans(trace: dict | None) -> list[dict]:
    """The spans of a trace that carry the wirelens record."""
    spans = []
    for span in (trace or {}).get("spans", []):
        if any(t["key"] == "wirelens.protocol" for t in span.get("tags", [])):
            spans.append(span)
    return spans


def test_every_protocol_through_the_istio_gateway_is_one_row_and_one_span(istio):
    settings = istio
    ports = {"rest-transcoded": port_of(settings, "WIRELENS_ISTIO_TRANSCODE_PORT")}
    run_id = f"istio-{uuid.uuid4().hex[:8]}"
    before = cluster_requests(settings)
    expected = {}
    for protocol in PROTOCOLS:
        for _ in range(CALLS_PER_PROTOCOL):
            trace_id, tp = traceparent()
            answer = call(protocol, ports.get(protocol, port_of(settings, "WIRELENS_ISTIO_PORT")), {}, None,
                          {"traceparent": tp, "x-wirelens-run": run_id})
            assert answer.status in ("200", "OK"), (protocol, answer)
            if protocol == "rest":
                assert answer.body == REST_REPLY, answer
            elif protocol == "rest-transcoded":   # the transcoder's JSON: the same object
                assert json.loads(answer.body) == json.loads(REST_REPLY), answer
            elif protocol != "grpc-web-text":   # the others carry the reply message as is
                assert HELLO_REPLY in answer.body, (protocol, answer)
            expected[trace_id] = (protocol, answer)

    # Every call one row with its operation, protocol, body bytes, messages and status; its span in Jaeger.
    check_rows_and_spans(settings, {"name": "istio", "tracer_service": tracer_service(settings)}, run_id, expected)
    assert counts_by_protocol(settings, run_id) == {p: CALLS_PER_PROTOCOL for p in PROTOCOLS}
    # gRPC message payloads, counted here independently of the filter.
    payloads = rows(settings, f"SELECT protocol, request_message_bytes, response_message_bytes, count() "
                              f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' "
                              f"GROUP BY ALL ORDER BY protocol")
    assert payloads == [[p, *(("0", "0") if p.startswith("rest") else (str(len(HELLO_REQUEST)), str(len(HELLO_REPLY)))),
                         str(CALLS_PER_PROTOCOL)] for p in sorted(PROTOCOLS)]
    # One span per call carries the record (the gateway's own; istiod also has it spawn an upstream span).
    jaeger = f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}"
    seen_spans = []
    for trace_id, (protocol, _) in expected.items():
        trace = jaeger_trace(jaeger, trace_id)
        spans = wirelens_spans(trace)
        assert len(spans) == 1, f"{protocol} call {trace_id}: {len(spans)} spans carry the record"
        tags = {t["key"]: t["value"] for t in spans[0]["tags"]}
        seen_spans.append({"trace_id": trace_id, "spans_in_trace": len(trace["spans"]),
                           "service": trace["processes"][spans[0]["processID"]]["serviceName"],
                           "operation": spans[0]["operationName"],
                           **{k: tags[k] for k in ("wirelens.protocol", "wirelens.operation", "http.request.body.size",
                                                   "http.response.body.size") if k in tags}})
    # What the docs show: the run's rows and spans.
    (artifacts(settings) / "rows.tsv").write_text(stack_rows_table(settings, run_id))
    (artifacts(settings) / "spans.json").write_text(json.dumps(seen_spans, indent=1))

    # Through the routes istiod made: gRPC, gRPC-Web and transcoded REST to the gRPC service, REST to REST.
    after = cluster_requests(settings)
    assert {name: after[name] - before[name] for name in after} == {
        REST_CLUSTER.format(**settings): 2 * CALLS_PER_PROTOCOL,
        GRPC_CLUSTER.format(**settings): 4 * CALLS_PER_PROTOCOL}


def stack_rows_table(settings, run_id: str) -> str:
    """The run's rows in wirelens.requests, as a table with a header line (TSV)."""
    columns = ("protocol, operation, http_status, grpc_status, request_body_bytes, response_body_bytes, "
               "request_messages, response_messages, request_message_bytes, response_message_bytes, trace_id")
    return local.stack.clickhouse_query(settings, f"SELECT {columns} FROM wirelens.requests FINAL "
                                                  f"WHERE run_id = '{run_id}' ORDER BY protocol, trace_id "
                                                  f"FORMAT TSVWithNames")


# ---------------------------------------------------------------- the live change


def numbered_rest_call(port: int, run_id: str):
    """One numbered REST call through the gateway (tests/e2e/numbered_calls.py's send)."""
    def send(number: int, tp: str) -> str | None:
        answer = call("rest", port, {}, None, {"x-wirelens-run": run_id, "traceparent": tp})
        return None if answer.status == "200" and answer.body == REST_REPLY else \
            f"status {answer.status}, body {answer.body[:80]!r}"
    return send


def numbered_calls(settings, run_id: str, n: int) -> list[str]:
    """n REST calls, each answered; their trace ids in order."""
    sent = []
    for number in range(n):
        trace_id, tp = traceparent()
        answer = call("rest", port_of(settings, "WIRELENS_ISTIO_PORT"), {}, None,
                      {"x-wirelens-run": run_id, "traceparent": tp})
        assert answer.status == "200" and answer.body == REST_REPLY, f"call {number} of {run_id}: {answer}"
        sent.append(trace_id)
    return sent


def logged_calls(settings, run_id: str) -> int:
    """Access-log records of a run in otel.otel_logs: every call, recorded by the filter or not."""
    return int(rows(settings, f"SELECT count() FROM otel.otel_logs "
                              f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")[0][0])


def rows_by_trace(settings, run_id: str) -> dict[str, int]:
    return {trace: int(n) for trace, n in rows(settings, f"SELECT trace_id, count() FROM wirelens.requests FINAL "
                                                         f"WHERE run_id = '{run_id}' GROUP BY trace_id")}


def test_plugin_config_change_goes_live_through_istiod_without_restart_or_lost_call(istio):
    settings = istio
    started = local.pids(settings)
    assert all(started.values()), started
    ports = {v: port_of(settings, v) for v in AFTER_WIRELENS}
    stats = {v: f"extension_config_discovery.http_filter.{local.wirelens_ecds_name(settings, p)}"
             for v, p in ports.items()}
    run = f"istio-live-{uuid.uuid4().hex[:8]}"
    n = 10
    # Numbered calls all through both changes (tests/e2e/numbered_calls.py): every one answered and logged,
    # one row each while sample_rate is 1, none while it is 0, and in each change's window the calls that met
    # the old rate first; the missing or doubled named by number.
    through = NumberedCalls(numbered_rest_call(ports["WIRELENS_ISTIO_PORT"], f"{run}-through"), rate_per_s=25,
                            name=f"numbered calls through the WasmPlugin changes "
                                 f"({settings['WIRELENS_ISTIO_MODULE_SOURCE']})")
    sent: dict[str, list[str]] = {}
    try:
        through.start()
        for sample_rate, phase in ((0, "unsampled"), (1, "sampled")):
            reloads = {v: local.envoy_stat(settings, f"{stat}.config_reload") or 0 for v, stat in stats.items()}
            with through.change(f"WasmPlugin sample_rate {sample_rate}", sample_rate):
                local.set_sample_rate(settings, sample_rate)
                # The known point: both listeners' wirelens filters run the new plugin configuration: Envoy's
                # ECDS config has it and the filter's config_reload has counted it (the dump shows a received
                # config a moment before the reload is counted).
                for variable, port in ports.items():
                    wait_for(f"Envoy running the wirelens filter on {variable}={port} with sample_rate "
                             f"{sample_rate} (sample_rate in its ECDS config, "
                             f"{stats[variable]}.config_reload > {reloads[variable]})",
                             lambda: ((local.active_plugin_config(settings, port) or {}).get("sample_rate"),
                                      local.envoy_stat(settings, f"{stats[variable]}.config_reload") or 0),
                             lambda seen: seen[0] == sample_rate and seen[1] > reloads[variable],
                             timeout_s=60, interval_s=0.1)
                    # A rejected update also raises config_reload: Envoy must have rejected none.
                    assert not local.envoy_stat(settings, f"{stats[variable]}.update_rejected"), variable
            print(through.timeline()[-1], file=sys.stderr)
            sent[phase] = numbered_calls(settings, f"{run}-{phase}", n)
    finally:
        through.stop()

    # Envoy logs every call; the filter measured only those made while sampling was on.
    for run_id in (f"{run}-unsampled", f"{run}-sampled"):
        wait_for(f"{n} access-log records of {run_id} in otel.otel_logs",
                 lambda: logged_calls(settings, run_id), lambda seen: seen >= n)
        assert logged_calls(settings, run_id) == n, f"{run_id}: more access-log records than calls"
    # The rows are a materialized view over those records, but an insert shows the records a moment before the
    # view's rows: this test read the rows as soon as the records were in and (rarely; here 4 of 4 runs once
    # the wait before that read was shorter) missed the last batch's rows, whose records carried the filter's
    # record. Wait for the rows; a call whose row never comes is named, with what Envoy logged for it.
    t0 = time.monotonic()
    try:
        found = wait_for(f"a row for each of the {n} calls of {run}-sampled",
                         lambda: rows_by_trace(settings, f"{run}-sampled"),
                         lambda seen: set(sent["sampled"]) <= set(seen), timeout_s=60, interval_s=0.05)
    except WaitTimeout as exc:
        found = exc.last_seen if isinstance(exc.last_seen, dict) else {}
    rows_lag = f"{run}-sampled: the rows complete {time.monotonic() - t0:.2f}s after the access-log records"
    print(rows_lag, file=sys.stderr)
    missing = [number for number, trace in enumerate(sent["sampled"]) if trace not in found]
    assert not missing, f"{run}-sampled: calls without a row after 60 s: numbers {missing} of {n}; Envoy logged: " + \
        logged_records(settings, [sent["sampled"][number] for number in missing[:3]])
    # A call made at sample_rate 0: its access-log record carries no filter record (so it can have no row).
    unsampled_recorded = int(rows(settings, f"SELECT count() FROM otel.otel_logs WHERE LogAttributes['wirelens.run_id'] "
                                            f"= '{run}-unsampled' AND mapContains(LogAttributes, 'wirelens.protocol')")[0][0])
    assert unsampled_recorded == 0 and rows_by_trace(settings, f"{run}-unsampled") == {}, \
        f"{unsampled_recorded} calls made at sample_rate 0 were recorded"
    assert found == {trace: 1 for trace in sent["sampled"]}, found
    # The calls through the changes, exactly (numbered_calls.NumberedCalls.check).
    counts = through.check(settings, f"{run}-through")
    summary = through.summary(counts)
    print(summary, file=sys.stderr)

    assert local.pids(settings) == started, "a process was restarted"
    assert all(Path(f"/proc/{pid}").exists() for pid in started.values()), started
    (artifacts(settings) / "live-change.txt").write_text("\n".join([
        *through.timeline(), summary, rows_lag,
        f"sample_rate 0: {n} calls, {n} access-log records, 0 rows",
        f"sample_rate 1: {n} calls, {n} rows, one per call",
        f"processes unchanged: {started}", ""]))
