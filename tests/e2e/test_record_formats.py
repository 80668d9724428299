"""A mixed fleet: Envoys with an older filter (record format 1) and with the current one (format 2) behind one
Collector, during a rolling upgrade. Both land as identical rows and identical span tags.

Format 1 is a JSON object under the short names, every field (rpc.service, rpc.method, wirelens.streaming and
http.route included); format 2 is the values by position with the operation map's key instead of those four
(filters/record.yaml, `published`), which the Collector restores from its copy of the map (collector/opmap.py).
Both records are written here from the same values, by the record's table, for cases that use every kind of
field: a REST call and its route, a gRPC call with frames and a status message holding `,` and `%`, an unknown
path, a counterfactual estimate, sampled rates. Then:

- logs, as shipped: the lines go into the stack's access-log file in Envoy's format, logship ships them, and
  each case's two rows in wirelens.requests are equal in every column but the request id (and the labels are
  the map's, so both are right, not only alike); their otel_logs attributes too;
- spans: an Envoy of its own tags a span per call with a literal record (a route per format), traced to the
  stack's Collector; Jaeger's tags of each pair are equal, typed (integers as int64, rates as float64);
- a format-2 record whose key the Collector's map does not know (a map changed elsewhere) still lands, with
  its operation and every value, without the four labels, and keeps `wirelens.opmap.key` (never another
  version's labels).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid

from collector import opmap
from filters import recordgen
from tests.e2e.conftest import ROOT, jaeger_trace, rows, stack
from wirelens_helpers import supervise
from wirelens_helpers.wait import wait_for

from envoy import wiring

DEADLINE_S = 120.0
RECORD = recordgen.load()


def labels(operation: str, route: str = "") -> dict[str, str]:
    """The labels the stack's map gives an operation (and one of its routes), as the filter would publish them."""
    config = json.loads((ROOT / "build" / "opmap.json").read_text())
    for name, _key, values in opmap.label_sets(config):
        if name == operation and values.get("http.route", "") == route:
            return values
    raise AssertionError(f"{operation} {route!r} is not in build/opmap.json")


# Each case: the record's values by attribute name, as the Collector is to store them.
CASES = {
    "rest": {
        "wirelens.protocol": "rest", "wirelens.operation": "hello.SayHello",
        **labels("hello.SayHello", "/v1/hello"),
        "wirelens.request.header.size": 204, "wirelens.response.header.size": 90,
        "wirelens.response.trailer.size": 0, "http.request.body.size": 19, "http.response.body.size": 31,
        "wirelens.time_to_first_byte_us": 1234, "wirelens.duration_us": 1300, "wirelens.request.duration_us": 50,
        "wirelens.malformed": 0, "wirelens.sample_rate": 0.25,
    },
    "grpc": {
        "wirelens.protocol": "grpc", "wirelens.operation": "hello.SayHello", **labels("hello.SayHello"),
        "rpc.grpc.status_code": 5, "wirelens.grpc.message": "not found, 100% sure",
        "wirelens.request.header.size": 216, "wirelens.response.header.size": 92,
        "wirelens.response.trailer.size": 40, "http.request.body.size": 15, "http.response.body.size": 0,
        "wirelens.request.messages": 1, "wirelens.response.messages": 0,
        "wirelens.request.message.bytes": 10, "wirelens.request.message.min": 10,
        "wirelens.request.message.max": 10, "wirelens.response.message.bytes": 0,
        "wirelens.request.framing.bytes": 5, "wirelens.response.framing.bytes": 0,
        "wirelens.request.compressed_messages": 0, "wirelens.response.compressed_messages": 0,
        "wirelens.time_to_first_byte_us": 800, "wirelens.duration_us": 900, "wirelens.malformed": 1,
    },
    "unknown": {
        "wirelens.protocol": "rest", "wirelens.operation": "unknown", "url.path": "/a,b%2Cc",
        "wirelens.request.header.size": 100, "wirelens.response.header.size": 50,
        "wirelens.response.trailer.size": 0, "http.request.body.size": 0, "http.response.body.size": 9,
        "wirelens.time_to_first_byte_us": 10, "wirelens.duration_us": 11, "wirelens.request.duration_us": 0,
        "wirelens.malformed": 0,
    },
    "grpc-web-counterfactual": {
        "wirelens.protocol": "grpc-web", "wirelens.operation": "catalog.GetProduct",
        **labels("catalog.GetProduct"), "rpc.grpc.status_code": 0,
        "wirelens.request.header.size": 180, "wirelens.response.header.size": 70,
        "wirelens.response.trailer.size": 0, "http.request.body.size": 12, "http.response.body.size": 60,
        "wirelens.request.messages": 1, "wirelens.response.messages": 1,
        "wirelens.request.message.bytes": 7, "wirelens.request.message.min": 7,
        "wirelens.request.message.max": 7, "wirelens.response.message.bytes": 30,
        "wirelens.response.message.min": 30, "wirelens.response.message.max": 30,
        "wirelens.request.framing.bytes": 5, "wirelens.response.framing.bytes": 30,
        "wirelens.request.compressed_messages": 0, "wirelens.response.compressed_messages": 0,
        "wirelens.time_to_first_byte_us": 2000, "wirelens.duration_us": 2500, "wirelens.request.duration_us": 100,
        "wirelens.malformed": 0, "wirelens.counterfactual.reason": "ok",
        "wirelens.counterfactual.request.json.size": 12, "wirelens.counterfactual.response.json.size": 44,
        "wirelens.counterfactual.rate": 0.5,
    },
    "rest-transcoded": {
        "wirelens.protocol": "rest-transcoded", "wirelens.operation": "catalog.GetProduct",
        **labels("catalog.GetProduct", "/v1/products/{id}"),
        "wirelens.request.header.size": 120, "wirelens.response.header.size": 80,
        "wirelens.response.trailer.size": 0, "http.request.body.size": 0, "http.response.body.size": 44,
        "wirelens.time_to_first_byte_us": 3000, "wirelens.duration_us": 3100, "wirelens.request.duration_us": 0,
        "wirelens.malformed": 0,
    },
}


def _text(value) -> str:
    return json.dumps(value) if isinstance(value, float) else str(value)


def format1(values: dict) -> str:
    """The record as filters before format 2 published it: JSON, short names, every field, in record order."""
    return json.dumps({f.wire: values[f.attribute] for f in RECORD.fields if f.attribute in values},
                      separators=(",", ":"), ensure_ascii=False)


def format2(values: dict, key: str | None = None) -> str:
    """The record as the filter publishes it now: values by position, the labels' key instead of the labels."""
    by_wire = {f.wire: values.get(f.attribute) for f in RECORD.fields}
    op = values["wirelens.operation"]
    if key is None and op != "unknown":
        key = opmap.labels_key(op, *(values.get(a, "") for a in opmap.LABELS))
    by_wire[RECORD.key.wire] = key
    out = []
    for _, wire, kind in RECORD.published():
        value = by_wire.get(wire)
        text = "" if value is None else _text(value)
        out.append(text.replace("%", "%25").replace(",", "%2C") if kind == "string" else text)
    while out and out[-1] == "":
        out.pop()
    return ",".join(out)


def access_log_line(run_id: str, request_id: str, record: str, when: float) -> str:
    """One line as Envoy's file access logger writes it (envoy/wiring.py's access_log_line_format)."""
    attributes = {name: "-" for name in wiring.access_log_attributes()}
    attributes.update({"wirelens.record": record, "wirelens.run_id": run_id, "wirelens.request_id": request_id,
                       "http.request.method": "POST", "http.response.status_code": "200",
                       "network.protocol.version": "HTTP/1.1", "wirelens.stack": "go"})
    return json.dumps({"time": f"{when:.9f}", "trace_id": "", "span_id": "", "body": "POST HTTP/1.1 200",
                       "attributes": attributes}) + "\n"


def test_both_formats_land_as_identical_rows(local_stack):
    settings = local_stack
    run_id = f"formats-{uuid.uuid4().hex[:8]}"
    when = time.time()
    lines = []
    for case, values in CASES.items():
        lines.append(access_log_line(run_id, f"{case}/1", format1(values), when))
        lines.append(access_log_line(run_id, f"{case}/2", format2(values), when))
    unresolved = format2(CASES["rest"], key="zzzz")
    lines.append(access_log_line(run_id, "unresolved/2", unresolved, when))
    # One append, as Envoy's writes are: logship ships it with the stack's own lines.
    fd = os.open(settings["WIRELENS_ACCESS_LOG"], os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, "".join(lines).encode())
    finally:
        os.close(fd)

    expected = len(lines)
    wait_for(f"{expected} rows of run {run_id}", lambda: int(rows(
        settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'")[0][0]) == expected,
        timeout_s=DEADLINE_S, interval_s=0.5,
        state=lambda: rows(settings, f"SELECT request_id FROM wirelens.requests FINAL WHERE run_id = '{run_id}'"))
    # The columns of SELECT *: MATERIALIZED ones (request_key, inserted_at) are not in it.
    columns = [c for (c,) in rows(settings, "SELECT name FROM system.columns WHERE database = 'wirelens' "
                                            "AND table = 'requests' AND default_kind NOT IN "
                                            "('MATERIALIZED', 'ALIAS', 'EPHEMERAL') ORDER BY position")]
    found = rows(settings, f"SELECT request_id, * FROM wirelens.requests FINAL WHERE run_id = '{run_id}'")
    assert {len(r) - 1 for r in found} == {len(columns)}, (columns, found[0])
    table = {r[0]: dict(zip(columns, r[1:])) for r in found}
    for case, values in CASES.items():
        old, new = dict(table[f"{case}/1"]), dict(table[f"{case}/2"])
        assert old.pop("request_id") == f"{case}/1" and new.pop("request_id") == f"{case}/2"
        assert new == old, f"{case}: format 2 {format2(values)!r} against format 1 {format1(values)!r}"
        # and right, not only alike
        assert old["operation"] == values["wirelens.operation"]
        for attribute, column in (("rpc.service", "rpc_service"), ("rpc.method", "rpc_method"),
                                  ("wirelens.streaming", "streaming"), ("http.route", "http_route"),
                                  ("wirelens.grpc.message", "grpc_message"), ("url.path", "url_path")):
            assert old[column] == values.get(attribute, ""), (case, column)
    # The raw copy: the same attributes (but the request id), and no record or key left on them.
    raw = {r[0]: json.loads(r[1]) for r in rows(
        settings, "SELECT LogAttributes['wirelens.request_id'], toJSONString(LogAttributes) FROM otel.otel_logs "
                  f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")}
    for case in CASES:
        old, new = raw[f"{case}/1"], raw[f"{case}/2"]
        old.pop("wirelens.request_id"), new.pop("wirelens.request_id")
        assert new == old, case
        assert "wirelens.record" not in new and opmap.KEY_ATTRIBUTE not in new and opmap.RESOLVED not in new

    # A key the Collector's map does not know: the row is there, every value but the four labels, the key kept.
    row, rest = dict(table["unresolved/2"]), dict(table["rest/1"])
    for column in ("rpc_service", "rpc_method", "streaming", "http_route"):
        assert row.pop(column) == "" and rest.pop(column) != ""
    row.pop("request_id"), rest.pop("request_id")
    assert row == rest
    assert raw["unresolved/2"][opmap.KEY_ATTRIBUTE] == "zzzz"


SPAN_ENVOY = """\
admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}}}
static_resources:
  listeners:
  - name: records
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: records
          tracing: {tracing}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
          route_config:
            virtual_hosts:
            - name: records
              domains: ["*"]
              routes: {routes}
  clusters:
  - {cluster}
"""


def test_both_formats_give_identical_span_tags(local_stack, tmp_path):
    settings = local_stack
    run_id = f"formats-spans-{uuid.uuid4().hex[:8]}"
    routes = []
    for case, values in CASES.items():
        for n, record in ((1, format1(values)), (2, format2(values))):
            routes.append({
                "match": {"path": f"/{case}/{n}"},
                "direct_response": {"status": 200, "body": {"inline_string": "ok"}},
                "decorator": {"operation": f"{case}/{n}"},
                "tracing": {"custom_tags": [{"tag": "wirelens.record", "literal": {"value": record}},
                                            {"tag": "wirelens.run_id", "literal": {"value": run_id}},
                                            {"tag": "formats.call", "literal": {"value": f"{case}/{n}"}}]},
            })
    tracing = {"random_sampling": {"value": 100}, "provider": wiring.otel_tracer()}
    cluster = wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1",
                                  int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]))
    port, admin = stack.free_ports(2)
    config = tmp_path / "envoy.yaml"
    config.write_text(SPAN_ENVOY.format(admin=admin, port=port, tracing=json.dumps(tracing),
                                        routes=json.dumps(routes), cluster=json.dumps(cluster)))
    envoy = supervise.Supervised("Envoy tagging literal records", [
        str(stack.envoy_binary()), "-c", str(config), "--concurrency", "1", "--disable-hot-restart",
        "--log-level", "warn"], tmp_path / "envoy.log", new_session=False)
    envoy.start()
    try:
        envoy.wait_ready(stack.http_ok(f"http://127.0.0.1:{admin}/ready", "LIVE"), timeout_s=DEADLINE_S,
                         error=AssertionError)
        for route in routes:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{route['match']['path']}", timeout=10) as r:
                assert r.status == 200
        # Envoy exports spans on its flush timer; the Collector batches them.
        wait_for(f"{len(routes)} spans of run {run_id}", lambda: int(rows(
            settings, "SELECT count() FROM otel.otel_traces "
                      f"WHERE SpanAttributes['wirelens.run_id'] = '{run_id}'")[0][0]) >= len(routes),
            timeout_s=DEADLINE_S, interval_s=0.5)
    finally:
        envoy.stop(grace_s=DEADLINE_S)
    trace_ids = dict(rows(settings, "SELECT SpanAttributes['formats.call'], TraceId FROM otel.otel_traces "
                                    f"WHERE SpanAttributes['wirelens.run_id'] = '{run_id}'"))
    jaeger = f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}"
    record_tags = {f.attribute for f in RECORD.fields}

    def tags(call: str) -> dict[str, tuple[str, object]]:
        trace = wait_for(f"trace of {call} in Jaeger", lambda: jaeger_trace(jaeger, trace_ids[call]),
                         timeout_s=DEADLINE_S, interval_s=0.5)
        span = trace["spans"][0]
        got = {t["key"]: (t["type"], t["value"]) for t in span["tags"]}
        assert "wirelens.record" not in got and opmap.KEY_ATTRIBUTE not in got, got
        return {k: v for k, v in got.items() if k in record_tags} | {"span name": ("", span["operationName"])}

    for case, values in CASES.items():
        old, new = tags(f"{case}/1"), tags(f"{case}/2")
        assert new == old, case
        for attribute, value in values.items():
            kind = "float64" if isinstance(value, float) else "int64" if isinstance(value, int) else "string"
            assert old[attribute] == (kind, value), (case, attribute)
        assert old["span name"] == ("", values["wirelens.operation"])
