"""End to end: header bytes for every protocol, predicted from what the test sent and received.

The record's measure (filters/README.md, "The record object"): a header map's
size is Σ(name length + value length) over its entries, pseudo-headers
included, no separators. The test writes every request byte itself (raw
sockets for HTTP/1.1, `h2` frame by frame for HTTP/2) and predicts:

- Request headers, as Envoy presents them to the filter: HTTP/1.1's request
  line becomes `:method` and `:path`, `host` becomes `:authority`, the codec
  adds `:scheme` (`http`); HTTP/2's header list arrives as sent. Before any
  filter the connection manager adds `x-request-id` (a fresh UUID: 36
  characters; the listener removes a client's own, envoy/envoy.yaml.tmpl) and
  `x-forwarded-proto` (`http`, a plaintext listener). What the router adds
  later (`x-envoy-expected-rq-timeout-ms`, `traceparent`) is not seen.
- Response headers, as the filter sees them on the way out: what the client
  received, less what Envoy adds after every filter: `server` (always),
  `date` (only when the upstream sent none: Go's net/http sends one, grpc-go
  does not) and, on HTTP/1.1, the codec's `transfer-encoding: chunked`;
  HTTP/1.1 carries `:status` in its status line.

Both response-header paths run in real Envoy: sized at the headers phase
(REST, gRPC with trailers: the size predates `server`, which Envoy's own
count at log time includes), and read in `on_log` (a gRPC request answered
without trailers: only that read sees the JSON content type and drops the
body's frame statistics, which as frames would be malformed).

Envoy's downstream counters are checked against the exact bytes on the
socket, and against the filter's counts as filters/README.md ("Header bytes
and Envoy's downstream counters") states: HPACK makes HTTP/2's smaller;
HTTP/1.1's carry the client's own header lines with their framing.
"""

from __future__ import annotations

import base64
import json
import socket
import time
import uuid
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import pytest
from hyperframe.frame import ContinuationFrame, DataFrame, Frame, HeadersFrame

from envoy import wiring
from tests.e2e.conftest import stack, stack_for_module, stack_on_free_ports
from wirelens_helpers.wait import wait_for

# What the connection manager adds before the filter: x-request-id (a UUID's
# 36 characters) and x-forwarded-proto: http.
ADDED_BEFORE_FILTER = len("x-request-id") + 36 + len("x-forwarded-proto") + len("http")
# What HTTP/1.1's request line and Host header become for the filter.
HTTP1_SCHEME = (":scheme", "http")
# grpc-go's trailers of an OK call; the native gRPC call checks them as received.
GRPC_GO_OK_TRAILERS = [("grpc-status", "0"), ("grpc-message", "")]
HTTP1_HEADER_LINE_COUNTED = 3  # Envoy's HTTP/1 parser counts ':' and CRLF, not the space after the colon
HTTP1_HEADER_LINE_WRITTEN = 4  # Envoy's HTTP/1 encoder writes ': ' and CRLF
H2_FRAME_HEADER = 9
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DEADLINE_S = 10.0


def size(headers) -> int:
    return sum(len(name) + len(value) for name, value in headers)


def grpc_frame(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


HELLO_REQUEST = b"\x0a\x08wirelens"  # wirelens.v1.HelloRequest{name: "wirelens"}
REST_REQUEST = b'{"name":"wirelens"}'


# -- HTTP/1.1 on a raw socket -----------------------------------------------------------


@dataclass
class Http1Exchange:
    request: bytes
    request_line: tuple[str, str]  # method, target
    request_headers: list[tuple[str, str]]
    response: bytes  # every byte Envoy wrote
    status: str
    response_lines: list[bytes]  # the header lines as written, without CRLF
    response_headers: list[tuple[str, str]]
    body: bytes  # de-chunked


def http1_call(port: int, path: str, headers: list[tuple[str, str]], body: bytes) -> Http1Exchange:
    request = (f"POST {path} HTTP/1.1\r\n".encode() + b"".join(f"{n}: {v}\r\n".encode() for n, v in headers)
               + b"\r\n" + body)
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(request)
        raw = b""
        deadline = time.monotonic() + DEADLINE_S
        while not http1_response_complete(raw):
            if time.monotonic() > deadline:
                pytest.fail(f"POST {path}: no complete HTTP/1.1 response within {DEADLINE_S:.0f}s; got {raw!r}")
            chunk = sock.recv(65536)
            if not chunk:
                pytest.fail(f"POST {path}: Envoy closed after {raw!r}")
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.split(b"\r\n")
    pairs = [tuple(part.decode() for part in line.split(b": ", 1)) for line in lines]
    return Http1Exchange(request, ("POST", path), headers, raw, status_line.split(b" ")[1].decode(), lines,
                         pairs, dechunk(payload) if ("transfer-encoding", "chunked") in pairs else payload)


def http1_response_complete(raw: bytes) -> bool:
    head, found, payload = raw.partition(b"\r\n\r\n")
    if not found:
        return False
    lines = head.lower().split(b"\r\n")
    if b"transfer-encoding: chunked" in lines:
        return payload.endswith(b"0\r\n\r\n")
    length = next((int(line.split(b": ")[1]) for line in lines if line.startswith(b"content-length: ")), 0)
    return len(payload) >= length


def dechunk(payload: bytes) -> bytes:
    body = b""
    while True:
        size_line, _, payload = payload.partition(b"\r\n")
        length = int(size_line, 16)
        if length == 0:
            return body
        body, payload = body + payload[:length], payload[length + 2:]


# -- HTTP/2 with h2, every frame kept -----------------------------------------------------


@dataclass
class Http2Exchange:
    request_headers: list[tuple[str, str]]
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    trailers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    sent_header_frames: int = 0  # bytes, frame headers included
    sent_frames: int = 0
    received_header_frames: int = 0
    received_frames: int = 0


def frames(raw: bytes):
    """(frame, bytes on the wire) of every whole frame in raw."""
    at = 0
    while at + H2_FRAME_HEADER <= len(raw):
        frame, length = Frame.parse_frame_header(memoryview(raw[at:at + H2_FRAME_HEADER]))
        yield frame, H2_FRAME_HEADER + length
        at += H2_FRAME_HEADER + length


def http2_calls(port: int, calls: list[tuple[list[tuple[str, str]], bytes]]) -> list[Http2Exchange]:
    """The calls one after another on one connection (so HPACK's dynamic table carries over)."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    exchanges: dict[int, Http2Exchange] = {}
    sent = received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        conn.initiate_connection()
        preface_and_settings = conn.data_to_send()
        sent += preface_and_settings
        sock.sendall(preface_and_settings)
        for headers, body in calls:
            stream = conn.get_next_available_stream_id()
            exchanges[stream] = exchange = Http2Exchange(headers)
            conn.send_headers(stream, headers)
            conn.send_data(stream, body, end_stream=True)
            out = conn.data_to_send()
            sent += out
            sock.sendall(out)
            deadline, ended = time.monotonic() + DEADLINE_S, False
            while not ended:
                if time.monotonic() > deadline:
                    pytest.fail(f"{headers}: stream {stream} did not end within {DEADLINE_S:.0f}s")
                chunk = sock.recv(65536)
                if not chunk:
                    pytest.fail(f"{headers}: Envoy closed the connection on stream {stream}")
                received += chunk
                for event in conn.receive_data(chunk):
                    if isinstance(event, h2.events.ResponseReceived):
                        exchange.response_headers = list(event.headers)
                    elif isinstance(event, h2.events.TrailersReceived):
                        exchange.trailers = list(event.headers)
                    elif isinstance(event, h2.events.DataReceived):
                        exchange.body += event.data
                    elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                        ended = True
                # What the client owes Envoy (SETTINGS acknowledgements); the bodies are too
                # small for a WINDOW_UPDATE, so a stream's frames are exactly its call.
                out = conn.data_to_send()
                sent += out
                sock.sendall(out)
    assert sent.startswith(CLIENT_PREFACE)
    count_stream_frames(sent[len(CLIENT_PREFACE):], exchanges, "sent")
    count_stream_frames(received, exchanges, "received")
    return list(exchanges.values())


def count_stream_frames(raw: bytes, exchanges: dict[int, Http2Exchange], direction: str) -> None:
    for frame, wire in frames(raw):
        exchange = exchanges.get(frame.stream_id)
        if exchange is None:
            continue  # connection-level frames (SETTINGS, WINDOW_UPDATE, PING)
        assert isinstance(frame, (HeadersFrame, ContinuationFrame, DataFrame)), f"{direction}: {frame}"
        setattr(exchange, f"{direction}_frames", getattr(exchange, f"{direction}_frames") + wire)
        if not isinstance(frame, DataFrame):
            setattr(exchange, f"{direction}_header_frames", getattr(exchange, f"{direction}_header_frames") + wire)


# -- what the filter should count ----------------------------------------------------------


def filter_request_header_bytes(exchange: Http1Exchange | Http2Exchange) -> int:
    if isinstance(exchange, Http2Exchange):
        return size(exchange.request_headers) + ADDED_BEFORE_FILTER
    method, target = exchange.request_line
    host = dict(exchange.request_headers)["host"]
    pseudo = [(":method", method), (":path", target), (":authority", host), HTTP1_SCHEME]
    return size(pseudo + [h for h in exchange.request_headers if h[0] != "host"]) + ADDED_BEFORE_FILTER


def added_after_filter(exchange: Http1Exchange | Http2Exchange, upstream_sends_date: bool) -> list[tuple[str, str]]:
    """The received response headers Envoy added after the filter had seen the map."""
    after = {"server", "transfer-encoding"} | (set() if upstream_sends_date else {"date"})
    return [h for h in exchange.response_headers if h[0] in after]


def filter_response_header_bytes(exchange: Http1Exchange | Http2Exchange, upstream_sends_date: bool) -> int:
    status = [(":status", exchange.status)] if isinstance(exchange, Http1Exchange) else []
    return size(exchange.response_headers + status) - size(added_after_filter(exchange, upstream_sends_date))


# -- the calls and their rows ----------------------------------------------------------------


@dataclass
class Case:
    protocol: str
    exchange: Http1Exchange | Http2Exchange
    upstream_sends_date: bool  # Go's net/http (REST) does, grpc-go does not
    trailer_bytes: int  # what the filter's trailer count should be
    row: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def wasm_header_stack(tmp_path_factory):
    with stack_on_free_ports(tmp_path_factory.mktemp("header-bytes"), "e2e-header-bytes") as settings:
        yield settings


@pytest.fixture(scope="module", params=wiring.MODULES)
def header_stack(request):
    """Every test here runs on both builds of the filter (envoy/wiring.py, MODULES): its own stack
    with the Wasm build, then the shared stack with the native build (conftest.native_stack)."""
    return stack_for_module(request, "wasm_header_stack")


@pytest.fixture(scope="module")
def cases(header_stack) -> dict[str, Case]:
    settings = header_stack
    port, transcode_port = int(settings["WIRELENS_ENVOY_PORT"]), int(settings["WIRELENS_ENVOY_TRANSCODE_PORT"])
    prefix = f"hb-{uuid.uuid4().hex[:8]}"
    hello = "/wirelens.v1.Hello/SayHello"

    def h1(name: str, listener: int, path: str, headers: list[tuple[str, str]], body: bytes) -> Http1Exchange:
        return http1_call(listener, path, [("host", f"127.0.0.1:{listener}"), *headers,
                                           ("content-length", str(len(body))), ("x-wirelens-run", f"{prefix}-{name}")],
                          body)

    def grpc(name: str, path: str) -> tuple[list[tuple[str, str]], bytes]:
        return ([(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{port}"),
                 ("content-type", "application/grpc"), ("te", "trailers"), ("x-wirelens-run", f"{prefix}-{name}")],
                grpc_frame(HELLO_REQUEST))

    ok_trailers = size(GRPC_GO_OK_TRAILERS)
    found = {
        "rest": Case("rest", h1("rest", port, "/v1/hello", [("content-type", "application/json")], REST_REQUEST),
                     True, 0),
        "rest-proto": Case("rest-proto", h1("rest-proto", port, "/v1/hello", [
            ("content-type", "application/x-protobuf"), ("accept", "application/x-protobuf")], HELLO_REQUEST), True, 0),
        # gRPC-Web's trailers travel in the body: no trailer map.
        "grpc-web": Case("grpc-web", h1("grpc-web", port, hello, [
            ("content-type", "application/grpc-web+proto"), ("x-grpc-web", "1")], grpc_frame(HELLO_REQUEST)), False, 0),
        "grpc-web-text": Case("grpc-web-text", h1("grpc-web-text", port, hello, [
            ("content-type", "application/grpc-web-text"), ("x-grpc-web", "1"), ("accept", "application/grpc-web-text")],
            base64.b64encode(grpc_frame(HELLO_REQUEST))), False, 0),
        # The transcoder passes grpc-go's trailers on (the filter sees them; an HTTP/1.1
        # response with a content-length cannot carry them to the client).
        "rest-transcoded": Case("rest-transcoded", h1("rest-transcoded", transcode_port, "/v1/hello", [
            ("content-type", "application/json")], REST_REQUEST), False, ok_trailers),
    }
    # One HTTP/2 connection: the second SayHello finds HPACK's dynamic table filled by the first.
    native = http2_calls(port, [grpc("grpc", hello), grpc("grpc-again", hello),
                                # A gRPC request on a REST route: Go's REST server answers JSON, no trailers.
                                grpc("grpc-no-trailers", "/v1/hello"),
                                # grpc-go answers an unknown method trailers-only (headers with end of stream).
                                grpc("grpc-trailers-only", "/wirelens.v1.Hello/Nope")])
    for name, exchange, upstream_sends_date in zip(
            ("grpc", "grpc-again", "grpc-no-trailers", "grpc-trailers-only"), native, (False, False, True, False)):
        found[name] = Case("grpc", exchange, upstream_sends_date, size(exchange.trailers))

    columns = ("run_id, protocol, http_version, http_status, request_header_bytes, response_header_bytes, "
               "response_trailer_bytes, request_body_bytes, response_body_bytes, response_messages, "
               "response_framing_bytes, toUInt8(malformed) AS malformed, grpc_message, response_headers_bytes, "
               "envoy_bytes_received, envoy_bytes_sent, downstream_header_bytes_received, "
               "downstream_header_bytes_sent, downstream_wire_bytes_received, downstream_wire_bytes_sent")

    def fetch() -> dict[str, dict]:
        out = stack.clickhouse_query(settings, f"SELECT {columns} FROM wirelens.requests FINAL WHERE run_id "
                                               f"LIKE '{prefix}-%' FORMAT JSONEachRow "
                                               f"SETTINGS output_format_json_quote_64bit_integers = 0")
        return {row.pop("run_id")[len(prefix) + 1:]: row for row in map(json.loads, out.splitlines())}

    seen = wait_for(f"{len(found)} rows of run ids {prefix}-*", fetch, lambda rows: len(rows) >= len(found))
    assert sorted(seen) == sorted(found), f"rows {sorted(seen)}, calls {sorted(found)}"
    for name, case in found.items():
        case.row = seen[name]
    return found


# -- the tests -------------------------------------------------------------------------------


def test_every_call_is_a_row_of_its_protocol(cases):
    for name, case in cases.items():
        http_version = "HTTP/2" if isinstance(case.exchange, Http2Exchange) else "HTTP/1.1"
        assert (case.row["protocol"], case.row["http_version"]) == (case.protocol, http_version), name
    assert {case.protocol for case in cases.values()} == {
        "rest", "rest-proto", "rest-transcoded", "grpc", "grpc-web", "grpc-web-text"}


def test_request_header_bytes_are_what_was_sent_as_envoy_presents_it(cases):
    for name, case in cases.items():
        assert case.row["request_header_bytes"] == filter_request_header_bytes(case.exchange), (
            f"{name}: the filter's request header bytes against what the test sent plus x-request-id and "
            f"x-forwarded-proto ({case.exchange.request_headers})")


def test_response_header_and_trailer_bytes_are_what_was_received_less_envoys_later_additions(cases):
    assert cases["grpc"].exchange.trailers == GRPC_GO_OK_TRAILERS  # the transcoded case's prediction
    for name, case in cases.items():
        assert case.row["response_header_bytes"] == filter_response_header_bytes(case.exchange,
                                                                                 case.upstream_sends_date), (
            f"{name}: received {case.exchange.response_headers}, of which Envoy added after the filter "
            f"{added_after_filter(case.exchange, case.upstream_sends_date)}")
        assert case.row["response_trailer_bytes"] == case.trailer_bytes, name


def test_response_headers_sized_at_the_headers_phase(cases):
    """REST and native gRPC with trailers: only the size of the headers is taken, when they pass the
    filter. Envoy's own count of the same map at log time includes what it added afterwards."""
    for name in ("rest", "rest-proto", "grpc"):
        case = cases[name]
        later = added_after_filter(case.exchange, case.upstream_sends_date)
        assert later and case.row["response_headers_bytes"] - case.row["response_header_bytes"] == size(later), (
            f"{name}: Envoy at log time {case.row['response_headers_bytes']} B, the filter "
            f"{case.row['response_header_bytes']} B; added after the filter: {later}")


def test_response_headers_read_in_on_log(cases):
    """A native gRPC response without trailers: its headers were only sized, so the filter reads them in
    on_log. Only that read sees the JSON content type and drops the body's frame statistics: read as gRPC
    frames, this body ends inside a frame (malformed)."""
    case = cases["grpc-no-trailers"]
    exchange, row = case.exchange, case.row
    assert dict(exchange.response_headers)[":status"] == "400" and not exchange.trailers, exchange.response_headers
    assert dict(exchange.response_headers)["content-type"] == "application/json"
    declared = int.from_bytes(exchange.body[1:5], "big")
    assert exchange.body.startswith(b'{"') and declared > len(exchange.body) - 5, exchange.body
    assert (row["response_body_bytes"], row["response_messages"], row["response_framing_bytes"],
            row["malformed"]) == (len(exchange.body), 0, 0, 0), row
    # Its size is still the headers phase's: without Envoy's later server header.
    assert row["response_headers_bytes"] - row["response_header_bytes"] == size(
        added_after_filter(exchange, case.upstream_sends_date)), row

    # Against it, a trailers-only response: entries read at the headers phase, grpc-message and all.
    only = cases["grpc-trailers-only"]
    received = dict(only.exchange.response_headers)
    assert received["grpc-status"] == "12" and not only.exchange.body and not only.exchange.trailers
    assert only.row["grpc_message"] == received["grpc-message"], only.row


def test_http1_wire_counters_are_the_socket_bytes_and_relate_to_the_filters_counts(cases):
    for name, case in cases.items():
        x, row = case.exchange, case.row
        if not isinstance(x, Http1Exchange):
            continue
        request_body = x.request.partition(b"\r\n\r\n")[2]
        assert row["downstream_wire_bytes_received"] == len(x.request), name
        assert row["downstream_header_bytes_received"] == sum(
            len(n) + len(v) + HTTP1_HEADER_LINE_COUNTED for n, v in x.request_headers), name
        assert row["downstream_wire_bytes_sent"] == len(x.response), name
        assert row["downstream_header_bytes_sent"] == sum(len(line) + len(b"\r\n") for line in x.response_lines), name
        assert (row["envoy_bytes_received"], row["envoy_bytes_sent"]) == (
            row["request_body_bytes"], row["response_body_bytes"]) == (len(request_body), len(x.body)), name

        # filters/README.md: the wire carries the client's own header lines; the filter counts them
        # without framing, with the request line's pseudo-headers and what Envoy added before it.
        pseudo = size([(":method", x.request_line[0]), (":path", x.request_line[1]), HTTP1_SCHEME]) + (
            len(":authority") - len("host"))
        assert row["downstream_header_bytes_received"] == (
            row["request_header_bytes"] - pseudo - ADDED_BEFORE_FILTER + HTTP1_HEADER_LINE_COUNTED * len(x.request_headers)), name
        later = added_after_filter(x, case.upstream_sends_date)
        assert row["downstream_header_bytes_sent"] == (
            row["response_header_bytes"] - len(":status") - len(x.status) + size(later)
            + HTTP1_HEADER_LINE_WRITTEN * len(x.response_lines)), f"{name}: added after the filter {later}"


def test_http2_wire_counters_are_the_frames_and_hpack_makes_them_smaller(cases):
    native = {name: case for name, case in cases.items() if isinstance(case.exchange, Http2Exchange)}
    for name, case in native.items():
        x, row = case.exchange, case.row
        assert (row["downstream_header_bytes_received"], row["downstream_wire_bytes_received"]) == (
            x.sent_header_frames, x.sent_frames), f"{name}: the stream's HEADERS and DATA frames as sent"
        assert (row["downstream_header_bytes_sent"], row["downstream_wire_bytes_sent"]) == (
            x.received_header_frames, x.received_frames), f"{name}: the stream's frames as received"
        assert (row["envoy_bytes_received"], row["envoy_bytes_sent"]) == (
            row["request_body_bytes"], row["response_body_bytes"]) == (
            len(grpc_frame(HELLO_REQUEST)), len(x.body)), name
        assert row["downstream_header_bytes_received"] < row["request_header_bytes"], f"{name}: HPACK"

    first, again = native["grpc"].row, native["grpc-again"].row
    assert again["downstream_header_bytes_received"] < first["downstream_header_bytes_received"], (first, again)
    assert again["downstream_header_bytes_sent"] < again["response_header_bytes"] + again["response_trailer_bytes"], (
        "on a warm connection HPACK's dynamic table makes the response's headers and trailers smaller "
        f"than the filter's count: {again}")
