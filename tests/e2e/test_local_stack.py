"""End to end: the whole local stack on free ports, known traffic, exact results.

Real Envoy with the wirelens filter, real ClickHouse (chdb-core engine), the
real Collector and Jaeger. Every wait polls with a deadline and says what was
missing. The stack is torn down even when a test fails.
"""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import subprocess
import uuid

import grpc
import pytest

from envoy import wiring
from tests.e2e.conftest import ROOT, jaeger_trace, rows, stack_for_module
from tests.e2e.spans import only
from wirelens_helpers.protowire import varint
from wirelens_helpers.wait import wait_for

N_CALLS = 40
PROTOCOLS = ("rest", "grpc", "grpc-web")
NAME = "wirelens"


def counts_by_protocol(settings, run_id: str) -> dict[str, int]:
    return {p: int(n) for p, n in rows(
        settings, f"SELECT protocol, count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol")}


def traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


# -- independent encodings of one known message ---------------------------------------


def proto_string_field(number: int, value: str) -> bytes:
    data = value.encode()
    assert len(data) < 128  # one-byte length varint keeps this encoder honest and tiny
    return bytes([(number << 3) | 2, len(data)]) + data


def grpc_frame(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


HELLO_REQUEST = proto_string_field(1, NAME)
HELLO_REPLY = proto_string_field(1, f"Hello, {NAME}")
REST_REQUEST = json.dumps({"name": NAME}, separators=(",", ":")).encode()
REST_REPLY = json.dumps({"message": f"Hello, {NAME}"}, separators=(",", ":")).encode()


# -- tests ----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=wiring.MODULES)
def exact_stack(request):
    """The exactness tests below (rows byte for byte over the six protocols and the streaming shapes)
    run on both builds of the filter: the Wasm build's session stack, then the native build's."""
    return stack_for_module(request, "local_stack")


def test_exactly_n_rows_per_protocol(exact_stack):
    settings = exact_stack
    run_id = f"e2e-count-{uuid.uuid4().hex[:8]}"
    for protocol in PROTOCOLS:
        result = subprocess.run(
            [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}",
             "-protocol", protocol, "-operation", "hello.SayHello", "-n", str(N_CALLS), "-run-id", run_id,
             "-timeout", "60s"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"loadgen {protocol}: {result.stderr}"
        assert json.loads(result.stdout.splitlines()[-1])["ok"] == N_CALLS

    expected = {p: N_CALLS for p in PROTOCOLS}
    wait_for(f"{N_CALLS} rows per protocol for run {run_id}",
             lambda: counts_by_protocol(settings, run_id),
             lambda seen: all(seen.get(p, 0) >= n for p, n in expected.items()))
    # Reached: now it must be exact, no duplicates and nothing extra.
    assert counts_by_protocol(settings, run_id) == expected

    ops = rows(settings, f"SELECT DISTINCT operation, rpc_service, rpc_method FROM wirelens.requests "
                         f"WHERE run_id = '{run_id}'")
    assert ops == [["hello.SayHello", "wirelens.v1.Hello", "SayHello"]]


def call_rest(settings, run_id: str, tp: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=10)
    conn.request("POST", "/v1/hello", body=REST_REQUEST,
                 headers={"content-type": "application/json", "x-wirelens-run": run_id, "traceparent": tp})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, body
    return body


def call_rest_transcoded(settings, run_id: str, tp: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_TRANSCODE_PORT"]), timeout=10)
    conn.request("POST", "/v1/hello", body=REST_REQUEST,
                 headers={"content-type": "application/json", "x-wirelens-run": run_id, "traceparent": tp})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, body
    return body


def call_grpc_web(settings, run_id: str, tp: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=10)
    conn.request("POST", "/wirelens.v1.Hello/SayHello", body=grpc_frame(HELLO_REQUEST),
                 headers={"content-type": "application/grpc-web+proto", "x-grpc-web": "1",
                          "x-wirelens-run": run_id, "traceparent": tp})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, body
    return body


def call_grpc_web_text(settings, run_id: str, tp: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=10)
    conn.request("POST", "/wirelens.v1.Hello/SayHello", body=base64.b64encode(grpc_frame(HELLO_REQUEST)),
                 headers={"content-type": "application/grpc-web-text", "x-grpc-web": "1",
                          "accept": "application/grpc-web-text", "x-wirelens-run": run_id, "traceparent": tp})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, body
    return body


def call_grpc(settings, run_id: str, tp: str) -> bytes:
    with grpc.insecure_channel(f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}") as channel:
        say_hello = channel.unary_unary("/wirelens.v1.Hello/SayHello")  # raw bytes both ways
        reply, call = say_hello.with_call(HELLO_REQUEST, timeout=10,
                                          metadata=[("x-wirelens-run", run_id), ("traceparent", tp)])
        assert call.code() == grpc.StatusCode.OK
    return reply


def test_known_message_bytes_status_and_span(exact_stack):
    settings = exact_stack
    run_id = f"e2e-known-{uuid.uuid4().hex[:8]}"
    trace_ids = {}

    trace_ids["rest"], tp = traceparent()
    assert call_rest(settings, run_id, tp) == REST_REPLY

    trace_ids["rest-transcoded"], tp = traceparent()
    assert json.loads(call_rest_transcoded(settings, run_id, tp)) == json.loads(REST_REPLY)

    trace_ids["grpc"], tp = traceparent()
    assert call_grpc(settings, run_id, tp) == HELLO_REPLY

    trace_ids["grpc-web"], tp = traceparent()
    web_body = call_grpc_web(settings, run_id, tp)
    assert web_body.startswith(grpc_frame(HELLO_REPLY))
    trailer = web_body[len(grpc_frame(HELLO_REPLY)):]
    assert trailer[0] == 0x80 and b"grpc-status:0" in trailer.replace(b" ", b"")

    trace_ids["grpc-web-text"], tp = traceparent()
    text_body = call_grpc_web_text(settings, run_id, tp)
    # Each frame may be base64-padded on its own: decode frame by frame.
    decoded = b"".join(base64.b64decode(chunk + b"=" * (-len(chunk) % 4))
                       for chunk in text_body.replace(b"\r\n", b"").split(b"=") if chunk)
    assert decoded.startswith(grpc_frame(HELLO_REPLY)), decoded

    # What each side sent and received, counted here, independently of the filter:
    # body bytes, messages, message payload bytes and framing bytes, each way.
    request, reply = len(HELLO_REQUEST), len(HELLO_REPLY)
    expected = {
        "rest": ((len(REST_REQUEST), len(REST_REPLY)), (0, 0), (0, 0), (0, 0), None),
        # The transcoder passes the upstream's grpc-status through to the client.
        "rest-transcoded": ((len(REST_REQUEST), len(REST_REPLY)), (0, 0), (0, 0), (0, 0), "0"),
        "grpc": ((request + 5, reply + 5), (1, 1), (request, reply), (5, 5), "0"),
        "grpc-web": ((request + 5, len(web_body)), (1, 1), (request, reply), (5, len(web_body) - reply), "0"),
        # Body bytes are the base64 text; payload and framing count the decoded stream.
        "grpc-web-text": ((len(base64.b64encode(grpc_frame(HELLO_REQUEST))), len(text_body)), (1, 1),
                          (request, reply), (5, len(decoded) - reply), "0"),
    }
    columns = ("protocol, (request_body_bytes, response_body_bytes), (request_messages, response_messages), "
               "(request_message_bytes, response_message_bytes), (request_framing_bytes, response_framing_bytes), "
               "ifNull(toString(grpc_status), 'null'), trace_id, http_status, operation, http_route, url_path")
    found = wait_for(f"{len(expected)} rows of run {run_id}",
                     lambda: rows(settings, f"SELECT {columns} FROM wirelens.requests FINAL "
                                            f"WHERE run_id = '{run_id}' ORDER BY protocol"),
                     lambda r: len(r) >= len(expected))
    assert [r[0] for r in found] == sorted(expected), found
    for protocol, body_b, messages, payload_b, framing_b, grpc_status, trace_id, status, operation, route, url_path \
            in found:
        want_body, want_messages, want_payload, want_framing, want_status = expected[protocol]
        assert json.loads(body_b.replace("(", "[").replace(")", "]")) == list(want_body), protocol
        assert json.loads(messages.replace("(", "[").replace(")", "]")) == list(want_messages), protocol
        assert json.loads(payload_b.replace("(", "[").replace(")", "]")) == list(want_payload), protocol
        assert json.loads(framing_b.replace("(", "[").replace(")", "]")) == list(want_framing), protocol
        assert grpc_status == (want_status or "null"), protocol
        assert trace_id == trace_ids[protocol], protocol
        assert status == "200" and operation == "hello.SayHello", protocol
        assert route == ("/v1/hello" if protocol.startswith("rest") else ""), protocol
        assert url_path == "", f"{protocol}: a known call carries no url.path"

    # The span of the gRPC-Web call, in Jaeger, tagged with its protocol.
    jaeger = f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}"
    for protocol in ("grpc-web", "rest"):
        # Envoy's span: the trace holds the service's own span too (issue 34).
        trace = wait_for(f"Envoy's span of trace {trace_ids[protocol]} ({protocol}) in Jaeger at {jaeger}",
                         lambda: only(jaeger_trace(jaeger, trace_ids[protocol])), lambda t: t is not None)
        tags = {tag["key"]: tag for span in trace["spans"] for tag in span["tags"]}
        assert tags.get("wirelens.protocol", {}).get("value") == protocol, tags
        assert tags.get("wirelens.operation", {}).get("value") == "hello.SayHello", tags
        # Counts and sizes are integers in Jaeger too (the Collector converts them).
        for key in ("wirelens.request.header.size", "http.response.body.size", "wirelens.duration_us"):
            assert tags.get(key, {}).get("type") == "int64", (key, tags.get(key))
        assert tags["http.response.body.size"]["value"] == expected[protocol][0][1], protocol


def test_grpc_request_answered_by_a_non_grpc_page_counts_no_response_frames(exact_stack):
    """A gRPC request routed to the REST service gets a plain HTTP answer with no trailers.
    The filter sizes gRPC response headers without reading them and reads them only in
    the log phase when no trailers came: that late read must still see Envoy's headers."""
    settings, run_id = exact_stack, f"e2e-grpc-page-{uuid.uuid4().hex[:8]}"
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=10)
    conn.request("POST", "/v1/hello", body=grpc_frame(HELLO_REQUEST),
                 headers={"content-type": "application/grpc", "x-wirelens-run": run_id})
    response = conn.getresponse()
    page = response.read()
    content_type = response.getheader("content-type", "")
    assert not content_type.startswith("application/grpc"), (response.status, content_type, page)
    assert response.getheader("grpc-status") is None, "a trailers-only gRPC answer would not test the late read"
    row = stream_row(settings, run_id)
    assert row["request_messages"] == "1" and row["request_message_bytes"] == str(len(HELLO_REQUEST)), row
    assert row["response_body_bytes"] == str(len(page)), row
    # Read as gRPC frames, a non-empty page would be malformed: it was recognised and dropped instead.
    assert page and (row["response_messages"], row["response_framing_bytes"], row["malformed"]) == ("0", "0", "false"), row


# -- streams ----------------------------------------------------------------------------


def person(age: int) -> bytes:
    address = proto_string_field(1, "seoul") + proto_string_field(2, "123456")
    return (proto_string_field(1, "kevin") + b"\x10" + varint(age)
            + proto_string_field(3, "foot ball") + proto_string_field(3, "basket ball")
            + bytes([(4 << 3) | 2, len(address)]) + address)


def stream_row(settings, run_id: str) -> dict[str, str]:
    columns = ["operation", "streaming", "request_messages", "response_messages", "request_message_bytes",
               "response_message_bytes", "request_message_min", "request_message_max", "request_framing_bytes",
               "response_framing_bytes", "request_body_bytes", "response_body_bytes", "grpc_status", "malformed"]
    found = wait_for(f"the stream of run {run_id} in wirelens.requests",
                     lambda: rows(settings, f"SELECT {', '.join(columns)} FROM wirelens.requests FINAL "
                                            f"WHERE run_id = '{run_id}'"),
                     lambda r: len(r) >= 1)
    assert len(found) == 1, found
    return dict(zip(columns, found[0]))


def test_client_stream_of_100000_messages_is_counted_exactly(exact_stack):
    settings, run_id = exact_stack, f"e2e-client-stream-{uuid.uuid4().hex[:8]}"
    messages = [person(1 + i % 50) for i in range(100_000)]
    with grpc.insecure_channel(f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}") as channel:
        register_batch = channel.stream_unary("/wirelens.v1.People/RegisterBatch")
        reply = register_batch(iter(messages), timeout=120, metadata=[("x-wirelens-run", run_id)])
    assert reply == b"\x08" + varint(len(messages))  # RegisterBatchReply{count}

    row = stream_row(settings, run_id)
    payload = sum(map(len, messages))
    assert row == {
        "operation": "people.RegisterBatch", "streaming": "client",
        "request_messages": str(len(messages)), "response_messages": "1",
        "request_message_bytes": str(payload), "response_message_bytes": str(len(reply)),
        "request_message_min": str(min(map(len, messages))), "request_message_max": str(max(map(len, messages))),
        "request_framing_bytes": str(5 * len(messages)), "response_framing_bytes": "5",
        "request_body_bytes": str(payload + 5 * len(messages)), "response_body_bytes": str(len(reply) + 5),
        "grpc_status": "0", "malformed": "false",
    }


def test_bidi_stream_of_10000_messages_is_counted_exactly(exact_stack):
    settings, run_id = exact_stack, f"e2e-bidi-{uuid.uuid4().hex[:8]}"
    requests = [proto_string_field(1, f"TestContent{i}") for i in range(10_000)]
    with grpc.insecure_channel(f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}") as channel:
        bi_stream = channel.stream_stream("/wirelens.v1.Echo/BiStream")
        replies = list(bi_stream(iter(requests), timeout=120, metadata=[("x-wirelens-run", run_id)]))
    assert replies == requests  # EchoReply{content} has the same encoding as EchoRequest{content}

    row = stream_row(settings, run_id)
    payload = sum(map(len, requests))
    assert row == {
        "operation": "echo.BiStream", "streaming": "bidi",
        "request_messages": "10000", "response_messages": "10000",
        "request_message_bytes": str(payload), "response_message_bytes": str(payload),
        "request_message_min": str(min(map(len, requests))), "request_message_max": str(max(map(len, requests))),
        "request_framing_bytes": "50000", "response_framing_bytes": "50000",
        "request_body_bytes": str(payload + 50000), "response_body_bytes": str(payload + 50000),
        "grpc_status": "0", "malformed": "false",
    }


# -- every operation over every protocol that can carry it -----------------------------


def protocols_for(streaming: str) -> list[tuple[str, str, str]]:
    """(recorded protocol, loadgen -protocol, Envoy listener port setting) that can carry a shape."""
    if streaming == "unary":
        return [("rest", "rest", "WIRELENS_ENVOY_PORT"), ("rest-proto", "rest-proto", "WIRELENS_ENVOY_PORT"),
                ("rest-transcoded", "rest", "WIRELENS_ENVOY_TRANSCODE_PORT"), ("grpc", "grpc", "WIRELENS_ENVOY_PORT"),
                ("grpc-web", "grpc-web", "WIRELENS_ENVOY_PORT"),
                ("grpc-web-text", "grpc-web-text", "WIRELENS_ENVOY_PORT")]
    if streaming == "server":  # gRPC-Web streams from the server, not from the client
        return [("grpc", "grpc", "WIRELENS_ENVOY_PORT"), ("grpc-web", "grpc-web", "WIRELENS_ENVOY_PORT"),
                ("grpc-web-text", "grpc-web-text", "WIRELENS_ENVOY_PORT")]
    return [("grpc", "grpc", "WIRELENS_ENVOY_PORT")]


def test_every_operation_answers_over_every_protocol(exact_stack):
    settings, run_id = exact_stack, f"e2e-matrix-{uuid.uuid4().hex[:8]}"
    operations = json.loads((ROOT / "build" / "opmap.json").read_text())["operations"]
    calls = 3
    expected: dict[tuple[str, str], int] = {}
    for op in operations:
        for recorded_as, protocol, port in protocols_for(op["streaming"]):
            result = subprocess.run(
                [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings[port]}", "-protocol", protocol,
                 "-operation", op["operation"], "-n", str(calls), "-count", "5", "-messages", "5",
                 "-number", "100", "-run-id", run_id, "-timeout", "60s"],
                capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, f"{op['operation']} over {recorded_as}: {result.stderr}"
            expected[(op["operation"], recorded_as)] = calls

    def seen():
        return {(op, p): int(n) for op, p, n in rows(
            settings, "SELECT operation, protocol, count() FROM wirelens.requests FINAL "
                      f"WHERE run_id = '{run_id}' GROUP BY operation, protocol")}

    wait_for(f"{len(expected)} (operation, protocol) pairs with {calls} rows each",
             seen, lambda s: all(s.get(k, 0) >= n for k, n in expected.items()))
    assert seen() == expected
    assert len(expected) == 7 * 6 + 3 + 1 + 1, sorted(expected)  # 7 unary, 1 server, 1 client, 1 bidi operation
    failures = rows(settings, "SELECT operation, protocol, http_status, grpc_status FROM wirelens.requests FINAL "
                              f"WHERE run_id = '{run_id}' AND (http_status != 200 OR ifNull(grpc_status, 0) != 0 "
                              "OR malformed)")
    assert failures == []


# -- transcoded REST = native REST ------------------------------------------------------

SAME_INPUT = [
    ("POST", "/v1/hello", {"name": "wirelens"}),
    ("POST", "/v1/hello-big", {"name": "wirelens"}),
    ("POST", "/v1/factorial", {"number": 100}),
    ("POST", "/v1/person", {"name": "kevin", "age": 7, "hobbies": ["foot ball", "basket ball"],
                            "address": {"city": "seoul", "zipCode": "123456"}}),
    ("GET", "/v1/products/7", None),
    ("GET", "/v1/products?count=3", None),
    ("GET", "/v1/echo?content=TestContent1", None),
]


def rest_json(port: str, method: str, path: str, body) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    payload = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=payload, headers={"content-type": "application/json"} if payload else {})
    response = conn.getresponse()
    data = response.read()
    assert response.status == 200, (port, method, path, data)
    return json.loads(data)


@pytest.mark.parametrize("method, path, body", SAME_INPUT, ids=[p for _, p, _ in SAME_INPUT])
def test_transcoded_rest_answers_the_same_json_as_native_rest(local_stack, method, path, body):
    native = rest_json(local_stack["WIRELENS_ENVOY_PORT"], method, path, body)
    transcoded = rest_json(local_stack["WIRELENS_ENVOY_TRANSCODE_PORT"], method, path, body)
    if path == "/v1/factorial":  # the time it took differs call to call
        native.pop("timeTaken", None), transcoded.pop("timeTaken", None)
    assert transcoded == native


# -- the Python pair behind the same Envoy (services/python) ------------------------------

PYTHON_OPERATIONS = ("hello.SayHello", "hello.SayHelloBig", "math.CalculateFactorial")
STACK_HEADER = "x-wirelens-stack"


def test_each_stack_is_a_dimension_of_every_row(local_stack):
    """The same calls to each pair: exactly N rows per (stack, operation, protocol), the stack from
    Envoy's cluster metadata, never from the client (a client naming an unknown stack reaches Go, recorded go)."""
    settings, run_id = local_stack, f"e2e-stacks-{uuid.uuid4().hex[:8]}"
    calls = 5
    expected: dict[tuple[str, str, str], int] = {}
    for stack_name in ("go", "python"):
        for operation in PYTHON_OPERATIONS:
            for recorded_as, protocol, port in protocols_for("unary"):
                result = subprocess.run(
                    [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings[port]}", "-protocol", protocol,
                     "-operation", operation, "-n", str(calls), "-number", "1000", "-run-id", run_id,
                     "-stack", stack_name, "-timeout", "60s"], capture_output=True, text=True, timeout=120)
                assert result.returncode == 0, f"{stack_name} {operation} over {recorded_as}: {result.stderr}"
                assert json.loads(result.stdout.splitlines()[-1])["stack"] == stack_name
                expected[(stack_name, operation, recorded_as)] = calls
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=10)
    conn.request("POST", "/v1/hello", body=REST_REQUEST, headers={
        "content-type": "application/json", "x-wirelens-run": run_id, STACK_HEADER: "python-not"})
    assert conn.getresponse().read() == REST_REPLY
    expected[("go", "hello.SayHello", "rest")] += 1

    def seen():
        return {(s, op, p): int(n) for s, op, p, n in rows(
            settings, "SELECT stack, operation, protocol, count() FROM wirelens.requests FINAL "
                      f"WHERE run_id = '{run_id}' GROUP BY stack, operation, protocol")}

    wait_for(f"{len(expected)} (stack, operation, protocol) groups", seen,
             lambda s: sum(s.values()) >= sum(expected.values()))
    assert seen() == expected
    failures = rows(settings, "SELECT stack, operation, protocol, http_status, grpc_status FROM wirelens.requests "
                              f"FINAL WHERE run_id = '{run_id}' AND (http_status != 200 OR ifNull(grpc_status, 0) != 0 "
                              "OR malformed OR upstream_service_ms IS NULL)")
    assert failures == []


def test_python_pair_sends_the_known_bytes(local_stack):
    """The golden call (hello.SayHello "wirelens") to the Python pair over every protocol: the same
    body, message and payload bytes as counted independently here (and as the Go pair's, same test above)."""
    settings, run_id = local_stack, f"e2e-python-known-{uuid.uuid4().hex[:8]}"
    port, transcode_port = int(settings["WIRELENS_ENVOY_PORT"]), int(settings["WIRELENS_ENVOY_TRANSCODE_PORT"])
    headers = {"x-wirelens-run": run_id, STACK_HEADER: "python"}
    bodies = {}
    for protocol, listener in (("rest", port), ("rest-transcoded", transcode_port)):
        conn = http.client.HTTPConnection("127.0.0.1", listener, timeout=10)
        conn.request("POST", "/v1/hello", body=REST_REQUEST, headers={"content-type": "application/json", **headers})
        response = conn.getresponse()
        bodies[protocol] = response.read()
        assert response.status == 200 and json.loads(bodies[protocol]) == json.loads(REST_REPLY), protocol
    assert bodies["rest"] == REST_REPLY
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/wirelens.v1.Hello/SayHello", body=grpc_frame(HELLO_REQUEST),
                 headers={"content-type": "application/grpc-web+proto", "x-grpc-web": "1", **headers})
    response = conn.getresponse()
    bodies["grpc-web"] = response.read()
    assert bodies["grpc-web"].startswith(grpc_frame(HELLO_REPLY)), bodies["grpc-web"]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply, call = channel.unary_unary("/wirelens.v1.Hello/SayHello").with_call(
            HELLO_REQUEST, timeout=10, metadata=list(headers.items()))
    assert call.code() == grpc.StatusCode.OK and reply == HELLO_REPLY

    request, reply_len = len(HELLO_REQUEST), len(HELLO_REPLY)
    expected = {
        "rest": (len(REST_REQUEST), len(REST_REPLY), 0, 0, 0, 0),
        "rest-transcoded": (len(REST_REQUEST), len(REST_REPLY), 0, 0, 0, 0),
        "grpc": (request + 5, reply_len + 5, 1, 1, request, reply_len),
        "grpc-web": (request + 5, len(bodies["grpc-web"]), 1, 1, request, reply_len),
    }
    columns = ("protocol", "request_body_bytes", "response_body_bytes", "request_messages", "response_messages",
               "request_message_bytes", "response_message_bytes", "stack", "upstream_host", "operation")
    found = wait_for(f"{len(expected)} rows of run {run_id}",
                     lambda: rows(settings, f"SELECT {', '.join(columns)} FROM wirelens.requests FINAL "
                                            f"WHERE run_id = '{run_id}' ORDER BY protocol"),
                     lambda r: len(r) >= len(expected))
    assert [r[0] for r in found] == sorted(expected), found
    python_ports = {settings["WIRELENS_PYTHON_REST_PORT"], settings["WIRELENS_PYTHON_GRPC_PORT"]}
    for protocol, *numbers, stack_name, upstream, operation in found:
        assert tuple(map(int, numbers)) == expected[protocol], protocol
        assert (stack_name, operation) == ("python", "hello.SayHello"), protocol
        assert upstream.rsplit(":", 1)[1] in python_ports, (protocol, upstream)
