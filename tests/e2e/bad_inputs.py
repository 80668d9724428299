"""The broken and hostile inputs of the bad-input suite, as data.

One list, two users: tests/e2e/test_bad_input.py sends every case to the real
Envoy of the local stack, and filters/fuzz/make_seeds.py writes the same bytes
into the filter core's fuzz corpus (filters/fuzz/corpus/<target>/bad_<id>).
Nothing here talks to a network.

A case names how it is sent (`send`, see test_bad_input.py's SENDERS), what it
sends (HTTP/2 header list and body, or raw HTTP/1 bytes), and what must follow:
`rows` calls in wirelens.requests under its run id (0 where Envoy itself
refuses the request before the filter sees headers), each with `malformed`
as given (the `wirelens.malformed` definition of filters/README.md: broken
gRPC framing or base64; a reset or a client gone mid-frame is not malformed),
and optionally exact values of other columns.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field

HELLO = "/wirelens.v1.Hello/SayHello"
SERVER_STREAM = "/wirelens.v1.Echo/ServerStream"
RUN_HEADER = "x-wirelens-run"
# The run id in every case's bytes; the test replaces it with a unique one
# (same length, so Content-Length and frame lengths stay right).
RUN_PLACEHOLDER = "bad-input-run-id-0000000000000000"


def frame(flags: int, payload: bytes, claimed: int | None = None) -> bytes:
    """One gRPC frame: flags, 4-byte big-endian length (claimed, or the real one), payload."""
    return bytes([flags]) + struct.pack(">I", len(payload) if claimed is None else claimed) + payload


def proto_string(number: int, value: bytes) -> bytes:
    assert len(value) < 128  # one-byte length varint
    return bytes([(number << 3) | 2, len(value)]) + value


HELLO_MESSAGE = proto_string(1, b"wirelens")
# Echo.ServerStream asking for many replies: a response long enough to reset mid-way.
MANY_REPLIES = proto_string(1, b"x" * 100) + b"\x10" + bytes([0xa0, 0x8d, 0x06])  # count = 100000


def grpc_headers(path: str = HELLO, content_type: str = "application/grpc",
                 extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[bytes, bytes]]:
    pairs = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "wirelens"),
             ("content-type", content_type), ("te", "trailers"), (RUN_HEADER, RUN_PLACEHOLDER), *extra]
    return [(n.encode(), v.encode() if isinstance(v, str) else v) for n, v in pairs]


def rest_headers(method: str = "GET", path: bytes | str = "/v1/products/1",
                 extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[bytes, bytes]]:
    pairs = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "wirelens"),
             (RUN_HEADER, RUN_PLACEHOLDER), *extra]
    return [(n.encode(), v if isinstance(v, bytes) else v.encode()) for n, v in pairs]


def http1(head: str, body: bytes = b"") -> bytes:
    """A raw HTTP/1 request: `head` lines joined with CRLF, the run header added after the first line."""
    lines = head.split("\n")
    lines.insert(1, f"{RUN_HEADER}: {RUN_PLACEHOLDER}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass(frozen=True)
class BadInput:
    id: str
    what: str
    send: str                     # a sender of test_bad_input.py
    rows: int                     # calls expected in wirelens.requests under the run id
    malformed: int | None = None  # expected `malformed` of every row
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)  # HTTP/2 request headers
    body: bytes = b""             # HTTP/2 request body (the filter sees it as is)
    raw: bytes = b""              # HTTP/1 bytes on the wire
    columns: dict[str, object] = field(default_factory=dict)  # exact values of other columns, every row
    statuses: tuple[int, ...] = ()  # the HTTP statuses the bad client gets (none: reset, closed, no request)
    why_no_row: str = ""          # rows == 0: who refuses it


FOUR_GIB = 0xFFFFFFFF
EMPTY_MESSAGES = 3000
B64 = base64.b64encode

CASES: list[BadInput] = [
    # -- gRPC framing ------------------------------------------------------------------
    BadInput("grpc_length_4gib", "a frame prefix claiming 4 GiB, 10 bytes sent, end of stream",
             "h2", 1, 1, grpc_headers(), frame(0, b"0123456789", claimed=FOUR_GIB),
             statuses=(200,)),
    BadInput("grpc_length_1mib_short", "a frame claiming 1 MiB, 100 bytes sent, end of stream",
             "h2", 1, 1, grpc_headers(), frame(0, b"p" * 100, claimed=1 << 20),
             statuses=(200,)),
    BadInput("grpc_prefix_truncated_3", "3 bytes of a 5-byte prefix, end of stream",
             "h2", 1, 1, grpc_headers(), b"\x00\x00\x00",
             statuses=(200,)),
    BadInput("grpc_prefix_truncated_after_message", "one whole message, then 4 bytes of the next prefix",
             "h2", 1, 1, grpc_headers(), frame(0, HELLO_MESSAGE) + b"\x00\x00\x00\x00",
             columns={"request_messages": 1},
             statuses=(200,)),
    BadInput("grpc_unknown_flag_bits", "flags 0x7e on a whole frame (bit 7 clear: a message, well framed)",
             "h2", 1, 0, grpc_headers(), frame(0x7E, HELLO_MESSAGE), columns={"request_messages": 1},
             statuses=(200,)),
    BadInput("grpc_compressed_without_encoding", "compressed flag set, no grpc-encoding header",
             "h2", 1, 0, grpc_headers(), frame(1, HELLO_MESSAGE),
             columns={"request_messages": 1, "request_compressed_messages": 1},
             statuses=(200,)),
    BadInput("grpc_empty_messages_to_unary", f"{EMPTY_MESSAGES} empty messages to a unary method",
             "h2", 1, 0, grpc_headers(), frame(0, b"") * EMPTY_MESSAGES,
             columns={"request_messages": EMPTY_MESSAGES, "request_message_bytes": 0},
             statuses=(200,)),
    BadInput("grpc_trailer_frame_from_client", "a valid 0x80 trailer frame after the message, sent by the client",
             "h2", 1, 0, grpc_headers(), frame(0, HELLO_MESSAGE) + frame(0x80, b"grpc-status:0\r\n"),
             columns={"request_messages": 1},
             statuses=(200,)),
    BadInput("grpc_trailer_frame_garbage", "a 0x80 frame whose header block does not parse",
             "h2", 1, 1, grpc_headers(), frame(0, HELLO_MESSAGE) + frame(0x80, b"not a header block"),
             statuses=(200,)),
    BadInput("grpc_web_trailer_frame_from_client", "grpc-web: message + 0x80 trailer frame from the client",
             "h2", 1, 0, grpc_headers(content_type="application/grpc-web+proto"),
             frame(0, HELLO_MESSAGE) + frame(0x80, b"grpc-status:0\r\ngrpc-message:ok\r\n"),
             columns={"protocol": "grpc-web", "request_messages": 1},
             statuses=(200,)),
    BadInput("grpc_web_text_invalid_base64", "grpc-web-text body with characters outside base64",
             "h2", 1, 1, grpc_headers(content_type="application/grpc-web-text"),
             B64(frame(0, HELLO_MESSAGE))[:8] + b"!!**" + B64(frame(0, HELLO_MESSAGE))[8:],
             columns={"protocol": "grpc-web-text"},
             statuses=(400,)),
    BadInput("grpc_web_text_padding_inside", "grpc-web-text with '=' inside a 4-character group",
             "h2", 1, 1, grpc_headers(content_type="application/grpc-web-text"),
             b"AA=A" + B64(frame(0, HELLO_MESSAGE)), columns={"protocol": "grpc-web-text"},
             statuses=(400,)),
    BadInput("grpc_web_text_padded_frames", "grpc-web-text frames padded one by one, CRLF between (valid)",
             "h2", 1, 0, grpc_headers(content_type="application/grpc-web-text"),
             B64(frame(0, b"\x0a\x01a")) + b"\r\n" + B64(frame(0, HELLO_MESSAGE)),
             columns={"protocol": "grpc-web-text", "request_messages": 2},
             statuses=(400,)),
    BadInput("grpc_web_text_dangling_char", "grpc-web-text ending in one dangling character",
             "h2", 1, 1, grpc_headers(content_type="application/grpc-web-text"),
             B64(frame(0, HELLO_MESSAGE)) + b"Q", columns={"protocol": "grpc-web-text"},
             statuses=(400,)),
    BadInput("grpc_to_rest_upstream", "a gRPC call to a path the REST service answers (404, text/plain, no trailers)",
             "h2", 1, 0, grpc_headers("/nope.v1.Svc/Method"), frame(0, HELLO_MESSAGE),
             columns={"protocol": "grpc", "request_messages": 1, "response_messages": 0},
             statuses=(404,)),
    BadInput("grpc_content_type_on_rest_route", "GET of a REST resource claiming application/grpc, no body",
             "h2", 1, 0, [(n, v) for n, v in rest_headers()] + [(b"content-type", b"application/grpc")],
             columns={"protocol": "grpc", "response_messages": 0},
             statuses=(200,)),
    BadInput("grpc_web_text_content_type_on_rest_route", "GET of a REST resource claiming grpc-web-text",
             "h2", 1, 0, rest_headers(extra=(("content-type", "application/grpc-web-text"),)),
             columns={"protocol": "grpc-web-text", "response_messages": 0},
             statuses=(200,)),
    # -- HTTP/2 streams cut short ------------------------------------------------------
    BadInput("h2_rst_stream_mid_request", "half a frame sent, then RST_STREAM(CANCEL)",
             "h2_reset_mid_request", 1, 0, grpc_headers(), frame(0, b"r" * 64)[:30],
             columns={"request_duration_us": None}),
    BadInput("h2_rst_stream_mid_response", "server stream answering; RST_STREAM after its first data",
             "h2_reset_mid_response", 1, 0, grpc_headers(SERVER_STREAM), frame(0, MANY_REPLIES),
             statuses=(200,)),
    BadInput("h2_client_gone_mid_body", "half a frame sent, then the TCP connection closed",
             "h2_close_mid_request", 1, 0, grpc_headers(), frame(0, b"g" * 64)[:30],
             columns={"request_duration_us": None}),
    BadInput("h2_headers_60kib", "HTTP/2 request headers just under 60 KiB (60 of 1 KiB)",
             "h2", 1, 0, rest_headers(extra=tuple((f"x-big-{i:02}", "v" * 1013) for i in range(60))),
             statuses=(200,)),
    BadInput("h2_headers_90kib", "HTTP/2 request headers of 90 KiB (90 of 1 KiB)",
             "h2", 0, headers=rest_headers(extra=tuple((f"x-big-{i:02}", "v" * 1013) for i in range(90))),
             why_no_row="Envoy's HTTP/2 codec resets the stream: over max_request_headers_kb (60)"),
    BadInput("h2_headers_count_200", "200 tiny HTTP/2 request headers (Envoy's max_headers_count is 100)",
             "h2", 0, headers=rest_headers(extra=tuple((f"x-{i}", "v") for i in range(200))),
             why_no_row="Envoy's HTTP/2 codec resets the stream: over max_headers_count (100)"),
    BadInput("h2_request_trailers", "a gRPC request ended by HTTP/2 trailers (a HEADERS frame after the body)",
             "h2_request_trailers", 1, 0, grpc_headers(), frame(0, HELLO_MESSAGE),
             columns={"request_messages": 1}, statuses=(200,)),
    BadInput("h2_duplicate_content_type", "two content-type headers: application/grpc and application/json",
             "h2", 1, headers=grpc_headers(extra=(("content-type", "application/json"),)),
             body=frame(0, HELLO_MESSAGE), statuses=(415,)),
    BadInput("h2_non_utf8_grpc_path", "a gRPC :path with bytes that are not UTF-8",
             "h2", 1, 0, [(n, b"/wirelens.v1.Hello/Say\xff\xfeHello" if n == b":path" else v)
                          for n, v in grpc_headers()], frame(0, HELLO_MESSAGE),
             statuses=(200,)),
    BadInput("h2_rapid_reset", "100 streams opened and reset at once (CVE-2023-44487 pattern, bounded)",
             "h2_rapid_reset", 100, 0, rest_headers()),
    BadInput("h2_settings_flood", "5,000 SETTINGS frames at <= 10,000/s without reading the ACKs",
             "h2_settings_flood", 0, why_no_row="no request on the connection"),
    BadInput("h2_ping_flood", "5,000 PINGs at <= 10,000/s without reading the ACKs",
             "h2_ping_flood", 0, why_no_row="no request on the connection"),
    # -- HTTP/1 ------------------------------------------------------------------------
    BadInput("h1_headers_60kib", "HTTP/1.1 request headers of 60 KiB and a bit",
             "h1", 0, raw=http1("GET /v1/products/1 HTTP/1.1\nHost: wirelens\nx-big: " + "v" * 60 * 1024),
             why_no_row="Envoy's codec answers 431 before any filter (max_request_headers_kb 60)",
             statuses=(431,)),
    BadInput("h1_path_non_utf8", "a path with raw bytes 0xff 0xfe",
             "h1", 0, raw=http1("GET /v1/products/\xff\xfe HTTP/1.1\nHost: wirelens\nConnection: close"),
             why_no_row="Envoy's HTTP/1 codec answers 400 to bytes outside the URL grammar",
             statuses=(400,)),
    BadInput("h1_path_percent_encoded", "a path of %-escapes: slash, NUL, 0xff, a euro sign",
             "h1", 1, 0, raw=http1("GET /v1/products/%2F%00%ff%E2%82%AC?q=%zz HTTP/1.1\nHost: wirelens\n"
                                   "Connection: close"),
             statuses=(400,)),
    BadInput("h1_http10", "HTTP/1.0 without Host",
             "h1", 0, raw=http1("GET /v1/products/1 HTTP/1.0"),
             why_no_row="Envoy refuses HTTP/1.0 (426) unless accept_http_10 is set",
             statuses=(426,)),
    BadInput("h1_pipelined", "three requests in one write, the last one closing",
             "h1", 3, 0, raw=http1("GET /v1/products/1 HTTP/1.1\nHost: wirelens")
             + http1("GET /v1/products/2 HTTP/1.1\nHost: wirelens")
             + http1("GET /v1/products/3 HTTP/1.1\nHost: wirelens\nConnection: close"),
             statuses=(200, 200, 200)),
    BadInput("h1_websocket_upgrade", "a WebSocket upgrade request (no upgrade configured)",
             "h1", 0, why_no_row="Envoy answers 403 (no upgrade_configs) and builds no filter chain",
             raw=http1("GET /v1/products/1 HTTP/1.1\nHost: wirelens\nConnection: Upgrade\n"
                       "Upgrade: websocket\nSec-WebSocket-Version: 13\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="),
             statuses=(403,)),
    BadInput("h1_connect", "CONNECT to a host:port (no CONNECT route)",
             "h1", 1, 0, raw=http1("CONNECT example.com:443 HTTP/1.1\nHost: example.com:443"),
             statuses=(404,)),
    BadInput("h1_options_asterisk", "OPTIONS * (the server-wide form)",
             "h1", 0, raw=http1("OPTIONS * HTTP/1.1\nHost: wirelens\nConnection: close"), statuses=(404,),
             why_no_row="Envoy's connection manager answers 404 to a path not starting with '/' before any filter"),
    BadInput("h1_head", "HEAD of a REST resource",
             "h1", 1, 0, raw=http1("HEAD /v1/products/1 HTTP/1.1\nHost: wirelens\nConnection: close"),
             columns={"response_body_bytes": 0},
             statuses=(200,)),
    BadInput("h1_options_cors_preflight", "OPTIONS with Origin and Access-Control-Request-Method",
             "h1", 1, 0, raw=http1("OPTIONS /v1/hello HTTP/1.1\nHost: wirelens\nOrigin: https://evil.example\n"
                                   "Access-Control-Request-Method: POST\n"
                                   "Access-Control-Request-Headers: content-type\nConnection: close"),
             statuses=(405,)),
    BadInput("h1_client_gone_mid_body", "Content-Length 1000, 100 bytes sent, then the connection closed",
             "h1_close", 1, 0, raw=http1("POST /v1/hello HTTP/1.1\nHost: wirelens\nContent-Type: application/json\n"
                                         "Content-Length: 1000", b"{" * 100),
             columns={"request_duration_us": None}),
    BadInput("h1_grpc_web_client_gone_mid_frame", "grpc-web over HTTP/1.1: half a frame, then the connection closed",
             "h1_close", 1, 0, raw=http1(f"POST {HELLO} HTTP/1.1\nHost: wirelens\n"
                                         "Content-Type: application/grpc-web+proto\nContent-Length: 69",
                                         frame(0, b"h" * 64)[:30]),
             columns={"protocol": "grpc-web", "request_duration_us": None}),
    BadInput("h1_chunked_bad_size", "a chunked body whose chunk size is not hex",
             "h1", 1, 0, raw=http1("POST /v1/hello HTTP/1.1\nHost: wirelens\nContent-Type: application/json\n"
                                   "Transfer-Encoding: chunked", b"zz\r\n{}\r\n0\r\n\r\n"),
             statuses=(400,)),
    BadInput("h1_content_length_and_chunked", "both Content-Length and chunked (request smuggling shape)",
             "h1", 0, raw=http1("POST /v1/hello HTTP/1.1\nHost: wirelens\nContent-Length: 4\n"
                                "Transfer-Encoding: chunked", b"0\r\n\r\n"),
             why_no_row="Envoy's HTTP/1 codec refuses the pair (400) before any filter",
             statuses=(400,)),
    BadInput("h1_tls_hello_on_cleartext", "a TLS ClientHello sent to the cleartext listener",
             "h1", 0, raw=bytes.fromhex("16030100a5010000a10303") + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00",
             why_no_row="not HTTP: the codec closes the connection, no request exists",
             statuses=(400,)),
]

assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
