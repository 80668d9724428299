"""End to end: no header value, body byte or query string is stored; grpc-message only as cut.

Calls over every protocol carry secret-looking values: authorization, cookie,
x-api-key, x-client-trace-id and x-request-id headers, a user-agent, a query
string, a JSON body and a gRPC message payload. Then every table of every
non-system database in ClickHouse (each row formatted whole, maps and arrays
included) and the calls' traces in Jaeger are searched for them.

wirelens' own data is what is scanned: Envoy's spans (service wirelens-envoy) in otel.otel_traces
and Jaeger, and every other table whole. The services' own spans (issue 34: the application's
tracing, OpenTelemetry's instrumentation with its defaults) are the application's: they do record
the user agent (user_agent.original), and the scan must find it there, which shows it reads those
spans and leaves them out on purpose.

A grpc-message can echo client input: catalog GetProduct's "product <id> not
found". With WIRELENS_GRPC_MESSAGE_BYTES at its default (128) the id is within
the cut and *is* stored: the scan must find it, which shows the scan can
catch a secret. Cut to 8 bytes ("product ") and with 0 (never stored) it must
be found nowhere.
"""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import urllib.error
import urllib.request
import uuid

import grpc
import pytest

from tests.e2e.conftest import rows, stack
from tests.e2e.spans import ENVOY, only
from wirelens_helpers.wait import wait_for

SYSTEM_DATABASES = ("system", "INFORMATION_SCHEMA", "information_schema")


def secret(kind: str) -> str:
    # Letters and digits only: no escaping in TSV, JSON or URLs can hide it from the search.
    return f"wlsecret{kind}{secrets.token_hex(10)}"


def proto_string_field(number: int, value: str) -> bytes:
    data = value.encode()
    assert len(data) < 128  # a one-byte length varint
    return bytes([(number << 3) | 2, len(data)]) + data


def proto_int32_field(number: int, value: int) -> bytes:
    """A varint field; a negative int32 is sign-extended to 64 bits, as protobuf encodes it."""
    raw, out = value & (2 ** 64 - 1), bytearray([number << 3])
    while True:
        byte, raw = raw & 0x7F, raw >> 7
        out.append(byte | (0x80 if raw else 0))
        if not raw:
            return bytes(out)


def grpc_frame(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


class Calls:
    """The calls of one test run: each with its own trace, all with the run id and the secret headers."""

    def __init__(self, settings: dict[str, str], run_id: str, header_secrets: dict[str, str]):
        self.settings, self.run_id, self.trace_ids = settings, run_id, []
        self.headers = {
            "authorization": f"Bearer {header_secrets['bearer']}",
            "cookie": f"session={header_secrets['cookie']}",
            "x-api-key": header_secrets["apikey"],
            "x-client-trace-id": header_secrets["clienttrace"],
            "x-request-id": header_secrets["requestid"],
        }
        self.user_agent = f"probe/1.0 ({header_secrets['useragent']})"

    def _traced(self) -> str:
        trace_id, tp = traceparent()
        self.trace_ids.append(trace_id)
        return tp

    def http(self, port_name: str, method: str, path: str, body: bytes | None, content_type: str,
             extra: dict[str, str] | None = None) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", int(self.settings[port_name]), timeout=10)
        conn.request(method, path, body=body, headers={
            **self.headers, "user-agent": self.user_agent, "content-type": content_type,
            "x-wirelens-run": self.run_id, "traceparent": self._traced(), **(extra or {})})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status

    def grpc(self, method: str, request: bytes) -> grpc.StatusCode:
        options = [("grpc.primary_user_agent", self.user_agent)]
        with grpc.insecure_channel(f"127.0.0.1:{self.settings['WIRELENS_ENVOY_PORT']}", options=options) as channel:
            call = channel.unary_unary(method)
            metadata = [*self.headers.items(), ("x-wirelens-run", self.run_id), ("traceparent", self._traced())]
            try:
                call(request, timeout=10, metadata=metadata)
            except grpc.RpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK


def stored_tables(settings) -> list[str]:
    """Every table that holds rows, in every database but ClickHouse's own (views hold none of their own)."""
    return [f"{db}.{name}" for db, name in rows(
        settings,
        "SELECT database, name FROM system.tables "
        f"WHERE database NOT IN {SYSTEM_DATABASES} AND engine NOT IN ('View', 'MaterializedView') "
        "ORDER BY database, name")]


# Tables that hold the services' spans too: wirelens' rows are the ones of this service.
SPAN_TABLES = {"otel.otel_traces": f"ServiceName = '{ENVOY}'"}


def clickhouse_findings(settings, wanted: dict[str, str], services: bool = False) -> dict[str, dict[str, str]]:
    """kind -> {table: the text around the secret in one of its rows}, searching every row formatted whole
    (in otel.otel_traces Envoy's spans, or with services=True only the services' spans)."""
    kinds = list(wanted)
    values = "[" + ", ".join(f"'{wanted[k]}'" for k in kinds) + "]"  # letters and digits only (secret())
    found: dict[str, dict[str, str]] = {}
    for table in stored_tables(settings):
        where = f"WHERE {'NOT ' if services else ''}({SPAN_TABLES[table]})" if table in SPAN_TABLES else \
            "WHERE 0" if services else ""
        hits = rows(settings, f"""
            -- Which of the secrets appear anywhere in a row of this table, and in what context?
            SELECT hit, any(substring(row, greatest(1, toInt64(position(row, {values}[hit])) - 120), 240))
            FROM (SELECT formatRow('TSVRaw', *) AS row FROM `{table.replace('.', '`.`', 1)}` {where})
            ARRAY JOIN arrayFilter(i -> position(row, {values}[i]) > 0, range(1, {len(kinds) + 1})) AS hit
            GROUP BY hit""")
        for index, context in hits:
            found.setdefault(kinds[int(index) - 1], {})[table] = context
    return found


def jaeger_trace_json(settings, trace_id: str) -> dict[str, str] | None:
    """The trace from Jaeger's API once Envoy's span is in: {"envoy": its spans' JSON, "services": the rest}."""
    url = f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}/api/traces/{trace_id}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            data = json.loads(response.read().decode()).get("data") or []
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    envoy = only(data[0]) if data else None
    if envoy is None:
        return None
    others = [span for span in data[0]["spans"] if span not in envoy["spans"]]
    return {"envoy": json.dumps(envoy), "services": json.dumps({**data[0], "spans": others})}


def wait_for_spans(settings, trace_ids: list[str]) -> None:
    """Until every trace is in otel.otel_traces: spans are best effort, and Envoy drops the ones it still
    buffers when it stops, so each phase's spans must be in before Envoy restarts."""
    trace_list = "(" + ", ".join(f"'{t}'" for t in trace_ids) + ")"
    wait_for(f"the spans of {len(trace_ids)} traces in otel.otel_traces",
             lambda: sorted(set(trace_ids) - {t for (t,) in rows(
                 settings, f"SELECT DISTINCT TraceId FROM otel.otel_traces WHERE TraceId IN {trace_list} "
                           f"AND ServiceName = '{ENVOY}'")}),
             lambda missing: not missing, timeout_s=90.0, interval_s=0.5)


def restart_envoy(settings: dict[str, str]) -> None:
    stack.stop("envoy", settings)
    stack.start(stack.BY_NAME["envoy"], settings)


@pytest.fixture(scope="module")
def secrets_run(local_stack):
    """Calls with secrets over every protocol, then the grpc-message variants (Envoy restarted with 8, then 0
    bytes); Envoy is back at the stack's own setting afterwards."""
    settings = local_stack
    header_secrets = {kind: secret(kind) for kind in ("bearer", "cookie", "apikey", "clienttrace", "requestid",
                                                      "useragent")}
    body_secrets = {kind: secret(kind) for kind in ("query", "restbody", "transcodedbody", "grpcbody",
                                                    "grpcwebbody", "grpcwebtextbody")}
    # int32 ids the catalog does not hold, echoed in its grpc-message; negative, so no timestamp or count
    # stored elsewhere can contain one by chance
    grpc_message_ids = {cut: -secrets.randbelow(2 ** 31 - 10 ** 9) - 10 ** 9 for cut in (128, 8, 0)}
    run_id = f"e2e-secrets-{uuid.uuid4().hex[:8]}"
    calls = Calls(settings, run_id, header_secrets)
    query = f"?token={body_secrets['query']}&page=1"

    def json_body(value: str) -> bytes:
        return json.dumps({"name": value}).encode()

    statuses = {
        "rest": calls.http("WIRELENS_ENVOY_PORT", "POST", "/v1/hello" + query, json_body(body_secrets["restbody"]),
                           "application/json"),
        # no query here: the transcoder refuses parameters its message lacks
        "rest-transcoded": calls.http("WIRELENS_ENVOY_TRANSCODE_PORT", "POST", "/v1/hello",
                                      json_body(body_secrets["transcodedbody"]), "application/json"),
        "rest-unknown-path": calls.http("WIRELENS_ENVOY_PORT", "GET", "/v1/no-such-route" + query, None,
                                        "application/json"),
        "grpc-web": calls.http("WIRELENS_ENVOY_PORT", "POST", "/wirelens.v1.Hello/SayHello",
                               grpc_frame(proto_string_field(1, body_secrets["grpcwebbody"])),
                               "application/grpc-web+proto", {"x-grpc-web": "1"}),
        "grpc-web-text": calls.http("WIRELENS_ENVOY_PORT", "POST", "/wirelens.v1.Hello/SayHello",
                                    base64.b64encode(grpc_frame(proto_string_field(1, body_secrets["grpcwebtextbody"]))),
                                    "application/grpc-web-text", {"x-grpc-web": "1",
                                                                  "accept": "application/grpc-web-text"}),
        "grpc": calls.grpc("/wirelens.v1.Hello/SayHello", proto_string_field(1, body_secrets["grpcbody"])),
    }
    assert statuses["rest"] == statuses["rest-transcoded"] == statuses["grpc-web"] == 200, statuses
    assert statuses["grpc"] == grpc.StatusCode.OK, statuses

    def get_product(cut: int) -> None:
        code = calls.grpc("/wirelens.v1.Catalog/GetProduct", proto_int32_field(1, grpc_message_ids[cut]))
        assert code == grpc.StatusCode.NOT_FOUND, f"GetProduct({grpc_message_ids[cut]}) answered {code}"

    get_product(128)
    try:
        for cut in (8, 0):
            wait_for_spans(settings, calls.trace_ids)
            restart_envoy({**settings, "WIRELENS_GRPC_MESSAGE_BYTES": str(cut)})
            get_product(cut)
        # A gRPC path with a query string: the server's grpc-message echoes it ("unknown method
        # SayHello?token=..."), as Envoy's grpc.path span tag would. With the setting 0 neither is stored.
        statuses["grpc-web-query"] = calls.http(
            "WIRELENS_ENVOY_PORT", "POST", "/wirelens.v1.Hello/SayHello" + query,
            grpc_frame(proto_string_field(1, body_secrets["grpcwebbody"])), "application/grpc-web+proto",
            {"x-grpc-web": "1"})
        wait_for_spans(settings, calls.trace_ids)
    finally:
        restart_envoy(settings)

    expected_rows = len(statuses) + len(grpc_message_ids)
    wait_for(f"{expected_rows} rows of run {run_id} in wirelens.requests",
             lambda: rows(settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'"),
             lambda value: value == [[str(expected_rows)]], timeout_s=90.0, interval_s=0.5)
    jaeger = {}
    for trace_id in calls.trace_ids:
        jaeger[trace_id] = wait_for(f"trace {trace_id} in Jaeger", lambda: jaeger_trace_json(settings, trace_id),
                                    lambda text: text is not None, timeout_s=90.0, interval_s=0.5)
    grpc_message_secrets = {f"grpcmessage{cut}": str(value) for cut, value in grpc_message_ids.items()}
    return {"run_id": run_id, "secrets": {**header_secrets, **body_secrets, **grpc_message_secrets},
            "jaeger": jaeger, "grpc_message_ids": grpc_message_ids}


def catalog_size(stored: list[tuple[str, str]]) -> str:
    """The catalog's size as its own message states it (the longest message: the uncut one)."""
    return max(stored)[0].rsplit("..", 1)[-1].rstrip(")") if stored else "?"


def test_no_secret_is_stored_anywhere(local_stack, secrets_run):
    settings, wanted = local_stack, secrets_run["secrets"]
    in_clickhouse = clickhouse_findings(settings, wanted)
    def jaeger_findings(part: str) -> dict[str, dict[str, str]]:
        found = {kind: {trace: text[part][max(0, text[part].index(value) - 120):text[part].index(value) + 120]
                        for trace, text in secrets_run["jaeger"].items() if value in text[part]}
                 for kind, value in wanted.items()}
        return {kind: traces for kind, traces in found.items() if traces}
    in_jaeger = jaeger_findings("envoy")

    # The services' own spans (the application's tracing) record the user agent: the scans read them.
    assert "useragent" in jaeger_findings("services"), \
        "the user agent was not found in the services' spans in Jaeger: does the scan see them?"
    assert "otel.otel_traces" in clickhouse_findings(settings, wanted, services=True).get("useragent", {}), \
        "the user agent was not found in the services' spans in otel.otel_traces: does the scan see them?"

    # The grpc-message within the default cut is stored: the scans see a secret where there is one.
    assert "wirelens.requests" in in_clickhouse.get("grpcmessage128", []), \
        f"the grpc-message echoing id {wanted['grpcmessage128']} (within the 128-byte cut) was not found in " \
        f"wirelens.requests: the scan cannot be trusted; found: {in_clickhouse}"
    assert "grpcmessage128" in in_jaeger, \
        f"the grpc-message within the cut was not found in Jaeger: the scan cannot be trusted; found: {in_jaeger}"

    leaked = {kind: tables for kind, tables in in_clickhouse.items() if kind != "grpcmessage128"}
    assert not leaked, "secrets stored in ClickHouse (kind: table: context): " + json.dumps(leaked, indent=1)
    leaked = {kind: traces for kind, traces in in_jaeger.items() if kind != "grpcmessage128"}
    assert not leaked, "secrets in Jaeger's traces (kind: trace id: context): " + json.dumps(leaked, indent=1)


def test_grpc_message_is_cut_and_can_be_turned_off(local_stack, secrets_run):
    ids = secrets_run["grpc_message_ids"]
    stored = sorted(tuple(row) for row in rows(local_stack, f"""
        -- What each not-found call's grpc-message became (the filter's cut: 128, 8, 0 bytes)
        SELECT grpc_message, grpc_status FROM wirelens.requests FINAL
        WHERE run_id = '{secrets_run['run_id']}' AND operation = 'catalog.GetProduct'"""))
    not_found = str(grpc.StatusCode.NOT_FOUND.value[0])
    assert stored == sorted([("", not_found), ("product ", not_found),
                             (f"product {ids[128]} not found (ids are 1..{catalog_size(stored)})", not_found)]), stored
