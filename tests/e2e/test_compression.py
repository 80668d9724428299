"""Compressed traffic through the real Envoy: the rows count what went over the wire.

On both builds of the filter (the Wasm build's session stack, the native build's; envoy/wiring.py MODULES),
every call of this module is compressed:

- gRPC with `grpc-encoding: gzip` from two real clients, grpcio (the channel's gzip compression) and grpc-go
  (tests/e2e/grpcgzip: grpc.UseCompressor(gzip)), hello.SayHello and echo.ServerStream (STREAM_REPLIES replies).
  Each call goes through a loopback TCP relay that keeps every byte both ways; the HTTP/2 DATA frames give the
  body bytes and the gRPC frames in them give the compressed flag and the compressed payload lengths. The Go gRPC
  server answers a gzip request gzipped (its gzip codec is registered: internal/grpcserver/gzip.go).
- gRPC-Web and gRPC-Web-text with hand-built frames: flag byte 1, a gzip payload (`grpc-encoding: gzip`); the
  response frames are read from the body the client received.
- REST with `Content-Encoding: gzip` one way, the other way (`Accept-Encoding: gzip`) and both ways
  (internal/restserver).

Each row must show the compressed flag (compressed_messages = messages, all of them), the message counts, payload
bytes equal to the sum of the compressed lengths read from the frames, body bytes equal to the bytes on the wire,
and the counterfactual's reason `compressed` (the local stack samples every call for it: counterfactual_rate 1).
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import socket
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from envoy import wiring
from tests.e2e.conftest import ROOT, rows, stack_for_module
from tests.e2e.test_local_stack import traceparent
from wirelens_helpers.protowire import varint
from wirelens_helpers.wait import wait_for

STREAM_REPLIES = 3
# Compressible and long enough that gzip makes it smaller: grpcio sends a message uncompressed (flag 0) when
# compressing would make it larger, and the test must see the flag set.
NAME = "wirelens gzip " * 12
HELLO_JSON = json.dumps({"name": NAME}, separators=(",", ":")).encode()
HELLO_REPLY_JSON = json.dumps({"message": f"Hello, {NAME}"}, separators=(",", ":")).encode()
GO_CLIENT = ROOT / "build" / "e2e" / "grpcgzip"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


# -- encodings, written out here (independent of the product's parsers) -------------------------------------


def string_field(number: int, value: str) -> bytes:
    data = value.encode()
    return varint(number << 3 | 2) + varint(len(data)) + data


HELLO_REQUEST = string_field(1, NAME)                                          # HelloRequest{name}
STREAM_REQUEST = string_field(1, NAME) + varint(2 << 3) + varint(STREAM_REPLIES)  # EchoStreamRequest{content, count}


def frame(flag: int, payload: bytes) -> bytes:
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


def grpc_frames(body: bytes) -> list[tuple[int, bytes]]:
    """The gRPC(-Web) frames of a body as (flag byte, payload); the body must hold whole frames only."""
    frames, at = [], 0
    while at < len(body):
        assert at + 5 <= len(body), f"a cut frame prefix at {at} of {len(body)} bytes"
        size = int.from_bytes(body[at + 1:at + 5], "big")
        assert at + 5 + size <= len(body), f"a frame of {size} bytes cut at {len(body)}"
        frames.append((body[at], body[at + 5:at + 5 + size]))
        at += 5 + size
    return frames


def unpadded_base64(text: bytes) -> bytes:
    """gRPC-Web-text: each frame may be base64-padded on its own."""
    return b"".join(base64.b64decode(chunk + b"=" * (-len(chunk) % 4)) for chunk in text.split(b"=") if chunk)


def h2_data(stream: bytes, from_client: bool) -> dict[int, bytes]:
    """The DATA of each HTTP/2 stream in one direction of a captured connection (padding removed)."""
    if from_client:
        assert stream.startswith(H2_PREFACE), stream[:24]
        stream = stream[len(H2_PREFACE):]
    data: dict[int, bytes] = {}
    at = 0
    while at + 9 <= len(stream):
        length = int.from_bytes(stream[at:at + 3], "big")
        kind, flags = stream[at + 3], stream[at + 4]
        stream_id = int.from_bytes(stream[at + 5:at + 9], "big") & 0x7FFFFFFF
        payload = stream[at + 9:at + 9 + length]
        assert len(payload) == length, f"a frame cut at the end of the capture ({len(payload)} of {length} bytes)"
        if kind == 0:  # DATA
            if flags & 0x8:  # PADDED
                payload = payload[1:len(payload) - payload[0]]
            data[stream_id] = data.get(stream_id, b"") + payload
        at += 9 + length
    assert at == len(stream), f"{len(stream) - at} bytes after the last whole frame"
    return data


# -- a loopback relay that keeps what it relays --------------------------------------------------------------


@dataclass
class Connection:
    up: bytearray = field(default_factory=bytearray)      # client -> Envoy
    down: bytearray = field(default_factory=bytearray)    # Envoy -> client
    closed: threading.Event = field(default_factory=threading.Event)


class Relay:
    """Listens on a free loopback port; every connection is relayed to 127.0.0.1:target and recorded."""

    def __init__(self, target: int):
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[Connection] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=30)
            conn = Connection()
            self.connections.append(conn)
            done = threading.Barrier(2, action=conn.closed.set)
            for src, dst, sink in ((client, upstream, conn.up), (upstream, client, conn.down)):
                threading.Thread(target=self._pump, args=(src, dst, sink, done), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, sink: bytearray, done: threading.Barrier):
        try:
            while chunk := src.recv(65536):
                sink += chunk          # kept before it is passed on: what the client got is recorded
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (dst, src):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            done.wait(timeout=30)

    def only_connection_since(self, before: int) -> Connection:
        """The one connection opened since there were `before`, once both of its directions have closed."""
        new = wait_for(f"one relayed connection after {before}", lambda: self.connections[before:],
                       lambda c: len(c) >= 1, timeout_s=30)
        assert len(new) == 1, f"{len(new)} connections for one call"
        assert new[0].closed.wait(30), "the relayed connection did not close within 30 s after its call"
        return new[0]

    def close(self):
        self.server.close()


# -- what each call should leave in its row ------------------------------------------------------------------


@dataclass
class Expected:
    protocol: str
    operation: str
    client: str
    request_body: bytes       # the HTTP body as sent (gRPC: DATA bytes; grpc-web-text: the base64 text)
    response_body: bytes      # the HTTP body as received
    request_frames: list[tuple[int, bytes]] | None = None    # gRPC family: the frames in those bodies
    response_frames: list[tuple[int, bytes]] | None = None


def data_frames(frames: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    return [f for f in frames if not f[0] & 0x80]  # the gRPC-Web trailer frame (0x80) is not a message


def require_compressed(what: str, frames: list[tuple[int, bytes]], count: int) -> None:
    """The precondition: the client (or server) really compressed every message of this body."""
    messages = data_frames(frames)
    assert len(messages) == count and all(flag == 1 for flag, _ in messages), \
        f"{what}: want {count} messages, all compressed (flag 1); got flags {[flag for flag, _ in messages]}"
    for _, payload in messages:
        gzip.decompress(payload)  # each one is gzip


# -- the calls ------------------------------------------------------------------------------------------------


def grpcio_call(relay: Relay, kind: str, run_id: str, tp: str) -> Expected:
    before = len(relay.connections)
    metadata = [("x-wirelens-run", run_id), ("traceparent", tp)]
    # A subchannel of this channel's own: grpcio would otherwise share one connection between channels.
    with grpc.insecure_channel(f"127.0.0.1:{relay.port}", options=[("grpc.use_local_subchannel_pool", 1)],
                               compression=grpc.Compression.Gzip) as channel:
        if kind == "hello":
            reply = channel.unary_unary("/wirelens.v1.Hello/SayHello")(HELLO_REQUEST, timeout=20, metadata=metadata)
            assert reply == string_field(1, f"Hello, {NAME}"), reply
        else:
            replies = list(channel.unary_stream("/wirelens.v1.Echo/ServerStream")(
                STREAM_REQUEST, timeout=20, metadata=metadata))
            assert len(replies) == STREAM_REPLIES, replies
    return grpc_expected(relay.only_connection_since(before), kind, "grpcio")


def grpc_go_calls(relay: Relay, run_id: str, kinds: list[tuple[str, str]]) -> list[Expected]:
    """One grpcgzip run: a call per (kind, traceparent), each on its own connection, in order."""
    before = len(relay.connections)
    done = subprocess.run([str(GO_CLIENT), "-target", f"127.0.0.1:{relay.port}", "-run", run_id, "-name", NAME,
                           "-replies", str(STREAM_REPLIES), *(f"{k}={tp}" for k, tp in kinds)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"grpcgzip exited {done.returncode}: {done.stderr}"
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["kind"], r["code"], r["replies"]) for r in results] == \
           [(k, "OK", 1 if k == "hello" else STREAM_REPLIES) for k, _ in kinds], results
    conns = wait_for(f"{len(kinds)} relayed connections", lambda: relay.connections[before:],
                     lambda c: len(c) >= len(kinds), timeout_s=30)
    assert len(conns) == len(kinds), f"{len(conns)} connections for {len(kinds)} calls"
    for conn in conns:
        assert conn.closed.wait(30), "a relayed connection did not close within 30 s after grpcgzip exited"
    return [grpc_expected(conn, kind, "grpc-go") for conn, (kind, _) in zip(conns, kinds)]


def grpc_expected(conn: Connection, kind: str, client: str) -> Expected:
    up, down = h2_data(bytes(conn.up), True), h2_data(bytes(conn.down), False)
    streams = sorted(set(up) | set(down))
    assert len(streams) == 1, f"{client}: DATA on streams {streams}, want one call's"
    request, response = up.get(streams[0], b""), down.get(streams[0], b"")
    expected = Expected("grpc", "hello.SayHello" if kind == "hello" else "echo.ServerStream", client,
                        request, response, grpc_frames(request), grpc_frames(response))
    require_compressed(f"{client} {kind} request", expected.request_frames, 1)
    require_compressed(f"{client} {kind} response", expected.response_frames,
                       1 if kind == "hello" else STREAM_REPLIES)
    return expected


def grpc_web_call(port: int, text: bool, kind: str, run_id: str, tp: str) -> Expected:
    message = HELLO_REQUEST if kind == "hello" else STREAM_REQUEST
    sent_frames = [(1, gzip.compress(message))]
    body = frame(*sent_frames[0])
    headers = {"x-wirelens-run": run_id, "traceparent": tp, "x-grpc-web": "1", "grpc-encoding": "gzip",
               "grpc-accept-encoding": "gzip"}
    if text:
        body = base64.b64encode(body)
        headers.update({"content-type": "application/grpc-web-text", "accept": "application/grpc-web-text"})
    else:
        headers["content-type"] = "application/grpc-web+proto"
    path = "/wirelens.v1.Hello/SayHello" if kind == "hello" else "/wirelens.v1.Echo/ServerStream"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    received = response.read()
    conn.close()
    assert response.status == 200, (response.status, received)
    frames = grpc_frames(unpadded_base64(received) if text else received)
    trailers = [payload for flag, payload in frames if flag & 0x80]
    assert len(trailers) == 1 and b"grpc-status:0" in trailers[0].replace(b" ", b""), frames
    protocol = "grpc-web-text" if text else "grpc-web"
    expected = Expected(protocol, "hello.SayHello" if kind == "hello" else "echo.ServerStream", "hand-built",
                        body, received, sent_frames, frames)
    require_compressed(f"{protocol} {kind} response", frames, 1 if kind == "hello" else STREAM_REPLIES)
    return expected


def rest_call(port: int, way: str, run_id: str, tp: str) -> Expected:
    headers = {"x-wirelens-run": run_id, "traceparent": tp}
    if way == "response":  # a GET: no request body, the answer gzipped
        method, path, body, plain_reply = "GET", "/v1/echo?content=" + "gzip" * 40, b"", None
    else:
        method, path, body, plain_reply = "POST", "/v1/hello", gzip.compress(HELLO_JSON), HELLO_REPLY_JSON
        headers.update({"content-type": "application/json", "content-encoding": "gzip"})
    if way in ("response", "both"):
        headers["accept-encoding"] = "gzip"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request(method, path, body=body or None, headers=headers)
    response = conn.getresponse()
    received = response.read()
    encoding = response.getheader("content-encoding")
    conn.close()
    assert response.status == 200, (response.status, received)
    if way == "request":
        assert encoding is None and received == plain_reply, (encoding, received)
    else:
        assert encoding == "gzip", encoding
        unpacked = gzip.decompress(received)
        assert unpacked == (plain_reply or json.dumps({"content": "gzip" * 40}).replace(" ", "").encode()), unpacked
        assert len(received) < len(unpacked), "the gzipped answer is not smaller: a poor compression test"
    return Expected("rest", "hello.SayHello" if method == "POST" else "echo.Unary", f"rest {way}", body, received)


# -- the test -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def go_client():
    """grpcgzip, built from tests/e2e/grpcgzip into build/e2e (the module's Go build cache makes it seconds)."""
    GO_CLIENT.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["go", "build", "-trimpath", "-o", str(GO_CLIENT), "./tests/e2e/grpcgzip"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local",
                               "GOMODCACHE": os.environ.get("GOMODCACHE", str(ROOT / ".cache/go/mod")),
                               "GOCACHE": os.environ.get("GOCACHE", str(ROOT / ".cache/go/build"))})
    assert done.returncode == 0, f"go build ./tests/e2e/grpcgzip failed: {done.stderr}"
    return GO_CLIENT


@pytest.fixture(scope="module", params=wiring.MODULES)
def compression_stack(request):
    """Both builds of the filter: the Wasm build's session stack, then the native build's."""
    return stack_for_module(request, "local_stack")


COLUMNS = ("protocol", "operation", "request_body_bytes", "response_body_bytes", "request_messages",
           "response_messages", "request_message_bytes", "response_message_bytes", "request_compressed_messages",
           "response_compressed_messages", "counterfactual_reason")


def wanted_row(e: Expected) -> dict[str, str]:
    """The row this call must have: every number from the captured or built bytes."""
    want = {"protocol": e.protocol, "operation": e.operation, "request_body_bytes": len(e.request_body),
            "response_body_bytes": len(e.response_body), "counterfactual_reason": "compressed"}
    if e.request_frames is None:  # REST: no messages, frames or compressed flags
        want.update({c: 0 for c in COLUMNS[4:10]})
    else:
        for side, frames in (("request", e.request_frames), ("response", e.response_frames)):
            messages = data_frames(frames)
            want[f"{side}_messages"] = len(messages)
            want[f"{side}_message_bytes"] = sum(len(payload) for _, payload in messages)
            want[f"{side}_compressed_messages"] = sum(flag & 1 for flag, _ in messages)
    return {k: str(v) for k, v in want.items()}


def test_compressed_calls_are_recorded_as_they_went_over_the_wire(compression_stack, go_client):
    settings = compression_stack
    envoy = int(settings["WIRELENS_ENVOY_PORT"])
    run_id = f"e2e-compression-{uuid.uuid4().hex[:8]}"
    sent: dict[str, Expected] = {}
    relay = Relay(envoy)
    try:
        for kind in ("hello", "stream"):
            trace_id, tp = traceparent()
            sent[trace_id] = grpcio_call(relay, kind, run_id, tp)
        go_calls = [(kind, *traceparent()) for kind in ("hello", "stream")]
        go_expected = grpc_go_calls(relay, run_id, [(kind, tp) for kind, _, tp in go_calls])
        for (_, trace_id, _), expected in zip(go_calls, go_expected):
            sent[trace_id] = expected
    finally:
        relay.close()
    for text in (False, True):
        for kind in ("hello", "stream"):
            trace_id, tp = traceparent()
            sent[trace_id] = grpc_web_call(envoy, text, kind, run_id, tp)
    for way in ("request", "response", "both"):
        trace_id, tp = traceparent()
        sent[trace_id] = rest_call(envoy, way, run_id, tp)

    found = wait_for(f"{len(sent)} rows of run {run_id}",
                     lambda: rows(settings, f"SELECT trace_id, {', '.join(COLUMNS)} FROM wirelens.requests FINAL "
                                            f"WHERE run_id = '{run_id}'"),
                     lambda r: len(r) >= len(sent))
    by_trace = {r[0]: dict(zip(COLUMNS, r[1:])) for r in found}
    assert sorted(by_trace) == sorted(sent) and len(found) == len(sent), \
        f"rows for traces not sent, or sent calls without one row: {sorted(set(by_trace) ^ set(sent))}"
    failures = []
    print(f"\n{'client':16} {'protocol':14} {'operation':18} " + " ".join(c[:12] for c in COLUMNS[2:]))
    for trace_id, expected in sent.items():
        got, want = by_trace[trace_id], wanted_row(expected)
        print(f"{expected.client:16} {expected.protocol:14} {expected.operation:18} "
              + " ".join(f"{got[c]:>12}" for c in COLUMNS[2:]))
        off = {c: f"row {got[c]}, want {want[c]}" for c in COLUMNS if got[c] != want[c]}
        if off:
            failures.append(f"{expected.client} {expected.protocol} {expected.operation} (trace {trace_id}): {off}")
    assert not failures, f"{len(failures)} of {len(sent)} rows off:\n" + "\n".join(failures)
