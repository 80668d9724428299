"""Bad input: broken and hostile requests to the real Envoy of the local stack.

Every kind in bad_inputs.CASES is one named test case. For each:

(a) Envoy still answers good calls right after, correctly: a REST GET (200,
    the product's JSON) and a gRPC unary SayHello through grpcio (OK, the
    exact reply bytes).
(b) No wasm failure. Envoy 1.40 counts none under FAIL_OPEN: a module that
    traps moves no stat at all (test_a_trap_is_seen: the trapping call gets
    a 503, later calls skip the filter and succeed). So three signals: the
    Envoy log has no new line of WASM_FAILURE_LOG (the trap's "Function: ...
    failed", "Wasm VM failed", a panic message); the good calls of (a) are
    rows in ClickHouse (a failed VM publishes nothing); and every `wasm.*`
    stat of /stats (`wasm.envoy.wasm.runtime.v8.created`/`.active`,
    `wasm.wasm_vm_count`: a VM created or lost; `wasm.<plugin>.vm_reload*`:
    reloads after a failure, with FAIL_RELOAD) and `server.envoy_bug_failures`,
    `server.debug_assertion_failures` are unchanged.
(c) The bad call is exactly `rows` rows under its own run id (header
    x-wirelens-run), with `malformed` as expected (1 exactly where the gRPC
    framing or base64 was broken, filters/README.md) and the case's columns.
    Where Envoy refuses the request before the filter (codec errors, floods)
    the expectation is no row: the good calls, sent after, are rows by then
    (the access log is written in order), and the bad run id has none.

Cases (id: rows under its run id, malformed, what the bad client gets; the
bytes are in bad_inputs.py). "no row" = refused by Envoy before the filter.

    grpc_length_4gib                    row, malformed; 200, grpc-status 8 from the server
    grpc_length_1mib_short              row, malformed; 200
    grpc_prefix_truncated_3             row, malformed; 200
    grpc_prefix_truncated_after_message row, malformed, 1 message; 200
    grpc_unknown_flag_bits              row, not malformed (well framed), 1 message; 200
    grpc_compressed_without_encoding    row, not malformed, 1 compressed message; 200
    grpc_empty_messages_to_unary        row, not malformed, 3000 messages of 0 bytes; 200
    grpc_trailer_frame_from_client      row, not malformed (the block parses); 200
    grpc_trailer_frame_garbage          row, malformed (the block does not parse); 200
    grpc_web_trailer_frame_from_client  row, not malformed; 200
    grpc_web_text_invalid_base64        row, malformed; 400 from Envoy's grpc_web filter
    grpc_web_text_padding_inside        row, malformed; 400 (grpc_web)
    grpc_web_text_padded_frames         row, not malformed, 2 messages; 400: Envoy's grpc_web
                                        refuses padding between frames, which the filter accepts
    grpc_web_text_dangling_char         row, malformed; 400 (grpc_web)
    grpc_to_rest_upstream               row, not malformed, 0 response messages: the REST
                                        service's 404 page is not gRPC (read in on_log)
    grpc_content_type_on_rest_route     row, not malformed, 0 response messages; 200 JSON
    grpc_web_text_content_type_on_rest_route  row, not malformed, 0 response messages; 200
    h2_rst_stream_mid_request           row, not malformed (a reset is not), no request duration
    h2_rst_stream_mid_response          row, not malformed; 200, then the client's reset
    h2_client_gone_mid_body             row, not malformed, no request duration
    h2_headers_60kib                    row; 200 (just under max_request_headers_kb)
    h2_headers_90kib                    no row: Envoy's HTTP/2 codec resets the stream
    h2_headers_count_200                no row: Envoy's HTTP/2 codec resets the stream
                                        (max_headers_count 100)
    h2_request_trailers                 row, not malformed, 1 message; 200
    h2_duplicate_content_type           row; 415 from the gRPC server
    h2_non_utf8_grpc_path               row; 200
    h2_rapid_reset                      100 rows, one per stream (bounded: 100 streams)
    h2_settings_flood                   no row (no request); Envoy answers a PING after 5,000
    h2_ping_flood                       no row (no request); Envoy answers a PING after 5,000
    h1_headers_60kib                    no row: Envoy's codec answers 431
    h1_path_non_utf8                    no row: Envoy's codec answers 400
    h1_path_percent_encoded             row; 400 from the REST service
    h1_http10                           no row: Envoy answers 426 (accept_http_10 off)
    h1_pipelined                        3 rows; 200 x 3
    h1_websocket_upgrade                no row: Envoy answers 403 (no upgrade_configs),
                                        without building the filter chain
    h1_connect                          row; 404 (no CONNECT route)
    h1_options_asterisk                 no row: Envoy's connection manager answers 404 to a
                                        path not starting with '/', before the filters
    h1_head                             row, response body 0; 200
    h1_options_cors_preflight           row; 405 from the REST service (no CORS filter)
    h1_client_gone_mid_body             row, no request duration
    h1_grpc_web_client_gone_mid_frame   row, not malformed, no request duration
    h1_chunked_bad_size                 row (headers reached the filter); 400 from Envoy's codec
    h1_content_length_and_chunked       no row: Envoy's codec answers 400
    h1_tls_hello_on_cleartext           no row: not HTTP; Envoy's codec answers 400

The same inputs are seeds of the filter core's fuzz corpus
(filters/fuzz/make_seeds.py writes filters/fuzz/corpus/*/bad_<id>).
"""

from __future__ import annotations

import http.client
import io
import json
import re
import socket
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import pytest

from tests.e2e import bad_inputs
from tests.e2e.bad_inputs import CASES, RUN_PLACEHOLDER, BadInput
from tests.e2e.conftest import stack
from wirelens_helpers import supervise
from wirelens_helpers.protowire import varint  # WebAssembly's unsigned LEB128 is the same encoding
from wirelens_helpers.wait import WaitTimeout, wait_for

assert all(f"\n    {c.id} " in __doc__ for c in CASES), "every case is in the table above"

DEADLINE_S = 20.0  # per network exchange and per ClickHouse wait; generous for 2 shared cores
# Floods: bounded in count and rate (at most 10,000 frames/s here), they stop by themselves.
FLOOD_FRAMES, FLOOD_BATCH, FLOOD_GAP_S = 5000, 100, 0.01
# What Envoy logs when a VM fails: a trap in a callback ("Function: proxy_on_request_headers failed:
# Uncaught RuntimeError: unreachable", wasm_vm.cc; a Rust panic ends in such a trap after printing
# "panicked at" on stderr), or Wasm::error ("Wasm VM failed ..."). test_a_trap_is_seen checks it.
WASM_FAILURE_LOG = re.compile(r"Function: \S+ failed|Wasm VM failed|panicked")
# Stats outside wasm.* that count Envoy's own broken invariants.
ENVOY_BUG_STATS = ("server.envoy_bug_failures", "server.debug_assertion_failures")
# Must be among the watched stats, or the check would pass vacuously (a renamed stat).
REQUIRED_STATS = {"wasm.envoy.wasm.runtime.v8.created", "wasm.envoy.wasm.runtime.v8.active", "wasm.wasm_vm_count",
                  "wasm.wirelens.vm_reload_failure", *ENVOY_BUG_STATS}


# -- HTTP/2 by hand ----------------------------------------------------------------------


class H2Client:
    """One cleartext HTTP/2 connection (prior knowledge) written frame by frame with h2."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
        # Off: the cases send headers h2 would refuse (non-UTF-8 paths) on purpose.
        config = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                           validate_outbound_headers=False, normalize_outbound_headers=False)
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        self.flush()
        self.closed = False
        self.events: list[h2.events.Event] = []

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def receive(self) -> list[h2.events.Event]:
        """Reads once (blocking up to the socket deadline); returns the events it produced."""
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return []  # receive_until's deadline says what was missing
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.closed = True
            return []
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.closed = True
            return []
        self.flush()
        self.events.extend(events)
        return events

    def send_body(self, stream_id: int, body: bytes, end_stream: bool) -> None:
        """Sends body in frames the peer's frame size and flow-control windows allow."""
        view = memoryview(body)
        while view:
            window = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            if window == 0:
                if not self.receive() and self.closed:
                    raise ConnectionError(f"connection closed with {len(view)} body bytes unsent")
                continue
            piece, view = view[:window], view[window:]
            self.conn.send_data(stream_id, piece.tobytes(), end_stream=end_stream and not view)
            self.flush()
        if end_stream and not body:
            self.conn.end_stream(stream_id)
            self.flush()

    def receive_until(self, done, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not done():
            if self.closed:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {DEADLINE_S:.0f}s; events: {self.events[-5:]}")
            self.receive()

    def seen(self, kind, stream_id: int | None = None) -> bool:
        return any(isinstance(e, kind) and (stream_id is None or e.stream_id == stream_id) for e in self.events)

    def sync(self) -> None:
        """A PING and its ACK: Envoy has read everything written before it (unless it closed)."""
        self.conn.ping(b"wl-sync!")
        self.flush()
        self.receive_until(lambda: any(isinstance(e, h2.events.PingAckReceived) and e.ping_data == b"wl-sync!"
                                  for e in self.events), "the ACK of a PING")

    def reset_and_sync(self, stream_id: int) -> None:
        self.conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
        self.flush()
        self.sync()

    def stream_over(self, stream_id: int) -> bool:
        return any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset))
                   and e.stream_id == stream_id for e in self.events)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Outcome:
    """What the bad client saw: the HTTP statuses Envoy answered (none for a reset or a
    closed connection) and a note for failure messages."""

    statuses: list[int]
    note: str

    def __str__(self) -> str:
        return f"statuses {self.statuses}, {self.note}"


def h2_exchange(port: int, case: BadInput, headers, ending: str) -> Outcome:
    """One HTTP/2 stream: headers, then the body ended, reset or abandoned as `ending` says."""
    client = H2Client(port)
    try:
        # Envoy's SETTINGS first: its windows and frame size decide how the body is cut.
        client.receive_until(lambda: client.seen(h2.events.RemoteSettingsChanged), "SETTINGS from Envoy")
        sid = client.conn.get_next_available_stream_id()
        client.conn.send_headers(sid, headers, end_stream=not case.body and ending == "end")
        client.flush()
        if ending == "end":
            if case.body:
                client.send_body(sid, case.body, end_stream=True)
            client.receive_until(lambda: client.stream_over(sid), "end of the response")
        elif ending == "trailers":
            client.send_body(sid, case.body, end_stream=False)
            client.conn.send_headers(sid, [(b"x-client-trailer", b"1")], end_stream=True)
            client.flush()
            client.receive_until(lambda: client.stream_over(sid), "end of the response")
        elif ending == "reset_mid_request":
            client.send_body(sid, case.body, end_stream=False)
            client.reset_and_sync(sid)
        elif ending == "close_mid_request":
            client.send_body(sid, case.body, end_stream=False)
        elif ending == "reset_mid_response":
            client.send_body(sid, case.body, end_stream=True)
            client.receive_until(lambda: client.seen(h2.events.DataReceived, sid), "the first response data")
            client.reset_and_sync(sid)
        statuses = [int(dict(e.headers)[b":status"]) for e in client.events
                    if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
        reset_by_envoy = client.seen(h2.events.StreamReset, sid)
        return Outcome(statuses, f"HTTP/2 stream {ending}, reset by Envoy: {reset_by_envoy}, "
                                 f"connection closed by Envoy: {client.closed}")
    finally:
        client.close()


def h2_rapid_reset(port: int, case: BadInput, headers, raw: bytes) -> Outcome:
    """case.rows streams opened (HEADERS with END_STREAM) and reset at once, in one write."""
    client = H2Client(port)
    try:
        client.receive_until(lambda: client.seen(h2.events.RemoteSettingsChanged), "SETTINGS from Envoy")
        for _ in range(case.rows):
            sid = client.conn.get_next_available_stream_id()
            client.conn.send_headers(sid, headers, end_stream=True)
            client.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        client.sync()
        return Outcome([], f"{case.rows} streams reset, connection closed by Envoy: {client.closed}")
    finally:
        client.close()


def h2_flood(port: int, frame_kind: str) -> Outcome:
    """FLOOD_FRAMES control frames, FLOOD_BATCH per write at most every FLOOD_GAP_S, without reading
    Envoy's ACKs; then a PING whose ACK shows Envoy got through them (or Envoy closed: also fine)."""
    client = H2Client(port)
    try:
        sent = 0
        try:
            for batch in range(FLOOD_FRAMES // FLOOD_BATCH):
                for i in range(FLOOD_BATCH):
                    if frame_kind == "settings":
                        client.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100 + i % 2})
                    else:
                        client.conn.ping((batch * FLOOD_BATCH + i).to_bytes(8, "big"))
                client.sock.sendall(client.conn.data_to_send())
                sent += FLOOD_BATCH
                time.sleep(FLOOD_GAP_S)  # the flood's rate limit, not a synchronization
            client.sync()
        except (ConnectionResetError, BrokenPipeError):
            client.closed = True
        return Outcome([], f"{sent} {frame_kind} frames sent, connection closed by Envoy: {client.closed}")
    finally:
        client.close()


class _NoClose(io.BufferedReader):
    """A socket reader http.client can read several responses from (it closes its reader after each)."""

    def close(self) -> None:
        pass


class _OneReader:
    def __init__(self, reader):
        self.reader = reader

    def makefile(self, *_args, **_kwargs):
        return self.reader


def h1_exchange(port: int, raw: bytes) -> Outcome:
    """Writes raw HTTP/1 bytes; reads one response per request line until a response closes the
    connection or Envoy does."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(raw)
        reader = _OneReader(_NoClose(socket.SocketIO(sock, "rb")))
        methods = re.findall(rb"(?m)^([A-Z]+) \S+ HTTP/1\.[01]\r$", raw) or [b"GET"]
        statuses = []
        for method in methods:
            response = http.client.HTTPResponse(reader, method=method.decode())
            try:
                response.begin()
            except (http.client.RemoteDisconnected, ConnectionResetError):
                break
            response.read()
            statuses.append(response.status)
            if response.will_close:
                break
        return Outcome(statuses, "HTTP/1")


def h1_gone(port: int, raw: bytes) -> Outcome:
    """Writes raw bytes (a request cut short) and closes the connection at once."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(raw)
    return Outcome([], "HTTP/1, client closed after the partial request")


# sender(port, case, HTTP/2 headers, raw HTTP/1 bytes) -> Outcome; the names are BadInput.send.
SENDERS = {
    "h2": lambda port, case, headers, raw: h2_exchange(port, case, headers, "end"),
    "h2_reset_mid_request": lambda port, case, headers, raw: h2_exchange(port, case, headers, "reset_mid_request"),
    "h2_reset_mid_response": lambda port, case, headers, raw: h2_exchange(port, case, headers,
                                                                          "reset_mid_response"),
    "h2_request_trailers": lambda port, case, headers, raw: h2_exchange(port, case, headers, "trailers"),
    "h2_close_mid_request": lambda port, case, headers, raw: h2_exchange(port, case, headers, "close_mid_request"),
    "h2_rapid_reset": h2_rapid_reset,
    "h2_settings_flood": lambda port, case, headers, raw: h2_flood(port, "settings"),
    "h2_ping_flood": lambda port, case, headers, raw: h2_flood(port, "ping"),
    "h1": lambda port, case, headers, raw: h1_exchange(port, raw),
    "h1_close": lambda port, case, headers, raw: h1_gone(port, raw),
}


# -- the stack's side ----------------------------------------------------------------------


def envoy_stats(settings) -> dict[str, int]:
    """Every wasm.* stat and Envoy's own bug counters, from the admin /stats."""
    _, text = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_ENVOY_ADMIN_PORT']}/stats", timeout=10)
    watched = {}
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        if (name.startswith("wasm.") or name in ENVOY_BUG_STATS) and value.strip().isdigit():
            watched[name] = int(value)
    return watched


def envoy_log(settings) -> Path:
    return stack.log_path(settings, "envoy")


def rows_of(settings, run_id: str) -> list[dict]:
    out = stack.clickhouse_query(
        settings, f"SELECT * FROM wirelens.requests FINAL WHERE run_id = '{run_id}' FORMAT JSONEachRow")
    return [json.loads(line) for line in out.splitlines() if line]


def wait_rows(settings, run_id: str, count: int, what: str) -> list[dict]:
    try:
        return wait_for(f"{what}: {count} rows", lambda: rows_of(settings, run_id), lambda found: len(found) >= count,
                        timeout_s=DEADLINE_S, interval_s=0.2)
    except WaitTimeout as exc:
        pytest.fail(f"{what}: {len(exc.last_seen)} of {count} rows in wirelens.requests for run {run_id} "
                    f"after {DEADLINE_S:.0f}s")


HELLO_REPLY = bad_inputs.proto_string(1, b"Hello, wirelens")


def good_calls(settings, run_id: str) -> None:
    port = settings["WIRELENS_ENVOY_PORT"]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/products/1",
                                     headers={bad_inputs.RUN_HEADER: run_id})
    with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
        assert response.status == 200
        assert json.loads(response.read())["id"] == 1
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        say_hello = channel.unary_unary(bad_inputs.HELLO)  # raw bytes both ways
        reply, call = say_hello.with_call(bad_inputs.HELLO_MESSAGE, timeout=DEADLINE_S,
                                          metadata=[(bad_inputs.RUN_HEADER, run_id)])
        assert call.code() == grpc.StatusCode.OK
        assert reply == HELLO_REPLY


def with_run_id(case: BadInput, run_id: str):
    """The case's headers and raw bytes with its unique run id in place of the placeholder."""
    assert len(run_id) == len(RUN_PLACEHOLDER)
    old, new = RUN_PLACEHOLDER.encode(), run_id.encode()
    headers = [(n, new if v == old else v) for n, v in case.headers]
    return headers, case.raw.replace(old, new)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(local_stack, case: BadInput):
    settings = local_stack
    run_id = f"bad-{uuid.uuid4().hex}"[:len(RUN_PLACEHOLDER)]
    good_run = f"{run_id}-good"
    headers, raw = with_run_id(case, run_id)
    stats_before = envoy_stats(settings)
    assert REQUIRED_STATS <= stats_before.keys(), f"missing stats: {REQUIRED_STATS - stats_before.keys()}"
    log_offset = envoy_log(settings).stat().st_size

    outcome = SENDERS[case.send](int(settings["WIRELENS_ENVOY_PORT"]), case, headers, raw)
    print(f"{case.id} ({case.what}): {outcome}")  # shown with -s, and with a failure
    assert outcome.statuses == list(case.statuses), f"{case.id}: Envoy answered {outcome}, expected {case.statuses}"

    # (a) Envoy answers good calls right after.
    good_calls(settings, good_run)
    # (b) No wasm failure: stats, log, and the good calls recorded (a trapped VM records nothing).
    stats_after = envoy_stats(settings)
    moved = {k: (stats_before.get(k), v) for k, v in stats_after.items() if stats_before.get(k) != v}
    assert not moved, f"wasm/bug stats moved after {case.id} ({outcome}): {moved}"
    with envoy_log(settings).open("rb") as log:
        log.seek(log_offset)
        failures = [line for line in log.read().decode(errors="replace").splitlines()
                    if WASM_FAILURE_LOG.search(line)]
    assert not failures, f"Envoy logged a wasm failure after {case.id}: {failures[:3]}"
    good = wait_rows(settings, good_run, 2, f"the good calls after {case.id}")
    assert sorted(r["protocol"] for r in good) == ["grpc", "rest"], good
    assert not any(r["malformed"] for r in good), good

    # (c) The bad call: its rows (the good calls' rows are in, so every earlier call is too).
    found = wait_rows(settings, run_id, case.rows, f"{case.id} ({outcome})") if case.rows else rows_of(settings,
                                                                                                         run_id)
    assert len(found) == case.rows, (
        f"{case.id} ({outcome}): expected {case.rows} rows"
        f"{' (' + case.why_no_row + ')' if case.why_no_row else ''}, got {len(found)}: {found[:2]}")
    # A whole HTTP/2 body: the filter was told every byte of it, however the call ended upstream.
    columns = {**case.columns, **({"request_body_bytes": len(case.body)} if case.send == "h2" else {})}
    for row in found:
        if case.malformed is not None:
            assert int(row["malformed"]) == case.malformed, f"{case.id} ({outcome}): malformed in {row}"
        for column, value in columns.items():
            assert str(row[column]) == str(value), (
                f"{case.id} ({outcome}): {column} = {row[column]!r}, expected {value!r}")


# -- the failure check (b) itself -------------------------------------------------------------


def _vector(items: list[bytes]) -> bytes:
    return varint(len(items)) + b"".join(items)


def trapping_module() -> bytes:
    """A proxy-wasm module (ABI 0.2.1) whose proxy_on_request_headers executes `unreachable`."""
    i32 = b"\x7f"

    def functype(params: int, results: int) -> bytes:
        return b"\x60" + _vector([i32] * params) + _vector([i32] * results)

    def section(section_id: int, body: bytes) -> bytes:
        return bytes([section_id]) + varint(len(body)) + body

    # (export name, type index, body: no locals, instructions, end)
    functions = [("proxy_abi_version_0_2_1", 0, b""), ("proxy_on_context_create", 1, b""),
                 ("proxy_on_vm_start", 2, b"\x41\x01"), ("proxy_on_configure", 2, b"\x41\x01"),
                 ("proxy_on_memory_allocate", 3, b"\x41\x80\x08"), ("proxy_on_request_headers", 4, b"\x00")]
    types = [functype(0, 0), functype(2, 0), functype(2, 1), functype(1, 1), functype(3, 1)]
    exports = [varint(len(name)) + name.encode() + b"\x00" + varint(i) for i, (name, _, _) in enumerate(functions)]
    exports.append(b"\x06memory\x02\x00")
    bodies = [b"\x00" + code + b"\x0b" for _, _, code in functions]
    return (b"\x00asm\x01\x00\x00\x00" + section(1, _vector(types))
            + section(3, _vector([varint(t) for _, t, _ in functions]))
            + section(5, _vector([b"\x00\x01"])) + section(7, _vector(exports))
            + section(10, _vector([varint(len(b)) + b for b in bodies])))


TRAP_ENVOY = """
admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}}}
static_resources:
  listeners:
  - name: trap
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: trap
          http_filters:
          - name: trap
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: trap
                root_id: trap
                failure_policy: FAIL_OPEN
                vm_config: {{vm_id: trap, runtime: envoy.wasm.runtime.v8, code: {{local: {{filename: "{wasm}"}}}}}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
          route_config:
            virtual_hosts:
            - name: trap
              domains: ["*"]
              routes: [{{match: {{prefix: "/"}}, direct_response: {{status: 200, body: {{inline_string: ok}}}}}}]
"""


def test_a_trap_is_seen(tmp_path):
    """Check (b) can fail: a module that traps, in an Envoy of its own, is in WASM_FAILURE_LOG's
    lines, and moves none of the watched stats (why the log and the rows are the signals)."""
    port, admin = stack.free_ports(2)
    (tmp_path / "trap.wasm").write_bytes(trapping_module())
    (tmp_path / "envoy.yaml").write_text(TRAP_ENVOY.format(port=port, admin=admin, wasm=tmp_path / "trap.wasm"))
    log = tmp_path / "envoy.log"
    envoy = supervise.Supervised("Envoy with the trapping module", [
        str(stack.envoy_binary()), "-c", str(tmp_path / "envoy.yaml"), "--concurrency", "1", "--disable-hot-restart",
        "--log-level", "warn"], log, new_session=False)
    envoy.start()
    try:
        settings = {"WIRELENS_ENVOY_ADMIN_PORT": str(admin)}
        envoy.wait_ready(stack.http_ok(f"http://127.0.0.1:{admin}/ready", "LIVE"), timeout_s=DEADLINE_S,
                         error=AssertionError)
        before = envoy_stats(settings)
        statuses = [stack.http_get(f"http://127.0.0.1:{port}/")[0] for _ in range(3)]
        assert statuses == [503, 200, 200], "the trapping call fails, later ones skip the failed filter"
        assert envoy_stats(settings) == before, "a trap moved a stat"
        # The log is written asynchronously.
        wait_for("a wasm failure in Envoy's log",
                 lambda: any(WASM_FAILURE_LOG.search(line) for line in log.read_text().splitlines()),
                 timeout_s=DEADLINE_S, interval_s=0.1, state=lambda: log.read_text()[-2000:])
    finally:
        envoy.stop(grace_s=DEADLINE_S)
